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

// Improve implements Solver.
func (r Restarts) Improve(s *Search) {
	runs, maxFail := r.Restarts, r.MaxFailures
	if runs <= 0 {
		runs = 4
	}
	if maxFail <= 0 {
		maxFail = 200
	}
	type step struct {
		x, to int32
		group int
	}
	var best []step
	bestCost := s.total
	start := s.mark()
	firstMove := len(s.moves)
	for run := 0; run < runs; run++ {
		fails := 0
		for fails < maxFail && !s.zero() && !s.full() {
			i, inst, ok := randomCostly(s)
			if !ok {
				break
			}
			s.stats.Visits++
			cands := s.candidates(i, inst, s.candBuf[:0])
			s.candBuf = cands
			if len(cands) == 0 {
				fails++
				continue
			}
			c := cands[s.rng.IntN(len(cands))]
			if s.candDelta(c).Less(Cost{}) {
				s.applyCand(c)
				fails = 0
			} else {
				fails++
			}
		}
		n := len(s.moves) - firstMove
		if s.total.Less(bestCost) || (best != nil && !bestCost.Less(s.total) && n < len(best)) {
			best = best[:0]
			for _, m := range s.moves[firstMove:] {
				best = append(best, step{m.x, m.to, m.group})
			}
			bestCost = s.total
		}
		s.rollback(start)
	}
	// Replay the best run; swaps keep their pairing as groups.
	lastGroup := 0
	for _, st := range best {
		if st.group != 0 && st.group != lastGroup {
			s.groupSeq++
		}
		lastGroup = st.group
		if st.group != 0 {
			s.group = s.groupSeq
		}
		ok := s.apply(st.x, st.to, true)
		s.group = 0
		if !ok {
			return
		}
	}
}

// randomCostly picks a costly instance in the batch uniformly among the
// rules that have one, then uniformly within the rule.
func randomCostly(s *Search) (int, int32, bool) {
	var rules [MaxRules]int
	n := 0
	for i := range s.rules {
		if len(s.pos[i].list) > 0 {
			rules[n] = i
			n++
		}
	}
	if n == 0 {
		return 0, 0, false
	}
	for tries := 0; tries < 16; tries++ {
		i := rules[s.rng.IntN(n)]
		list := s.pos[i].list
		inst := list[s.rng.IntN(len(list))]
		if s.scope[i] == ScopeEgroup && !s.inBatch(inst) {
			continue
		}
		return i, inst, true
	}
	return 0, 0, false
}
