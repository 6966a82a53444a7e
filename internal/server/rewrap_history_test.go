package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
)

// openRewrapNode opens a one-device node whose keyring holds one master
// key, "old", and returns it with that key.
func openRewrapNode(t *testing.T) (*Node, sse.MasterKey) {
	t.Helper()
	dir := t.TempDir()
	oldKey, _ := sse.NewMasterKey("old")
	t.Setenv("TERRACE_MASTER_KEY", sse.FormatKeyLine(oldKey))
	cfg := Config{DataDir: dir, Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"}, DefaultVector: "any=1", ProbeBytes: 64 << 10}
	n, err := Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, oldKey
}

// putSSES3 writes bucket/key as an SSE-S3 object sealed with the node's
// active master key.
func putSSES3(t *testing.T, n *Node, bucket, key string) object.ObjectInfo {
	t.Helper()
	dk, _ := sse.NewDataKey()
	sealed, _ := n.Keys.Seal(sse.PurposeObjectKey, dk)
	rec := sse.ObjectRecord{Mode: sse.ModeS3, Key: sealed}
	info, err := n.Layer.Put(context.Background(), bucket, key, bytes.NewReader([]byte("x")),
		object.PutOptions{Size: 1, Headers: map[string]string{sse.ObjectHeader: rec.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// rotateAndRewrap puts a new master key first (the old one kept), runs
// Rewrap and returns a keyring holding only the new key.
func rotateAndRewrap(t *testing.T, n *Node, oldKey sse.MasterKey) *sse.Keyring {
	t.Helper()
	newKey, _ := sse.NewMasterKey("new")
	n.Keys, _ = sse.NewKeyring(newKey, oldKey)
	if _, err := n.Rewrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	onlyNew, _ := sse.NewKeyring(newKey)
	return onlyNew
}

// opensWith reports whether info's SSE-S3 data key opens with keys.
func opensWith(t *testing.T, keys *sse.Keyring, info object.ObjectInfo) error {
	t.Helper()
	rec, err := sse.ParseObjectRecord(info.Headers[sse.ObjectHeader])
	if err != nil {
		t.Fatal(err)
	}
	_, err = keys.Open(sse.PurposeObjectKey, rec.Key)
	return err
}

// TestRewrapCoversNoncurrentVersions: the documented rotation is "new key
// first, restart, terrace sse rewrap, then drop the old lines". Rewrap
// must therefore re-seal every SSE-S3 record that can still be read —
// noncurrent versions of a versioned bucket included — or dropping the old
// key makes them permanently unreadable (it walked current records only).
func TestRewrapCoversNoncurrentVersions(t *testing.T) {
	ctx := context.Background()
	n, oldKey := openRewrapNode(t)
	if err := n.Layer.CreateBucket(ctx, "vbkt", "terrace", n.Layer.Options().DefaultVector); err != nil {
		t.Fatal(err)
	}
	if err := n.Layer.SetVersioning(ctx, "vbkt", object.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	first := putSSES3(t, n, "vbkt", "k")
	putSSES3(t, n, "vbkt", "k")
	if first.VersionID == "" {
		t.Fatal("no version id")
	}
	onlyNew := rotateAndRewrap(t, n, oldKey)
	info, err := n.Layer.HeadVersion(ctx, "vbkt", "k", first.VersionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := opensWith(t, onlyNew, info); err != nil {
		t.Fatalf("noncurrent version %s still sealed with the old master key after rewrap: %v", first.VersionID, err)
	}
}

// TestRewrapCoversSnapshots: a snapshot serves the records it pinned; an
// SSE-S3 object overwritten after the snapshot keeps its old record there.
// After rewrap and dropping the old key, the snapshot must still open, and
// still see the record it saw (the rewrite keeps its place in time).
func TestRewrapCoversSnapshots(t *testing.T) {
	ctx := context.Background()
	n, oldKey := openRewrapNode(t)
	if err := n.Layer.CreateBucket(ctx, "sbkt", "terrace", n.Layer.Options().DefaultVector); err != nil {
		t.Fatal(err)
	}
	putSSES3(t, n, "sbkt", "k")
	snap, err := n.Layer.CreateSnapshot(ctx, "sbkt", "s1")
	if err != nil {
		t.Fatal(err)
	}
	putSSES3(t, n, "sbkt", "k") // the live bucket moves on; the snapshot keeps the first record
	onlyNew := rotateAndRewrap(t, n, oldKey)
	info, err := n.Layer.Head(ctx, snap.Served, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := opensWith(t, onlyNew, info); err != nil {
		t.Fatalf("snapshot %s still sealed with the old master key after rewrap: %v", snap.Served, err)
	}
}
