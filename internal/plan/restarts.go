package plan

// Restarts is a deliberately simple second solver that proves the Solver
// seam: random first-improvement local search with restarts. Each restart
// repeatedly picks a random costly instance, a random candidate replica
// and a random candidate destination (from the same hints and domain
// orderings the greedy solver uses) and applies the move if it lowers the
// total cost, until MaxFailures picks in a row fail. The cheapest restart
// (fewest moves on ties) is kept. Randomness comes from Options.Seed.
type Restarts struct {
	// Restarts is the number of independent runs (default 4).
	Restarts int
	// MaxFailures ends a run after this many non-improving picks in a row
	// (default 200).
	MaxFailures int
}

var _ Solver = Restarts{}

// Name implements Solver.
func (Restarts) Name() string { return "restarts" }

// Escape implements Solver: restarts has no wider search.
func (Restarts) Escape(*Search) bool { return false }

// Improve implements Solver. It uses only Search's exported API, as a
// solver outside the package would.
func (r Restarts) Improve(s *Search) {
	runs, maxFail := r.Restarts, r.MaxFailures
	if runs <= 0 {
		runs = 4
	}
	if maxFail <= 0 {
		maxFail = 200
	}
	rng := s.Rand()
	var best, applied []Candidate
	bestCost := s.Cost()
	start := s.Mark()
	var costly []Instance
	var cands []Candidate
	for run := 0; run < runs; run++ {
		applied = applied[:0]
		fails := 0
		for fails < maxFail && !s.Done() {
			costly = s.Costly(costly[:0])
			if len(costly) == 0 {
				break
			}
			cands = s.Candidates(costly[rng.IntN(len(costly))], cands[:0])
			if len(cands) == 0 {
				fails++
				continue
			}
			c := cands[rng.IntN(len(cands))]
			if s.Delta(c).Less(Cost{}) && s.Apply(c) {
				applied = append(applied, c)
				fails = 0
			} else {
				fails++
			}
		}
		// Keep the cheapest run, fewest changes on ties.
		if s.Cost().Less(bestCost) || (best != nil && !bestCost.Less(s.Cost()) && len(applied) < len(best)) {
			best = append(best[:0], applied...)
			bestCost = s.Cost()
		}
		s.Rollback(start)
	}
	// Replaying the same changes from the same start gives the same
	// layout (everything is deterministic).
	for _, c := range best {
		if !s.Apply(c) {
			return
		}
	}
}
