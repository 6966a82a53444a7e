package tiersched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/model"
)

// Names of the schedulers, as configured (`curator: tiering_scheduler:`).
const (
	NameThreshold = "threshold"
	NameQLearning = "qlearning"
)

// Names lists the schedulers.
var Names = []string{NameThreshold, NameQLearning}

// Input is what a scheduler sees at one tiering check.
type Input struct {
	Now      time.Time
	Snapshot *model.Snapshot
	// Obs carries the node signals (cpu, mem, client iops and latency of
	// the interval since the last check). Tier usages are filled in from
	// Snapshot by the scheduler.
	Obs learn.Observation
	// Base are the configured thresholds (f, d, h, ...).
	Base decide.TierOptions
	// Starved counts the hot egroups promotion left on a slower tier for
	// lack of room on a faster one within the last hot window that are
	// still there and still hot (decide.Promotions' refused, filtered by
	// decide.StillStarved at this check). It is not a learned feature:
	// QLearning's promotion-starvation rule acts on it.
	Starved int
}

// Decision says whether to run a tiering job now and with which options.
type Decision struct {
	Run     bool
	Options decide.TierOptions
	Reason  string
	// Agent is the learned agent's decision (QLearning only).
	Agent *learn.Decision
}

// Scheduler decides when the Curator tiers down.
type Scheduler interface {
	Name() string
	// Check is called at every tiering check (every poll interval).
	Check(in Input, rng *rand.Rand) (Decision, error)
	// JobOptions are the tiering options of a job started for another
	// reason (a periodic scan, an event-driven promotion).
	JobOptions(s *model.Snapshot, base decide.TierOptions) decide.TierOptions
}

// TierUsage returns tier t's used fraction over the snapshot's devices
// (all devices, as the Curator's trigger has always counted them).
func TierUsage(s *model.Snapshot, t model.Tier) (float64, bool) {
	var used, capacity int64
	for _, d := range s.Devices {
		if d.Tier == t {
			used += d.UsedBytes
			capacity += d.CapacityBytes
		}
	}
	if capacity <= 0 {
		return 0, false
	}
	return float64(used) / float64(capacity), true
}

// FastestTier is the fastest tier new data is written to (not memory, not
// remote): the tier whose size the learned scheduler manages.
func FastestTier(s *model.Snapshot) (model.Tier, bool) {
	for _, t := range s.Tiers() {
		if t != model.TierMem && t.ForAny(false) {
			return t, true
		}
	}
	return "", false
}

// nextTier is the next slower local tier after t.
func nextTier(s *model.Snapshot, t model.Tier) (model.Tier, bool) {
	for _, x := range s.Tiers() {
		if x.Rank() > t.Rank() && x.ForAny(false) {
			return x, true
		}
	}
	return "", false
}

// Threshold is the Curator §3.3 rule: run when some tier is over f.
type Threshold struct{}

var _ Scheduler = Threshold{}

// Name implements Scheduler.
func (Threshold) Name() string { return NameThreshold }

// Check implements Scheduler.
func (Threshold) Check(in Input, _ *rand.Rand) (Decision, error) {
	o := in.Base
	o.EnsureDefaults()
	for _, t := range in.Snapshot.Tiers() {
		if u, ok := TierUsage(in.Snapshot, t); ok && u > o.DownAbove {
			return Decision{Run: true, Options: in.Base, Reason: fmt.Sprintf("tier %s at %.0f%%", t, 100*u)}, nil
		}
	}
	return Decision{Options: in.Base}, nil
}

// JobOptions implements Scheduler.
func (Threshold) JobOptions(_ *model.Snapshot, base decide.TierOptions) decide.TierOptions {
	return base
}

// Names of the rules that force the learned scheduler's action
// (learn.Decision.ForcedBy).
const (
	ForcedCeiling   = "ceiling"
	ForcedStarved   = "promotion-starved"
	ForcedBehaviour = "behaviour"
)

// DefaultStarvedMin is QLearning.StarvedMin when unset: one starved hot
// egroup (decide.StillStarved) is evidence enough.
const DefaultStarvedMin = 1

// DefaultForceAbove is the usage of the fastest tier above which the
// learned scheduler runs tiering whatever its model says: below the
// placement ceiling (95 %, where writes spill to slower tiers) with room
// for the writes of one hold period.
const DefaultForceAbove = 0.90

