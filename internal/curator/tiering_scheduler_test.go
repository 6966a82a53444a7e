package curator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/model"
)

// learned returns a learned scheduler whose agent always picks run
// (runBias > 0) or skip (runBias < 0), never exploring.
func learned(t *testing.T, runBias float64) *tiersched.QLearning {
	m, err := learn.NewModel([]string{learn.FeatSSD}, learn.PaperActions, []float64{50}, []float64{10})
	if err != nil {
		t.Fatal(err)
	}
	m.Bias[1], m.Epsilon = runBias, 0
	a, err := learn.NewAgent(m, learn.AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tiersched.NewQLearning(a)
}

func (e *tierEnv) fillSSD(to float64) {
	for i := 0; e.tierUse(model.TierSSD) < to; i++ {
		e.put(fmt.Sprintf("f%03d", i), data(uint64(i), 200<<10), "any=1")
		if i > 200 {
			e.t.Fatal("ssd never filled")
		}
	}
}

// quietSchedules makes periodic scans not due, so due() reports only
// tiering decisions.
func (e *tierEnv) quietSchedules() {
	now := time.Now()
	e.c.mu.Lock()
	e.c.last["full"], e.c.last["partial"] = now, now.Add(-time.Minute)
	e.c.mu.Unlock()
}

// With the learned scheduler the Curator tiers the ssd down when the
// agent says run, although the ssd is below f; the threshold scheduler
// (the default) does not.
func TestLearnedSchedulerRunsBelowF(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	e.quietSchedules()
	if kind, why := e.c.due(); kind != "" {
		t.Fatalf("threshold scheduler at %.0f%%: due %q (%s)", 100*e.tierUse(model.TierSSD), kind, why)
	}
	e.c.opts.TieringScheduler = learned(t, 10)
	kind, why := e.c.due()
	if kind != "partial" || !strings.Contains(why, "q-learning: run") {
		t.Fatalf("learned scheduler: due %q (%s), want a partial job for a run", kind, why)
	}
	before := e.tierUse(model.TierSSD)
	rec, err := e.c.RunJob(context.Background(), kind, why)
	if err != nil {
		t.Fatal(err)
	}
	after := e.tierUse(model.TierSSD)
	t.Logf("ssd %.1f%% -> %.1f%% (%v)", 100*before, 100*after, rec.Done)
	if rec.Done[string(decide.KindTierDown)] == 0 || before-after < 0.12 {
		t.Fatalf("run below f shed %.1f%% (%v), want ≈ h = 15%%", 100*(before-after), rec.Done)
	}
	st := e.c.Status(context.Background()).Tiering
	if st == nil || st.Scheduler != "qlearning" || st.Agent == nil || st.Agent.Name != "run" || st.AgentStats == nil || st.AgentStats.Runs != 1 {
		t.Fatalf("status does not show the agent's decision: %+v", st)
	}
	// The agent now holds for 5 minutes: no new run.
	e.quietSchedules()
	if kind, _ := e.c.due(); kind != "" {
		t.Fatalf("due %q during the hold after a run", kind)
	}
}

// Under the learned scheduler only the agent tiers the ssd down: a job
// started for another reason leaves an ssd over f but under the safety
// ceiling alone, where the threshold rule would shed h.
func TestLearnedSchedulerOwnsTheFastTier(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.8)
	e.c.opts.TieringScheduler = learned(t, -10)
	e.quietSchedules()
	if kind, why := e.c.due(); kind != "" {
		t.Fatalf("agent says skip at %.0f%%, but due %q (%s)", 100*e.tierUse(model.TierSSD), kind, why)
	}
	rec := e.job()
	if n := rec.Done[string(decide.KindTierDown)]; n != 0 {
		t.Fatalf("a periodic job demoted %d egroups under the learned scheduler", n)
	}
	// Over the ceiling a run is forced whatever the agent says.
	e.fillSSD(0.91)
	e.quietSchedules()
	kind, why := e.c.due()
	if kind != "partial" || !strings.Contains(why, "forced") {
		t.Fatalf("over the ceiling: due %q (%s), want a forced run", kind, why)
	}
	// The threshold scheduler sheds at 80 %.
	e.c.opts.TieringScheduler = nil
	e.quietSchedules()
	if kind, _ := e.c.due(); kind != "partial" {
		t.Fatalf("threshold scheduler over f: due %q", kind)
	}
}

type notLeader struct{}

func (notLeader) IsLeader() bool { return false }

// Only the Curator master consults (and trains) the learned scheduler.
func TestLearnedSchedulerOnlyOnTheMaster(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	q := learned(t, 10)
	e.c.opts.TieringScheduler = q
	e.c.leader = notLeader{}
	e.quietSchedules()
	e.c.due()
	if st := q.Agent().Stats(); st.Decisions != 0 {
		t.Fatalf("a follower's agent decided: %+v", st)
	}
}

