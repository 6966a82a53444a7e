package plan

import "sort"

// The second pass (Mirador §3.3): when the first pass is stuck in a local
// minimum, clear the assignment of a group of the costliest replicas and
// re-place them together. Re-placement is greedy first (each replica, in
// order, to the device that lowers the cost most, its old device
// included); if that leaves cost, a depth-first search over the group's
// candidate devices, bounded by SecondPassBudget steps, looks for the
// cheapest complete re-placement. On small groups the search is
// exhaustive, which is what lets the policy fuzzer demand that every hard
// rule holds whenever a feasible layout exists.
//
// A group is kept only if it lowers the total cost. Its changes are then
// emitted as ordinary moves in an order that can be executed one at a time:
// a move waits until its destination has room (an earlier move of the
// group frees it), and a cycle of full devices is broken by routing one
// replica through a temporary device with room.

func secondPass(s *Search) bool {
	tried := map[int32]bool{}
	applied := false
	for g := 0; g < s.o.SecondPassGroups && !s.zero() && !s.full(); g++ {
		group := pickGroup(s, tried)
		if len(group) == 0 {
			break
		}
		s.stats.SecondPassGroups++
		if tryGroup(s, group) {
			applied = true
			s.stats.SecondPassApplied++
			continue
		}
		for _, x := range group {
			if positive(s.attributed(x)) {
				tried[x] = true
			}
		}
		tried[group[0]] = true
	}
	return applied
}

// pickGroup returns up to SecondPassGroup movable replicas: those of the
// costliest instances first, then replicas sharing their devices (moving
// a neighbour can make room). A model with no more replicas than the
// group size is taken whole.
func pickGroup(s *Search, tried map[int32]bool) []int32 {
	st := s.st
	size := s.o.SecondPassGroup
	var group []int32
	in := func(x int32) bool {
		for _, y := range group {
			if y == x {
				return true
			}
		}
		return false
	}
	if len(st.varEg) <= size {
		for x := range int32(len(st.varEg)) {
			if s.movable(x) && !tried[x] {
				group = append(group, x)
			}
		}
		if len(group) == 0 {
			return nil
		}
		// Everything is in: an earlier failure with the same group would
		// fail again.
		for x := range int32(len(st.varEg)) {
			if tried[x] {
				return nil
			}
		}
		sort.SliceStable(group, func(a, b int) bool { return s.attributed(group[b]).Less(s.attributed(group[a])) })
		return group
	}
	type inst struct {
		i    int
		inst int32
		c    Cost
	}
	var costly []inst
	for i := range s.rules {
		for _, k := range s.pos[i].list {
			costly = append(costly, inst{i, k, s.cost[i][k]})
		}
	}
	sort.Slice(costly, func(a, b int) bool {
		if costly[b].c.Less(costly[a].c) {
			return true
		}
		if costly[a].c.Less(costly[b].c) {
			return false
		}
		if costly[a].i != costly[b].i {
			return costly[a].i < costly[b].i
		}
		return costly[a].inst < costly[b].inst
	})
	add := func(x int32) {
		if x >= 0 && len(group) < size && !tried[x] && !in(x) && s.movable(x) {
			group = append(group, x)
		}
	}
	for _, c := range costly {
		if len(group) >= size {
			break
		}
		// The replicas the first pass would move for this instance — for a
		// device that lacks load, those are on other devices — then the
		// instance's own.
		for _, cd := range s.candidates(c.i, c.inst, s.candBuf[:0]) {
			add(cd.x)
			add(cd.y)
		}
		s.hintInstance(c.i, c.inst, &s.hints)
		for _, x := range s.variablesOf(c.i, c.inst, &s.hints, size) {
			add(x)
		}
	}
	if len(group) == 0 {
		return nil
	}
	// Neighbours: replicas on the same devices.
	for k := 0; k < len(group) && len(group) < size; k++ {
		d := st.varDev[group[k]]
		if d < 0 {
			continue
		}
		for _, x := range st.devVars[d] {
			if len(group) >= size {
				break
			}
			if s.movable(x) && !in(x) {
				group = append(group, x)
			}
		}
	}
	return group
}

type groupChange struct{ x, from, to int32 }

