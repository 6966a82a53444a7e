package actuate

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// getHookKV is a Pebble store that runs a hook around one Get of a key.
type getHookKV struct {
	*meta.Pebble
	key           []byte
	skip          atomic.Int32 // Gets of key to let through first
	before, after func()
}

func (k *getHookKV) Get(ctx context.Context, key []byte) (meta.Item, error) {
	if !bytes.Equal(key, k.key) || k.skip.Add(-1) != -1 {
		return k.Pebble.Get(ctx, key)
	}
	k.before()
	it, err := k.Pebble.Get(ctx, key)
	k.after()
	return it, err
}

// TestResumeSurvivesJobTrimmedDuringClaim: the old master finishes a job
// the new master has loaded, and trims it, between the claim's read of the
// header (finished) and its read of the batches. The job is gone, not
// broken: ResumeUnfinished must go on to the next unfinished job instead
// of giving up on all of them.
func TestResumeSurvivesJobTrimmedDuringClaim(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	raw := NewJobStore(e.kv)
	seals := func(n int) []Task {
		tasks := make([]Task, n)
		for i := range tasks {
			tasks[i] = Task{Kind: KindSeal, Egroup: uint64(i + 1), ModRev: 1}
		}
		return tasks
	}
	now := time.Now()
	old := NewJob("job-x", "plan", "test", 1, now, seals(3))
	if done, err := raw.claim(ctx, old, "n1"); err != nil || done {
		t.Fatalf("claim by n1: %v, %v", done, err)
	}
	next := NewJob("job-y", "plan", "test", 2, now.Add(time.Second), seals(2))
	if done, err := raw.claim(ctx, next, "n1"); err != nil || done {
		t.Fatalf("claim by n1: %v, %v", done, err)
	}

	// The second Get of job-x's header is the new master's claim (the
	// first is its Load): the old master finishes the job just before,
	// and trims it just after.
	hk := &getHookKV{Pebble: e.kv, key: jobKey("job-x")}
	hk.skip.Store(1)
	hk.before = func() {
		for i := range old.Tasks {
			old.set(i, Done, 0, nil)
		}
		old.finished = time.Now()
		if err := raw.Checkpoint(ctx, old); err != nil {
			t.Errorf("old master's final checkpoint: %v", err)
		}
	}
	hk.after = func() {
		trim := NewJobStore(e.kv)
		trim.Keep = 0
		if err := trim.Trim(ctx); err != nil {
			t.Errorf("trim: %v", err)
		}
	}
	r := &Runner{Actuator: e.act, Store: NewJobStore(hk), Owner: "n2", CheckpointEvery: 10 * time.Millisecond}
	if err := r.ResumeUnfinished(ctx); err != nil {
		t.Errorf("ResumeUnfinished: %v", err)
	}
	y, err := raw.Load(ctx, "job-y")
	if err != nil {
		t.Fatal(err)
	}
	if p := y.Progress(time.Now()); p.Finished.IsZero() || p.Owner != "n2" {
		t.Errorf("the next job was not resumed: owner %q, states %v", p.Owner, p.States)
	}
}

// TestResumeGoesOnPastAJobAlreadyRunning: a job this runner is already
// running (a plan job started outside mastership) fails its resume; the
// later unfinished jobs are still resumed, and the failure is reported.
func TestResumeGoesOnPastAJobAlreadyRunning(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store := NewJobStore(e.kv)
	now := time.Now()
	for i, id := range []string{"job-a", "job-b"} {
		j := NewJob(id, "plan", "test", uint64(i+1), now.Add(time.Duration(i)*time.Second),
			[]Task{{Kind: KindSeal, Egroup: uint64(i + 1), ModRev: 1}})
		if done, err := store.claim(ctx, j, "n1"); err != nil || done {
			t.Fatalf("claim %s: %v, %v", id, done, err)
		}
	}
	r := &Runner{Actuator: e.act, Store: store, Owner: "n2", CheckpointEvery: 10 * time.Millisecond}
	r.running = map[string]*Job{"job-a": nil} // job-a is running here already
	if err := r.ResumeUnfinished(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("ResumeUnfinished: %v, want job-a's failure reported", err)
	}
	b, err := store.Load(ctx, "job-b")
	if err != nil {
		t.Fatal(err)
	}
	if p := b.Progress(time.Now()); p.Finished.IsZero() || p.Owner != "n2" {
		t.Errorf("the job after the failing one was not resumed: owner %q, states %v", p.Owner, p.States)
	}
}
