package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/sse"
	"github.com/terrace-storage/terrace/internal/users"
)

func TestUserAdminAPI(t *testing.T) {
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	mk, _ := sse.NewMasterKey("k")
	keys, _ := sse.NewKeyring(mk)
	n := &Node{Users: users.New(kv, keys, "root"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	n.userRoutes(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	call := func(method, path string, out any) int {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var c map[string]string
	if st := call("POST", "/v1/users/alice?admin=1", &c); st != 200 || c["name"] != "alice" || c["access_key"] == "" || c["secret_key"] == "" {
		t.Fatalf("add: %d %v", st, c)
	}
	if st := call("POST", "/v1/users/alice", nil); st != http.StatusConflict {
		t.Fatalf("add twice: %d", st)
	}
	if st := call("POST", "/v1/users/root", nil); st != http.StatusBadRequest {
		t.Fatalf("add root: %d", st)
	}
	var list []users.User
	if st := call("GET", "/v1/users", &list); st != 200 || len(list) != 1 || !list[0].Admin || list[0].AccessKey != c["access_key"] {
		t.Fatalf("list: %d %+v", st, list)
	}
	var r map[string]string
	if st := call("POST", "/v1/users/alice/keys/rotate", &r); st != 200 || r["access_key"] == c["access_key"] || r["secret_key"] == "" {
		t.Fatalf("rotate: %d %v", st, r)
	}
	if st := call("DELETE", "/v1/users/alice", nil); st != http.StatusNoContent {
		t.Fatalf("remove: %d", st)
	}
	if st := call("DELETE", "/v1/users/alice", nil); st != http.StatusNotFound {
		t.Fatalf("remove twice: %d", st)
	}
	if st := call("POST", "/v1/users/nobody/keys/rotate", nil); st != http.StatusNotFound {
		t.Fatalf("rotate missing: %d", st)
	}
}
