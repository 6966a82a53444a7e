package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Selection names a weighted random selection scheme (Allen §3.3).
type Selection string

// Selection schemes.
const (
	// SelectSUS is stochastic universal sampling with one pointer per
	// Sample call: selection probability is proportional to weight
	// (Allen §3.3.3). Prone to herding onto one heavy item.
	SelectSUS Selection = "sus"
	// SelectTruncation samples uniformly among the top T % by weight
	// (Allen §3.3.4).
	SelectTruncation Selection = "truncation"
	// SelectTwoChoice draws two items uniformly and keeps the heavier
	// (Allen §3.3.5; Azar et al. 1999). O(1) per sample and resistant to
	// herding.
	SelectTwoChoice Selection = "two-choice"
	// SelectUniform ignores weights (Allen §3.3.6).
	SelectUniform Selection = "uniform"
)

// Selections lists the schemes in the order the thesis presents them.
var Selections = []Selection{SelectSUS, SelectTruncation, SelectTwoChoice, SelectUniform}

func (s Selection) valid() bool {
	for _, x := range Selections {
		if s == x {
			return true
		}
	}
	return false
}

// sparseTakenLimit is how many samples a WeightedVector tracks as a short
// list before switching to a dense "still eligible" array. Below it, a
// sample is O(1) expected with no O(pool) setup, which is what keeps
// two-choice placement under 2 µs per replica on a 1,000-device tier;
// past it rejection of already-sampled items would start to cost more
// than building the dense array once.
const sparseTakenLimit = 8

// WeightedVector is the thesis's WeightedVector (Allen §3.4): items with
// fitness-derived weights, sampled without replacement until Reset. Each
// Sample returns an item not returned since the last Reset, chosen by the
// vector's Selection; it reports false when every item has been sampled.
//
// Weights must be non-negative. The thesis asserts positive fitness; here a
// zero weight (a saturated queue with t_q clamped at 0) is legal and such
// items are drawn only when every remaining weight is zero, uniformly.
//
// Two-choice and uniform selection compute weights lazily, for the items
// they draw only; SUS and truncation compute every weight once per SetItems.
// A WeightedVector is not safe for concurrent use.
type WeightedVector[T any] struct {
	fitness  func(T) float64
	sel      Selection
	truncPct float64

	items []T
	// weights are cached per item for SUS and truncation (nil otherwise).
	weights []float64

	// Sampling state. In sparse mode taken lists the sampled positions;
	// in dense mode alive lists the positions still eligible.
	taken []int
	dense bool
	alive []int
	total float64 // SUS: sum of alive weights
	order []int   // truncation scratch
}

// NewWeightedVector returns an empty vector. truncPct is T for truncation
// selection, in (0, 100]; it is ignored by the other schemes.
func NewWeightedVector[T any](fitness func(T) float64, sel Selection, truncPct float64) *WeightedVector[T] {
	if !sel.valid() {
		panic(fmt.Sprintf("placement: unknown selection %q", sel))
	}
	return &WeightedVector[T]{fitness: fitness, sel: sel, truncPct: truncPct}
}

// Add appends an item (the thesis's EmplaceBack) and resets sampling.
func (w *WeightedVector[T]) Add(x T) {
	w.items = append(w.items, x)
	w.weights = nil
	w.Reset()
}

// SetItems adopts items without copying (the vector never modifies them)
// and resets sampling. Policies pass a snapshot's shared device index.
func (w *WeightedVector[T]) SetItems(items []T) {
	w.items = items
	w.weights = nil
	w.Reset()
}

// Len returns the number of items.
func (w *WeightedVector[T]) Len() int { return len(w.items) }

// Remaining returns how many items can still be sampled before Reset.
func (w *WeightedVector[T]) Remaining() int {
	if w.dense {
		return len(w.alive)
	}
	return len(w.items) - len(w.taken)
}

// Weight returns item i's weight.
func (w *WeightedVector[T]) Weight(i int) float64 {
	if w.weights != nil {
		return w.weights[i]
	}
	return w.weigh(i)
}

func (w *WeightedVector[T]) weigh(i int) float64 {
	x := w.fitness(w.items[i])
	if x < 0 || math.IsNaN(x) {
		panic(fmt.Sprintf("placement: fitness %v is not a non-negative number", x))
	}
	return x
}

