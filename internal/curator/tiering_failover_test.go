package curator

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/meta"
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

// termLeader is a Termed the test switches; win starts a new term.
type termLeader struct {
	switchLeader
	term atomic.Uint64
}

func (l *termLeader) Term() uint64 { return l.term.Load() }
func (l *termLeader) win()         { l.term.Add(1); l.on.Store(true) }
func (l *termLeader) lose()        { l.on.Store(false) }

// A node that loses mastership and later wins it back must not credit its
// last decision of the earlier term with the latency it observes on its
// return: that interval was the other master's, whose decisions (and
// model) it covers. Its first decision of the new term has no
// predecessor, like a fresh master's: the model is the restored one
// exactly. The same holds when it loses and wins back mastership between
// two of its checks (an election session lost and a campaign won inside
// one poll): no check saw it as a follower, but the elector's term moved.
func TestTieringRegainedMasterCreditsNoStaleDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		// checkAsFollower: a check of the node's runs while it follows.
		checkAsFollower bool
	}{
		{"seen as a follower", true},
		{"within one poll", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
			defer e.close()
			e.fillSSD(0.5)
			a := e.learnedCurator(4)
			var la termLeader
			la.win()
			a.leader = &la
			for range 2 { // one update, saved; a decision pending
				quiet(a)
				a.due()
			}
			la.lose()
			if tc.checkAsFollower {
				quiet(a)
				a.due()
			}
			b := e.learnedCurator(40)
			for range 3 {
				quiet(b)
				b.due()
			}
			want := savedModel(t, e)
			// b is deposed; a wins the election again.
			la.win()
			quiet(a)
			a.due()
			if got := a.scheduler().(modelAgent).Agent().Model(); got.String() != want.String() {
				t.Fatalf("regained master's model after its first check:\n%s\nwant the restored one (its decision of the earlier term credited with nothing):\n%s", got, want)
			}
		})
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
	ct := &clockedTier{e: e, clock: time.Now()}
	runner := func() *Curator { return ct.runner(e.kv) }
	check := ct.check
	a := runner()
	if kind, why := check(a); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("old master: due %q (%s), want a run", kind, why)
	}
	if m := savedModel(t, e); !m.LastRun.Equal(ct.clock) {
		t.Fatalf("saved model's last run %v, want the old master's run at %v", m.LastRun, ct.clock)
	}
	// The old master dies; a minute later another node is the master.
	ct.clock = ct.clock.Add(time.Minute)
	b := runner()
	if kind, why := check(b); kind != "" {
		t.Fatalf("new master a minute after the old master's run: due %q (%s), want nothing inside the hold", kind, why)
	}
	ct.clock = ct.clock.Add(learn.DefaultHold - 2*time.Minute)
	if kind, why := check(b); kind != "" {
		t.Fatalf("new master a minute before the hold ends: due %q (%s)", kind, why)
	}
	ct.clock = ct.clock.Add(2 * time.Minute)
	if kind, why := check(b); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("new master after the hold: due %q (%s), want a run", kind, why)
	}
}

// clockedTier makes Curators on e (other nodes, whose agents always run)
// that read the clock the test sets, and checks them with the periodic
// scans not due, so due() reports only tiering decisions.
type clockedTier struct {
	e     *tierEnv
	clock time.Time
}

func (ct *clockedTier) runner(kv meta.KV) *Curator {
	e := ct.e
	c := New(e.l, kv, e.local, e.c.policy, nil, nil, Options{Tiering: true, TieringScheduler: learned(e.t, 10)})
	c.mu.Lock()
	c.now = func() time.Time { return ct.clock }
	c.mu.Unlock()
	return c
}

func (ct *clockedTier) check(c *Curator) (kind, why string) {
	c.mu.Lock()
	c.last["full"], c.last["partial"] = ct.clock, ct.clock.Add(-time.Minute)
	c.mu.Unlock()
	return c.due()
}

// modelGetFails fails reads of the saved tiering model while fail is set
// (the metadata store not answering a new master's first read).
type modelGetFails struct {
	meta.KV
	fail atomic.Bool
}

func (k *modelGetFails) Get(ctx context.Context, key []byte) (meta.Item, error) {
	if k.fail.Load() && string(key) == tieringModelKey {
		return meta.Item{}, context.DeadlineExceeded
	}
	return k.KV.Get(ctx, key)
}

