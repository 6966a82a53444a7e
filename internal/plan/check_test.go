package plan

import (
	"fmt"
	"math"

	"github.com/terrace-storage/terrace/internal/model"
)

// checkPlan verifies what every plan guarantees, independently of the
// solver's bookkeeping: it replays the moves one at a time on the model
// and recomputes costs from scratch.
//
//   - each move copies from a readable replica to an ok device with room
//     that holds no replica of the egroup (never a failed, full, bad or
//     draining device), and its source holds the replica it moves;
//   - no replica set ever has fewer live replicas than before the move
//     (copy before delete);
//   - the total cost never rises: every first-pass move lowers it, every
//     second-pass group lowers it as a whole, and Before/After chain;
//   - the plan's initial and final costs are the costs a fresh evaluation
//     of the initial and final models gives.
func checkPlan(m *Model, rules *RuleSet, p *Plan) error {
	cur := m.Clone()
	devIdx := map[model.DeviceID]int{}
	for i, d := range cur.Devices {
		devIdx[d.ID] = i
	}
	egIdx := map[uint64]int{}
	for i, e := range cur.Egroups {
		egIdx[e.ID] = i
	}
	live := func(e *Egroup) int {
		n := 0
		for _, r := range e.Replicas {
			if cur.Devices[devIdx[r]].Health != HealthFailed {
				n++
			}
		}
		return n
	}
	const tol = 1e-6
	near := func(a, b Cost) bool {
		return math.Abs(a.Hard-b.Hard) <= tol*math.Max(1, math.Abs(a.Hard)) && math.Abs(a.Soft-b.Soft) <= tol*math.Max(1, math.Abs(a.Soft))
	}
	var groupStart Cost
	for k, mv := range p.Moves {
		where := fmt.Sprintf("move %d (%s)", k, mv)
		i, ok := egIdx[mv.Egroup]
		if !ok {
			return fmt.Errorf("%s: unknown egroup", where)
		}
		e := &cur.Egroups[i]
		to, ok := devIdx[mv.To]
		if !ok {
			return fmt.Errorf("%s: unknown destination", where)
		}
		dst := &cur.Devices[to]
		if dst.Health != HealthOK {
			return fmt.Errorf("%s: destination is %s", where, dst.Health)
		}
		if dst.UsedBytes+e.SizeBytes > dst.CapacityBytes {
			return fmt.Errorf("%s: destination full (%d + %d > %d)", where, dst.UsedBytes, e.SizeBytes, dst.CapacityBytes)
		}
		readable, pos := false, -1
		for j, r := range e.Replicas {
			if r == mv.To {
				return fmt.Errorf("%s: destination already holds a replica", where)
			}
			if r == mv.From {
				pos = j
			}
			if cur.Devices[devIdx[r]].Health.readable() {
				readable = true
			}
		}
		if !readable {
			return fmt.Errorf("%s: no readable replica to copy from", where)
		}
		if mv.From != "" && pos < 0 {
			return fmt.Errorf("%s: source holds no replica", where)
		}
		if mv.From == "" && len(e.Replicas) >= e.Vector.Total() {
			return fmt.Errorf("%s: adds a replica the vector does not ask for", where)
		}
		before := live(e)
		next, err := cur.Apply([]Move{mv})
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		cur = next
		e = &cur.Egroups[i]
		if after := live(e); after < before {
			return fmt.Errorf("%s: live replicas dropped from %d to %d", where, before, after)
		}
		if k > 0 && !near(mv.Before, p.Moves[k-1].After) {
			return fmt.Errorf("%s: cost before %s does not chain from the previous move's %s", where, mv.Before, p.Moves[k-1].After)
		}
		if mv.Group == 0 {
			if !mv.After.Less(mv.Before) {
				return fmt.Errorf("%s: first-pass move does not lower the cost", where)
			}
			if len(mv.Lowers) == 0 {
				return fmt.Errorf("%s: lowers the cost but names no rule", where)
			}
		} else {
			if k == 0 || p.Moves[k-1].Group != mv.Group {
				groupStart = mv.Before
			}
			if k == len(p.Moves)-1 || p.Moves[k+1].Group != mv.Group {
				if !mv.After.Less(groupStart) {
					return fmt.Errorf("%s: second-pass group %d does not lower the cost (%s -> %s)", where, mv.Group, groupStart, mv.After)
				}
			}
		}
	}
	if p.Initial.Less(p.Final) {
		return fmt.Errorf("final cost %s is above the initial %s", p.Final, p.Initial)
	}
	init, err := freshCost(m, m, rules)
	if err != nil {
		return err
	}
	if !near(init, p.Initial) {
		return fmt.Errorf("initial cost %s, fresh evaluation says %s", p.Initial, init)
	}
	fin, err := freshCost(cur, m, rules)
	if err != nil {
		return err
	}
	if !near(fin, p.Final) {
		return fmt.Errorf("final cost %s, fresh evaluation of the final layout says %s", p.Final, fin)
	}
	if len(p.Moves) > 0 && !near(p.Moves[len(p.Moves)-1].After, p.Final) {
		return fmt.Errorf("last move ends at %s, plan says final %s", p.Moves[len(p.Moves)-1].After, p.Final)
	}
	return nil
}

// freshCost evaluates a model from scratch; rules that compare with the
// start of the run (tier_fill) see the initial model's tier usage.
func freshCost(m, initial *Model, rules *RuleSet) (Cost, error) {
	st, err := newState(m, rules)
	if err != nil {
		return Cost{}, err
	}
	st0, err := newState(initial, rules)
	if err != nil {
		return Cost{}, err
	}
	copy(st.tierUsed0, st0.tierUsed0)
	o := Options{}
	o.EnsureDefaults()
	return newSearch(st, rules, o).exactTotal(), nil
}
