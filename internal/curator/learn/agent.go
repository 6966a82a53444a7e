package learn

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// DefaultHold is how long the agent waits after a run before deciding
// again, and so the interval whose latency is the run's reward. The
// paper waits 5 minutes (Appendix E: "we do not want to schedule Tiering
// tasks back-to-back"); we wait 10 (DefaultHoldPolls decisions): a run
// sheds h and event-driven promotion refills the tier for minutes after
// it, so a 5-minute reward missed part of a run's cost and a model that
// preferred running re-ran at every hold's end (docs/design/0006,
// "Exploration and the hold").
const DefaultHold = DefaultHoldPolls * DefaultPoll

// DefaultHoldPolls is the hold in decision periods: a caller that
// compresses the agent's period (benchmarks) compresses the hold with it.
const DefaultHoldPolls = 20

// DefaultPoll is the decision period when the agent did not just run
// (Appendix E: every 30 seconds). The caller drives the agent at this
// period; the agent itself has no clock.
const DefaultPoll = 30 * time.Second

// AgentOptions configure an Agent. Zero values mean defaults.
type AgentOptions struct {
	// Hold is the pause after a run (default DefaultHold, 10 min).
	Hold time.Duration
	// Frozen stops online learning: the agent acts (still ε-greedily) but
	// never updates its model. Used to evaluate a fixed model.
	Frozen bool
}

// EnsureDefaults fills zero fields.
func (o *AgentOptions) EnsureDefaults() {
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
}

// NoForce tells Step to choose the action itself.
const NoForce = -1

// Decision is what one Step decided, with everything a status display
// and a replay need.
type Decision struct {
	At time.Time `json:"at"`
	// Held is true while the hold after a run lasts: no new decision was
	// made and Action is the run still in effect.
	Held   bool    `json:"held"`
	Action int     `json:"action"`
	Name   string  `json:"name"`
	Reduce float64 `json:"reduce"`
	// Explored is true when ε-greedy picked a random action; Forced when
	// the caller imposed it (a safety ceiling).
	Explored bool `json:"explored"`
	Forced   bool `json:"forced"`
	// ForcedBy says who forced the action (the caller's rule, e.g. a
	// safety ceiling or promotion starvation); empty when not forced or
	// not told.
	ForcedBy string `json:"forced_by,omitempty"`
	// Epsilon is the exploration rate the decision was made with (the
	// model's schedule at its experience then).
	Epsilon float64 `json:"epsilon"`
	// Q are the action values in the observed state (before the update).
	Q     []float64   `json:"q"`
	State Observation `json:"state"`
	// Reward is the reward credited to the previous decision (−mean
	// client latency in ms since it was made) when HasReward; TDError is
	// that update's TD error.
	HasReward bool    `json:"has_reward"`
	Reward    float64 `json:"reward"`
	TDError   float64 `json:"td_error"`
	// UpdateErr reports a rejected update (the model is unchanged).
	UpdateErr string `json:"update_err,omitempty"`
}

func (d Decision) String() string {
	if d.Held && d.Name == "" {
		// The hold of a run this agent did not decide: the model's
		// LastRun, another Curator master's.
		return "held (the model's last run in effect)"
	}
	if d.Held {
		return fmt.Sprintf("held (%s in effect)", d.Name)
	}
	how := "greedy"
	switch {
	case d.Forced && d.ForcedBy != "":
		how = "forced: " + d.ForcedBy
	case d.Forced:
		how = "forced"
	case d.Explored:
		how = "explore"
	}
	s := fmt.Sprintf("%s (%s) q=%s", d.Name, how, fmtQ(d.Q))
	if d.HasReward {
		s += fmt.Sprintf(" reward=%s td=%s", fmtF(d.Reward), fmtF(d.TDError))
	}
	if d.UpdateErr != "" {
		s += " update-error=" + d.UpdateErr
	}
	return s
}

func fmtQ(q []float64) string {
	s := "["
	for i, v := range q {
		if i > 0 {
			s += " "
		}
		s += fmtF(v)
	}
	return s + "]"
}

// AgentStats count what the agent did since it was created.
type AgentStats struct {
	Decisions int `json:"decisions"`
	Explored  int `json:"explored"`
	Forced    int `json:"forced"`
	// ForcedBy counts forced decisions by who forced them (StepForced).
	ForcedBy map[string]int `json:"forced_by,omitempty"`
	Runs     int            `json:"runs"`
	Updates  int            `json:"updates"`
	Rejected int            `json:"rejected_updates"`
}

// Agent is the deployed Q-learner as a state machine: the caller pushes
// logical time and an observation each poll (Step); the agent credits the
// client latency seen since its last decision as that decision's reward,
// updates its model, and decides again unless it is holding after a run.
type Agent struct {
	model *Model
	opts  AgentOptions

	havePrev  bool
	prevObs   Observation
	prevAct   int
	latSum    float64 // Σ latency × ops since the last decision
	latOps    float64
	holdUntil time.Time
	last      Decision
	stats     AgentStats
}

// NewAgent returns an agent that acts and learns with m (which it owns
// from now on; pass a Clone to keep the original).
func NewAgent(m *Model, o AgentOptions) (*Agent, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	o.EnsureDefaults()
	a := &Agent{model: m, opts: o}
	a.holdFrom(m.LastRun)
	return a, nil
}

