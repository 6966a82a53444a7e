package curator

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// afterCommitKV runs after once, right after the first commit match
// accepts has landed, and then fails failParts commits that delete part
// records (a metadata error, or a crash, between an abort's or complete's
// two commits).
type afterCommitKV struct {
	*meta.Pebble
	match     func(*meta.Txn) bool
	after     func()
	armed     bool
	failParts int
}

func (k *afterCommitKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if k.armed && k.failParts > 0 && deletesPrefix(t, meta.PrefixUpload) {
		k.failParts--
		return 0, errors.New("injected: metadata store unavailable")
	}
	rev, err := k.Pebble.Commit(ctx, t)
	if err == nil && !k.armed && k.match != nil && k.match(t) {
		k.armed = true
		if k.after != nil {
			k.after()
		}
	}
	return rev, err
}

func deletesPrefix(t *meta.Txn, prefix string) bool {
	for _, op := range t.Ops {
		if op.Delete && bytes.HasPrefix(op.Key, []byte(prefix)) {
			return true
		}
	}
	return false
}

type orphanEnv struct {
	l   *object.Layer
	kv  *meta.Pebble
	akv *afterCommitKV
	c   *Curator
	up  string
	etg string
}

// newOrphanEnv makes a layer and Curator over one store and an upload of
// bucket bkt, key m, with one 300 KiB part.
func newOrphanEnv(t *testing.T) *orphanEnv {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta2"))
	if err != nil {
		t.Fatal(err)
	}
	akv := &afterCommitKV{Pebble: kv}
	pol, _ := placement.New(placement.Config{Name: "moop"})
	l, err := object.New(akv, e.local, e.local, object.Options{ExtentMaxBytes: 64 << 10, EgroupMaxBytes: 512 << 10, Policy: pol, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); kv.Close() })
	c := New(l, kv, e.local, pol, nil, nil, Options{
		Decide:          decide.Options{GarbageGrace: time.Nanosecond, NodeDownAfter: time.Nanosecond},
		MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
	})
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	up, err := l.CreateUpload(ctx, "bkt", "m", object.PutOptions{Vector: model.MustParseVector("ssd=1,hdd=1")})
	if err != nil {
		t.Fatal(err)
	}
	body := data(7, 300<<10)
	p, err := l.UploadPart(ctx, "bkt", up, 1, bytes.NewReader(body), int64(len(body)), "")
	if err != nil {
		t.Fatal(err)
	}
	akv.match = func(t *meta.Txn) bool { return deletesPrefix(t, string(meta.UploadKey("bkt", up))) }
	return &orphanEnv{l: l, kv: kv, akv: akv, c: c, up: up, etg: p.ETag}
}

// extentsAfterFullScans runs three full Curator jobs and returns how many
// extent records and part records are left.
func (o *orphanEnv) extentsAfterFullScans(t *testing.T) (extents, parts int) {
	ctx := context.Background()
	for range 3 {
		if _, err := o.c.RunJob(ctx, "full", "test"); err != nil {
			t.Fatal(err)
		}
	}
	xs, _ := o.kv.Scan(ctx, []byte(meta.PrefixExtent), meta.PrefixEnd([]byte(meta.PrefixExtent)), 0)
	p := append(meta.UploadKey("bkt", o.up), 0)
	ps, _ := o.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	return len(xs), len(ps)
}

// TestFinishedUploadLeavesNoPartRecords: an abort or complete whose part
// deletion does not happen — the client hangs up right after the upload
// record went (the deletion ran on the request's context), or the
// metadata store fails then (the deletion gave up silently) — must not
// leave the parts and their extents for good: nobody can list, abort or
// read them, after a complete they kept the object's extents once the
// object was deleted, and nothing collected them.
func TestFinishedUploadLeavesNoPartRecords(t *testing.T) {
	finish := map[string]func(o *orphanEnv, ctx context.Context) error{
		"abort": func(o *orphanEnv, ctx context.Context) error { return o.l.AbortUpload(ctx, "bkt", o.up) },
		"complete": func(o *orphanEnv, ctx context.Context) error {
			if _, err := o.l.CompleteUpload(ctx, "bkt", o.up, []object.CompletePart{{Num: 1, ETag: o.etg}}, nil); err != nil {
				return err
			}
			return o.l.Delete(context.Background(), "bkt", "m")
		},
	}
	for _, op := range []string{"abort", "complete"} {
		for _, tc := range []struct {
			name      string
			failParts int
		}{{"client hangs up", 0}, {"metadata error", 1}} {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				o := newOrphanEnv(t)
				ctx, cancel := context.WithCancel(context.Background())
				o.akv.after, o.akv.failParts = cancel, tc.failParts
				if err := finish[op](o, ctx); err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if x, p := o.extentsAfterFullScans(t); x != 0 || p != 0 {
					t.Fatalf("after the %s and 3 full scans: %d extent records, %d part records left (leak)", op, x, p)
				}
			})
		}
	}
}
