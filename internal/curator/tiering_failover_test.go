package curator

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/model"
)

// learnedCurator opens a second Curator (another node, as far as the
// learned scheduler goes) on e's metadata store, with a fresh agent that
// decides at every check and observes latencyMs.
func (e *tierEnv) learnedCurator(latencyMs float64) *Curator {
	q := learned(e.t, -10)
	q.Poll = time.Nanosecond
	c := New(e.l, e.kv, e.local, e.c.policy, nil, nil, Options{Tiering: true, TieringScheduler: q,
		TierSignals: func() learn.Observation { return learn.Observation{LatencyMs: latencyMs, Ops: 100} }})
	quiet(c)
	return c
}

// quiet makes c's periodic scans not due, so due() reports only tiering
// decisions.
func quiet(c *Curator) {
	now := time.Now()
	c.mu.Lock()
	c.last["full"], c.last["partial"] = now, now.Add(-time.Minute)
	c.mu.Unlock()
}

func savedModel(t *testing.T, e *tierEnv) *learn.Model {
	t.Helper()
	it, err := e.kv.Get(context.Background(), []byte(tieringModelKey))
	if err != nil {
		t.Fatal(err)
	}
	m, err := learn.ParseModel(it.Value)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A deposed master that does not know it yet (its election session has
// not timed out locally) must not write its model over the one the new
// master saved: the save is conditional on the record it last read or
// wrote, and a conflict makes it reload instead.
func TestTieringModelDeposedMasterDoesNotOverwrite(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	a := e.learnedCurator(4)
	for range 3 { // two updates, saved
		quiet(a)
		a.due()
	}
	if m := savedModel(t, e); m.Updates != 2 {
		t.Fatalf("old master saved a model with %d updates, want 2", m.Updates)
	}
	// The new master restores it and learns two more updates.
	b := e.learnedCurator(40)
	for range 3 {
		quiet(b)
		b.due()
	}
	want := savedModel(t, e)
	if want.Updates != 4 {
		t.Fatalf("new master saved a model with %d updates, want 4", want.Updates)
	}
	// The old master, still believing it leads, learns once more and saves.
	quiet(a)
	a.due()
	if got := savedModel(t, e); got.String() != want.String() {
		t.Fatalf("the deposed master overwrote the new master's model:\n%s\nwant:\n%s", got, want)
	}
	// At its next check it continues from the record in the store.
	quiet(a)
	a.due()
	if n := a.scheduler().(modelAgent).Agent().Model().Updates; n < want.Updates {
		t.Fatalf("after a conflicting save the old master's model has %d updates; want it reloaded (≥ %d)", n, want.Updates)
	}
}

// switchLeader is a Leader the test switches on and off.
type switchLeader struct{ on atomic.Bool }

func (l *switchLeader) IsLeader() bool { return l.on.Load() }

// A node that loses mastership and later wins it back must not credit its
// last decision of the earlier term with the latency it observes on its
// return: that interval was the other master's, whose decisions (and
// model) it covers. Its first decision of the new term has no
// predecessor, like a fresh master's: the model is the restored one
// exactly.
func TestTieringRegainedMasterCreditsNoStaleDecision(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	a := e.learnedCurator(4)
	var la switchLeader
	la.on.Store(true)
	a.leader = &la
	for range 2 { // one update, saved; a decision pending
		quiet(a)
		a.due()
	}
	la.on.Store(false)
	quiet(a)
	a.due() // a follower now
	b := e.learnedCurator(40)
	for range 3 {
		quiet(b)
		b.due()
	}
	want := savedModel(t, e)
	// b is deposed; a wins the election again.
	la.on.Store(true)
	quiet(a)
	a.due()
	if got := a.scheduler().(modelAgent).Agent().Model(); got.String() != want.String() {
		t.Fatalf("regained master's model after its first check:\n%s\nwant the restored one (its decision of the earlier term credited with nothing):\n%s", got, want)
	}
}

// The options of a run the agent decided are for the job that check
// starts. If the node stops being the master before that job runs, they
// must not be handed to a job of a later term (here a periodic scan after
// it wins mastership back), which would shed the ssd on a decision the
// other master's term has made moot.
func TestTieringPendingRunDroppedWithMastership(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	var l switchLeader
	l.on.Store(true)
	e.c.leader = &l
	e.c.opts.TieringScheduler = learned(t, 10) // always runs
	e.quietSchedules()
	if kind, why := e.c.due(); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("due %q (%s), want a run", kind, why)
	}
	// Deposed before the job starts; a follower's check; mastership back.
	l.on.Store(false)
	e.quietSchedules()
	e.c.due()
	l.on.Store(true)
	before := e.tierUse(model.TierSSD)
	rec := e.job() // a periodic scan of the new term
	after := e.tierUse(model.TierSSD)
	if n := rec.Done[string(decide.KindTierDown)]; n != 0 {
		t.Fatalf("a periodic job of a later term applied the earlier term's run: demoted %d egroups, ssd %.1f%% -> %.1f%%", n, 100*before, 100*after)
	}
}

// The hold after a run is the cluster's, not one node's: a new master must
// not start a run inside the hold that began with the old master's run
// (tiering back to back is what the hold prevents). The run's time travels
// in the saved model record; the new master honours it until the hold
// ends, then decides again.
func TestTieringHoldSurvivesFailover(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	clock := time.Now()
	runner := func() *Curator { // another node, whose agent always runs
		c := New(e.l, e.kv, e.local, e.c.policy, nil, nil, Options{Tiering: true, TieringScheduler: learned(t, 10)})
		c.mu.Lock()
		c.now = func() time.Time { return clock }
		c.mu.Unlock()
		return c
	}
	check := func(c *Curator) (kind, why string) {
		c.mu.Lock()
		c.last["full"], c.last["partial"] = clock, clock.Add(-time.Minute)
		c.mu.Unlock()
		return c.due()
	}
	a := runner()
	if kind, why := check(a); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("old master: due %q (%s), want a run", kind, why)
	}
	if m := savedModel(t, e); !m.LastRun.Equal(clock) {
		t.Fatalf("saved model's last run %v, want the old master's run at %v", m.LastRun, clock)
	}
	// The old master dies; a minute later another node is the master.
	clock = clock.Add(time.Minute)
	b := runner()
	if kind, why := check(b); kind != "" {
		t.Fatalf("new master a minute after the old master's run: due %q (%s), want nothing inside the hold", kind, why)
	}
	clock = clock.Add(learn.DefaultHold - 2*time.Minute)
	if kind, why := check(b); kind != "" {
		t.Fatalf("new master a minute before the hold ends: due %q (%s)", kind, why)
	}
	clock = clock.Add(2 * time.Minute)
	if kind, why := check(b); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("new master after the hold: due %q (%s), want a run", kind, why)
	}
}
