package curator

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// TieringScheduler answers the Curator's question "tier down now, and
// with which thresholds?" at every tiering check. tiersched.Threshold
// (run when a tier is over f) is the default; tiersched.QLearning is the
// learned scheduler (`curator: tiering_scheduler: qlearning`,
// docs/design/0006-learned-tiering.md). Implementations are pure and are
// called under the Curator's lock.
type TieringScheduler interface {
	Name() string
	// Check is called at each tiering check; a Decision with Run starts a
	// partial job whose tiering pass uses Decision.Options.
	Check(in tiersched.Input, rng *rand.Rand) (tiersched.Decision, error)
	// JobOptions are the tiering options of a job started for another
	// reason (periodic scans, requested jobs, dry runs).
	JobOptions(s *model.Snapshot, base decide.TierOptions) decide.TierOptions
}

var (
	_ TieringScheduler = tiersched.Threshold{}
	_ TieringScheduler = (*tiersched.QLearning)(nil)
)

// TieringStatus is the tiering scheduler's part of the Curator's status:
// for the learned scheduler, the agent's last state, action and reward.
type TieringStatus struct {
	Scheduler string    `json:"scheduler"`
	LastCheck time.Time `json:"last_check,omitzero"`
	// LastRun is when a check last started a tiering job, and why.
	LastRun    time.Time         `json:"last_run,omitzero"`
	LastReason string            `json:"last_reason,omitempty"`
	Agent      *learn.Decision   `json:"agent,omitempty"`
	AgentStats *learn.AgentStats `json:"agent_stats,omitempty"`
	Error      string            `json:"error,omitempty"`
	// PromotionsRefused counts the hot egroups event-driven promotion
	// left on a slower tier for lack of room on a faster one since this
	// Curator started; the learned scheduler's promotion-starvation rule
	// acts on those still starved (Starved at the last check).
	PromotionsRefused int64 `json:"promotions_refused_for_room,omitempty"`
	Starved           int   `json:"starved,omitempty"`
}

// tierState is the Curator's scheduler bookkeeping (guarded by c.mu).
type tierState struct {
	pending   *decide.TierOptions // options of the job the last check started
	pendingAt time.Time
	status    TieringStatus
	saved     int64 // model updates at the last save
	// savedRun is the model's LastRun at the last save: a run the agent
	// decides is saved at once, updates or not, so that a new master
	// honours the hold after it.
	savedRun time.Time
	restored bool // the saved model was loaded since this node became master
	// term is the master term (Termed) of the last check as master.
	term uint64
	// rev is the revision of the model record this node last read or
	// wrote (0: none). A save is conditional on it, so a master deposed
	// without knowing it yet cannot overwrite what the new master saved.
	rev int64
	// newer is set (to why) while the saved model is in a format newer
	// than this binary reads: a newer binary's, during a rolling upgrade
	// or downgrade. It is left as it is: the threshold rule decides, the
	// agent neither acts nor learns and nothing is saved, and the record
	// is read again at every check until it is gone or readable.
	newer string
	// refused holds the hot egroups event-driven promotion left on a
	// slower tier for lack of room (decide.Promotions), with when; they
	// are forgotten a hot window later.
	refused map[uint64]time.Time
}

// maxRefusedTracked bounds the refused egroups remembered, and
// maxStarvedLookups those looked up at one check: starvation needs a
// little evidence, not a census.
const (
	maxRefusedTracked = 1024
	maxStarvedLookups = 256
)

// noteRefused remembers egroups refused promotion for lack of room.
// Called with c.mu held.
func (c *Curator) noteRefused(ids []uint64) {
	now := c.now()
	if c.tier.refused == nil {
		c.tier.refused = map[uint64]time.Time{}
	}
	for _, id := range ids {
		if _, ok := c.tier.refused[id]; ok || len(c.tier.refused) < maxRefusedTracked {
			c.tier.refused[id] = now
		}
	}
	c.tier.status.PromotionsRefused += int64(len(ids))
}