// A new master that cannot read the saved model does not know the hold
// after the old master's run (nor what it learned): its agent must not
// decide until the model loads; the threshold rule decides meanwhile.
// Once the read succeeds, the hold holds.
func TestTieringUnreadModelHoldsTheAgent(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	ct := &clockedTier{e: e, clock: time.Now()}
	runner, check := ct.runner, ct.check
	if kind, why := check(runner(e.kv)); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("old master: due %q (%s), want a run", kind, why)
	}
	ct.clock = ct.clock.Add(time.Minute)
	kv := &modelGetFails{KV: e.kv}
	kv.fail.Store(true)
	b := runner(kv)
	if kind, why := check(b); strings.Contains(why, "q-learning") {
		t.Fatalf("new master that could not read the model: due %q (%s), want the threshold rule's answer", kind, why)
	}
	if st := b.TieringStatus(); !strings.Contains(st.Error, "could not be read") {
		t.Fatalf("status while the model is unread: error %q, want it to say why the threshold rule decides", st.Error)
	}
	kv.fail.Store(false)
	if kind, why := check(b); kind != "" {
		t.Fatalf("new master once the model loaded, inside the old master's hold: due %q (%s)", kind, why)
	}
}

// During a rolling upgrade or downgrade the saved model may be in a
// format newer than this binary reads: a newer binary's learned table.
// This binary must leave it as it is (not replace it with its configured
// model), decide with the threshold rule meanwhile (its agent neither acts
// nor learns), and say so once, not at every check. Once the record is
// gone (an operator deleted it to start over) the learned scheduler
// resumes.
func TestTieringModelFromNewerBinaryKept(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	newer := []byte(`{"version":99,"features":["ssd"],"actions":[{"name":"skip","reduce":0},{"name":"run","reduce":1}],` +
		`"mean":[50],"scale":[10],"weights":[[0],[1]],"bias":[0,0],"alpha":0.01,"gamma":0.9,"epsilon":0.2,"td_clip":100,"updates":123456,"a_later_field":{}}`)
	var put meta.Txn
	put.Put([]byte(tieringModelKey), newer)
	if _, err := e.kv.Commit(context.Background(), &put); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	q := learned(t, 10) // would run at once, and save
	q.Poll = time.Nanosecond
	c := New(e.l, e.kv, e.local, e.c.policy, nil, nil, Options{Tiering: true, TieringScheduler: q,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 3 {
		quiet(c)
		if kind, why := c.due(); kind != "" {
			t.Fatalf("check %d with a newer binary's model saved, ssd at %.0f%%: due %q (%s), want the threshold rule's answer (nothing below f)",
				i, 100*e.tierUse(model.TierSSD), kind, why)
		}
	}
	it, err := e.kv.Get(context.Background(), []byte(tieringModelKey))
	if err != nil || !bytes.Equal(it.Value, newer) {
		t.Fatalf("the newer binary's model was replaced (err %v):\n%s", err, it.Value)
	}
	if st := q.Agent().Stats(); st.Decisions != 0 {
		t.Fatalf("the agent decided %d times on a model that is not the cluster's", st.Decisions)
	}
	if n := strings.Count(logs.String(), "written by a newer Terrace"); n != 1 {
		t.Fatalf("want one warning about the newer model, got %d:\n%s", n, logs.String())
	}
	if st := c.TieringStatus(); !strings.Contains(st.Error, "newer") || !strings.Contains(st.Error, "threshold") {
		t.Fatalf("status does not say why the threshold rule decides: %+v", st)
	}
	// The threshold rule still tiers a tier over f.
	e.fillSSD(0.8)
	quiet(c)
	if kind, why := c.due(); kind != "partial" || !strings.Contains(why, "tier ssd at") {
		t.Fatalf("ssd over f with a newer binary's model saved: due %q (%s), want the threshold rule's run", kind, why)
	}
	// Deleted: the learned scheduler takes over again, and saves.
	var del meta.Txn
	del.Del([]byte(tieringModelKey))
	if _, err := e.kv.Commit(context.Background(), &del); err != nil {
		t.Fatal(err)
	}
	quiet(c)
	if kind, why := c.due(); kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("after the newer model was deleted: due %q (%s), want the learned scheduler's run", kind, why)
	}
	if m := savedModel(t, e); m.LastRun.IsZero() {
		t.Fatalf("the learned scheduler's run was not saved: %s", m)
	}
}
