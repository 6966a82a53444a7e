package actuate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Node task queues (Curator §3.1: asynchronous tasks are executed by each
// node at its own pace). A scan job runs its tasks until its time limit;
// the moves it did not start then are not dropped but handed to the
// durable queue of the node that runs them — the node that receives the
// data — in the metadata store. Every node runs a QueueWorker over its own
// queue, through its own Actuator and Scheduler, so the pace follows that
// node's client load, and the queue outlives the job, the scan and a
// Curator master failover. A task still applies only if its egroup record
// is at the revision the decision saw (stale otherwise), so a queued task
// that waited too long is dropped, never forced.
//
// Keys: j/n/<node>/<egroup hex>/<kind> → a queuedTask (JSON). One entry per
// egroup and kind per node: a later scan that plans the same move again
// overwrites it.

const nodeQueuePrefix = meta.PrefixJob + "n/"

// Queueable reports whether a task can wait in a node queue: moves that
// name their destination and carry everything they need in their record
// (transformations keep their source lists in memory only and are
// re-planned by the next scan instead).
func Queueable(t Task) bool {
	switch t.Kind {
	case KindRecover, KindTierDown, KindTierUp, KindBalance, KindPlanned, KindRemoveReplicas:
		return queueNode(t) != ""
	}
	return false
}

// QueuedTask is one entry of a node queue.
type QueuedTask struct {
	Task     Task         `json:"task"`
	Node     model.NodeID `json:"node"`
	Job      string       `json:"job"`
	Enqueued time.Time    `json:"enqueued"`
	Attempts int          `json:"attempts,omitempty"`
	LastErr  string       `json:"last_error,omitempty"`
}

func nodeQueueKey(node model.NodeID, egroup uint64, kind Kind) []byte {
	return []byte(nodeQueuePrefix + string(node) + "/" + meta.FormatID(egroup) + "/" + string(kind))
}

// NodeQueues is the set of node task queues in a metadata store.
type NodeQueues struct{ kv meta.KV }

// NewNodeQueues returns the queues stored in kv.
func NewNodeQueues(kv meta.KV) *NodeQueues { return &NodeQueues{kv: kv} }

// Enqueue puts tasks on the queues of the nodes that run them and returns
// how many it queued; tasks that cannot wait (Queueable) are left out.
func (q *NodeQueues) Enqueue(ctx context.Context, job string, now time.Time, tasks []Task) (int, error) {
	const perTxn = 64
	committed := 0
	var t meta.Txn
	flush := func() error {
		if len(t.Ops) == 0 {
			return nil
		}
		if _, err := q.kv.Commit(ctx, &t); err != nil {
			return err
		}
		committed += len(t.Ops)
		t = meta.Txn{}
		return nil
	}
	for _, tk := range tasks {
		if !Queueable(tk) {
			continue
		}
		node := queueNode(tk)
		t.Put(nodeQueueKey(node, tk.Egroup, tk.Kind), meta.Encode(QueuedTask{Task: tk, Node: node, Job: job, Enqueued: now}))
		if len(t.Ops) == perTxn {
			if err := flush(); err != nil {
				return committed, err
			}
		}
	}
	err := flush()
	return committed, err
}

// entry is a stored queue entry with its key and revision.
type entry struct {
	key []byte
	rev int64
	qt  QueuedTask
}

// list reads the entries under prefix (a node's queue, or every queue).
func (q *NodeQueues) list(ctx context.Context, prefix string, limit int) ([]entry, error) {
	var out []entry
	start, end := []byte(prefix), meta.PrefixEnd([]byte(prefix))
	for {
		items, err := q.kv.Scan(ctx, start, end, 512)
		if err != nil {
			return out, err
		}
		for _, it := range items {
			var qt QueuedTask
			if err := meta.Decode(it.Value, &qt); err != nil {
				// A damaged entry is dropped, not retried forever: the
				// next scan plans the egroup's move again if it still
				// needs one.
				_, _ = q.kv.Commit(ctx, &meta.Txn{Ops: []meta.Op{{Key: it.Key, Delete: true}}})
				continue
			}
			out = append(out, entry{key: it.Key, rev: it.ModRev, qt: qt})
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if len(items) < 512 {
			return out, nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// List returns a node's queued tasks in egroup order (limit 0: all).
func (q *NodeQueues) List(ctx context.Context, node model.NodeID, limit int) ([]QueuedTask, error) {
	es, err := q.list(ctx, nodeQueuePrefix+string(node)+"/", limit)
	out := make([]QueuedTask, len(es))
	for i, e := range es {
		out[i] = e.qt
	}
	return out, err
}

// Counts returns how many tasks wait in each node's queue.
func (q *NodeQueues) Counts(ctx context.Context) (map[model.NodeID]int, error) {
	es, err := q.list(ctx, nodeQueuePrefix, 0)
	out := map[model.NodeID]int{}
	for _, e := range es {
		out[e.qt.Node]++
	}
	return out, err
}

// Egroups returns the egroups with a task queued on a node for which up
// is true: the Curator plans nothing else for them until the queue has
// run (a task queued on a node that is down does not hold its egroup).
func (q *NodeQueues) Egroups(ctx context.Context, up func(model.NodeID) bool) (map[uint64]bool, error) {
	es, err := q.list(ctx, nodeQueuePrefix, 0)
	out := map[uint64]bool{}
	for _, e := range es {
		if up(e.qt.Node) {
			out[e.qt.Task.Egroup] = true
		}
	}
	return out, err
}

// Drop empties a node's queue (a node gone for good: its tasks are
// planned again from fresh metadata) and returns how many it removed.
func (q *NodeQueues) Drop(ctx context.Context, node model.NodeID) (int, error) {
	es, err := q.list(ctx, nodeQueuePrefix+string(node)+"/", 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range es {
		if q.remove(ctx, e) == nil {
			n++
		}
	}
	return n, nil
}

// remove deletes an entry if it is still the one read (a newer entry for
// the same egroup and kind, queued meanwhile, stays).
func (q *NodeQueues) remove(ctx context.Context, e entry) error {
	var t meta.Txn
	t.If(e.key, e.rev)
	t.Del(e.key)
	_, err := q.kv.Commit(ctx, &t)
	return err
}

// QueueWorker executes one node's queue.
type QueueWorker struct {
	Actuator *Actuator
	Queues   *NodeQueues
	Node     model.NodeID
	// Poll is how often an empty queue is read again (default 2 s).
	Poll time.Duration
	// MaxAttempts is how often a failing task is tried before it is
	// dropped (default 3); the next scan plans it again if still needed.
	MaxAttempts int
	Log         *slog.Logger
	// OnTask hears about every executed task (metrics).
	OnTask TaskObserver

	mu      sync.Mutex
	running bool
}

func (w *QueueWorker) defaults() {
	if w.Poll <= 0 {
		w.Poll = 2 * time.Second
	}
	if w.MaxAttempts <= 0 {
		w.MaxAttempts = 3
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
}

// Run executes the queue until ctx ends.
func (w *QueueWorker) Run(ctx context.Context) {
	w.defaults()
	for {
		n, err := w.Drain(ctx)
		if err != nil && ctx.Err() == nil {
			w.Log.Warn("node queue", "node", w.Node, "err", err)
		}
		if n > 0 {
			continue // more may have arrived meanwhile
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.Poll):
		}
	}
}

// Drain executes the tasks queued now, one at a time (the Scheduler's
// limits and rate apply as to any job), and returns how many it finished
// (done, stale, or failed for the last time).
func (w *QueueWorker) Drain(ctx context.Context) (int, error) {
	w.defaults()
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return 0, nil
	}
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	es, err := w.Queues.list(ctx, nodeQueuePrefix+string(w.Node)+"/", 0)
	if err != nil {
		return 0, err
	}
	finished := 0
	for _, e := range es {
		if ctx.Err() != nil {
			return finished, ctx.Err()
		}
		res, err := w.Actuator.Execute(ctx, e.qt.Task)
		var st TaskState
		switch {
		case errors.Is(err, ErrBusy):
			continue // another job moves this egroup now: try at the next drain
		case ctx.Err() != nil:
			return finished, ctx.Err() // stays queued
		case errors.Is(err, ErrStale):
			st, err = Stale, nil
		case err != nil:
			st = Failed
		default:
			st = Done
		}
		if st == Failed && e.qt.Attempts+1 < w.MaxAttempts {
			qt := e.qt
			qt.Attempts++
			qt.LastErr = err.Error()
			var t meta.Txn
			t.If(e.key, e.rev)
			t.Put(e.key, meta.Encode(qt))
			if _, cerr := w.Queues.kv.Commit(ctx, &t); cerr != nil && !errors.Is(cerr, meta.ErrConflict) {
				return finished, cerr
			}
			continue
		}
		if rerr := w.Queues.remove(ctx, e); rerr != nil && !errors.Is(rerr, meta.ErrConflict) {
			return finished, fmt.Errorf("actuate: remove queued task %s: %w", e.key, rerr)
		}
		finished++
		if st == Failed {
			w.Log.Warn("queued task failed; dropped", "node", w.Node, "task", e.qt.Task.String(), "attempts", e.qt.Attempts+1, "err", err)
		}
		if w.OnTask != nil {
			w.OnTask(e.qt.Task, st, res, err)
		}
	}
	return finished, nil
}
