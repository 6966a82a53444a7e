package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/store"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// oneStripeLog creates a one-stripe log with an entry at position 0 and
// returns its record ID and layout (two replicas: the primary and a
// backup, on this node's two devices).
func oneStripeLog(t *testing.T, n *single, name string) (uint64, layout.Layout) {
	t.Helper()
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, name, client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(name, client.LogOptions{}).Append(ctx, []byte("zero")); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	lay := client.LayoutFromProto(info.Layout)
	if len(lay.Segments) != 1 || len(lay.Segments[0].Stripes[0]) != 2 {
		t.Fatalf("layout %s: want one segment, two replicas", lay)
	}
	return info.Record.Id, lay
}

// checkSealedAgree fails unless every fresh replica of segment seg in the
// log's current layout holds the same kind, token and bytes at pos, and
// returns the layout.
func checkSealedAgree(t *testing.T, n *single, name string, segID uint32, pos uint64) layout.Layout {
	t.Helper()
	info, err := n.client(t).Info(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	lay := client.LayoutFromProto(info.Layout)
	var first *store.Result
	for _, seg := range lay.Segments {
		if seg.ID != segID {
			continue
		}
		if seg.Open() {
			t.Fatalf("segment %d still open in %s", segID, lay)
		}
		for _, rep := range seg.Stripes[0] {
			if rep.Stale {
				continue
			}
			r := n.svc.store.ReadAny(rep.Device, store.Key{Log: info.Record.Id, Segment: segID}, pos)
			if first == nil {
				first = &r
				continue
			}
			if r.Status != first.Status || r.Kind != first.Kind || r.Token != first.Token || !bytes.Equal(r.Data, first.Data) {
				t.Fatalf("fresh replicas of segment %d disagree at %d: %s holds %v %v %q, another %v %v %q (layout %s)",
					segID, pos, rep.Device, r.Status, r.Kind, r.Data, first.Status, first.Kind, first.Data, lay)
			}
		}
	}
	if first == nil {
		t.Fatalf("segment %d has no fresh replica in %s", segID, lay)
	}
	return lay
}

// TestSettleAfterAnUncommittedAttempt: a recovery attempt sealed the
// backup at epoch E while the primary's seal timed out, filled position 2
// on the backup (which lacked it), and failed before its layout
// committed. The primary meanwhile holds an entry at 2 that was never
// acknowledged. The next attempt, at the same epoch E, hears both: it must
// not count both as holding 2 and leave them disagreeing (a reader would
// get data from one replica and a hole from the other).
func TestSettleAfterAnUncommittedAttempt(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	id, lay := oneStripeLog(t, n, "uncommitted")
	seg := lay.Segments[0]
	primary, backup := seg.Stripes[0][0], seg.Stripes[0][1]
	ref := &zlogpb.StripeRef{Log: id, Segment: seg.ID}
	raw := n.raw(t)
	// The primary's half of a write the backup never got.
	resp, err := raw.Replicate(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{{Ref: ref, Pos: 2, Kind: zlogpb.Kind_KIND_DATA,
		Token: bytes.Repeat([]byte{9}, 16), Data: []byte("never acknowledged"), Device: primary.Device, Epoch: lay.Epoch}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("primary write: %v %v", err, resp)
	}
	// The uncommitted attempt: seal the backup at E, fill 2 there.
	e := lay.Epoch + 1
	if _, err := raw.Seal(ctx, &zlogpb.SealRequest{Ref: ref, Device: backup.Device, Epoch: e, Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	resp, err = raw.Replicate(ctx, &zlogpb.WriteRequest{Settle: true, Ops: []*zlogpb.Op{{Ref: ref, Pos: 2, Kind: zlogpb.Kind_KIND_FILL,
		Token: make([]byte, 16), Device: backup.Device, Epoch: e}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("settle fill: %v %v", err, resp)
	}
	// The next attempt: the restarted host recovers at E again.
	n = n.restart()
	lay = checkSealedAgree(t, n, "uncommitted", seg.ID, 2)
	if got, err := n.client(t).Open("uncommitted", client.LogOptions{}).Read(ctx, 2); err != nil || got.Kind != client.KindFill {
		t.Fatalf("read 2: %+v %v, want the fill", got, err)
	}
	if !lay.Segments[0].Stripes[0][0].Stale {
		t.Fatalf("the primary holding the losing entry is not stale: %s", lay)
	}
	// Repair brings it back: then both replicas hold the fill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := n.client(t).Info(ctx, "uncommitted")
		if err != nil {
			t.Fatal(err)
		}
		l := client.LayoutFromProto(info.Layout)
		if !l.Segments[0].Stripes[0][0].Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale replica not repaired: %s", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkSealedAgree(t, n, "uncommitted", seg.ID, 2)
	if r := n.svc.store.ReadAny(primary.Device, store.Key{Log: id, Segment: seg.ID}, 2); r.Kind != store.KindFill {
		t.Fatalf("repaired primary at 2: %+v, want the fill", r)
	}
}

// TestReaderWaitsForTheSealedLayout: once recovery has sealed a replica,
// what it holds is final only when the new layout commits (settle may
// still fill around it, or a later attempt drop it). A reader of the old
// epoch must not be answered from it: here the primary holds an entry
// the backup never got, sealed by a recovery that never commits.
func TestReaderWaitsForTheSealedLayout(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	id, lay := oneStripeLog(t, n, "sealed")
	seg := lay.Segments[0]
	primary := seg.Stripes[0][0]
	ref := &zlogpb.StripeRef{Log: id, Segment: seg.ID}
	raw := n.raw(t)
	resp, err := raw.Replicate(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{{Ref: ref, Pos: 1, Kind: zlogpb.Kind_KIND_DATA,
		Token: bytes.Repeat([]byte{5}, 16), Data: []byte("unsettled"), Device: primary.Device, Epoch: lay.Epoch}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("primary write: %v %v", err, resp)
	}
	l := n.client(t).Open("sealed", client.LogOptions{})
	if _, err := l.Read(ctx, 1); !errors.Is(err, client.ErrNotWritten) {
		t.Fatalf("unconfirmed entry before the seal: %v", err)
	}
	if _, err := raw.Seal(ctx, &zlogpb.SealRequest{Ref: ref, Device: primary.Device, Epoch: lay.Epoch + 1, Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if got, err := l.Read(rctx, 1); err == nil {
		t.Fatalf("read of the old epoch answered %+v from a replica sealed by an uncommitted recovery", got)
	}
	// The entry at 0 (acknowledged, on both) is refused the same way
	// until the layout moves on; then it is read as before.
	if _, err := raw.Seal(ctx, &zlogpb.SealRequest{Ref: ref, Device: seg.Stripes[0][1].Device, Epoch: lay.Epoch + 1, Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	n = n.restart()
	l = n.client(t).Open("sealed", client.LogOptions{})
	if got, err := l.Read(ctx, 0); err != nil || string(got.Data) != "zero" {
		t.Fatalf("read 0 after recovery: %+v %v", got, err)
	}
	checkSealedAgree(t, n, "sealed", seg.ID, 1)
}

// TestSettleGivesUpOnAPendingWrite: recovery copies an entry only one
// replica holds; that replica's write of it is still in flight (journal
// slow), so settle gives up waiting and fills the position on the other.
// The write then lands. The replica holding it must not stay in the
// layout as if it agreed.
func TestSettleGivesUpOnAPendingWrite(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	id, lay := oneStripeLog(t, n, "pending")
	seg := lay.Segments[0]
	primary := seg.Stripes[0][0]
	key := store.Key{Log: id, Segment: seg.ID}
	var tok store.Token
	copy(tok[:], bytes.Repeat([]byte{3}, 16))
	p, r := n.svc.store.Begin(primary.Device, key, 1, lay.Epoch, store.KindData, tok, store.Normal)
	if p == nil {
		t.Fatalf("begin: %+v", r)
	}
	n.svc.hostMu.Lock()
	q := n.svc.hosted["pending"]
	n.svc.hostMu.Unlock()
	if q == nil {
		t.Fatal("log not hosted here")
	}
	q.requestRecovery(lay.Epoch)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := n.client(t).Info(ctx, "pending")
		if err != nil {
			t.Fatal(err)
		}
		if info.Layout.Epoch > lay.Epoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("recovery did not commit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The slow write lands after settle filled the position elsewhere.
	if err := p.Write([]byte("late")); err != nil {
		t.Logf("late write: %v", err)
	}
	checkSealedAgree(t, n, "pending", seg.ID, 1)
	if got, err := n.client(t).Open("pending", client.LogOptions{}).Read(ctx, 1); err != nil || got.Kind != client.KindFill {
		t.Fatalf("read 1: %+v %v, want the fill", got, err)
	}
}

// TestTrimRacesRecovery: a trim point is checked against the tail, but the
// sequencer had handed out positions nobody wrote, and a recovery between
// the tail read and the trim's commit starts the next segment below that
// tail. The trim must be judged against the new tail (and refused), not
// cover the appends the new segment acknowledges.
func TestTrimRacesRecovery(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "trimrace", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("trimrace", client.LogOptions{})
	for i := 0; i < 10; i++ {
		if _, err := l.Append(ctx, []byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	raw := n.raw(t)
	// Positions 10..59 handed out to an appender that never writes them.
	if r, err := raw.Next(ctx, &zlogpb.NextRequest{Name: "trimrace", Count: 50}); err != nil || r.First != 10 {
		t.Fatalf("next: %+v %v", r, err)
	}
	var once bool
	n.svc.afterTrimTail = func() {
		if once {
			return
		}
		once = true
		v, _ := n.svc.cache.get("trimrace")
		n.svc.hostMu.Lock()
		q := n.svc.hosted["trimrace"]
		n.svc.hostMu.Unlock()
		q.requestRecovery(v.Layout.Epoch)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if nv, _ := n.svc.cache.get("trimrace"); nv.Layout.Epoch > v.Layout.Epoch {
				return
			}
			if time.Now().After(deadline) {
				t.Error("recovery did not commit")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_, err := raw.TrimLog(ctx, &zlogpb.TrimLogRequest{Name: "trimrace", Before: 40})
	if err == nil {
		t.Errorf("trim at 40 accepted against the old tail 60; the recovered tail is 10")
	}
	p, err := l.Append(ctx, []byte("after recovery"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(ctx, p)
	if err != nil || string(got.Data) != "after recovery" {
		t.Fatalf("acknowledged append at %d reads %+v %v", p, got, err)
	}
}

// TestRehomeLostNode: a closed segment's replica is on a node that never
// comes back. After ReplaceAfter the host re-homes it onto a live device
// and repair copies the stripe there, so the segment has its full
// replica count again and reads do not depend on the lost node.
func TestRehomeLostNode(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{ReplaceAfter: 300 * time.Millisecond, RepairEvery: 100 * time.Millisecond})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "rehome", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("rehome", client.LogOptions{})
	for i := 0; i < 5; i++ {
		if _, err := l.Append(ctx, []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	n = n.restart() // closes segment 0 at 5
	c = n.client(t)
	// Segment 0's second replica now "lives" on n9, a node the cluster
	// does not have (gone, as if its machine died).
	li, err := n.kv.Get(ctx, layoutKey("rehome"))
	if err != nil {
		t.Fatal(err)
	}
	lay, err := decodeLayout(li.Value)
	if err != nil {
		t.Fatal(err)
	}
	if lay.Segments[0].Open() {
		t.Fatalf("segment 0 still open: %s", lay)
	}
	primary := lay.Segments[0].Stripes[0][0]
	lay.Segments[0].Stripes[0][1] = layout.Replica{Node: "n9", Device: "n9/ssd0"}
	var txn meta.Txn
	txn.If(layoutKey("rehome"), li.ModRev)
	txn.Put(layoutKey("rehome"), mustJSON(lay))
	if _, err := n.kv.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var got layout.Layout
	var info *zlogpb.LogInfo
	for {
		info, err = c.Info(ctx, "rehome")
		if err != nil {
			t.Fatal(err)
		}
		got = client.LayoutFromProto(info.Layout)
		if r := got.Segments[0].Stripes[0][1]; r.Node == "n1" && !r.Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica on the lost node not re-homed and repaired: %s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	moved := got.Segments[0].Stripes[0][1]
	if moved.Device == primary.Device {
		t.Fatalf("re-homed onto the stripe's other replica's device: %s", got)
	}
	key := store.Key{Log: info.Record.Id, Segment: got.Segments[0].ID}
	for pos := uint64(0); pos < 5; pos++ {
		a, b := n.svc.store.ReadAny(primary.Device, key, pos), n.svc.store.ReadAny(moved.Device, key, pos)
		if a.Status != store.OK || b.Status != store.OK || !bytes.Equal(a.Data, b.Data) || a.Token != b.Token {
			t.Fatalf("position %d: primary %+v, re-homed replica %+v", pos, a, b)
		}
	}
	if e, err := n.client(t).Open("rehome", client.LogOptions{}).Read(ctx, 3); err != nil || string(e.Data) != "d" {
		t.Fatalf("read 3: %+v %v", e, err)
	}
}

// TestSettleGiveUpReadsOtherHolders: three replicas. The primary's write
// of position 1 is still in flight at the seal, a backup already holds it
// durably (forwards run in parallel), the third lacks it. Settle must copy
// the entry from the backup that has it, not give up on the primary and
// fill the third while the backup keeps the data.
func TestSettleGiveUpReadsOtherHolders(t *testing.T) {
	n := startSingleOn(t, t.TempDir(), "", Options{}, "n1/ssd0:ssd", "n1/ssd1:ssd", "n1/ssd2:ssd")
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "three", client.CreateOptions{Stripes: 1, Vector: "any=3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open("three", client.LogOptions{}).Append(ctx, []byte("zero")); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, "three")
	if err != nil {
		t.Fatal(err)
	}
	lay := client.LayoutFromProto(info.Layout)
	seg := lay.Segments[0]
	if len(seg.Stripes[0]) != 3 {
		t.Fatalf("want 3 replicas: %s", lay)
	}
	reps := seg.Stripes[0]
	key := store.Key{Log: info.Record.Id, Segment: seg.ID}
	ref := &zlogpb.StripeRef{Log: info.Record.Id, Segment: seg.ID}
	tk := bytes.Repeat([]byte{7}, 16)
	var tok store.Token
	copy(tok[:], tk)
	p, r := n.svc.store.Begin(reps[0].Device, key, 1, lay.Epoch, store.KindData, tok, store.Normal)
	if p == nil {
		t.Fatalf("begin: %+v", r)
	}
	resp, err := n.raw(t).Replicate(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{{Ref: ref, Pos: 1, Kind: zlogpb.Kind_KIND_DATA,
		Token: tk, Data: []byte("payload"), Device: reps[1].Device, Epoch: lay.Epoch}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("backup write: %v %v", err, resp)
	}
	n.svc.hostMu.Lock()
	q := n.svc.hosted["three"]
	n.svc.hostMu.Unlock()
	q.requestRecovery(lay.Epoch)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if v, _ := n.svc.cache.get("three"); v.Layout.Epoch > lay.Epoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no recovery")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = p.Write([]byte("payload")) // the slow write lands
	checkSealedAgree(t, n, "three", seg.ID, 1)
	if e, err := n.client(t).Open("three", client.LogOptions{}).Read(ctx, 1); err != nil || string(e.Data) != "payload" {
		t.Fatalf("read 1: %+v %v, want the entry a backup held", e, err)
	}
}

// TestRepairDoesNotResetAFreshReplica: a repair that takes longer than
// RepairEvery left a tick waiting; the next pass read the cache before
// the MarkFresh commit reached it, found the replica stale again, and
// reset it while the layout called it fresh: readers got "not written"
// for acknowledged entries until the second copy finished.
func TestRepairDoesNotResetAFreshReplica(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{RepairEvery: 30 * time.Millisecond})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "rep", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open("rep", client.LogOptions{}).Append(ctx, []byte("zero")); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, "rep")
	if err != nil {
		t.Fatal(err)
	}
	lay := client.LayoutFromProto(info.Layout)
	seg := lay.Segments[0]
	ref := &zlogpb.StripeRef{Log: info.Record.Id, Segment: seg.ID}
	raw := n.raw(t)
	const last = 20000
	for _, rep := range seg.Stripes[0] {
		for from := 1; from <= last; from += 4096 {
			var ops []*zlogpb.Op
			for p := from; p < from+4096 && p <= last; p++ {
				tok := make([]byte, 16)
				copy(tok, fmt.Sprintf("t%d", p))
				ops = append(ops, &zlogpb.Op{Ref: ref, Pos: uint64(p), Kind: zlogpb.Kind_KIND_DATA, Token: tok,
					Data: []byte(fmt.Sprintf("entry-%d", p)), Device: rep.Device, Epoch: lay.Epoch})
			}
			resp, err := raw.Replicate(ctx, &zlogpb.WriteRequest{Ops: ops})
			if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
				t.Fatalf("replicate: %v %v", err, resp)
			}
		}
	}
	n = n.restart() // seals both replicas, closes segment 0 past the last entry
	li, err := n.kv.Get(ctx, layoutKey("rep"))
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := decodeLayout(li.Value)
	target := cur.Segments[0].Stripes[0][0]
	cur.Segments[0].Stripes[0][0].Stale = true // as if its node had missed the seal
	var txn meta.Txn
	txn.If(layoutKey("rep"), li.ModRev)
	txn.Put(layoutKey("rep"), mustJSON(cur))
	if _, err := n.kv.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	key := store.Key{Log: info.Record.Id, Segment: seg.ID}
	var freshAt time.Time
	bad := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		li, err := n.kv.Get(ctx, layoutKey("rep"))
		if err != nil {
			t.Fatal(err)
		}
		l2, _ := decodeLayout(li.Value)
		if l2.Segments[0].Stripes[0][0].Stale {
			continue
		}
		if freshAt.IsZero() {
			freshAt = time.Now()
		}
		if r := n.svc.store.ReadAny(target.Device, key, last); r.Status != store.OK {
			bad++
		}
		if time.Since(freshAt) > 2*time.Second {
			break
		}
	}
	if freshAt.IsZero() {
		t.Fatal("never repaired")
	}
	if bad > 0 {
		t.Fatalf("the replica was marked fresh, then lacked acknowledged position %d in %d probes (reset by a second repair)", last, bad)
	}
}

// TestOldLayoutReaderRefreshes: a reader holding an old layout reads the
// old active segment's primary. That replica has since been closed out
// (stale: its node missed the seal) but, back and not yet repaired, it is
// unsealed and lacks an entry acknowledged on the other replica. The node
// knows the newer layout and sends the reader to refresh, instead of the
// replica answering "not written".
func TestOldLayoutReaderRefreshes(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{RepairEvery: time.Hour})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "old", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("old", client.LogOptions{})
	if _, err := l.Append(ctx, []byte("zero")); err != nil {
		t.Fatal(err)
	}
	if e, err := l.Read(ctx, 0); err != nil || string(e.Data) != "zero" { // l caches the layout
		t.Fatalf("read 0: %+v %v", e, err)
	}
	info, err := c.Info(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	li, err := n.kv.Get(ctx, layoutKey("old"))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := decodeLayout(li.Value)
	reps := old.Segments[0].Stripes[0]
	ref := &zlogpb.StripeRef{Log: info.Record.Id, Segment: old.Segments[0].ID}
	// Position 1 acknowledged on the backup (the primary was down), then
	// the layout closes segment 0 with the primary stale.
	resp, err := n.raw(t).Replicate(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{{Ref: ref, Pos: 1, Kind: zlogpb.Kind_KIND_DATA,
		Token: bytes.Repeat([]byte{4}, 16), Data: []byte("one"), Device: reps[1].Device, Epoch: old.Epoch}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("backup write: %v %v", err, resp)
	}
	if _, err := n.raw(t).Seal(ctx, &zlogpb.SealRequest{Ref: ref, Device: reps[1].Device, Epoch: old.Epoch + 1, Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	nl, err := layout.Recover(old, 1, 2, [][]bool{{false, true}}, [][]layout.Replica{{reps[1], reps[0]}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var txn meta.Txn
	txn.If(layoutKey("old"), li.ModRev)
	txn.Put(layoutKey("old"), mustJSON(nl))
	if _, err := n.kv.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, _ := n.svc.cache.get("old"); v.Layout.Epoch == nl.Epoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node's cache did not see the new layout")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if e, err := l.Read(rctx, 1); err != nil || string(e.Data) != "one" {
		t.Fatalf("reader with the old layout read position 1: %+v %v, want the acknowledged entry", e, err)
	}
}

// TestRepairWaitsForAnEntryInFlight: repair copies a stale replica from a
// fresh one with Dump, which skips entries still being written there (a
// trim in flight). A copy missing one must not be marked fresh: readers
// would get "not written" at that position from it.
func TestRepairWaitsForAnEntryInFlight(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{RepairEvery: 50 * time.Millisecond})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "inflight", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("inflight", client.LogOptions{})
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	n = n.restart() // closes segment 0
	li, err := n.kv.Get(ctx, layoutKey("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	lay, _ := decodeLayout(li.Value)
	seg := lay.Segments[0]
	src := seg.Stripes[0][1]
	v, _ := n.svc.cache.get("inflight")
	key := store.Key{Log: v.Record.ID, Segment: seg.ID}
	// An entry being written on the source (settle-mode reservation).
	p, r := n.svc.store.Begin(src.Device, key, 1000, lay.Epoch, store.KindFill, store.Token{}, store.Settle)
	if p == nil {
		t.Fatalf("begin: %+v", r)
	}
	lay.Segments[0].Stripes[0][0].Stale = true
	var txn meta.Txn
	txn.If(layoutKey("inflight"), li.ModRev)
	txn.Put(layoutKey("inflight"), mustJSON(lay))
	if _, err := n.kv.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	stale := func() bool {
		li, err := n.kv.Get(ctx, layoutKey("inflight"))
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := decodeLayout(li.Value)
		return cur.Segments[0].Stripes[0][0].Stale
	}
	time.Sleep(time.Second) // about 20 repair passes
	if !stale() {
		t.Fatal("the copy was marked fresh while its source still had an entry in flight (the copy lacks it)")
	}
	p.Cancel()
	for deadline := time.Now().Add(10 * time.Second); stale(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not repaired once the entry settled")
		}
	}
}
