package object

import (
	"bytes"
	"context"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func (e *env) extentOf(bucket, key string) (uint64, int64, meta.Extent) {
	e.t.Helper()
	loc, err := e.l.Locate(context.Background(), bucket, key)
	if err != nil {
		e.t.Fatal(err)
	}
	id := loc.Extents[0].Extent
	var x meta.Extent
	rev, err := meta.GetRecord(context.Background(), e.kv, meta.ExtentKey(id), &x)
	if err != nil {
		e.t.Fatal(err)
	}
	return id, rev, x
}

// TestShareExtentsComparesBytes: equal data shares one copy; a forged
// fingerprint collision (equal fingerprints, different bytes) is caught by
// the byte comparison and never shared; stale records are left alone.
func TestShareExtentsComparesBytes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "ddb", "", model.Vector{})
	if err := e.l.SetBucketTransform(ctx, "ddb", meta.BucketTransform{Dedup: true}); err != nil {
		t.Fatal(err)
	}
	a, other := payload(1, 100_000), payload(2, 100_000)
	e.put("ddb", "a", a, "hdd=2")
	e.put("ddb", "b", a, "hdd=2")
	e.put("ddb", "c", other, "hdd=2")
	e.l.SealIdle(ctx, 0)
	ida, reva, xa := e.extentOf("ddb", "a")
	idb, revb, xb := e.extentOf("ddb", "b")
	idc, _, xc := e.extentOf("ddb", "c")
	if len(xa.FP) != 32 || !bytes.Equal(xa.FP, xb.FP) || bytes.Equal(xa.FP, xc.FP) {
		t.Fatalf("fingerprints: a %x b %x c %x", xa.FP, xb.FP, xc.FP)
	}
	// Forge a collision: c claims a's fingerprint.
	xc.FP = xa.FP
	var tx meta.Txn
	tx.Put(meta.ExtentKey(idc), meta.Encode(xc))
	if _, err := e.kv.Commit(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	_, revc, _ := e.extentOf("ddb", "c")
	res, err := e.l.ShareExtents(ctx, ExtentRev{ida, reva}, []ExtentRev{{idb, revb}, {idc, revc}, {idb, revb - 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Shared != 1 || res.Differ != 1 || res.Stale != 1 {
		t.Fatalf("share: %+v, want 1 shared, 1 differing, 1 stale", res)
	}
	_, _, nb := e.extentOf("ddb", "b")
	if nb.Egroup != xa.Egroup || nb.Off != xa.Off || nb.Shares != ida {
		t.Fatalf("b not pointed at a's copy: %+v", nb)
	}
	_, _, nc := e.extentOf("ddb", "c")
	if nc.Egroup != xc.Egroup || nc.Off != xc.Off || nc.Shares != 0 {
		t.Fatalf("c (collision) changed: %+v", nc)
	}
	e.mustRead("ddb", "a", a)
	e.mustRead("ddb", "b", a)
	e.mustRead("ddb", "c", other)
	// Deleting the canonical object leaves the sharer readable.
	if err := e.l.Delete(ctx, "ddb", "a"); err != nil {
		t.Fatal(err)
	}
	e.mustRead("ddb", "b", a)
	e.restart()
	e.mustRead("ddb", "b", a)
}
