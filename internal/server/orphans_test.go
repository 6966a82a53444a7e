package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// The orphan sweep runs hourly unless configured; a negative period
// turns it off.
func TestOrphanSweepEveryDefault(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if c.OrphanSweepEvery != time.Hour {
		t.Fatalf("default orphan_sweep_every %s, want 1h", c.OrphanSweepEvery)
	}
	c = Config{OrphanSweepEvery: -1}
	c.EnsureDefaults()
	if c.OrphanSweepEvery >= 0 {
		t.Fatalf("orphan_sweep_every -1 became %s, want it left negative (off)", c.OrphanSweepEvery)
	}
	p := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(p, []byte("orphan_sweep_every: 15m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadFile(p)
	if err != nil || cfg.OrphanSweepEvery != 15*time.Minute {
		t.Fatalf("orphan_sweep_every: 15m read as %s (%v)", cfg.OrphanSweepEvery, err)
	}
}

// POST /v1/egroups/held answers which egroups this node's writers hold
// (none on an idle node), signed like every admin request.
func TestEgroupsHeldEndpoint(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	body := `{"ids":[1,2,18446744073709551615]}`
	resp, err := http.Post(s.URL+"/v1/egroups/held", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d, want 401", resp.StatusCode)
	}
	resp, err = root.Post(s.URL+"/v1/egroups/held", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out heldEgroups
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || out.IDs == nil || len(out.IDs) != 0 {
		t.Fatalf("signed: %d %+v %v, want 200 and no held egroups", resp.StatusCode, out, err)
	}
	resp, err = root.Post(s.URL+"/v1/egroups/held", "application/json", bytes.NewReader([]byte("not json")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad body: %d, want 400", resp.StatusCode)
	}
}
