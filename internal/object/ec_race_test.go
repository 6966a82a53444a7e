package object

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/transform"
)

// TestMissingStripMarkedBad: a strip file that disappears while the node
// runs (a remote-tier object lost, a file removed by hand) is marked bad by
// the degraded read and by scrub (VerifyStripe), since the Curator
// rebuilds only strips marked bad or on failed, draining or gone devices:
// unmarked, the stripe would stay a strip short for good.
func TestMissingStripMarkedBad(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	a := payload(1, 700_000)
	e.put("cold", "a", a, "hdd=2")
	e.l.SealIdle(ctx, 0)
	if _, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), EC: transform.ECShape{K: 3, M: 2},
		Sources: []RewriteSource{e.source(e.egroupOf("cold", "a"))}}); err != nil {
		t.Fatal(err)
	}
	id := e.egroupOf("cold", "a")
	eg, _, _ := e.l.Egroup(ctx, id)
	lose := func(i int) {
		t.Helper()
		st, _ := e.local.Store(eg.Replicas[i].Device)
		if err := st.Remove(id); err != nil { // drops the cached handle too
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(e.devPath(eg.Replicas[i].Device), extent.FileName(id))); !os.IsNotExist(err) {
			t.Fatal("still there", err)
		}
	}
	marked := func() []int {
		cur, _, _ := e.l.Egroup(ctx, id)
		var out []int
		for i, r := range cur.Replicas {
			if r.Bad {
				out = append(out, i)
			}
		}
		return out
	}
	// Data strip 0 lost: the degraded read reconstructs and marks it.
	lose(0)
	e.mustRead("cold", "a", a)
	if got := marked(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("after a degraded read around lost strip 0, strips %v are marked bad", got)
	}
	// Parity strip 4 lost: scrub finds and marks it.
	lose(4)
	bad, ok, err := e.l.VerifyStripe(ctx, id)
	if err != nil || bad != 1 || ok {
		t.Fatalf("VerifyStripe: bad=%d parityOK=%v err=%v, want one unreadable strip", bad, ok, err)
	}
	if got := marked(); len(got) != 2 || got[1] != 4 {
		t.Fatalf("after scrub with strip 4 lost, strips %v are marked bad", got)
	}
	e.mustRead("cold", "a", a)
}

// TestECRemovalPlannedBeforeTheSwitchIsStale: encoding can outlast the
// garbage grace, so a scan may see a new stripe with no live extents and
// plan its removal at that revision. The encode rewrites each new stripe's
// record before switching extents to it, so that removal is refused
// instead of deleting the record and strips the extents now name.
func TestECRemovalPlannedBeforeTheSwitchIsStale(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	a := payload(1, 700_000)
	e.put("cold", "a", a, "hdd=2")
	e.l.SealIdle(ctx, 0)
	src := e.source(e.egroupOf("cold", "a"))
	// The next egroup ID is the stripe's; remember its record revision
	// when it is created (what a scan before the switch would see).
	var stripeRev int64
	var stripeID uint64
	spy := &hookKV{KV: e.kv, after: func(tx *meta.Txn, rev int64, err error) {
		if id, ok := newECRecord(tx); ok && err == nil && stripeID == 0 {
			stripeID, stripeRev = id, rev
		}
	}}
	e.l.kv = spy
	if _, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), EC: transform.ECShape{K: 3, M: 2}, Sources: []RewriteSource{src}}); err != nil {
		t.Fatal(err)
	}
	e.l.kv = e.kv
	if got := e.egroupOf("cold", "a"); got != stripeID {
		t.Fatalf("stripe %x, object in %x", stripeID, got)
	}
	// Data removal planned at stripeRev (LiveExtents 0 at that snapshot).
	if _, err := e.l.RemoveEgroup(ctx, stripeID, stripeRev); err == nil {
		_, rerr := e.get("cold", "a", 0, -1)
		t.Fatalf("removal decided before the switch removed the live stripe; read now: %v", rerr)
	}
}

// TestRewriteRemovalPlannedBeforeTheSwitchIsStale: the same for a
// replicated (compressing) rewrite.
func TestRewriteRemovalPlannedBeforeTheSwitchIsStale(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	a := logText(1, 700_000)
	e.put("cold", "a", a, "hdd=2")
	e.l.SealIdle(ctx, 0)
	src := e.source(e.egroupOf("cold", "a"))
	var newRev int64
	var newID uint64
	spy := &hookKV{KV: e.kv, after: func(tx *meta.Txn, rev int64, err error) {
		if err != nil || newID != 0 {
			return
		}
		for _, op := range tx.Ops {
			if id, perr := meta.ParseID(op.Key); strings.HasPrefix(string(op.Key), meta.PrefixEgroup) && perr == nil && id != src.Egroup {
				newID, newRev = id, rev
			}
		}
	}}
	e.l.kv = spy
	if _, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), Codec: "zstd", Sources: []RewriteSource{src}}); err != nil {
		t.Fatal(err)
	}
	e.l.kv = e.kv
	if _, err := e.l.RemoveEgroup(ctx, newID, newRev); err == nil {
		t.Fatalf("replicated: removal at the creation revision applied")
	}
}
