package object

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/transform"
)

// hookKV runs before(t) ahead of forwarding each Commit (re-entrant
// calls from inside the hook are forwarded untouched).
type hookKV struct {
	meta.KV
	in     bool
	before func(*meta.Txn)
	after  func(*meta.Txn, int64, error)
}

func (h *hookKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if h.in {
		return h.KV.Commit(ctx, t)
	}
	h.in = true
	if h.before != nil {
		h.before(t)
	}
	h.in = false
	rev, err := h.KV.Commit(ctx, t)
	if h.after != nil && !h.in {
		h.in = true
		h.after(t, rev, err)
		h.in = false
	}
	return rev, err
}

func newECRecord(t *meta.Txn) (uint64, bool) {
	for _, op := range t.Ops {
		if !strings.HasPrefix(string(op.Key), meta.PrefixEgroup) || op.Delete {
			continue
		}
		var eg meta.Egroup
		if meta.Decode(op.Value, &eg) == nil && eg.EC != nil {
			for _, c := range t.Cmps {
				if string(c.Key) == string(op.Key) && c.ModRev == 0 {
					id, _ := meta.ParseID(op.Key)
					return id, true
				}
			}
		}
	}
	return 0, false
}

// TestSweepSparesAnEncodeInProgress: an erasure-coding encode writes its
// strips, then commits the stripe's record. If the strips are older than
// the sweep's grace while the commit is still pending (a stalled metadata
// commit, a paused process, a clock step), the sweep must leave them: the
// encode holds the egroup until its record commits.
func TestSweepSparesAnEncodeInProgress(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	a := payload(1, 700_000)
	e.put("cold", "a", a, "hdd=2")
	e.l.SealIdle(ctx, 0)
	src := e.source(e.egroupOf("cold", "a"))
	var rep OrphanReport
	swept := false
	h := &hookKV{KV: e.kv}
	h.before = func(tx *meta.Txn) {
		id, ok := newECRecord(tx)
		if !ok || swept {
			return
		}
		swept = true
		// The strips were written, synced and verified >10 min ago; the
		// commit has not landed yet.
		for f := range e.replicaFiles() {
			if f.id == id {
				e.age(f, 15*time.Minute)
			}
		}
		runtime.GC()
		var err error
		rep, err = e.l.SweepOrphans(ctx, e.local)
		if err != nil {
			t.Fatal(err)
		}
	}
	e.l.kv = h
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), EC: transform.ECShape{K: 3, M: 2},
		Sources: []RewriteSource{src}})
	e.l.kv = e.kv
	t.Logf("sweep during encode: %s; rewrite: %+v err=%v", rep, res, err)
	if !swept {
		t.Fatal("no EC record commit seen")
	}
	got, rerr := e.get("cold", "a", 0, -1)
	if rerr != nil || !bytes.Equal(got, a) {
		t.Fatalf("object lost after an EC encode and a sweep: err=%v (%d bytes); held=%d removed=%d", rerr, len(got), rep.Held, rep.Removed)
	}
}

// TestRecoveryFencesBeforeRemovingAMovesCopy: start-up recovery's
// deferred removal finds a file whose record lists other devices: a move's
// verified copy whose switch comes after the grace. The removal must fence
// the record first, so that the switch (decided at the old revision) fails
// instead of listing the removed file and deleting the source.
func TestRecoveryFencesBeforeRemovingAMovesCopy(t *testing.T) {
	e := newEnv(t)
	e.tweak = func(o *Options) { o.OrphanGrace = 100 * time.Millisecond }
	e.restart()
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	data := payload(5, 300_000)
	e.put("bkt", "k", data, "ssd=1")
	e.l.SealIdle(ctx, 0)
	id := e.egroupOf("bkt", "k")
	eg, rev, err := e.l.Egroup(ctx, id)
	if err != nil || eg.State != meta.EgroupSealed {
		t.Fatal(eg, err)
	}
	devs := e.local.Devices()
	ssd, hdd0 := devs[0].ID(), devs[1].ID()
	src := eg.Replicas[0].Replica()
	dst := model.Replica{Device: hdd0, Node: "n1", Tier: model.TierHDD}
	// A tier-down move (decided at rev): the copy to hdd0 is done and
	// verified; the executor has not switched yet (another Add, a
	// throttle). This node restarts meanwhile.
	if err := e.l.CopyReplica(ctx, id, eg.Size, src, dst); err != nil {
		t.Fatal(err)
	}
	e.restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := e.replicaFiles()[sweepFile{hdd0, id}]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Skip("recovery kept the copy")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The move resumes: its switch at rev still succeeds.
	next := eg
	next.Replicas = []meta.EgroupReplica{{Device: hdd0, Node: "n1", Tier: model.TierHDD}}
	if err := e.l.SwitchEgroup(ctx, id, rev, next); err != nil {
		t.Logf("switch refused (good): %v", err)
		return
	}
	_ = e.l.RemoveReplicaFile(ctx, src, id)
	_ = ssd
	got, rerr := e.get("bkt", "k", 0, -1)
	if rerr != nil || !bytes.Equal(got, data) {
		t.Fatalf("recovery removed the move's copy without a fence; the switch at rev %d landed; read: %v", rev, rerr)
	}
}
