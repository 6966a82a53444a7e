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

// TestRewrapCoversNoncurrentVersions: the documented rotation is "new key
// first, restart, terrace sse rewrap, then drop the old lines". Rewrap
// must therefore re-seal every SSE-S3 record that can still be read —
// noncurrent versions of a versioned bucket included — or dropping the old
// key makes them permanently unreadable (it walked current records only).
func TestRewrapCoversNoncurrentVersions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldKey, _ := sse.NewMasterKey("old")
	t.Setenv("TERRACE_MASTER_KEY", sse.FormatKeyLine(oldKey))
	cfg := Config{DataDir: dir, Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"}, DefaultVector: "any=1", ProbeBytes: 64 << 10}
	n, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Layer.CreateBucket(ctx, "vbkt", "terrace", n.Layer.Options().DefaultVector); err != nil {
		t.Fatal(err)
	}
	if err := n.Layer.SetVersioning(ctx, "vbkt", object.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	var first object.ObjectInfo
	for i := 0; i < 2; i++ {
		dk, _ := sse.NewDataKey()
		sealed, _ := n.Keys.Seal(sse.PurposeObjectKey, dk)
		rec := sse.ObjectRecord{Mode: sse.ModeS3, Key: sealed}
		info, err := n.Layer.Put(ctx, "vbkt", "k", bytes.NewReader([]byte("x")), object.PutOptions{Size: 1, Headers: map[string]string{sse.ObjectHeader: rec.Encode()}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = info
		}
	}
	if first.VersionID == "" {
		t.Fatal("no version id")
	}
	newKey, _ := sse.NewMasterKey("new")
	n.Keys, _ = sse.NewKeyring(newKey, oldKey)
	if _, err := n.Rewrap(ctx); err != nil {
		t.Fatal(err)
	}
	onlyNew, _ := sse.NewKeyring(newKey)
	info, err := n.Layer.HeadVersion(ctx, "vbkt", "k", first.VersionID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sse.ParseObjectRecord(info.Headers[sse.ObjectHeader])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onlyNew.Open(sse.PurposeObjectKey, rec.Key); err != nil {
		t.Fatalf("noncurrent version %s still sealed with the old master key after rewrap: %v", first.VersionID, err)
	}
}

// TestRewrapCoversSnapshots: a snapshot serves the records it pinned; an
// SSE-S3 object overwritten after the snapshot keeps its old record there.
// After rewrap and dropping the old key, the snapshot must still open.
func TestRewrapCoversSnapshots(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldKey, _ := sse.NewMasterKey("old")
	t.Setenv("TERRACE_MASTER_KEY", sse.FormatKeyLine(oldKey))
	cfg := Config{DataDir: dir, Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"}, DefaultVector: "any=1", ProbeBytes: 64 << 10}
	n, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Layer.CreateBucket(ctx, "sbkt", "terrace", n.Layer.Options().DefaultVector); err != nil {
		t.Fatal(err)
	}
	put := func() {
		dk, _ := sse.NewDataKey()
		sealed, _ := n.Keys.Seal(sse.PurposeObjectKey, dk)
		rec := sse.ObjectRecord{Mode: sse.ModeS3, Key: sealed}
		if _, err := n.Layer.Put(ctx, "sbkt", "k", bytes.NewReader([]byte("x")), object.PutOptions{Size: 1, Headers: map[string]string{sse.ObjectHeader: rec.Encode()}}); err != nil {
			t.Fatal(err)
		}
	}
	put()
	snap, err := n.Layer.CreateSnapshot(ctx, "sbkt", "s1")
	if err != nil {
		t.Fatal(err)
	}
	put() // the live bucket moves on; the snapshot keeps the first record
	newKey, _ := sse.NewMasterKey("new")
	n.Keys, _ = sse.NewKeyring(newKey, oldKey)
	if _, err := n.Rewrap(ctx); err != nil {
		t.Fatal(err)
	}
	onlyNew, _ := sse.NewKeyring(newKey)
	info, err := n.Layer.Head(ctx, snap.Served, "k")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sse.ParseObjectRecord(info.Headers[sse.ObjectHeader])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onlyNew.Open(sse.PurposeObjectKey, rec.Key); err != nil {
		t.Fatalf("snapshot %s still sealed with the old master key after rewrap: %v", snap.Served, err)
	}
}
