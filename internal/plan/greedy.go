package plan

// Solver searches for moves that lower a Search's cost. Solvers see the
// model only through Search, so they are interchangeable (Mirador §3.3's
// pluggable solver interface).
type Solver interface {
	// Name is how options and the CLI name the solver.
	Name() string
	// Improve lowers the cost by moving replicas of the current batch.
	Improve(s *Search)
	// Escape is called when a whole round moved nothing but cost remains:
	// the solver may search more widely. It reports whether it moved
	// anything.
	Escape(s *Search) bool
}

// Greedy is Mirador's greedy solver (Listing 3): rule instances with a
// positive cost wait in a priority queue, costliest first (hard before
// soft); each visit asks the instance's rules for hints, tries the hinted
// replicas against the head of the domain orderings (least loaded, most
// free, hinted devices first), and applies the candidate that lowers the
// total cost most — stopping early at one that zeroes the visited
// instance. A replica moves at most once per pass. Instances whose cost
// changes are re-queued. When a whole round moves nothing, Escape runs the
// second pass (secondpass.go).
type Greedy struct{}

var _ Solver = Greedy{}

// Name implements Solver.
func (Greedy) Name() string { return "greedy" }

// Improve implements Solver.
func (Greedy) Improve(s *Search) {
	var q instQueue
	s.listener = func(i int, inst int32, c Cost) { q.push(qItem{c: c, entry: int32(i), inst: inst}) }
	defer func() { s.listener = nil }()
	for i := range s.rules {
		if s.scope[i] == ScopeEgroup && !s.allBatch {
			// Only the batch's egroups: O(batch), not O(costly egroups).
			for _, e := range s.batchEgs {
				if c := s.cost[i][e]; positive(c) {
					q.push(qItem{c: c, entry: int32(i), inst: e})
				}
			}
			continue
		}
		for _, inst := range s.pos[i].list {
			q.push(qItem{c: s.cost[i][inst], entry: int32(i), inst: inst})
		}
	}
	for q.len() > 0 && !s.full() {
		it := q.pop()
		if s.cost[it.entry][it.inst] != it.c {
			continue // stale: a newer entry carries the current cost
		}
		visit(s, int(it.entry), it.inst)
	}
}

// visit tries to lower the cost of one instance; it reports whether it
// applied a move.
func visit(s *Search, i int, inst int32) bool {
	s.stats.Visits++
	cands := s.candidates(i, inst, s.candBuf[:0])
	s.candBuf = cands
	best := -1
	var bestDelta Cost
	for j, c := range cands {
		d := s.candDelta(c)
		if !d.Less(bestDelta) {
			continue
		}
		best, bestDelta = j, d
		// Mirador: a value that satisfies the variable's rules is taken
		// at once — here, a move after which nothing it touched costs.
		// The touched list still holds this candidate's evaluation.
		if c.y < 0 && s.touchedClear() {
			break
		}
	}
	if best < 0 {
		return false
	}
	return s.applyCand(cands[best])
}

// Escape implements Solver: the second pass.
func (Greedy) Escape(s *Search) bool { return secondPass(s) }

// qItem is a queued instance with the cost it had when queued.
type qItem struct {
	c     Cost
	entry int32
	inst  int32
}

// before orders the queue: hard before soft, costlier first, then rule and
// instance order so that runs are deterministic.
func (a qItem) before(b qItem) bool {
	if a.c.Hard != b.c.Hard {
		return a.c.Hard > b.c.Hard
	}
	if a.c.Soft != b.c.Soft {
		return a.c.Soft > b.c.Soft
	}
	if a.entry != b.entry {
		return a.entry < b.entry
	}
	return a.inst < b.inst
}

// instQueue is a binary max-heap of instances (hand-rolled to avoid
// container/heap's interface calls on the hot path).
type instQueue struct{ items []qItem }

func (q *instQueue) len() int { return len(q.items) }

func (q *instQueue) push(it qItem) {
	q.items = append(q.items, it)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.items[i].before(q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *instQueue) pop() qItem {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	i := 0
	for {
		l, r := 2*i+1, 2*i+2
		m := i
		if l < last && q.items[l].before(q.items[m]) {
			m = l
		}
		if r < last && q.items[r].before(q.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}
