package curator

import (
	"context"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestQueuedMoveDoesNotHoldRecovery: a balancing move of egroup E waits
// in an up node's queue; then the device of E's other replica fails. The
// next partial scan's recovery of E must run, not be held for the queued
// move (which, planned before the failure, would run as planned and leave
// E with one good replica).
func TestQueuedMoveDoesNotHoldRecovery(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	want := data(5, 200<<10)
	e.put("k", want, "hdd=2")
	e.l.SealIdle(ctx, -1)
	loc, err := e.l.Locate(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	id := loc.Extents[0].Egroup
	eg, rev, _ := e.l.Egroup(ctx, id)
	used := map[model.DeviceID]bool{}
	for _, r := range eg.Replicas {
		used[r.Device] = true
	}
	var spare model.Replica
	for _, d := range e.devs {
		if d.Tier() == "hdd" && !used[d.ID()] {
			spare = model.Replica{Device: d.ID(), Node: "n1", Tier: "hdd"}
		}
	}
	a, b := eg.Replicas[0], eg.Replicas[1]
	task := actuate.Task{Kind: actuate.KindPlanned, Egroup: id, ModRev: rev, Bytes: eg.Size,
		Add: []model.Replica{spare}, Remove: []model.Replica{a.Replica()}, Reason: "disk_balanced"}
	if _, err := e.c.Queues().Enqueue(ctx, "old-job", time.Now(), []actuate.Task{task}); err != nil {
		t.Fatal(err)
	}
	e.c.opts.NodeQueues = true
	e.c.QueueWorker().Node = "n1"
	for _, d := range e.devs {
		if d.ID() == b.Device {
			d.MarkFailed()
		}
	}
	rec := e.run("partial")
	t.Logf("partial scan: under-replicated=%d planned=%v done=%v held=%d", rec.Stats.UnderReplicated, rec.Planned, rec.Done, rec.Held)
	if _, err := e.c.QueueWorker().Drain(ctx); err != nil {
		t.Fatal(err)
	}
	after, _, _ := e.l.Egroup(ctx, id)
	good := 0
	for _, r := range after.Replicas {
		if r.Device != b.Device && !r.Bad {
			good++
		}
	}
	t.Logf("after the queue ran: replicas %+v", after.Replicas)
	if rec.Held > 0 || good < 2 {
		t.Fatalf("recovery held by a queued move (held=%d); %d replica(s) on healthy devices after the queue ran, want 2", rec.Held, good)
	}
}
