package plan

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Search is a solver's handle on a planning run: the current layout, the
// cached cost of every rule instance, the batch's movable replicas and the
// moves planned so far. Solvers change the layout only through Apply and
// Rollback, so every move is costed, recorded and reversible.
//
// Costs are kept per rule instance. A move re-evaluates only the instances
// it touches — the egroup's egroup-scope rules, the source and destination
// devices, nodes, racks and tiers, and for tier-wide rules every device of
// a tier whose totals changed — so a delta costs a handful of rule calls
// whatever the model's size.
type Search struct {
	st          *state
	rules       []entry
	scope       []Scope
	anyTierWide bool
	o           Options
	rng         *rand.Rand

	cost       [][]Cost // [rule][instance]
	entryTotal []Cost
	nonzero    []int
	pos        []posSet
	total      Cost

	touched    []touch
	entryDelta []Cost

	// Batches and passes: a replica may move once per pass, and only if
	// its egroup is in the current batch.
	egBatch    []int32
	batchStamp int32
	allBatch   bool
	batchEgs   []int32
	// batchVars lists, per device, the batch's replicas on it when the
	// batch started (CSR: batchVars[batchOff[d]:batchOff[d+1]]), so that
	// visiting a device costs its batch replicas, not all of them. Entries
	// go stale when a replica moves; a moved replica may not move again in
	// the pass, and scanning checks the replica is still there.
	batchOff  []int32
	batchVars []int32
	cursor    []int32
	varStamp  []int32
	pass      int32
	round     int
	batch     int
	group     int // second-pass group of the moves being applied (0: none)
	groupSeq  int

	journal []journalRec
	moves   []rawMove

	listener func(i int, inst int32, c Cost)
	stats    Stats

	hints, ehints Hints
	varBuf        []int32
	keyBuf        []rankKey
	candBuf       []cand
}

type touch struct {
	entry int32
	inst  int32
	c     Cost
}

type journalRec struct {
	u        undo
	recorded bool
	stamp    int32
}

type rawMove struct {
	x, from, to   int32
	before, after Cost
	mask          uint64
	batch, round  int
	group         int
}

// cand is a candidate move: variable x to device d. A swap first moves y
// (≥ 0) off d to yd to make room; its two moves form a group.
type cand struct{ x, d, y, yd int32 }

func move1(x, d int32) cand { return cand{x, d, -1, -1} }

// candDelta is the change in total cost if c were applied.
func (s *Search) candDelta(c cand) Cost {
	if c.y < 0 {
		return s.delta(c.x, c.d)
	}
	// A tentative apply must not re-queue instances: the greedy solver
	// would visit them again with an unchanged cost, forever.
	l := s.listener
	s.listener = nil
	m := s.mark()
	before := s.total
	s.apply(c.y, c.yd, false)
	d := s.total.Sub(before).Add(s.delta(c.x, c.d))
	s.rollback(m)
	s.listener = l
	return d
}

// applyCand applies c (a swap as a two-move group).
func (s *Search) applyCand(c cand) bool {
	if c.y < 0 {
		return s.apply(c.x, c.d, true)
	}
	if len(s.moves)+2 > s.o.MaxMoves {
		return false
	}
	s.groupSeq++
	s.group = s.groupSeq
	defer func() { s.group = 0 }()
	return s.apply(c.y, c.yd, true) && s.apply(c.x, c.d, true)
}

// posSet is the set of instances of one rule with a positive cost.
type posSet struct {
	list []int32
	idx  []int32 // by instance; −1 when absent
}

func (p *posSet) add(i int32) {
	if p.idx[i] >= 0 {
		return
	}
	p.idx[i] = int32(len(p.list))
	p.list = append(p.list, i)
}

func (p *posSet) remove(i int32) {
	k := p.idx[i]
	if k < 0 {
		return
	}
	last := p.list[len(p.list)-1]
	p.list[k] = last
	p.idx[last] = k
	p.list = p.list[:len(p.list)-1]
	p.idx[i] = -1
}