// starved counts the egroups refused promotion within the last hot window
// that are still starved now (decide.StillStarved: still on a slower tier,
// still well above the promotion threshold), reading their records and
// access counts. Only the learned scheduler uses the count; c.mu must NOT
// be held (it reads the metadata store).
func (c *Curator) starved(ctx context.Context, s *model.Snapshot, o decide.TierOptions) int {
	if _, ok := c.scheduler().(*tiersched.QLearning); !ok || !c.leader.IsLeader() {
		return 0
	}
	o.EnsureDefaults()
	c.mu.Lock()
	now := c.now()
	ids := make([]uint64, 0, len(c.tier.refused))
	for id, at := range c.tier.refused {
		if now.Sub(at) > o.HotWindow {
			delete(c.tier.refused, id)
			continue
		}
		if len(ids) < maxStarvedLookups {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	if len(ids) == 0 {
		return 0
	}
	snap := model.NewSnapshot(now, s.Nodes, s.Devices)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n := 0
	for _, id := range ids {
		eg, rev, err := c.layer.Egroup(ctx, id)
		if err != nil {
			continue // removed, or unreadable now: no evidence either way
		}
		var a meta.Access
		if _, err := meta.GetRecord(ctx, c.kv, meta.AccessKey(id), &a); err != nil {
			continue
		}
		if decide.StillStarved(snap, egroupView(id, rev, eg, &a), o) {
			n++
		}
	}
	return n
}

// tieringModelKey holds the learned scheduler's model (JSON) in the
// metadata store: the master saves it as it learns and a new master
// restores it, so learning survives failovers.
const tieringModelKey = meta.PrefixJob + "t/model"

// modelAgent is a scheduler with a learning agent (tiersched.QLearning).
type modelAgent interface{ Agent() *learn.Agent }

// forgetter is a scheduler whose pending decision can be dropped
// (tiersched.QLearning.Forget).
type forgetter interface{ Forget() }

// forgetPending drops the learning agent's pending decision: this node's
// term as master ended (or another master saved the model meanwhile), so
// the interval that would reward it was not this node's alone. Called
// with c.mu held.
func (c *Curator) forgetPending() {
	if f, ok := c.scheduler().(forgetter); ok {
		f.Forget()
	}
}

// endTerm forgets what this node's term as master left behind, once it
// is no longer the master or is master again in a new term. Called with
// c.mu held.
func (c *Curator) endTerm() {
	// If this node wins mastership back, its last decision of the earlier
	// term must not be credited with what it observes then: that interval
	// was the other master's.
	c.forgetPending()
	c.tier.restored = false
	// Nor may a run decided in the earlier term be carried out by a job
	// of a later one (pendingFor is 10 minutes).
	c.tier.pending = nil
}

// pendingFor bounds how long a check's options wait for the job it
// started (a job whose scan failed must not hand them to a periodic scan
// an hour later).
const pendingFor = 10 * time.Minute

func (c *Curator) scheduler() TieringScheduler {
	if c.opts.TieringScheduler != nil {
		return c.opts.TieringScheduler
	}
	return tiersched.Threshold{}
}

// decider is the scheduler that decides now: the configured one, or the
// threshold rule while the saved model is a newer binary's (tierState.
// newer): an agent acting on a model that is not the cluster's would
// have to save it over the newer one to keep what it learns. Called with
// c.mu held.
func (c *Curator) decider() TieringScheduler {
	if c.tier.newer != "" {
		return tiersched.Threshold{}
	}
	return c.scheduler()
}

// tierCheck asks the scheduler whether to start a tiering job now (on the
// Curator master only). A scheduler error (a bad signal) falls back to the
// threshold rule for this check. base are the thresholds in force (the
// configured ones, or a tiering policy's). Called with c.mu held.
func (c *Curator) tierCheck(s *model.Snapshot, now time.Time, base decide.TierOptions, starved int) (bool, string) {
	// Only the master acts on the answer; a learning agent on another node
	// would learn from jobs it did not run.
	if !c.leader.IsLeader() {
		c.endTerm()
		return false, ""
	}
	if t, ok := c.leader.(Termed); ok {
		// Mastership lost and won back since the last check, too quickly
		// for a check to see this node as a follower.
		if term := t.Term(); term != c.tier.term {
			c.endTerm()
			c.tier.term = term
		}
	}
	if !c.tier.restored || c.tier.newer != "" {
		// This node just became the master: continue from the model the
		// previous master saved (retried at the next check if the
		// metadata store did not answer; nothing is saved until then).
		// A newer binary's model is read again at every check, so that
		// the learned scheduler resumes once it is deleted.
		c.tier.restored = c.restoreTieringModel()
	}
	var obs learn.Observation
	if c.opts.TierSignals != nil {
		obs = c.opts.TierSignals()
	}
	sched := c.decider()
	if !c.tier.restored {
		// The saved model could not be read: the agent knows neither what
		// the previous master learned nor the hold after its last run, so
		// it must not decide yet; the threshold rule does until it loads.
		sched = tiersched.Threshold{}
	}
	in := tiersched.Input{Now: now, Snapshot: s, Obs: obs, Base: base, Starved: starved}
	d, err := sched.Check(in, c.rng)
	st := &c.tier.status
	st.Scheduler, st.LastCheck, st.Error, st.Starved = sched.Name(), now, "", starved
	switch {
	case c.tier.newer != "":
		st.Error = c.tier.newer + "; deciding with the threshold rule and leaving the saved model as it is"
	case !c.tier.restored:
		st.Error = "the saved tiering model could not be read yet; deciding with the threshold rule until it is"
	}
	if err != nil {
		c.log.Warn("tiering scheduler check failed; using the threshold rule", "scheduler", sched.Name(), "err", err)
		st.Error = err.Error()
		d, _ = tiersched.Threshold{}.Check(in, c.rng)
	}
	if d.Agent != nil && !d.Agent.Held {
		a := *d.Agent
		st.Agent = &a
	}
	if q, ok := sched.(*tiersched.QLearning); ok {
		s := q.Agent().Stats()
		st.AgentStats = &s
		c.saveTieringModel(q)
	}
	if !d.Run {
		return false, ""
	}
	o := d.Options
	c.tier.pending, c.tier.pendingAt = &o, now
	st.LastRun, st.LastReason = now, d.Reason
	return true, d.Reason
}

// schedulerOptions are the tiering options of this job: those of the
// check that started it (consumed once), else the scheduler's options
// for any other job. Called with c.mu held.
func (c *Curator) schedulerOptions(s *model.Snapshot, base decide.TierOptions, consume bool) decide.TierOptions {
	if p := c.tier.pending; p != nil && c.now().Sub(c.tier.pendingAt) < pendingFor {
		if consume {
			c.tier.pending = nil
		}
		o := *p
		// The check saw no egroups; the job's base carries a tiering
		// policy's coldness ranking over this scan's.
		o.Rank = base.Rank
		return o
	}
	return c.decider().JobOptions(s, base)
}

// TieringStatus returns the scheduler's status.
func (c *Curator) TieringStatus() TieringStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.tier.status
	st.Scheduler = c.scheduler().Name()
	return st
}

// saveTieringModel writes the agent's model to the metadata store when it
// learned or decided a run since the last save. Called with c.mu held, at
// most once per agent decision (every 30 s); a failed save is retried at
// the next one.
func (c *Curator) saveTieringModel(ma modelAgent) {
	m := ma.Agent().Model()
	if !c.tier.restored || c.tier.newer != "" || m.Updates == c.tier.saved && m.LastRun.Equal(c.tier.savedRun) {
		return
	}
	b, err := m.Marshal()
	if err != nil {
		c.log.Warn("curator: tiering model not saved", "err", err)
		return
	}
	var t meta.Txn
	// Only over the record this node restored or last saved: another
	// master may have saved since (this node was deposed and its election
	// session has not noticed yet, or it lost and regained mastership
	// between two checks). An unconditional put would throw away what
	// that master learned.
	t.If([]byte(tieringModelKey), c.tier.rev)
	t.Put([]byte(tieringModelKey), b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rev, err := c.kv.Commit(ctx, &t)
	if errors.Is(err, meta.ErrConflict) {
		// Someone else saved: reload theirs at the next check instead.
		c.log.Warn("curator: tiering model changed in the store since this node read it (another master saved it); not overwriting, reloading at the next check")
		c.tier.restored = false
		c.forgetPending()
		return
	}
	if err != nil {
		c.log.Warn("curator: tiering model not saved", "err", err)
		return
	}
	c.tier.saved, c.tier.savedRun, c.tier.rev = m.Updates, m.LastRun, rev
}

// restoreTieringModel loads the saved model into the learned scheduler's
// agent, at the first tiering check after this node became the master.
// Without a saved model (the first master) the configured one stays; an
// invalid saved model is reported and replaced at the next save; one in
// a newer format is kept, and sets tierState.newer. It returns false only
// when the store could not be read. Called with c.mu held.
func (c *Curator) restoreTieringModel() bool {
	ma, ok := c.scheduler().(modelAgent)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	it, err := c.kv.Get(ctx, []byte(tieringModelKey))
	if errors.Is(err, meta.ErrNotFound) {
		c.tier.rev, c.tier.newer = 0, "" // the first save creates the record
		return true
	}
	if err != nil {
		c.log.Warn("curator: reading the saved tiering model", "err", err)
		return false
	}
	// Saves compare with this revision, also when the record is unusable
	// and is to be replaced.
	c.tier.rev = it.ModRev
	m, err := learn.ParseModel(it.Value)
	if errors.Is(err, learn.ErrNewerModel) {
		// Replacing it would throw away what a newer binary learned, and
		// that binary is back as master after the upgrade (or a
		// downgrade is undone). Once per run of such checks: they
		// repeat until the record is gone.
		if c.tier.newer == "" {
			c.log.Warn("curator: the saved learned tiering model was written by a newer Terrace; leaving it as it is and deciding with the threshold rule while this node is master (delete "+tieringModelKey+" to start this binary's learned scheduler over)", "err", err)
		}
		c.tier.newer = "saved tiering model: " + err.Error()
		return true
	}
	c.tier.newer = ""
	if err == nil {
		// SetModel may keep a later run of this node's own in m; what the
		// store holds is the record's.
		savedRun := m.LastRun
		if err = ma.Agent().SetModel(m); err == nil {
			c.tier.saved, c.tier.savedRun = m.Updates, savedRun
		}
	}
	if err != nil {
		c.log.Error("curator: the saved tiering model is unusable; keeping the configured one", "err", err)
		return true
	}
	args := []any{"updates", m.Updates}
	if !m.LastRun.IsZero() {
		args = append(args, "last_run", m.LastRun)
	}
	c.log.Info("curator: restored the learned tiering model", args...)
	return true
}