// holdFrom extends the hold to a run's at lastRun (zero: none).
func (a *Agent) holdFrom(lastRun time.Time) {
	if !lastRun.IsZero() {
		if end := lastRun.Add(a.opts.Hold); end.After(a.holdUntil) {
			a.holdUntil = end
		}
	}
}

// holdEnd is the end of the hold as of now: at most one hold from now, so
// a run stamped in the future by a master whose clock ran ahead holds the
// agent no longer than a run of its own would.
func (a *Agent) holdEnd(now time.Time) time.Time {
	if lim := now.Add(a.opts.Hold); a.holdUntil.After(lim) {
		return lim
	}
	return a.holdUntil
}

// Model returns the agent's model (live: callers must not change it, and
// should Clone or Marshal it to persist).
func (a *Agent) Model() *Model { return a.model }

// SetModel replaces the agent's model (one restored from the metadata
// store by a new Curator master); the agent's pending decision is kept,
// so the next reward still credits it. The hold is the later of the
// agent's own and the one after m's LastRun: the run another master
// started holds this agent too, and a later run of this agent's stays in
// the model for the next save.
func (a *Agent) SetModel(m *Model) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if a.havePrev && a.prevAct >= len(m.Actions) {
		a.havePrev = false
	}
	if a.model.LastRun.After(m.LastRun) {
		m.LastRun = a.model.LastRun
	}
	a.holdFrom(m.LastRun)
	a.model = m
	return nil
}

// Forget drops the pending decision and the latency accumulated for its
// reward: the next Step credits nothing and only decides. The Curator
// calls it when its node stops being the master (or finds that another
// master saved the model meanwhile): the interval after the pending
// decision was then, at least in part, another master's, and crediting it
// would teach the model a transition that never happened. The hold, the
// model and the counters are kept.
func (a *Agent) Forget() {
	a.havePrev, a.latSum, a.latOps = false, 0, 0
}

// Last returns the last decision (zero before the first Step).
func (a *Agent) Last() Decision { return a.last }

// Stats returns the agent's counters.
func (a *Agent) Stats() AgentStats {
	st := a.stats
	if st.ForcedBy != nil {
		st.ForcedBy = make(map[string]int, len(a.stats.ForcedBy))
		for k, v := range a.stats.ForcedBy {
			st.ForcedBy[k] = v
		}
	}
	return st
}

// Holding reports whether a run's hold lasts at now: Step without a
// forced action would not decide.
func (a *Agent) Holding(now time.Time) bool { return now.Before(a.holdEnd(now)) }

// Step is one poll at logical time now. obs carries the state and the
// client latency of the poll interval that just ended. force is NoForce
// or an action the caller imposes (recorded and learned from like any
// other). Invalid observations are refused with an error and change
// nothing.
func (a *Agent) Step(now time.Time, obs Observation, force int, rng *rand.Rand) (Decision, error) {
	return a.StepForced(now, obs, force, "", rng)
}

// StepForced is Step with the name of the rule that forced the action
// (by, recorded in the decision and counted in the stats; ignored when
// force is NoForce).
func (a *Agent) StepForced(now time.Time, obs Observation, force int, by string, rng *rand.Rand) (Decision, error) {
	if err := obs.Validate(); err != nil {
		return Decision{}, err
	}
	if force != NoForce && (force < 0 || force >= len(a.model.Actions)) {
		return Decision{}, fmt.Errorf("learn: forced action %d: model has %d actions", force, len(a.model.Actions))
	}
	a.latSum += obs.LatencyMs * obs.Ops
	a.latOps += obs.Ops
	a.holdUntil = a.holdEnd(now)
	if now.Before(a.holdUntil) && force == NoForce {
		d := a.last
		d.At, d.Held, d.State, d.HasReward, d.Reward, d.TDError, d.UpdateErr = now, true, obs, false, 0, 0, ""
		return d, nil
	}
	d := Decision{At: now, State: obs, Q: a.model.Q(obs), Epsilon: a.model.EpsilonNow()}
	// Credit the previous decision with the mean latency since it was
	// made. Without client operations there is no evidence either way.
	if a.havePrev && a.latOps > 0 {
		d.HasReward = true
		d.Reward = -a.latSum / a.latOps
		if !a.opts.Frozen {
			td, err := a.model.Update(Transition{S: a.prevObs, Action: a.prevAct, Reward: d.Reward, Next: obs})
			d.TDError = td
			if err != nil {
				d.UpdateErr = err.Error()
				a.stats.Rejected++
			} else {
				a.stats.Updates++
			}
		}
	}
	a.latSum, a.latOps = 0, 0
	if force != NoForce {
		d.Action, d.Forced, d.ForcedBy = force, true, by
		a.stats.Forced++
		if by != "" {
			if a.stats.ForcedBy == nil {
				a.stats.ForcedBy = map[string]int{}
			}
			a.stats.ForcedBy[by]++
		}
	} else {
		d.Action, d.Explored = a.model.Choose(obs, rng)
		if d.Explored {
			a.stats.Explored++
		}
	}
	spec := a.model.Actions[d.Action]
	d.Name, d.Reduce = spec.Name, spec.Reduce
	if spec.Reduce > 0 {
		a.holdUntil = now.Add(a.opts.Hold)
		// In the model, so the hold survives a change of Curator master.
		a.model.LastRun = now
		a.stats.Runs++
	}
	a.stats.Decisions++
	a.havePrev, a.prevObs, a.prevAct = true, obs, d.Action
	a.last = d
	return d, nil
}