func newSearch(st *state, rules *RuleSet, o Options) *Search {
	s := &Search{st: st, rules: rules.entries, o: o, rng: newRand(o.Seed)}
	n := len(s.rules)
	s.scope = make([]Scope, n)
	s.cost = make([][]Cost, n)
	s.entryTotal = make([]Cost, n)
	s.nonzero = make([]int, n)
	s.pos = make([]posSet, n)
	s.entryDelta = make([]Cost, n)
	for i := range s.rules {
		s.scope[i] = s.rules[i].rule.Scope()
		s.anyTierWide = s.anyTierWide || s.rules[i].tierWide
		size := st.domains(s.scope[i])
		s.cost[i] = make([]Cost, size)
		s.pos[i].idx = make([]int32, size)
		for k := range s.pos[i].idx {
			s.pos[i].idx[k] = -1
		}
		for inst := range size {
			c := s.evalRaw(i, int32(inst))
			s.setCost(i, int32(inst), c)
		}
	}
	s.sumTotal()
	s.egBatch = make([]int32, len(st.egID))
	s.varStamp = make([]int32, len(st.varEg))
	s.allBatch = true
	s.hints.reset(st)
	s.ehints.reset(st)
	return s
}

// evalRaw evaluates rule i on instance inst in the current layout.
func (s *Search) evalRaw(i int, inst int32) Cost {
	en := &s.rules[i]
	v := &s.st.view
	v.inst = inst
	raw := en.rule.Cost(v)
	s.stats.Evaluations++
	if !math.IsInf(raw, 0) && !math.IsNaN(raw) {
		if math.Abs(raw) < 1e-12 {
			return Cost{}
		}
		return Cost{Soft: raw * en.weight}
	}
	ex := 0.0
	if en.hard != nil {
		v.inst = inst
		ex = en.hard.Excess(v)
	}
	return instanceCost(raw, ex)
}

func positive(c Cost) bool { return c.Hard > 0 || c.Soft > 0 }

// setCost stores a new cost for an instance and keeps the per-rule totals
// and positive sets current; it returns the change.
func (s *Search) setCost(i int, inst int32, c Cost) Cost {
	old := s.cost[i][inst]
	if old == c {
		return Cost{}
	}
	s.cost[i][inst] = c
	d := c.Sub(old)
	oldNZ, newNZ := old != (Cost{}), c != (Cost{})
	switch {
	case oldNZ && !newNZ:
		s.nonzero[i]--
	case !oldNZ && newNZ:
		s.nonzero[i]++
	}
	if s.nonzero[i] == 0 {
		s.entryTotal[i] = Cost{} // exact zero, no accumulated rounding
	} else {
		s.entryTotal[i] = s.entryTotal[i].Add(d)
	}
	if positive(c) {
		s.pos[i].add(inst)
		if s.listener != nil {
			s.listener(i, inst, c)
		}
	} else {
		s.pos[i].remove(inst)
	}
	return d
}

func (s *Search) sumTotal() {
	var t Cost
	for _, c := range s.entryTotal {
		t = t.Add(c)
	}
	s.total = t
}

// exactTotal re-sums every instance (no accumulated rounding).
func (s *Search) exactTotal() Cost {
	var t Cost
	for i := range s.cost {
		for _, c := range s.cost[i] {
			t = t.Add(c)
		}
	}
	return t
}

// evalInst re-evaluates one instance into s.touched and returns the change
// against the cached cost.
func (s *Search) evalInst(i int, inst int32) Cost {
	c := s.evalRaw(i, inst)
	s.touched = append(s.touched, touch{int32(i), inst, c})
	return c.Sub(s.cost[i][inst])
}

// evaluate re-evaluates every instance a move of x between from and to
// touches (the state already shows the move) and returns the total change.
func (s *Search) evaluate(x, from, to int32) Cost {
	st := s.st
	s.touched = s.touched[:0]
	var delta Cost
	e := st.varEg[x]
	tf, tt := -1, -1
	if s.anyTierWide {
		tf, tt = st.tierLoadChanged(from, to)
	}
	for i := range s.rules {
		switch s.scope[i] {
		case ScopeEgroup:
			delta = delta.Add(s.evalInst(i, e))
		case ScopeDevice:
			if s.rules[i].tierWide && (tf >= 0 || tt >= 0) {
				for _, t := range [2]int{tf, tt} {
					if t >= 0 {
						for _, d := range st.tierDevs[t] {
							delta = delta.Add(s.evalInst(i, d))
						}
					}
				}
				for _, d := range [2]int32{from, to} {
					if d >= 0 && int(st.devTier[d]) != tf && int(st.devTier[d]) != tt {
						delta = delta.Add(s.evalInst(i, d))
					}
				}
				continue
			}
			if from >= 0 {
				delta = delta.Add(s.evalInst(i, from))
			}
			if to >= 0 && to != from {
				delta = delta.Add(s.evalInst(i, to))
			}
		case ScopeNode, ScopeRack, ScopeTier:
			a, b := int32(-1), int32(-1)
			if from >= 0 {
				a = st.domainOf(s.scope[i], from)
				delta = delta.Add(s.evalInst(i, a))
			}
			if to >= 0 {
				b = st.domainOf(s.scope[i], to)
				if b != a {
					delta = delta.Add(s.evalInst(i, b))
				}
			}
		}
	}
	return delta
}

