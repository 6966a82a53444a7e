package plan

import "math/rand/v2"

// The exported Search API is what a solver outside this package works
// with; Restarts uses nothing else. Instances and candidates are values a
// solver gets from Search and hands back; it never sees the layout's
// internals, so every change goes through Apply (costed, recorded,
// reversible).

// Instance names a rule instance: the Rule'th rule of the rule set on the
// Index'th egroup, device, node, rack or tier of its scope.
type Instance struct {
	Rule  int
	Index int
}

// Candidate is a candidate change: one move, or a swap of two moves that
// only lowers the cost together. Its fields are the solver engine's.
type Candidate struct{ c cand }

// Cost is the current total cost.
func (s *Search) Cost() Cost { return s.total }

// Done reports whether no rule instance costs anything, or the plan is at
// MaxMoves.
func (s *Search) Done() bool { return s.zero() || s.full() }

// Rand is the run's seeded generator.
func (s *Search) Rand() *rand.Rand { return s.rng }

// Costly appends the instances with a positive cost that the current batch
// can act on (egroup instances only for the batch's egroups).
func (s *Search) Costly(out []Instance) []Instance {
	for i := range s.rules {
		for _, inst := range s.pos[i].list {
			if s.scope[i] == ScopeEgroup && !s.inBatch(inst) {
				continue
			}
			out = append(out, Instance{i, int(inst)})
		}
	}
	return out
}

// InstanceCost is one instance's current cost.
func (s *Search) InstanceCost(in Instance) Cost { return s.cost[in.Rule][in.Index] }

// Candidates appends the changes the rules' hints and the domain orderings
// suggest for a costly instance (the greedy solver's candidate set).
func (s *Search) Candidates(in Instance, out []Candidate) []Candidate {
	s.stats.Visits++
	cs := s.candidates(in.Rule, int32(in.Index), s.candBuf[:0])
	s.candBuf = cs
	for _, c := range cs {
		out = append(out, Candidate{c})
	}
	return out
}

// Delta is the change in total cost if c were applied (nothing changes).
func (s *Search) Delta(c Candidate) Cost { return s.candDelta(c.c) }

// Apply makes the change and records its moves in the plan. It reports
// false (and changes nothing) when the plan is at MaxMoves.
func (s *Search) Apply(c Candidate) bool { return s.applyCand(c.c) }

// Mark returns a point Rollback can return to within the current batch.
func (s *Search) Mark() int { return s.mark() }

// Rollback undoes every change since mark, newest first, and drops their
// moves from the plan.
func (s *Search) Rollback(mark int) { s.rollback(mark) }
