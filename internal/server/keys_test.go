package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/sse"
)

func TestOpenKeys(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	noenv := func(string) string { return "" }

	// A single node creates its keyring once and reuses it.
	n := &Node{Config: Config{DataDir: dir}, Log: log}
	if err := n.openKeys(noenv); err != nil {
		t.Fatal(err)
	}
	sealed, err := n.Keys.Seal(sse.PurposeUserSecret, []byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	again := &Node{Config: Config{DataDir: dir}, Log: log}
	if err := again.openKeys(noenv); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Keys.Open(sse.PurposeUserSecret, sealed); err != nil {
		t.Fatalf("restarted node cannot open what it sealed: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, MasterKeyFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v %v", err, st)
	}

	// Every node of a cluster derives the same key from the secret.
	cfg := Config{DataDir: t.TempDir(), InitialCluster: "n1=http://x", ClusterSecret: strings.Repeat("c", 20)}
	a, b := &Node{Config: cfg, Log: log}, &Node{Config: cfg, Log: log}
	if err := a.openKeys(noenv); err != nil {
		t.Fatal(err)
	}
	if err := b.openKeys(noenv); err != nil {
		t.Fatal(err)
	}
	s2, _ := a.Keys.Seal(sse.PurposeObjectKey, []byte("k"))
	if _, err := b.Keys.Open(sse.PurposeObjectKey, s2); err != nil {
		t.Fatalf("cluster nodes disagree on the master key: %v", err)
	}

	// The environment wins; a rotated keyring lists the new key first.
	old, _ := sse.NewMasterKey("old")
	nk, _ := sse.NewMasterKey("new")
	env := func(k string) string {
		if k == "TERRACE_MASTER_KEY" {
			return sse.FormatKeyLine(nk) + "," + sse.FormatKeyLine(old)
		}
		return ""
	}
	e := &Node{Config: Config{DataDir: t.TempDir()}, Log: log}
	if err := e.openKeys(env); err != nil {
		t.Fatal(err)
	}
	if e.Keys.ActiveID() != "new" || len(e.Keys.IDs()) != 2 {
		t.Fatalf("env keyring %s", e.Keys)
	}
	bad := &Node{Config: Config{DataDir: t.TempDir()}, Log: log}
	if err := bad.openKeys(func(k string) string {
		if k == "TERRACE_MASTER_KEY" {
			return "x:short"
		}
		return ""
	}); err == nil {
		t.Fatal("bad TERRACE_MASTER_KEY accepted")
	}
	f := &Node{Config: Config{DataDir: t.TempDir(), MasterKeyFile: filepath.Join(dir, "missing")}, Log: log}
	if err := f.openKeys(noenv); err == nil {
		t.Fatal("missing master_key_file accepted")
	}
}