// commit stores the costs of the last evaluation and returns the mask of
// rules whose cost went down.
func (s *Search) commit() uint64 {
	for i := range s.entryDelta {
		s.entryDelta[i] = Cost{}
	}
	for _, t := range s.touched {
		d := s.setCost(int(t.entry), t.inst, t.c)
		s.entryDelta[t.entry] = s.entryDelta[t.entry].Add(d)
	}
	var mask uint64
	for i, d := range s.entryDelta {
		if d.Less(Cost{}) {
			mask |= 1 << uint(i)
		}
	}
	s.sumTotal()
	return mask
}

// Delta returns the change in total cost if variable x moved to device to
// (the layout is left unchanged).
func (s *Search) delta(x, to int32) Cost {
	from := s.st.varDev[x]
	u := s.st.move(x, to)
	d := s.evaluate(x, from, to)
	s.st.unmove(u)
	return d
}

// touchedClear reports whether the last evaluation left every instance it
// touched without a positive cost.
func (s *Search) touchedClear() bool {
	for _, t := range s.touched {
		if positive(t.c) {
			return false
		}
	}
	return true
}

// apply moves variable x to device to, costs and journals the move, and
// records it in the plan when record is set. It returns false when the
// plan is at MaxMoves.
func (s *Search) apply(x, to int32, record bool) bool {
	if record && len(s.moves) >= s.o.MaxMoves {
		return false
	}
	st := s.st
	from := st.varDev[x]
	before := s.total
	u := st.move(x, to)
	s.evaluate(x, from, to)
	mask := s.commit()
	st.fixOrders(from)
	st.fixOrders(to)
	s.journal = append(s.journal, journalRec{u: u, recorded: record, stamp: s.varStamp[x]})
	if record {
		s.moves = append(s.moves, rawMove{x: x, from: from, to: to, before: before, after: s.total, mask: mask,
			batch: s.batch, round: s.round, group: s.group})
		s.varStamp[x] = s.pass
	}
	return true
}

// mark returns a point Rollback can return to.
func (s *Search) mark() int { return len(s.journal) }

// rollback undoes every move since mark, newest first.
func (s *Search) rollback(mark int) {
	st := s.st
	for len(s.journal) > mark {
		rec := s.journal[len(s.journal)-1]
		s.journal = s.journal[:len(s.journal)-1]
		st.unmove(rec.u)
		s.evaluate(rec.u.x, rec.u.to, rec.u.from)
		s.commit()
		st.fixOrders(rec.u.from)
		st.fixOrders(rec.u.to)
		s.varStamp[rec.u.x] = rec.stamp
		if rec.recorded {
			s.moves = s.moves[:len(s.moves)-1]
		}
	}
}

func (s *Search) full() bool { return len(s.moves) >= s.o.MaxMoves }

// zero reports whether no rule instance has a positive cost.
func (s *Search) zero() bool {
	for i := range s.pos {
		if len(s.pos[i].list) > 0 {
			return false
		}
	}
	return true
}

func (s *Search) inBatch(e int32) bool { return s.allBatch || s.egBatch[e] == s.batchStamp }

// movable reports whether variable x may move in this pass.
func (s *Search) movable(x int32) bool {
	e := s.st.varEg[x]
	return s.inBatch(e) && s.varStamp[x] != s.pass && s.st.readableSource(e)
}