// tryGroup clears and re-places one group; it reports whether the group's
// moves were applied.
func tryGroup(s *Search, group []int32) bool {
	st := s.st
	mark := s.mark()
	before := s.total
	orig := make([]int32, len(group))
	// A replica may go back to its old device if that leaves the device
	// no fuller than it was (it may have been over capacity to begin with).
	usedBefore := map[int32]int64{}
	for k, x := range group {
		orig[k] = st.varDev[x]
		if d := orig[k]; d >= 0 {
			usedBefore[d] = st.devUsed[d]
		}
	}
	stay := func(x, d int32) bool {
		return d >= 0 && !st.hasSibling(st.varEg[x], d) && st.devUsed[d]+st.egSize[st.varEg[x]] <= max(st.devCap[d], usedBefore[d])
	}
	for _, x := range group {
		if st.varDev[x] >= 0 {
			s.apply(x, -1, false)
		}
	}
	cleared := s.mark()

	// The best complete re-placement: cheapest, then fewest changed
	// replicas (fewer moves to execute, and fewer chances of a cycle).
	best := make([]int32, len(group))
	bestCost := Cost{Hard: 1e300}
	bestChanged := len(group) + 1
	haveBest := false
	changedNow := func() int {
		n := 0
		for k, x := range group {
			if st.varDev[x] != orig[k] {
				n++
			}
		}
		return n
	}
	snapshot := func() {
		for k, x := range group {
			if orig[k] >= 0 && st.varDev[x] < 0 {
				return // incomplete: a replica would be dropped
			}
		}
		changed := changedNow()
		if !haveBest || s.total.Less(bestCost) || (!bestCost.Less(s.total) && changed < bestChanged) {
			for k, x := range group {
				best[k] = st.varDev[x]
			}
			bestCost, bestChanged, haveBest = s.total, changed, true
		}
	}

	// Greedy re-placement.
	for k, x := range group {
		var bestD Cost
		choice := int32(-1)
		for _, d := range groupCandidates(s, x, orig[k], stay, s.o.CandidateDevices) {
			delta := s.delta(x, d)
			if choice < 0 || delta.Less(bestD) {
				choice, bestD = d, delta
			}
		}
		if choice >= 0 {
			s.apply(x, choice, false)
		}
	}
	snapshot()

	// Bounded exhaustive re-placement, unless the greedy one left nothing
	// costly (an incomplete greedy layout does not count: a replica it
	// could not place costs nothing under rules that only look at placed
	// replicas).
	if !haveBest || bestCost.Hard > 0 || bestCost.Soft > 0 {
		s.rollback(cleared)
		// The budget counts rule evaluations, not search steps: a step
		// that changes a tier's totals re-evaluates tier-wide rules on
		// every device of the tier, so steps vary by orders of magnitude.
		stop := s.stats.Evaluations + s.o.SecondPassBudget
		k := s.o.CandidateDevices * 2
		var dfs func(level, changed int)
		dfs = func(level, changed int) {
			if s.stats.Evaluations >= stop {
				return
			}
			// Once a layout with nothing costly is known, only layouts
			// that change fewer replicas can beat it.
			if haveBest && bestCost.Hard == 0 && bestCost.Soft <= 0 && changed >= bestChanged {
				return
			}
			if level == len(group) {
				snapshot()
				return
			}
			x := group[level]
			cands := groupCandidates(s, x, orig[level], stay, k)
			// Cheapest first, so good layouts are found before the
			// budget runs out.
			type scored struct {
				d int32
				c Cost
			}
			sc := make([]scored, len(cands))
			for j, d := range cands {
				sc[j] = scored{d, s.delta(x, d)}
			}
			sort.SliceStable(sc, func(a, b int) bool { return sc[a].c.Less(sc[b].c) })
			for _, c := range sc {
				if s.stats.Evaluations >= stop {
					return
				}
				m := s.mark()
				s.apply(x, c.d, false)
				next := changed
				if c.d != orig[level] {
					next++
				}
				dfs(level+1, next)
				s.rollback(m)
			}
			if orig[level] < 0 {
				dfs(level+1, changed) // a missing replica may stay missing
			}
		}
		dfs(0, 0)
	}
	s.rollback(mark)
	if !haveBest || !bestCost.Less(before) {
		return false
	}

	var changes []groupChange
	for k, x := range group {
		if best[k] != orig[k] {
			changes = append(changes, groupChange{x, orig[k], best[k]})
		}
	}
	if len(changes) == 0 {
		return false
	}
	s.groupSeq++
	s.group = s.groupSeq
	ok := emitGroup(s, changes)
	s.group = 0
	if !ok || !s.total.Less(before) {
		s.rollback(mark)
		return false
	}
	return true
}

// groupCandidates lists devices a cleared replica may take: its old device
// (staying is not a move) and destinations as the first pass would find
// them — every ok device when the model is small, so the search is
// exhaustive there.
func groupCandidates(s *Search, x, orig int32, stay func(x, d int32) bool, k int) []int32 {
	st := s.st
	var out []int32
	if stay(x, orig) {
		out = append(out, orig)
	}
	if len(st.devID) <= 64 {
		for d := range int32(len(st.devID)) {
			if d != orig && st.canTarget(x, d) {
				out = append(out, d)
			}
		}
		return out
	}
	h := &s.hints
	h.reset(st)
	eh := s.egroupHints(x)
	var cs []cand
	if orig >= 0 {
		// Keep the old tier in reach.
		h.tiers = append(h.tiers, st.devTier[orig])
	}
	cs = s.destinations(x, h, eh, cs, k)
	for _, c := range cs {
		if c.d != orig {
			out = append(out, c.d)
		}
	}
	return out
}

// emitGroup applies a group's changes as recorded moves in an executable
// order.
func emitGroup(s *Search, changes []groupChange) bool {
	st := s.st
	pending := append([]groupChange(nil), changes...)
	for iter := 0; len(pending) > 0; iter++ {
		if iter > 4*len(changes)+8 {
			return false
		}
		progress := false
		rest := pending[:0]
		for _, c := range pending {
			if st.varDev[c.x] != c.from {
				return false
			}
			if st.canTarget(c.x, c.to) && st.readableSource(st.varEg[c.x]) {
				if !s.apply(c.x, c.to, true) {
					return false
				}
				progress = true
				continue
			}
			rest = append(rest, c)
		}
		pending = rest
		if progress || len(pending) == 0 {
			continue
		}
		// Every remaining destination is waiting for another: route one
		// replica through a device with room.
		// Prefer a device no pending move needs; failing that, any device
		// with room (its own later arrival will wait for this one to go).
		c := &pending[0]
		tmp, tmpBusy := int32(-1), true
		for d := range int32(len(st.devID)) {
			if d == c.to || !st.canTarget(c.x, d) {
				continue
			}
			busy := false
			for _, p := range pending {
				if p.to == d {
					busy = true
				}
			}
			better := tmp < 0 || (tmpBusy && !busy) || (busy == tmpBusy && st.usedFrac(d) < st.usedFrac(tmp))
			if better {
				tmp, tmpBusy = d, busy
			}
		}
		if tmp < 0 || !st.readableSource(st.varEg[c.x]) || !s.apply(c.x, tmp, true) {
			return false
		}
		c.from = tmp
	}
	return true
}