// QLearning schedules tiering of the fastest tier with a learned agent.
// The Curator may call Check more often than the agent's poll period; the
// calls in between only accumulate client latency for the next reward
// (and still apply the threshold rule to slower tiers and the safety
// ceiling).
type QLearning struct {
	agent *learn.Agent
	// ForceAbove is the safety ceiling (default DefaultForceAbove): above
	// it a run is forced that sheds the tier to f − h.
	ForceAbove float64
	// Poll is the agent's decision period (default 30 s).
	Poll time.Duration
	// Behaviour, when set, chooses the action instead of the agent (the
	// agent still learns from it): pre-training collects transitions
	// under the threshold policy this way (Curator §4.3.3). usage is the
	// fastest tier's used fraction.
	Behaviour func(usage float64, rng *rand.Rand) int
	// StarvedMin is the promotion-starvation rule, a safety rule outside
	// the learned values like ForceAbove: when at a decision at least
	// StarvedMin hot egroups are starved (Input.Starved: refused
	// promotion for lack of room, still on a slower tier and still well
	// above the promotion threshold), the fastest tier is at or above f
	// and the agent is not holding after a run, the decision is a forced
	// run that sheds the tier to f − h, the room the threshold rule
	// leaves. The model's state cannot tell an ssd full of cold data from
	// one full of hot data; starved promotions can.
	// 0 means DefaultStarvedMin; negative turns the rule off.
	StarvedMin int

	stepped  bool
	lastStep time.Time
	latSum   float64 // Σ latency × ops since the last step
	ops      float64
}

var _ Scheduler = (*QLearning)(nil)

// NewQLearning returns a learned scheduler acting with agent.
func NewQLearning(agent *learn.Agent) *QLearning {
	return &QLearning{agent: agent, ForceAbove: DefaultForceAbove, Poll: learn.DefaultPoll}
}

// Agent returns the learning agent (for status and persistence).
func (q *QLearning) Agent() *learn.Agent { return q.agent }

// Forget drops the agent's pending decision and the latency accumulated
// for its reward (learn.Agent.Forget): the Curator calls it when its node
// stops being the master, so a later term does not credit a decision of
// an earlier one.
func (q *QLearning) Forget() {
	q.agent.Forget()
	q.latSum, q.ops = 0, 0
}

// Name implements Scheduler.
func (*QLearning) Name() string { return NameQLearning }

// Check steps the agent (at most once per Poll) and maps its action to
// tiering options.
func (q *QLearning) Check(in Input, rng *rand.Rand) (Decision, error) {
	if err := in.Obs.Validate(); err != nil {
		return Decision{}, err
	}
	base := in.Base
	base.EnsureDefaults()
	fast, ok := FastestTier(in.Snapshot)
	if !ok {
		return Threshold{}.Check(in, rng)
	}
	u, _ := TierUsage(in.Snapshot, fast)
	ceiling := q.ceiling(base)
	if in.Starved < 0 {
		return Decision{}, fmt.Errorf("tiersched: %d starved egroups: want ≥ 0", in.Starved)
	}
	q.latSum += in.Obs.LatencyMs * in.Obs.Ops
	q.ops += in.Obs.Ops
	d := Decision{Options: q.JobOptions(in.Snapshot, in.Base)}
	due := !q.stepped || in.Now.Sub(q.lastStep) >= q.Poll
	if due || u > ceiling {
		obs := in.Obs
		obs.SSDUsage = math.Min(100, 100*u)
		if slow, ok := nextTier(in.Snapshot, fast); ok {
			us, _ := TierUsage(in.Snapshot, slow)
			obs.HDDUsage = math.Min(100, 100*us)
		}
		obs.Ops = q.ops
		obs.LatencyMs = 0
		if q.ops > 0 {
			obs.LatencyMs = q.latSum / q.ops
		}
		force, by := learn.NoForce, ""
		m := q.agent.Model()
		starved := q.starved(in.Now, u, in.Starved, base)
		switch {
		case u > ceiling:
			force, by = biggest(m.Actions), ForcedCeiling
		case q.Behaviour != nil:
			force, by = q.Behaviour(u, rng), ForcedBehaviour
		case starved:
			force, by = biggest(m.Actions), ForcedStarved
		}
		ad, err := q.agent.StepForced(in.Now, obs, force, by, rng)
		if err != nil {
			return Decision{}, err
		}
		q.stepped, q.lastStep, q.latSum, q.ops = true, in.Now, 0, 0
		d.Agent = &ad
		if !ad.Held && ad.Reduce > 0 {
			o := q.JobOptions(in.Snapshot, in.Base)
			// Shed from the current usage: the tier demotes now, whatever f.
			o.DemoteAbove[fast] = math.Max(0, u-1e-9)
			o.Reduce = base.Reduce * ad.Reduce
			if by == ForcedStarved || by == ForcedCeiling {
				// A safety rule fired: restore the room the threshold
				// rule leaves, f − h, so promotions have room below f.
				// Shedding h from above the ceiling would leave the
				// tier above f, where promotions stop, for a whole hold.
				o.Reduce = math.Max(o.Reduce, u-(base.DownAbove-base.Reduce))
			}
			d.Run, d.Options = true, o
			how := "greedy"
			switch {
			case ad.Forced && u > ceiling && starved:
				how = fmt.Sprintf("forced above %.0f%%, and promotion-starved: %d hot egroup(s) refused for room", 100*ceiling, in.Starved)
			case ad.Forced && u > ceiling:
				how = fmt.Sprintf("forced above %.0f%%", 100*ceiling)
			case ad.Forced && by == ForcedStarved:
				how = fmt.Sprintf("forced: promotion-starved, %d hot egroup(s) refused promotion for room", in.Starved)
			case ad.Forced:
				how = "behaviour policy"
			case ad.Explored:
				how = "exploring"
			}
			d.Reason = fmt.Sprintf("q-learning: %s (%s) with %s at %.0f%%, shed %.0f%%", ad.Name, how, fast, 100*u, 100*o.Reduce)
			return d, nil
		}
	}
	// Slower tiers keep the threshold rule.
	for _, t := range in.Snapshot.Tiers() {
		if t == fast {
			continue
		}
		if ut, ok := TierUsage(in.Snapshot, t); ok && ut > base.DownAbove {
			d.Run = true
			d.Reason = fmt.Sprintf("tier %s at %.0f%%", t, 100*ut)
			return d, nil
		}
	}
	return d, nil
}