func (s *Search) startBatch(egs []int32, round int) {
	s.pass++
	s.round = round
	s.batch++
	s.journal = s.journal[:0]
	if egs == nil {
		s.allBatch = true
		return
	}
	s.allBatch = false
	s.batchStamp++
	s.batchEgs = egs
	for _, e := range egs {
		s.egBatch[e] = s.batchStamp
	}
	st := s.st
	nd := len(st.devID)
	if s.batchOff == nil {
		s.batchOff = make([]int32, nd+1)
	}
	off := s.batchOff
	clear(off)
	for _, e := range egs {
		for x := st.egStart[e]; x < st.egStart[e+1]; x++ {
			if d := st.varDev[x]; d >= 0 {
				off[d+1]++
			}
		}
	}
	for d := range nd {
		off[d+1] += off[d]
	}
	s.batchVars = s.batchVars[:0]
	s.batchVars = append(s.batchVars, make([]int32, off[nd])...)
	fill := s.batchCursor(nd)
	copy(fill, off[:nd])
	for _, e := range egs {
		for x := st.egStart[e]; x < st.egStart[e+1]; x++ {
			if d := st.varDev[x]; d >= 0 {
				s.batchVars[fill[d]] = x
				fill[d]++
			}
		}
	}
}

func (s *Search) batchCursor(n int) []int32 {
	if cap(s.cursor) < n {
		s.cursor = make([]int32, n)
	}
	return s.cursor[:n]
}

// deviceVars returns the replicas on device d a visit may consider: all of
// them, or in a batch the batch's (possibly stale) entries.
func (s *Search) deviceVars(d int32) []int32 {
	if s.allBatch {
		return s.st.devVars[d]
	}
	return s.batchVars[s.batchOff[d]:s.batchOff[d+1]]
}

func (s *Search) startEscape(round int) {
	s.pass++
	s.round = round
	s.batch++
	s.allBatch = true
	s.journal = s.journal[:0]
}

// attributed returns the cost a variable carries: its egroup's rules plus
// the rules of the device, node and rack it sits on (Mirador charges a
// device-scope cost to every object on the device).
func (s *Search) attributed(x int32) Cost {
	st := s.st
	e := st.varEg[x]
	d := st.varDev[x]
	var c Cost
	for i := range s.rules {
		switch s.scope[i] {
		case ScopeEgroup:
			c = c.Add(s.cost[i][e])
		case ScopeDevice, ScopeNode, ScopeRack:
			if d >= 0 {
				c = c.Add(s.cost[i][st.domainOf(s.scope[i], d)])
			}
		}
	}
	return c
}

// egroupCost is the sum of attributed costs over an egroup's replicas.
func (s *Search) egroupCost(e int32) Cost {
	var c Cost
	for x := s.st.egStart[e]; x < s.st.egStart[e+1]; x++ {
		c = c.Add(s.attributed(x))
	}
	return c
}

// orderBatches splits the egroups into batches of at most size, worst
// offenders first (Mirador §3.4), the rest in model order; one nil batch
// means "everything".
func (s *Search) orderBatches(size int) [][]int32 {
	n := len(s.st.egID)
	if n <= size {
		return [][]int32{nil}
	}
	type keyed struct {
		e int32
		c Cost
	}
	var costly []keyed
	var rest []int32
	for e := range int32(n) {
		if c := s.egroupCost(e); positive(c) {
			costly = append(costly, keyed{e, c})
		} else {
			rest = append(rest, e)
		}
	}
	slices.SortFunc(costly, func(a, b keyed) int {
		switch {
		case b.c.Less(a.c):
			return -1
		case a.c.Less(b.c):
			return 1
		}
		return cmp.Compare(a.e, b.e)
	})
	all := make([]int32, 0, n)
	for _, k := range costly {
		all = append(all, k.e)
	}
	all = append(all, rest...)
	var out [][]int32
	for len(all) > 0 {
		k := min(size, len(all))
		out = append(out, all[:k:k])
		all = all[k:]
	}
	return out
}

// --- hints and candidates ---

// hintInstance asks the rules for hints about a costly instance. For an
// egroup, every costly egroup-scope rule speaks (they share the replicas).
func (s *Search) hintInstance(i int, inst int32, h *Hints) {
	h.reset(s.st)
	v := &s.st.view
	if s.scope[i] == ScopeEgroup {
		for j := range s.rules {
			if s.scope[j] == ScopeEgroup && s.rules[j].hinter != nil && positive(s.cost[j][inst]) {
				v.inst = inst
				s.rules[j].hinter.Hint(v, h)
			}
		}
		return
	}
	if s.rules[i].hinter != nil {
		v.inst = inst
		s.rules[i].hinter.Hint(v, h)
	}
}