// The master saves the agent's model in the metadata store as it learns;
// a new master's agent (here: a new Curator on the same store) continues
// from it.
func TestTieringModelSurvivesFailover(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB")
	defer e.close()
	e.fillSSD(0.5)
	q := learned(t, -10) // skip: no hold, a decision at every check
	q.Poll = time.Nanosecond
	e.c.opts.TieringScheduler = q
	e.c.opts.TierSignals = func() learn.Observation { return learn.Observation{LatencyMs: 4, Ops: 100} }
	for range 3 {
		e.quietSchedules()
		e.c.due()
	}
	learnedModel := q.Agent().Model()
	if learnedModel.Updates != 2 {
		t.Fatalf("agent made %d updates, want 2", learnedModel.Updates)
	}
	// A new master with a fresh model restores the saved one at its first check.
	fresh := learned(t, -10)
	fresh.Poll = time.Nanosecond
	c2 := New(e.l, e.kv, e.local, e.c.policy, nil, nil, Options{Tiering: true, TieringScheduler: fresh,
		TierSignals: e.c.opts.TierSignals})
	c2.mu.Lock()
	c2.last["full"], c2.last["partial"] = time.Now(), time.Now().Add(-time.Minute)
	c2.mu.Unlock()
	c2.due()
	// Its first decision has no predecessor to credit: the model is the
	// saved one exactly.
	got := fresh.Agent().Model()
	if got.String() != learnedModel.String() {
		t.Fatalf("new master's model:\n%s\nwant the saved one:\n%s", got, learnedModel)
	}
}

// The promotion-starvation rule end to end: with the ssd over f but under
// the safety ceiling and an agent that never runs, a hot object on hdd
// is refused promotion for lack of room. Read just past the promotion
// threshold it is no evidence (lukewarm data); read ten times that, it
// is: the next decision is a forced run (its reason and the status say
// why) that sheds the ssd to f − h, after which the object is promoted.
func TestLearnedSchedulerPromotionStarved(t *testing.T) {
	e := newTierEnv(t, "hdd:%s:64MiB")
	e.put("hot", data(7, 100<<10), "any=1")
	e.l.SealIdle(context.Background(), -1)
	e.close()
	e.specs = append(e.specs, "ssd:%s:8MiB")
	e.open()
	defer e.close()
	e.fillSSD(0.8)
	e.l.SealIdle(context.Background(), -1)
	e.c.opts.TieringScheduler = learned(t, -10)
	e.quietSchedules()
	if kind, why := e.c.due(); kind != "" {
		t.Fatalf("agent says skip at %.0f%%, but due %q (%s)", 100*e.tierUse(model.TierSSD), kind, why)
	}

	e.read("hot", decide.DefaultPromoteReads)
	rec, err := e.c.PromoteHot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil || rec.Planned[string(decide.KindTierUp)] != 0 || e.tiersOf("hot")[model.TierSSD] != 0 {
		t.Fatalf("ssd at %.0f%% ≥ f, yet the hot object was promoted: %+v", 100*e.tierUse(model.TierSSD), rec)
	}
	// The agent decides again 30 s later (it skipped: no hold).
	clock := time.Now().Add(time.Minute)
	e.c.mu.Lock()
	e.c.now = func() time.Time { return clock }
	e.c.mu.Unlock()
	e.quietSchedules()
	if kind, why := e.c.due(); kind != "" {
		t.Fatalf("refused with %d reads (below %d): due %q (%s), want a skip", decide.DefaultPromoteReads, decide.DefaultStarveFactor*decide.DefaultPromoteReads, kind, why)
	}
	if st := e.c.Status(context.Background()).Tiering; st == nil || st.PromotionsRefused != 1 || st.Starved != 0 {
		t.Fatalf("status after a lukewarm refusal: %+v", st)
	}

	e.read("hot", decide.DefaultStarveFactor*decide.DefaultPromoteReads)
	clock = clock.Add(time.Minute)
	e.quietSchedules()
	kind, why := e.c.due()
	if kind != "partial" || !strings.Contains(why, "promotion-starved") {
		t.Fatalf("hot object starved: due %q (%s), want a run forced by promotion starvation", kind, why)
	}
	st := e.c.Status(context.Background()).Tiering
	if st == nil || st.Starved != 1 || st.Agent == nil || st.Agent.ForcedBy != tiersched.ForcedStarved || !strings.Contains(st.LastReason, "promotion-starved") {
		t.Fatalf("status does not show the starvation: %+v", st)
	}
	before := e.tierUse(model.TierSSD)
	if _, err := e.c.RunJob(context.Background(), kind, why); err != nil {
		t.Fatal(err)
	}
	after := e.tierUse(model.TierSSD)
	t.Logf("ssd %.1f%% -> %.1f%%", 100*before, 100*after)
	if after > 0.62 {
		t.Fatalf("a starved run shed the ssd from %.1f%% to %.1f%%, want f − h = 60%%", 100*before, 100*after)
	}
	// Room below f: the next job promotes the hot object, which then no
	// longer counts as starved.
	e.job()
	if e.tiersOf("hot")[model.TierSSD] == 0 {
		t.Fatalf("hot object still not on ssd (ssd %.0f%%): %v", 100*e.tierUse(model.TierSSD), e.tiersOf("hot"))
	}
	if n := e.c.starved(context.Background(), e.c.topo.Snapshot(), e.c.opts.Tier); n != 0 {
		t.Fatalf("a promoted egroup still counts as starved (%d)", n)
	}
	// A hot window after the refusal it is forgotten.
	clock = clock.Add(2 * time.Hour)
	e.c.mu.Lock()
	left := len(e.c.tier.refused)
	e.c.mu.Unlock()
	e.c.starved(context.Background(), e.c.topo.Snapshot(), e.c.opts.Tier)
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if left != 1 || len(e.c.tier.refused) != 0 {
		t.Fatalf("refused egroups remembered: %d before the window ended, %d after (want 1, 0)", left, len(e.c.tier.refused))
	}
}
