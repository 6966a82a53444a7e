package actuate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// errLog is a slog handler that remembers the errors logged with "err".
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (h *errLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *errLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}
func (h *errLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errLog) WithGroup(string) slog.Handler      { return h }

func (h *errLog) has(target error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// TestDeposedRunnerCannotOverwriteJob: a master pauses mid-job (a GC
// pause, a partition) while its checkpoints keep going; a new master
// resumes the job from the store and finishes it. The deposed master must
// neither rewrite the job record (owner back to itself, the finished job
// unfinished, the new master's task states replaced by its own) nor run
// the job's remaining tasks once it learns it lost the job.
func TestDeposedRunnerCannotOverwriteJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	want := map[string][]byte{}
	var tasks []Task
	for i := range 12 { // one egroup each
		k := fmt.Sprintf("k%02d", i)
		want[k] = data(uint64(100+i), 3000+i)
		id, eg, rev := e.put(k, want[k])
		tasks = append(tasks, Task{Kind: KindPlanned, Egroup: id, ModRev: rev, Bytes: eg.Size,
			Add: []model.Replica{e.spare(eg, "hdd")}, Remove: []model.Replica{eg.Replicas[0].Replica()}})
	}
	if len(tasks) < 5 {
		t.Fatalf("only %d moves", len(tasks))
	}
	// Pad with no-op seals so the job spans two checkpoint batches.
	for len(tasks) < batchSize+10 {
		tasks = append(tasks, Task{Kind: KindSeal, Egroup: tasks[0].Egroup, ModRev: 1})
	}
	store := NewJobStore(e.kv)
	job1 := NewJob("job-1", "plan", "test", 7, time.Now(), tasks)

	// The old master pauses inside its 3rd task's callback; its
	// checkpoint ticker keeps running, as the rest of a partitioned node
	// does.
	log1 := &errLog{}
	r1 := &Runner{Actuator: e.act, Store: store, Workers: 1, CheckpointEvery: 10 * time.Millisecond, Owner: "n1",
		Log: slog.New(log1)}
	paused, release := make(chan struct{}), make(chan struct{})
	var calls, afterRelease atomic.Int64
	var released atomic.Bool
	err1 := make(chan error, 1)
	go func() {
		err1 <- r1.Run(ctx, job1, func(Task, TaskState, Result, error) {
			if released.Load() {
				afterRelease.Add(1)
			}
			if calls.Add(1) == 3 {
				close(paused)
				<-release
			}
		})
	}()
	releaseOnce := sync.OnceFunc(func() { released.Store(true); close(release) })
	defer func() { releaseOnce(); <-err1 }()
	select {
	case <-paused:
	case <-time.After(time.Minute):
		t.Fatal("the old master never reached its 3rd task")
	}
	time.Sleep(50 * time.Millisecond) // let a checkpoint record the 3 tasks

	// The new master resumes the job and runs it to the end.
	r2 := &Runner{Actuator: New(e.l, NewScheduler(Limits{}, 1e12, Signals{}), nil), Store: store, Workers: 2,
		CheckpointEvery: 10 * time.Millisecond, Owner: "n2"}
	job2, err := store.Load(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Run(ctx, job2, nil); err != nil {
		t.Fatal(err)
	}
	if !job2.Finished() {
		t.Fatalf("new master left the job unfinished: %v", job2.Progress(time.Now()).States)
	}
	final := job2.Progress(time.Now())
	finalStates := slices.Clone(job2.State)

	// The old master's checkpoints go on for a while (at most until it
	// learns that it lost the job).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !log1.has(ErrJobTakenOver); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)

	check := func(when string) {
		t.Helper()
		got, err := store.Load(ctx, "job-1")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		p := got.Progress(time.Now())
		if p.Owner != "n2" {
			t.Errorf("%s: stored owner %q, want the new master n2", when, p.Owner)
		}
		if p.Finished.IsZero() {
			t.Errorf("%s: the finished job is stored unfinished (states %v)", when, p.States)
		}
		if ids, _ := store.Unfinished(ctx); len(ids) != 0 {
			t.Errorf("%s: unfinished jobs %v", when, ids)
		}
		if !slices.Equal(got.State, finalStates) {
			t.Errorf("%s: stored task states %v, the new master left %v", when, p.States, final.States)
		}
	}
	check("while the old master is paused")

	// The old master wakes up.
	releaseOnce()
	var runErr error
	select {
	case runErr = <-err1:
		err1 <- runErr // for the deferred receive
	case <-time.After(time.Minute):
		t.Fatal("the old master's run did not return")
	}
	if !errors.Is(runErr, ErrJobTakenOver) {
		t.Errorf("old master's Run returned %v, want ErrJobTakenOver", runErr)
	}
	if n := afterRelease.Load(); n != 0 {
		t.Errorf("the deposed master ran %d more tasks of the job", n)
	}
	check("after the old master resumed")
	for k, b := range want {
		e.check(k, b)
	}
}

// TestDeposedCheckpointWritesNoBatch: after a new owner claims a job, a
// checkpoint by the old one fails with ErrJobTakenOver and commits none of
// its batches either (they would show the new owner's finished tasks
// pending); a checkpoint whose header write landed though its commit
// reported an error does not count as a takeover.
func TestDeposedCheckpointWritesNoBatch(t *testing.T) {
	ctx := context.Background()
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	store := NewJobStore(kv)
	tasks := make([]Task, batchSize+10)
	for i := range tasks {
		tasks[i] = Task{Kind: KindSeal, Egroup: uint64(i + 1), ModRev: 1}
	}
	old := NewJob("job-2", "plan", "test", 1, time.Now(), tasks)
	if done, err := store.claim(ctx, old, "n1"); err != nil || done {
		t.Fatalf("first claim: %v, %v", done, err)
	}
	// The old owner's own write that reported an error but landed.
	rev := old.rev
	old.set(0, Done, 0, nil)
	if err := store.Checkpoint(ctx, old); err != nil {
		t.Fatal(err)
	}
	old.rev = rev
	old.set(1, Done, 0, nil)
	if err := store.Checkpoint(ctx, old); err != nil {
		t.Fatalf("checkpoint after an own write that landed: %v", err)
	}

	nw, err := store.Load(ctx, "job-2")
	if err != nil {
		t.Fatal(err)
	}
	if done, err := store.claim(ctx, nw, "n2"); err != nil || done {
		t.Fatalf("takeover: %v, %v", done, err)
	}
	nw.set(5, Done, 0, nil)
	nw.set(batchSize+5, Done, 0, nil)
	if err := store.Checkpoint(ctx, nw); err != nil {
		t.Fatal(err)
	}
	old.set(6, Failed, 0, errors.New("x"))
	old.set(batchSize+6, Stale, 0, nil)
	err = store.Checkpoint(ctx, old)
	if !errors.Is(err, ErrJobTakenOver) || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("deposed checkpoint: %v, want ErrJobTakenOver naming n2", err)
	}
	if err := store.Save(ctx, old); !errors.Is(err, ErrJobTakenOver) {
		t.Fatalf("deposed save: %v, want ErrJobTakenOver", err)
	}
	got, err := store.Load(ctx, "job-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 5, batchSize + 5} {
		if got.State[i] != Done {
			t.Errorf("task %d stored %v, want done", i, got.State[i])
		}
	}
	for _, i := range []int{6, batchSize + 6} {
		if got.State[i] != Pending {
			t.Errorf("task %d stored %v: the deposed owner's batch landed", i, got.State[i])
		}
	}
	if got.owner != "n2" {
		t.Errorf("owner %q, want n2", got.owner)
	}
}