// egroupHints collects the hints of x's egroup's costly egroup-scope rules
// (which tiers it wants, which domains its siblings occupy); nil if none.
func (s *Search) egroupHints(x int32) *Hints {
	e := s.st.varEg[x]
	h := &s.ehints
	h.reset(s.st)
	any := false
	v := &s.st.view
	for j := range s.rules {
		if s.scope[j] == ScopeEgroup && s.rules[j].hinter != nil && positive(s.cost[j][e]) {
			v.inst = e
			s.rules[j].hinter.Hint(v, h)
			any = true
		}
	}
	if !any {
		return nil
	}
	return h
}

type rankKey struct {
	x     int32
	group int8
	key   float64
}

func (s *Search) metric(m Metric, e int32) float64 {
	switch m {
	case MetricLoad, MetricColdness:
		return s.st.egLoad[e]
	case MetricSize:
		return float64(s.st.egSize[e])
	case MetricWorkingSet:
		return float64(s.st.egWS[e])
	}
	return 0
}

// rank orders vars by the offender hints and keeps the best limit.
func (s *Search) rank(vars []int32, h *Hints, m Metric, target float64, limit int) []int32 {
	keys := s.keyBuf[:0]
	st := s.st
	for _, x := range vars {
		k := rankKey{x: x}
		e := st.varEg[x]
		d := st.varDev[x]
		switch {
		case d >= 0 && containsInt32(h.offDevs, d):
			k.group = -3
		case d < 0:
			k.group = -2
		case st.devHealth[d] != HealthOK:
			k.group = -1
		case m == MetricColdness:
			k.key = st.egLoad[e]
		case m != MetricNone:
			if val := s.metric(m, e); val <= target {
				k.key = -val
			} else {
				k.group, k.key = 1, val
			}
		}
		keys = append(keys, k)
	}
	less := func(a, b rankKey) bool {
		if a.group != b.group {
			return a.group < b.group
		}
		return a.key < b.key
	}
	n := min(limit, len(keys))
	for i := range n {
		best := i
		for j := i + 1; j < len(keys); j++ {
			if less(keys[j], keys[best]) {
				best = j
			}
		}
		keys[i], keys[best] = keys[best], keys[i]
	}
	out := vars[:0]
	for _, k := range keys[:n] {
		out = append(out, k.x)
	}
	s.keyBuf = keys
	return out
}

