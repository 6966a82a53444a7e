package curator

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// renameKV runs a hook once, just before the first scan of the owner map
// range that starts at prefix: a client's change landing mid-scan.
type renameKV struct {
	meta.KV
	prefix string
	once   sync.Once
	hook   func()
}

func (k *renameKV) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	if strings.HasPrefix(string(start), k.prefix) {
		k.once.Do(k.hook)
	}
	return k.KV.Scan(ctx, start, end, limit)
}

// Snapshot and SnapshotAt pass the store's snapshots on, with the hook in
// their scans too.
func (k *renameKV) Snapshot(ctx context.Context) (meta.Snapshot, error) {
	s, err := k.KV.(meta.Snapshotter).Snapshot(ctx)
	return renameSnapshot{s, k}, err
}

func (k *renameKV) SnapshotAt(ctx context.Context, rev int64) (meta.Snapshot, error) {
	s, err := k.KV.(meta.Snapshotter).SnapshotAt(ctx, rev)
	return renameSnapshot{s, k}, err
}

type renameSnapshot struct {
	meta.Snapshot
	k *renameKV
}

func (s renameSnapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	if strings.HasPrefix(string(start), s.k.prefix) {
		s.k.once.Do(s.k.hook)
	}
	return s.Snapshot.Scan(ctx, start, end, limit)
}

// TestRenameDuringFullScanLosesNothing: an S3 rename — copy to a key the
// scan has already passed (the copy shares the source's extents), then
// delete the source before the scan reaches it — must not make the
// shared extents look unreferenced: data removal would delete records
// that the new key reads (the extents are older than the grace period).
// A full scan reads the owner maps as of one snapshot.
func TestRenameDuringFullScanLosesNothing(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "aaa", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	want := data(7, 200<<10)
	e.put("k", want, "ssd=1,hdd=1")
	hook := func() {
		if _, err := e.l.Copy(ctx, "bkt", "k", "aaa", "k", object.CopyOptions{}); err != nil {
			t.Errorf("copy: %v", err)
		}
		if err := e.l.Delete(ctx, "bkt", "k"); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	kv := &renameKV{KV: e.kv, prefix: meta.PrefixObject + "bkt", hook: hook}
	pol, _ := placement.New(placement.Config{Name: "moop"})
	c := New(e.l, kv, e.local, pol, nil, nil, Options{
		Decide: decide.Options{GarbageGrace: 1, NodeDownAfter: 1}, MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
		ScanParallelism: 1, // aaa's partition is done before bkt's starts
	})
	rec, err := c.RunJob(ctx, "full", "test")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Done[string(decide.KindRemoveExtents)] > 0 {
		t.Errorf("the scan removed %d extent records of the renamed object", rec.Done[string(decide.KindRemoveExtents)])
	}
	_, rc, err := e.l.Get(ctx, "aaa", "k", 0, -1)
	if err != nil {
		t.Fatalf("the renamed object: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the renamed object reads wrong bytes (err %v)", err)
	}
}

// TestWriteDuringFullScanLosesNothing: a PUT that lands after a full
// scan read the owner maps but before it reads the extent map must not
// have its extents taken for garbage. Its object is not in the owner
// maps the scan read; if the scan saw the new extents, they would look
// unreferenced, and a grace period shorter than the scan (here 1 ns, as
// a 10-minute grace is under a scan of a large cluster) would remove
// them. A full scan reads the extent map at the owners' snapshot, and
// measures the grace period to its start.
func TestWriteDuringFullScanLosesNothing(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	e.put("old", data(3, 64<<10), "ssd=1,hdd=1")
	want := data(8, 200<<10)
	hook := func() { e.put("new", want, "ssd=1,hdd=1") }
	kv := &renameKV{KV: e.kv, prefix: meta.PrefixExtent, hook: hook}
	pol, _ := placement.New(placement.Config{Name: "moop"})
	c := New(e.l, kv, e.local, pol, nil, nil, Options{
		Decide: decide.Options{GarbageGrace: 1, NodeDownAfter: 1}, MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
	})
	rec, err := c.RunJob(ctx, "full", "test")
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.Done[string(decide.KindRemoveExtents)]; n > 0 {
		t.Errorf("the scan removed %d extent records of an object written during it", n)
	}
	_, rc, err := e.l.Get(ctx, "bkt", "new", 0, -1)
	if err != nil {
		t.Fatalf("the object written during the scan: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the object written during the scan reads wrong bytes (err %v)", err)
	}
}
