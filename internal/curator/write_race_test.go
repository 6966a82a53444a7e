package curator

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// commitHookKV runs hook once, before the first commit match accepts.
type commitHookKV struct {
	*meta.Pebble
	mu    sync.Mutex
	match func(*meta.Txn) bool
	hook  func()
}

func (k *commitHookKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	k.mu.Lock()
	var h func()
	if k.hook != nil && k.match(t) {
		h, k.hook = k.hook, nil
	}
	k.mu.Unlock()
	if h != nil {
		h()
	}
	return k.Pebble.Commit(ctx, t)
}

func hookedEnv(t *testing.T, now func() time.Time, grace time.Duration) (*env, *commitHookKV, *Curator) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta2"))
	if err != nil {
		t.Fatal(err)
	}
	hkv := &commitHookKV{Pebble: kv}
	pol, _ := placement.New(placement.Config{Name: "moop"})
	l, err := object.New(hkv, e.local, e.local, object.Options{ExtentMaxBytes: 64 << 10, EgroupMaxBytes: 512 << 10, Policy: pol, StatsInterval: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); kv.Close() })
	c := New(l, kv, e.local, pol, nil, nil, Options{
		Decide:          decide.Options{GarbageGrace: grace, NodeDownAfter: time.Nanosecond},
		MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
	})
	e.l, e.kv = l, kv
	if err := l.CreateBucket(context.Background(), "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	return e, hkv, c
}

func putsKey(t *meta.Txn, key []byte) bool {
	for _, op := range t.Ops {
		if !op.Delete && bytes.Equal(op.Key, key) {
			return true
		}
	}
	return false
}

func readBack(l *object.Layer, key string) ([]byte, error) {
	_, rc, err := l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Copy of an object onto itself (S3 metadata REPLACE, or restoring a
// version) skips the compare on its source: a delete of the key and a full
// scan landing between its lookup and its commit leave the new record
// naming removed extents.
func TestCopyOntoItselfRacesDeleteAndScan(t *testing.T) {
	e, hkv, c := hookedEnv(t, nil, time.Nanosecond)
	ctx := context.Background()
	want := data(5, 200<<10)
	e.put("k", want, "ssd=1,hdd=1")
	hkv.match = func(t *meta.Txn) bool { return putsKey(t, meta.ObjectKey("bkt", "k")) }
	hkv.hook = func() {
		if err := e.l.Delete(ctx, "bkt", "k"); err != nil {
			t.Errorf("delete: %v", err)
		}
		rec, err := c.RunJob(ctx, "full", "test")
		if err != nil {
			t.Errorf("job: %v", err)
		}
		t.Logf("removed %d extent records", rec.Done[string(decide.KindRemoveExtents)])
	}
	_, err := e.l.Copy(ctx, "bkt", "k", "bkt", "k", object.CopyOptions{ReplaceMeta: true, UserMeta: map[string]string{"a": "b"}})
	if err != nil {
		t.Logf("copy failed (the safe outcome): %v", err)
		return
	}
	got, err := readBack(e.l, "k")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("copy succeeded but the object it wrote is unreadable: %v", err)
	}
}

// lateReader switches the clock once its last byte is read.
type lateReader struct {
	r    *bytes.Reader
	done func()
}

func (r *lateReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.r.Len() == 0 && r.done != nil {
		r.done()
		r.done = nil
	}
	return n, err
}

// A PUT longer than garbage_grace with more extents than one transaction
// holds: its first extent records are committed before its object record,
// carrying the append time as Ctime, so a full scan in between takes them
// for old garbage and removes them; the object commit then names them.
func TestSlowLargePutRacesScan(t *testing.T) {
	var skew atomic.Int64
	skew.Store(int64(20 * time.Minute))
	now := func() time.Time { return time.Now().Add(-time.Duration(skew.Load())) }
	e, hkv, c := hookedEnv(t, now, 10*time.Minute)
	ctx := context.Background()
	want := data(9, 10<<20) // 160 extents of 64 KiB: two transactions
	commits := 0
	hkv.match = func(t *meta.Txn) bool {
		for _, op := range t.Ops {
			if strings.HasPrefix(string(op.Key), meta.PrefixExtent) {
				commits++
				return commits == 2
			}
		}
		return false
	}
	hkv.hook = func() {
		rec, err := c.RunJob(ctx, "full", "test")
		if err != nil {
			t.Errorf("job: %v", err)
		}
		t.Logf("scan between the PUT's commits removed %d extent records, %d egroups", rec.Done[string(decide.KindRemoveExtents)], rec.Done[string(decide.KindRemoveEgroup)])
	}
	body := &lateReader{r: bytes.NewReader(want), done: func() { skew.Store(0) }}
	if _, err := e.l.Put(ctx, "bkt", "big", body, object.PutOptions{Size: int64(len(want)), Vector: model.MustParseVector("ssd=1,hdd=1")}); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := readBack(e.l, "big")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("acknowledged PUT unreadable: %v", err)
	}
}

// UploadPartCopy from a snapshot compared the key o/<bkt--snap-s>/<key>,
// which never exists: a snapshot deleted while the part copy read its
// source let collection and data removal take the extents the part names.
// It now compares the record it read.
func TestPartCopyFromSnapshotRacesSnapshotDelete(t *testing.T) {
	e, hkv, c := hookedEnv(t, nil, time.Nanosecond)
	ctx := context.Background()
	v1 := data(3, 100<<10)
	e.put("k", v1, "ssd=1,hdd=1")
	if _, err := e.l.CreateSnapshot(ctx, "bkt", "s"); err != nil {
		t.Fatal(err)
	}
	e.put("k", data(4, 100<<10), "ssd=1,hdd=1")
	up, err := e.l.CreateUpload(ctx, "bkt", "m", object.PutOptions{Vector: model.MustParseVector("ssd=1,hdd=1")})
	if err != nil {
		t.Fatal(err)
	}
	hkv.match = func(t *meta.Txn) bool { return putsKey(t, meta.PartKey("bkt", up, 1)) }
	hkv.hook = func() {
		if err := e.l.DeleteSnapshot(ctx, "bkt", "s"); err != nil {
			t.Errorf("delete snapshot: %v", err)
		}
		for i := 0; i < 2; i++ {
			rec, err := c.RunJob(ctx, "full", "test")
			if err != nil {
				t.Errorf("job: %v", err)
			}
			t.Logf("job %d: done %v", i, rec.Done)
		}
	}
	p, err := e.l.UploadPartCopy(ctx, "bkt", up, 1, "bkt--snap-s", "k", 0, -1)
	if err != nil {
		t.Logf("part copy failed (safe): %v", err)
		return
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", up, []object.CompletePart{{Num: 1, ETag: p.ETag}}, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	rec, err := c.RunJob(ctx, "full", "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Dangling) > 0 {
		t.Errorf("dangling after the part copy: %v", rec.Dangling)
	}
	got, err := readBack(e.l, "m")
	if err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("object made from the snapshot unreadable: %v", err)
	}
}