func containsInt32(xs []int32, x int32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// maxScanReplicas bounds how many replicas of a node, rack or tier one
// visit looks at (the instance may hold millions).
const maxScanReplicas = 4096

// addVars appends device d's movable replicas passing the hint filters.
func (s *Search) addVars(vars []int32, d int32, h *Hints) []int32 {
	st := s.st
	for _, x := range s.deviceVars(d) {
		if len(vars) >= maxScanReplicas {
			break
		}
		if st.varDev[x] == d && s.acceptVar(x, h) {
			vars = append(vars, x)
		}
	}
	return vars
}

func (s *Search) acceptVar(x int32, h *Hints) bool {
	st := s.st
	e := st.varEg[x]
	if h.onlyBucket >= 0 && st.egBucket[e] != h.onlyBucket {
		return false
	}
	if h.onlyCold && (!st.egCold[e] || st.pinned(x)) {
		return false
	}
	return s.movable(x)
}

// variablesOf returns up to limit replicas of instance (i, inst) to try,
// best first.
func (s *Search) variablesOf(i int, inst int32, h *Hints, limit int) []int32 {
	st := s.st
	vars := s.varBuf[:0]
	switch s.scope[i] {
	case ScopeEgroup:
		for x := st.egStart[inst]; x < st.egStart[inst+1]; x++ {
			if s.acceptVar(x, h) {
				vars = append(vars, x)
			}
		}
		limit = len(vars)
	case ScopeDevice:
		vars = s.addVars(vars, inst, h)
	case ScopeNode:
		for _, d := range st.nodeDevs[inst] {
			vars = s.addVars(vars, d, h)
		}
	case ScopeRack:
		for _, d := range st.rackDevs[inst] {
			vars = s.addVars(vars, d, h)
		}
	case ScopeTier:
		// The fullest devices of the tier first.
		devs := st.ordFree[inst].devs
		for k := len(devs) - 1; k >= 0 && k >= len(devs)-8; k-- {
			vars = s.addVars(vars, devs[k], h)
		}
	}
	vars = s.rank(vars, h, h.offMetric, h.offTarget, limit)
	s.varBuf = vars
	return vars
}

// candidates returns the candidate moves for a costly instance.
func (s *Search) candidates(i int, inst int32, out []cand) []cand {
	h := &s.hints
	s.hintInstance(i, inst, h)
	if h.pull {
		return s.pullCandidates(i, inst, h, out)
	}
	vars := s.variablesOf(i, inst, h, s.o.CandidateReplicas)
	for _, x := range vars {
		var eh *Hints
		if s.scope[i] != ScopeEgroup {
			eh = s.egroupHints(x)
		}
		out = s.destinations(x, h, eh, out, s.o.CandidateDevices)
	}
	return out
}

// pullCandidates brings replicas from the top of the tier's ordering into
// the instance (an underloaded device or node).
func (s *Search) pullCandidates(i int, inst int32, h *Hints, out []cand) []cand {
	st := s.st
	var dests []int32
	switch s.scope[i] {
	case ScopeDevice:
		dests = append(dests, inst)
	case ScopeNode:
		dests = append(dests, st.nodeDevs[inst]...)
	case ScopeRack:
		dests = append(dests, st.rackDevs[inst]...)
	default:
		return out
	}
	k := s.o.CandidateDevices
	for _, dst := range dests {
		if st.devHealth[dst] != HealthOK {
			continue
		}
		t := st.devTier[dst]
		ord := &st.ordLoad[t]
		if h.pullMetric == MetricSize {
			ord = &st.ordFree[t]
		}
		// Only replicas that fit: an underloaded device may be nearly
		// full, and pulling a replica it cannot hold helps nobody.
		vars := s.varBuf[:0]
		taken, scanned := 0, 0
		for j := len(ord.devs) - 1; j >= 0 && taken < k && scanned < 4*k; j-- {
			src := ord.devs[j]
			if src == dst || s.scope[i] == ScopeNode && st.devNode[src] == st.devNode[dst] {
				continue
			}
			scanned++
			n := len(vars)
			for _, x := range s.deviceVars(src) {
				if len(vars) >= maxScanReplicas {
					break
				}
				if st.varDev[x] == src && s.acceptVar(x, h) && st.canTarget(x, dst) {
					vars = append(vars, x)
				}
			}
			if len(vars) > n {
				taken++
			}
		}
		if len(vars) == 0 {
			out = s.swapCandidates(dst, ord, h, out)
			continue
		}
		vars = s.rank(vars, h, h.pullMetric, h.pullTarget, s.o.CandidateReplicas)
		s.varBuf = vars
		for _, x := range vars {
			if s.allowedByEgroup(x, dst) {
				out = append(out, move1(x, dst))
			}
		}
	}
	return out
}

// swapCandidates handles a pulling device that is too full to take any
// replica: it pairs one of its replicas y that carries little of the
// pulled metric per byte (moved to the emptiest device that takes it)
// with a replica x from the top of the ordering that fits once y is gone.
// A single move cannot do this — y leaving alone makes the deficit worse
// — and the pair is small enough to evaluate on the spot rather than wait
// for the second pass.
func (s *Search) swapCandidates(dst int32, ord *ordering, h *Hints, out []cand) []cand {
	st := s.st
	metric := func(x int32) float64 { return s.metric(h.pullMetric, st.varEg[x]) }
	// The two replicas of dst with the least metric per byte.
	var ys [2]int32
	ny := 0
	for _, y := range s.deviceVars(dst) {
		if st.varDev[y] != dst || !s.acceptVar(y, h) {
			continue
		}
		e := st.varEg[y]
		per := metric(y) / float64(max(1, st.egSize[e]))
		if ny < len(ys) {
			ys[ny] = y
			ny++
		} else {
			worst := 0
			for k := 1; k < ny; k++ {
				if metric(ys[k])/float64(max(1, st.egSize[st.varEg[ys[k]]])) > metric(ys[worst])/float64(max(1, st.egSize[st.varEg[ys[worst]]])) {
					worst = k
				}
			}
			if per < metric(ys[worst])/float64(max(1, st.egSize[st.varEg[ys[worst]]])) {
				ys[worst] = y
			}
		}
	}
	free := st.devCap[dst] - st.devUsed[dst]
	t := st.devTier[dst]
	for _, y := range ys[:ny] {
		ey := st.varEg[y]
		yd := int32(-1)
		for _, d := range st.ordFree[t].devs {
			if d != dst && st.canTarget(y, d) && s.allowedByEgroup(y, d) {
				yd = d
				break
			}
		}
		if yd < 0 {
			continue
		}
		room := free + st.egSize[ey]
		vars := s.varBuf[:0]
		taken, scanned := 0, 0
		for j := len(ord.devs) - 1; j >= 0 && taken < s.o.CandidateDevices && scanned < 4*s.o.CandidateDevices; j-- {
			src := ord.devs[j]
			if src == dst || src == yd {
				continue
			}
			scanned++
			n := len(vars)
			for _, x := range s.deviceVars(src) {
				e := st.varEg[x]
				if len(vars) < maxScanReplicas && st.varDev[x] == src && e != ey && st.egSize[e] <= room && s.acceptVar(x, h) && !st.hasSibling(e, dst) {
					vars = append(vars, x)
				}
			}
			if len(vars) > n {
				taken++
			}
		}
		vars = s.rank(vars, h, h.pullMetric, h.pullTarget+metric(y), s.o.CandidateReplicas)
		s.varBuf = vars
		for _, x := range vars {
			if s.allowedByEgroup(x, dst) {
				out = append(out, cand{x, dst, y, yd})
			}
		}
	}
	return out
}

// allowedByEgroup applies x's egroup hints' avoid lists to a destination.
func (s *Search) allowedByEgroup(x, d int32) bool {
	eh := s.egroupHints(x)
	return eh == nil || !s.avoided(d, eh)
}

func (s *Search) avoided(d int32, h *Hints) bool {
	st := s.st
	if containsInt32(h.avoidDev, d) || containsInt32(h.avoidNode, st.devNode[d]) || containsInt32(h.avoidRack, st.devRack[d]) {
		return true
	}
	if h.avoidBucket >= 0 && s.bucketIn(h.avoidBucket, h.bucketLevel, d) {
		return true
	}
	return false
}

func (s *Search) bucketIn(b int32, lvl Scope, d int32) bool {
	st := s.st
	if lvl < ScopeDevice || lvl > ScopeRack {
		return false
	}
	if int(b) >= len(st.counters[lvl]) || st.counters[lvl][b] == nil {
		st.countBucket(lvl, b)
	}
	return st.counters[lvl][b][st.domainOf(lvl, d)] > 0
}

// destinations appends up to about 2k candidate devices for x per tier:
// hinted devices, then the head of the tier's load and free-space
// orderings (Mirador's domain priorities), skipping devices a move cannot
// target or the hints rule out.
func (s *Search) destinations(x int32, h, eh *Hints, out []cand, k int) []cand {
	st := s.st
	start := len(out)
	ok := func(d int32) bool {
		if !st.canTarget(x, d) || s.avoided(d, h) || (eh != nil && s.avoided(d, eh)) {
			return false
		}
		for _, c := range out[start:] {
			if c.d == d {
				return false
			}
		}
		return true
	}
	for _, hs := range [2]*Hints{eh, h} {
		if hs == nil {
			continue
		}
		for _, d := range hs.prefer {
			if ok(d) {
				out = append(out, move1(x, d))
			}
		}
	}
	var tiers [8]int8
	nt := 0
	addTier := func(t int8) {
		for _, u := range tiers[:nt] {
			if u == t {
				return
			}
		}
		if nt < len(tiers) {
			tiers[nt] = t
			nt++
		}
	}
	for _, hs := range [2]*Hints{eh, h} {
		if hs != nil {
			for _, t := range hs.tiers {
				addTier(t)
			}
		}
	}
	e := st.varEg[x]
	if d := st.varDev[x]; d >= 0 {
		addTier(st.devTier[d])
	} else if nt == 0 {
		vi := &st.vecs[st.egVec[e]]
		for t, n := range vi.counts {
			if n > 0 {
				addTier(int8(t))
			}
		}
		for y := st.egStart[e]; y < st.egStart[e+1]; y++ {
			if d := st.varDev[y]; d >= 0 {
				addTier(st.devTier[d])
			}
		}
		for t := range st.nTiers {
			if st.tierNames[t].ForAny(false) {
				addTier(int8(t))
			}
		}
	}
	order := h.order
	if eh != nil && order == MetricNone {
		order = eh.order
	}
	out = s.walkTiers(x, tiers[:nt], order, h.nearBucket, h.bucketLevel, ok, out, k)
	if len(out) == start {
		// Nothing on the hinted or current tiers (full, or no ok device):
		// the domain is every device, so try the other tiers, fastest
		// first; the rules decide whether a tier change is worth it.
		var rest [8]int8
		nr := 0
		for t := range st.nTiers {
			if !containsInt8(tiers[:nt], int8(t)) && nr < len(rest) {
				rest[nr] = int8(t)
				nr++
			}
		}
		out = s.walkTiers(x, rest[:nr], order, h.nearBucket, h.bucketLevel, ok, out, k)
	}
	return out
}

func containsInt8(xs []int8, x int8) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// walkTiers appends up to k candidates per domain ordering of each tier.
func (s *Search) walkTiers(x int32, tiers []int8, order Metric, near int32, nearLevel Scope, ok func(int32) bool, out []cand, k int) []cand {
	st := s.st
	for _, t := range tiers {
		if near >= 0 {
			n := 0
			for _, d := range st.ordLoad[t].devs {
				if n >= k {
					break
				}
				if s.bucketIn(near, nearLevel, d) && ok(d) {
					out = append(out, move1(x, d))
					n++
				}
			}
		}
		first, second := &st.ordLoad[t], &st.ordFree[t]
		if order == MetricSize {
			first, second = second, first
		}
		for _, o := range [2]*ordering{first, second} {
			n, scanned := 0, 0
			limit := 8*k + 32
			for _, d := range o.devs {
				if n >= k || scanned >= limit {
					break
				}
				scanned++
				if ok(d) {
					out = append(out, move1(x, d))
					n++
				}
			}
		}
	}
	return out
}

// --- reporting ---

func (s *Search) ruleName(i int) string { return s.rules[i].rule.Name() }

func (s *Search) materialize(from int) []Move {
	st := s.st
	out := make([]Move, 0, len(s.moves)-from)
	for _, m := range s.moves[from:] {
		mv := Move{Egroup: st.egID[st.varEg[m.x]], To: st.devID[m.to], Before: m.before, After: m.after,
			Batch: m.batch, Round: m.round, Group: m.group}
		if m.from >= 0 {
			mv.From = st.devID[m.from]
		}
		var names []string
		for i := range s.rules {
			if m.mask&(1<<uint(i)) != 0 {
				names = append(names, s.ruleName(i))
			}
		}
		mv.Lowers = sortedUnique(names)
		out = append(out, mv)
	}
	return out
}

func (s *Search) ruleCosts() []RuleCost {
	out := make([]RuleCost, len(s.rules))
	for i := range s.rules {
		var t Cost
		for _, c := range s.cost[i] {
			t = t.Add(c)
		}
		out[i] = RuleCost{Rule: s.ruleName(i), Before: t, ViolationsBefore: len(s.pos[i].list)}
	}
	return out
}

func (s *Search) instanceName(sc Scope, inst int32) string {
	st := s.st
	switch sc {
	case ScopeEgroup:
		return fmt.Sprint(st.egID[inst])
	case ScopeDevice:
		return string(st.devID[inst])
	case ScopeNode:
		return string(st.nodeIDs[inst])
	case ScopeRack:
		return st.rackNames[inst]
	case ScopeTier:
		return string(st.tierNames[inst])
	}
	return "?"
}

func (s *Search) unresolved() []Violation {
	var hard, soft []Violation
	for i := range s.rules {
		list := append([]int32(nil), s.pos[i].list...)
		sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
		for _, inst := range list {
			c := s.cost[i][inst]
			v := Violation{Rule: s.ruleName(i), Scope: s.scope[i], Instance: s.instanceName(s.scope[i], inst), Cost: c}
			if c.Hard > 0 {
				hard = append(hard, v)
			} else if len(soft) < MaxReported {
				soft = append(soft, v)
			}
		}
	}
	return append(hard, soft...)
}

func (s *Search) stranded() []uint64 {
	var out []uint64
	st := s.st
	for e := range int32(len(st.egID)) {
		if !st.readableSource(e) {
			out = append(out, st.egID[e])
			if len(out) >= MaxReported {
				break
			}
		}
	}
	return out
}
