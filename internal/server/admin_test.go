package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// openNode opens a real single node (Pebble, directory devices) without
// serving it.
func openNode(t *testing.T, mod func(*Config)) *Node {
	t.Helper()
	n, err := openNodeAt(t.TempDir(), mod)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// openNodeAt opens a node whose data lives under dir.
func openNodeAt(dir string, mod func(*Config)) (*Node, error) {
	cfg := Config{DataDir: dir, ProbeBytes: 64 << 10, Devices: []string{
		"ssd:" + filepath.Join(dir, "ssd0") + ":256MiB", "hdd:" + filepath.Join(dir, "hdd0") + ":256MiB"},
		DefaultVector: "any=1", Curator: CuratorConfig{Disabled: true}}
	if mod != nil {
		mod(&cfg)
	}
	return Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func status(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminAPIIsAuthenticated: every admin endpoint refuses unsigned
// requests (401) and requests signed with the wrong secret (403), and
// serves the root account's signed requests; metrics and health open only
// when configured.
func TestAdminAPIIsAuthenticated(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	wrong := adminauth.Client(n.Config.RootUser, "not-the-secret")
	for _, path := range []string{"/v1/status", "/v1/health", "/metrics", "/v1/buckets", "/v1/tier/report", "/debug/pprof/"} {
		if got := status(t, http.DefaultClient, s.URL+path); got != http.StatusUnauthorized {
			t.Errorf("unsigned GET %s: %d, want 401", path, got)
		}
		if got := status(t, wrong, s.URL+path); got != http.StatusForbidden {
			t.Errorf("wrongly signed GET %s: %d, want 403", path, got)
		}
		if got := status(t, root, s.URL+path); got != http.StatusOK {
			t.Errorf("signed GET %s: %d, want 200", path, got)
		}
	}
	req, _ := http.NewRequest("PUT", s.URL+"/v1/buckets/sneaky", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned bucket create: %v %v", resp, err)
	}
	if _, _, err := n.Layer.GetBucket(context.Background(), "sneaky"); err == nil {
		t.Fatal("an unsigned request created a bucket")
	}

	open := openNode(t, func(c *Config) { c.AdminPublic = []string{"metrics", "health"} })
	so := httptest.NewServer(open.AdminHandler())
	defer so.Close()
	for path, want := range map[string]int{"/metrics": 200, "/v1/health": 200, "/v1/status": 401} {
		if got := status(t, http.DefaultClient, so.URL+path); got != want {
			t.Errorf("admin_public metrics,health: unsigned GET %s: %d, want %d", path, got, want)
		}
	}
}

// TestCuratorMapForms: a worker's map endpoint streams an egroup
// partition as records or, asked for it, in the compact form; both read
// back to the same number of egroups, and a form it does not know is a
// clear 400.
func TestCuratorMapForms(t *testing.T) {
	n := openNode(t, nil)
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "maps", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		// Distinct vectors: several egroups.
		v := model.MustParseVector([]string{"ssd=1", "hdd=1", "any=1"}[i%3])
		if _, err := n.Layer.Put(ctx, "maps", fmt.Sprint(i), strings.NewReader("x"), object.PutOptions{Size: 1, Vector: v}); err != nil {
			t.Fatal(err)
		}
	}
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	part := curator.Partition{Name: "egroups/0", Lo: 0, Hi: 1 << 40}
	count := func(form string) (int, int) {
		t.Helper()
		resp, err := root.Get(fmt.Sprintf("%s/v1/curator/map?part=egroups/0&lo=0&hi=%d&form=%s", s.URL, part.Hi, form))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, len(b)
		}
		out, err := curator.ReadMapStream(resp.Body, part)
		if err != nil {
			t.Fatalf("form %q: %v", form, err)
		}
		return resp.StatusCode, len(out.Records)
	}
	_, records := count("records")
	_, compact := count("compact")
	if records < 3 || compact != records {
		t.Fatalf("%d egroups as records, %d compact; want the same, at least 3", records, compact)
	}
	if code, _ := count("protobuf"); code != http.StatusBadRequest {
		t.Fatalf("an unknown form: %d, want 400", code)
	}
}
