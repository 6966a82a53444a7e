package actuate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestNodeQueueRunsMovesAndDropsStale: moves queued for a node are
// executed by that node's worker (copy, verify, switch, delete), a stale
// one is dropped without effect, a failing one is retried MaxAttempts
// times and dropped, and tasks that cannot wait are never queued.
func TestNodeQueueRunsMovesAndDropsStale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := NewNodeQueues(e.kv)
	want := map[string][]byte{}
	var tasks []Task
	var froms []model.Replica
	for i := range 4 {
		k := fmt.Sprintf("k%d", i)
		want[k] = data(uint64(10+i), 150<<10)
		id, eg, rev := e.put(k, want[k])
		from := eg.Replicas[0].Replica()
		froms = append(froms, from)
		tasks = append(tasks, Task{Kind: KindTierUp, Egroup: id, ModRev: rev, Bytes: eg.Size,
			Add: []model.Replica{e.spare(eg, "ssd")}, Remove: []model.Replica{from}})
	}
	// Task 2 is stale: its egroup changed after the decision.
	tasks[2].ModRev--
	// Task 3 cannot succeed: its destination device does not exist.
	tasks[3].Add = []model.Replica{{Device: "n1/nvme9", Node: "n1", Tier: "ssd"}}
	// Not queueable: a seal (no destination) and a compaction.
	extra := []Task{{Kind: KindSeal, Egroup: tasks[0].Egroup, ModRev: 1}, {Kind: KindCompact, Egroup: tasks[1].Egroup, Add: tasks[1].Add}}
	n, err := q.Enqueue(ctx, "job-1", time.Now(), append(tasks, extra...))
	if err != nil || n != len(tasks) {
		t.Fatalf("enqueue: %d queued, %v; want %d", n, err, len(tasks))
	}
	if c, err := q.Counts(ctx); err != nil || c["n1"] != 4 || len(c) != 1 {
		t.Fatalf("counts %v, %v", c, err)
	}
	held, err := q.Egroups(ctx, func(model.NodeID) bool { return true })
	if err != nil || len(held) != 4 {
		t.Fatalf("held egroups %v, %v", held, err)
	}
	if none, _ := q.Egroups(ctx, func(model.NodeID) bool { return false }); len(none) != 0 {
		t.Fatalf("a down node's queue holds egroups: %v", none)
	}
	// Another node's worker runs nothing of n1's.
	other := &QueueWorker{Actuator: e.act, Queues: q, Node: "n2"}
	if k, err := other.Drain(ctx); k != 0 || err != nil {
		t.Fatalf("n2 drained %d (%v) of n1's queue", k, err)
	}
	outcomes := map[TaskState]int{}
	w := &QueueWorker{Actuator: e.act, Queues: q, Node: "n1", MaxAttempts: 2,
		OnTask: func(_ Task, s TaskState, _ Result, _ error) { outcomes[s]++ }}
	if k, err := w.Drain(ctx); err != nil || k != 3 {
		t.Fatalf("first drain finished %d (%v), want 3 (two done, one stale; the failure stays for a retry)", k, err)
	}
	left, err := q.List(ctx, "n1", 0)
	if err != nil || len(left) != 1 || left[0].Attempts != 1 || !strings.Contains(left[0].LastErr, "nvme9") {
		t.Fatalf("after one drain: %+v, %v", left, err)
	}
	if k, err := w.Drain(ctx); err != nil || k != 1 {
		t.Fatalf("second drain finished %d (%v), want the failing task dropped", k, err)
	}
	if c, _ := q.Counts(ctx); len(c) != 0 {
		t.Fatalf("queue not empty: %v", c)
	}
	if outcomes[Done] != 2 || outcomes[Stale] != 1 || outcomes[Failed] != 1 {
		t.Fatalf("outcomes %v", outcomes)
	}
	for i, tk := range tasks {
		eg, _, err := e.l.Egroup(ctx, tk.Egroup)
		if err != nil {
			t.Fatal(err)
		}
		onSSD := false
		for _, r := range eg.Replicas {
			onSSD = onSSD || r.Tier == "ssd"
		}
		if moved := i < 2; onSSD != moved {
			t.Fatalf("task %d: egroup on ssd = %v, want %v (%+v)", i, onSSD, moved, eg.Replicas)
		}
		if i < 2 && e.fileExists(froms[i].Device, tk.Egroup) {
			t.Fatalf("task %d: source replica file kept", i)
		}
	}
	for k, b := range want {
		e.check(k, b)
	}
}

// TestNodeQueueSurvivesAndDropsDamage: the queue is in the metadata store
// (a new worker over the same store finds it), a damaged entry is dropped
// rather than retried forever, and Drop empties a node's queue.
func TestNodeQueueSurvivesAndDropsDamage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id, eg, rev := e.put("k", data(3, 100<<10))
	task := Task{Kind: KindTierUp, Egroup: id, ModRev: rev, Bytes: eg.Size,
		Add: []model.Replica{e.spare(eg, "ssd")}, Remove: []model.Replica{eg.Replicas[0].Replica()}}
	if n, err := NewNodeQueues(e.kv).Enqueue(ctx, "job-9", time.Now(), []Task{task, {Kind: KindPlanned, Egroup: id + 1, Add: task.Add, Remove: task.Remove}}); err != nil || n != 2 {
		t.Fatalf("enqueue: %d, %v", n, err)
	}
	if _, err := e.kv.Commit(ctx, &meta.Txn{Ops: []meta.Op{{Key: []byte(nodeQueuePrefix + "n1/ffffffffffffffff/tier-up"), Value: []byte("{not json")}}}); err != nil {
		t.Fatal(err)
	}
	q := NewNodeQueues(e.kv) // as after a restart
	l, err := q.List(ctx, "n1", 0)
	if err != nil || len(l) != 2 || l[0].Job != "job-9" || l[0].Task.Egroup != id {
		t.Fatalf("list after restart: %+v, %v", l, err)
	}
	if l, _ := q.List(ctx, "n1", 0); len(l) != 2 {
		t.Fatalf("damaged entry not dropped: %+v", l)
	}
	if n, err := q.Drop(ctx, "n1"); err != nil || n != 2 {
		t.Fatalf("drop: %d, %v", n, err)
	}
	if c, err := q.Counts(ctx); err != nil || len(c) != 0 {
		t.Fatalf("after drop: %v, %v", c, err)
	}
	// A conflicting writer: remove only deletes the entry it read.
	if _, err := q.Enqueue(ctx, "job-10", time.Now(), []Task{task}); err != nil {
		t.Fatal(err)
	}
	es, _ := q.list(ctx, nodeQueuePrefix, 0)
	if _, err := q.Enqueue(ctx, "job-11", time.Now(), []Task{task}); err != nil { // replanned meanwhile
		t.Fatal(err)
	}
	if err := q.remove(ctx, es[0]); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("removing a replaced entry: %v, want a conflict", err)
	}
	if l, _ := q.List(ctx, "n1", 0); len(l) != 1 || l[0].Job != "job-11" {
		t.Fatalf("the newer entry was lost: %+v", l)
	}
}
