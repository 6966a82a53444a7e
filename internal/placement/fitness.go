package placement

import (
	"math"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
)

// FitnessFunc combines the utilization and queue terms (Allen §3.1).
type FitnessFunc string

// Fitness functions.
const (
	// FitnessMult is f_mult = t_u · t_q (Allen Eq. 6), the thesis's
	// recommendation: the bias toward the emptier disk does not fade as
	// disks fill (§4.3.1).
	FitnessMult FitnessFunc = "mult"
	// FitnessAdd is f_add = t_u + t_q (Allen Eq. 5).
	FitnessAdd FitnessFunc = "add"
)

// Fitness is Allen's fitness-weighted placement: each candidate device gets
// a fitness value from its utilization and queue length, and a
// WeightedVector draws candidates in fitness-weighted random order; the
// first suitable one takes the replica (Allen §3.5). Replicas of one
// request on the same tier are drawn without replacement.
//
// Unspecified replicas go to the fastest non-memory tier that has a
// suitable device, the way Stargate creates extent groups on the hot tier
// and leaves down-tiering to the background; fitness then spreads them
// within that tier.
type Fitness struct {
	Func FitnessFunc
	// Selection is the sampling scheme.
	Selection Selection
	// Aggression is a in t_u = 1/a^u, with u the utilization in percent.
	Aggression float64
	// QueueCeil is q_ceil in t_q = 1 − q/q_ceil.
	QueueCeil float64
	// TruncationPercent is T for truncation selection.
	TruncationPercent float64
	// LocalFirst puts the first replica on the client's node when possible.
	LocalFirst bool
}

var _ tracedPolicy = (*Fitness)(nil)

// Name implements Policy.
func (*Fitness) Name() string { return "fitness" }

// TermU is t_u = 1/a^u (Allen Eq. 4), u the utilization in percent.
func (f *Fitness) TermU(d *model.Device) float64 {
	return math.Pow(f.Aggression, -100*d.Usage())
}

// TermQ is t_q = 1 − q/q_ceil (Allen Eq. 3), clamped at 0 once the queue
// reaches the ceiling.
func (f *Fitness) TermQ(d *model.Device) float64 {
	return math.Max(0, 1-float64(d.QueueLen)/f.QueueCeil)
}

// Value is the fitness of d: f_add (Eq. 5) or f_mult (Eq. 6).
func (f *Fitness) Value(d *model.Device) float64 {
	tu, tq := f.TermU(d), f.TermQ(d)
	if f.Func == FitnessAdd {
		return tu + tq
	}
	return tu * tq
}

// Place implements Policy.
func (f *Fitness) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	return f.placeTraced(s, req, rng, nil)
}

func (f *Fitness) placeTraced(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer) ([]model.Replica, error) {
	return placeSampled(s, req, rng, tr, sampledPlan{
		sel:        f.Selection,
		truncPct:   f.TruncationPercent,
		weight:     f.Value,
		localFirst: f.LocalFirst,
		anyPool:    anyPoolFastestTier,
		scoreCols:  []string{"t_u", "t_q", "f_" + string(f.Func)},
		scores: func(d *model.Device) []float64 {
			return []float64{f.TermU(d), f.TermQ(d), f.Value(d)}
		},
	})
}