// starved is the promotion-starvation rule (StarvedMin): enough hot
// egroups are starved, the tier is at or above f, no hold is in effect,
// and the agent (not a behaviour policy) acts.
func (q *QLearning) starved(now time.Time, u float64, n int, base decide.TierOptions) bool {
	k := q.StarvedMin
	switch {
	case k < 0 || q.Behaviour != nil:
		// Off, or a behaviour policy (pre-training) chooses: it owns
		// every decision below the ceiling, and the data it collects
		// stays that policy's.
		return false
	case k == 0:
		k = DefaultStarvedMin
	}
	return n >= k && u >= base.DownAbove && !q.agent.Holding(now)
}

// JobOptions leave the fastest tier's data in place unless it is over the
// safety ceiling: under the learned scheduler only the agent tiers it
// down. Promotions still fill it only up to f, and slower tiers keep f.
func (q *QLearning) JobOptions(s *model.Snapshot, base decide.TierOptions) decide.TierOptions {
	fast, ok := FastestTier(s)
	if !ok {
		return base
	}
	base.DemoteAbove = copyMap(base.DemoteAbove)
	base.DemoteAbove[fast] = q.ceiling(base)
	return base
}

// ceiling is the usage above which tiering runs whatever the agent says.
func (q *QLearning) ceiling(base decide.TierOptions) float64 {
	if q.ForceAbove > 0 {
		return q.ForceAbove
	}
	// Zero or negative: the threshold policy's trigger f.
	base.EnsureDefaults()
	return base.DownAbove
}

func copyMap(m map[model.Tier]float64) map[model.Tier]float64 {
	out := make(map[model.Tier]float64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// biggest is the action that tiers the most.
func biggest(as []learn.ActionSpec) int {
	best := 0
	for i, a := range as {
		if a.Reduce > as[best].Reduce {
			best = i
		}
	}
	return best
}

// New returns the named scheduler; qlearning needs a model (a pre-trained
// one, or one restored from the metadata store).
func New(name string, m *learn.Model, o learn.AgentOptions) (Scheduler, error) {
	switch strings.ToLower(name) {
	case "", NameThreshold:
		return Threshold{}, nil
	case NameQLearning:
		if m == nil {
			return nil, fmt.Errorf("tiersched: qlearning needs a model")
		}
		a, err := learn.NewAgent(m, o)
		if err != nil {
			return nil, err
		}
		return NewQLearning(a), nil
	}
	return nil, fmt.Errorf("tiersched: unknown tiering scheduler %q (want %s)", name, strings.Join(Names, " or "))
}