// Reset makes every item eligible again.
func (w *WeightedVector[T]) Reset() {
	w.taken = w.taken[:0]
	w.dense = false
	w.alive = w.alive[:0]
	if w.sel == SelectSUS || w.sel == SelectTruncation {
		// Both need every weight; they run dense from the start.
		if w.weights == nil && len(w.items) > 0 {
			w.weights = make([]float64, len(w.items))
			for i := range w.items {
				w.weights[i] = w.weigh(i)
			}
		}
		w.makeDense()
	}
}

func (w *WeightedVector[T]) makeDense() {
	w.dense = true
	w.alive = w.alive[:0]
	w.total = 0
	for i := range w.items {
		if containsInt(w.taken, i) {
			continue
		}
		w.alive = append(w.alive, i)
		if w.weights != nil {
			w.total += w.weights[i]
		}
	}
	w.taken = w.taken[:0]
}

// Sample returns an item not sampled since the last Reset.
func (w *WeightedVector[T]) Sample(rng *rand.Rand) (T, bool) {
	var zero T
	if w.Remaining() == 0 {
		return zero, false
	}
	var i int
	switch w.sel {
	case SelectSUS:
		i = w.sampleSUS(rng)
	case SelectTruncation:
		i = w.sampleTruncation(rng)
	case SelectTwoChoice:
		a := w.drawUniform(rng)
		b := w.drawUniform(rng)
		i = a
		if b != a && w.Weight(b) > w.Weight(a) {
			i = b
		}
	default:
		i = w.drawUniform(rng)
	}
	w.remove(i)
	return w.items[i], true
}

// drawUniform returns a uniformly random eligible position without
// removing it.
func (w *WeightedVector[T]) drawUniform(rng *rand.Rand) int {
	if !w.dense {
		n := len(w.items)
		// Rejection sampling: with at most sparseTakenLimit of n taken,
		// each try succeeds with probability >= 1 - limit/n.
		for try := 0; try < 4*sparseTakenLimit; try++ {
			i := rng.IntN(n)
			if !containsInt(w.taken, i) {
				return i
			}
		}
		w.makeDense()
	}
	return w.alive[rng.IntN(len(w.alive))]
}

func (w *WeightedVector[T]) remove(i int) {
	if !w.dense {
		w.taken = append(w.taken, i)
		if len(w.taken) > sparseTakenLimit || len(w.taken)*2 > len(w.items) {
			w.makeDense()
		}
		return
	}
	for k, x := range w.alive {
		if x == i {
			last := len(w.alive) - 1
			w.alive[k] = w.alive[last]
			w.alive = w.alive[:last]
			break
		}
	}
	if w.weights != nil {
		w.total -= w.weights[i]
		if len(w.alive) == 0 || w.total < 0 {
			w.total = 0
		}
	}
}

// sampleSUS spins a roulette wheel with one pointer over the remaining
// weights: the thesis's SUS with a sampled item's weight set to zero.
func (w *WeightedVector[T]) sampleSUS(rng *rand.Rand) int {
	if w.total <= 0 {
		return w.alive[rng.IntN(len(w.alive))]
	}
	ptr := rng.Float64() * w.total
	acc := 0.0
	for _, i := range w.alive {
		acc += w.weights[i]
		if ptr < acc {
			return i
		}
	}
	// Floating-point slack: the pointer fell past the last bin.
	for k := len(w.alive) - 1; k >= 0; k-- {
		if w.weights[w.alive[k]] > 0 {
			return w.alive[k]
		}
	}
	return w.alive[len(w.alive)-1]
}

// sampleTruncation ranks the remaining items by weight and draws uniformly
// from the top T % (at least one item). Ranking every time is the
// O(D log D) cost the thesis measures in Fig 13.
func (w *WeightedVector[T]) sampleTruncation(rng *rand.Rand) int {
	w.order = append(w.order[:0], w.alive...)
	sort.Slice(w.order, func(a, b int) bool {
		wa, wb := w.weights[w.order[a]], w.weights[w.order[b]]
		if wa != wb {
			return wa > wb
		}
		return w.order[a] < w.order[b]
	})
	k := int(math.Ceil(float64(len(w.order)) * w.truncPct / 100))
	k = max(1, min(k, len(w.order)))
	return w.order[rng.IntN(k)]
}
