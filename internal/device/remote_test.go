package device

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/bench/benchtest"
)

var remoteBuckets atomic.Int64

// openRemote opens a remote device on a real S3 server (versitygw over a
// directory, in this process), in a fresh bucket.
func openRemote(t *testing.T) *Device {
	t.Helper()
	u, err := benchtest.Gateway()
	if err != nil {
		t.Skipf("no S3 gateway: %v", err)
	}
	spec := fmt.Sprintf("remote:http://%s:%s@%s/remote-%d/p:1GiB", benchtest.Access, benchtest.Secret,
		strings.TrimPrefix(u, "http://"), remoteBuckets.Add(1))
	sp, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open("n1/remote0", sp)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRemoteRoundTrip(t *testing.T) {
	d := openRemote(t)
	f, err := d.Create("eg/01/x.eg")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(1000, 7), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := d.OpenFile("eg/01/x.eg")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1000)
	if _, err := g.ReadAt(got, 0); err != nil || !bytes.Equal(got, bytesOf(1000, 7)) {
		t.Fatalf("read back: %v", err)
	}
	g.Close()
	if err := d.Remove("eg/01/x.eg"); err != nil || d.Used() != 0 {
		t.Fatalf("remove: %v, used %d", err, d.Used())
	}
}

// TestRemoteRemoveOfUnsyncedFileReleasesUsed: a copy that fails before its
// Sync closes and removes the partial file; the bytes its writes counted
// must be released (they leaked: placement saw the remote tier fuller on
// every failed copy until a restart).
func TestRemoteRemoveOfUnsyncedFileReleasesUsed(t *testing.T) {
	d := openRemote(t)
	f, err := d.Create("eg/02/y.eg")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(1<<20, 1), 0)
	f.Close() // the store drops its handle before removing
	if err := d.Remove("eg/02/y.eg"); err != nil {
		t.Fatal(err)
	}
	if d.Used() != 0 {
		t.Fatalf("used %d after the only file was removed (never synced)", d.Used())
	}
}

// TestRemoteRecreateDoesNotDoubleCount: re-creating an existing remote
// file (a copy over a replica that does not verify) replaces its bytes.
func TestRemoteRecreateDoesNotDoubleCount(t *testing.T) {
	d := openRemote(t)
	for range 2 {
		f, err := d.Create("eg/03/z.eg")
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, bytesOf(1<<20, 2), 0)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if d.Used() != 1<<20 {
		t.Fatalf("used %d for one 1 MiB object", d.Used())
	}
}

// TestRemoteCloseKeepsUnsyncedWrites: the extent store closes idle handles
// when its cache is full, so an append and the Sync that makes it durable
// may reach different handles. Closing a staged file must not drop its
// unsynced bytes (the fresh handle's Sync reported success for bytes that
// were never uploaded).
func TestRemoteCloseKeepsUnsyncedWrites(t *testing.T) {
	d := openRemote(t)
	f, err := d.Create("eg/04/w.eg")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(1000, 3), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(1000, 4), 1000) // appended, not yet synced
	if err := f.Close(); err != nil {   // evicted from the handle cache
		t.Fatal(err)
	}
	g, err := d.OpenFile("eg/04/w.eg")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if g.Size() != 2000 {
		t.Fatalf("file is %d bytes after Sync, not the 2000 written: the unsynced append was dropped at Close", g.Size())
	}
	got := make([]byte, 1000)
	if _, err := g.ReadAt(got, 1000); err != nil || !bytes.Equal(got, bytesOf(1000, 4)) {
		t.Fatalf("appended bytes: %v", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	benchtest.Cleanup() // the in-process S3 gateway's directory, if one ran
	os.Exit(code)
}
