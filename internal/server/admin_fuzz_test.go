package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// fuzzNode is one real node shared by every fuzz input (opening Pebble per
// input would make the fuzzer crawl).
var fuzzNode struct {
	once sync.Once
	n    *Node
	root string // the directory that must hold every file the node writes
	err  error
}

func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// FuzzAdminAPI sends arbitrary, correctly signed admin requests (method,
// path, query, body) to a real node: none may crash it or answer 500, and
// bucket and key names with path tricks (.., //, NUL, invalid UTF-8) never
// create a file outside the node's data directory.
func FuzzAdminAPI(f *testing.F) {
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/buckets/fuzz", ""},
		{"PUT", "/v1/data/fuzz/../../../../tmp/escape", "x"},
		{"PUT", "/v1/data/fuzz//double//slash", "x"},
		{"PUT", "/v1/data/fuzz/nul%00byte", "x"},
		{"PUT", "/v1/data/fuzz/bad%ff%feutf8", "x"},
		{"PUT", "/v1/data/..%2f..%2fescape/k", "x"},
		{"GET", "/v1/data/fuzz?prefix=%ff&delimiter=%00&max=-1", ""},
		{"GET", "/v1/object/locate?bucket=fuzz&key=" + strings.Repeat("k", 2000), ""},
		{"POST", "/v1/object/set-replication?bucket=fuzz&key=k&vector=ssd=99999999999999999999", ""},
		{"GET", "/v1/placement/explain?vector=any=3&bytes=-5&seed=x", ""},
		{"POST", "/v1/curator/run?kind=nonsense", ""},
		{"POST", "/v1/nodes/%2e%2e/drain", ""},
		{"PUT", "/v1/buckets/UPPER..case?vector=,,,", ""},
		{"DELETE", "/v1/buckets/fuzz", ""},
	} {
		f.Add(c.method, c.path, c.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		fuzzNode.once.Do(func() {
			dir, err := os.MkdirTemp("", "terrace-admin-fuzz-")
			if err != nil {
				fuzzNode.err = err
				return
			}
			fuzzNode.root = dir
			// The node lives for the whole fuzz run (the process's lifetime).
			fuzzNode.n, fuzzNode.err = openNodeAt(filepath.Join(dir, "data"), nil)
		})
		if fuzzNode.err != nil {
			t.Fatal(fuzzNode.err)
		}
		switch method {
		case "GET", "PUT", "POST", "DELETE", "HEAD":
		default:
			return
		}
		req, err := http.NewRequest(method, "http://127.0.0.1:9001"+path, bytes.NewReader([]byte(body)))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/v1/") || strings.HasPrefix(req.URL.Path, "/v1/curator/run") {
			return // not a request a client could send, or a full Curator scan per input
		}
		if err := adminauth.Sign(req, fuzzNode.n.Config.RootUser, fuzzNode.n.Config.RootPassword, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		fuzzNode.n.AdminHandler().ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusInsufficientStorage {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		for _, p := range listTree(t, fuzzNode.root) {
			if p != fuzzNode.root && !strings.HasPrefix(p, filepath.Join(fuzzNode.root, "data")) {
				t.Fatalf("%s %s created %s outside the data directory", method, path, p)
			}
		}
	})
}
