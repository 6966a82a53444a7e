package plan

import (
	"fmt"
	"sort"

	"github.com/terrace-storage/terrace/internal/model"
)

// state is the solver's working copy of the model, in flat arrays indexed
// by small integers so that a move and its cost delta touch a handful of
// cache lines and allocate nothing. Devices, egroups, nodes, racks, tiers
// and buckets are numbered densely; a variable is one replica slot of an
// egroup (slots beyond the recorded replicas are missing replicas, device
// -1).
//
// Everything a rule may read through View is an aggregate the state keeps
// current on every move: per-device used/load/working set/replica lists,
// per-node working set, per-tier online totals and cold bytes, and
// per-domain bucket counters for the buckets rules name.
type state struct {
	m *Model

	// tiers: union of device tiers and vector tiers, fastest first.
	tierNames []model.Tier
	tierIdx   map[model.Tier]int
	nTiers    int

	// devices (static)
	devID     []model.DeviceID
	devIdx    map[model.DeviceID]int32
	devTier   []int8
	devNode   []int32
	devRack   []int32
	devHealth []Health
	devCap    []int64
	// devices (dynamic)
	devUsed []int64
	devLoad []float64
	devWS   []int64
	devVars [][]int32

	nodeIDs     []model.NodeID
	nodeDevs    [][]int32
	nodeWS      []int64
	nodeTierCap []int64 // [node*nTiers+tier]: capacity of the node's ok devices
	rackNames   []string
	rackDevs    [][]int32
	onlineNodes int
	onlineRacks int

	// tiers: totals over ok devices
	tierDevs    [][]int32 // every device of the tier, any health
	tierOnline  []int32
	tierCap     []int64
	tierUsed    []int64
	tierUsed0   []int64
	tierLoad    []float64
	tierCold    []int64
	slowestTier int

	// egroups
	egID     []uint64
	egSize   []int64
	egLoad   []float64
	egWS     []int64
	egBucket []int32
	egVec    []int32
	egCold   []bool
	egStart  []int32
	vecs     []vecInfo
	vecModel []model.Vector

	// variables
	varEg  []int32
	varDev []int32
	varPos []int32

	// buckets
	bucketNames []string
	bucketIdx   map[string]int32
	counters    [numScopes][][]int32 // [level][bucket] -> per-domain count, nil if not counted

	// domain orderings of ok devices per tier
	ordLoad []ordering
	ordFree []ordering

	view View
}

// vecInfo is an interned replication vector over tier indexes.
type vecInfo struct {
	counts []int8 // per tier index
	any    int8
	total  int8
}

func newState(m *Model, rules *RuleSet) (*state, error) {
	devIdx, replicaDevs, err := m.validate()
	if err != nil {
		return nil, err
	}
	s := &state{m: m, tierIdx: map[model.Tier]int{}, devIdx: devIdx, bucketIdx: map[string]int32{}}
	s.view.s = s

	// Tiers.
	seen := map[model.Tier]bool{}
	for _, d := range m.Devices {
		seen[d.Tier] = true
	}
	var vectors []knownVector
	for i := range m.Egroups {
		v := m.Egroups[i].Vector
		if findKnown(vectors, v) >= 0 {
			continue
		}
		if len(vectors) < maxDistinctVectors {
			vectors = append(vectors, newKnown(v))
		}
		for t, n := range v.Counts {
			if n > 0 && t != model.TierAny {
				seen[t] = true
			}
		}
	}
	for t := range seen {
		s.tierNames = append(s.tierNames, t)
	}
	model.SortTiers(s.tierNames)
	if len(s.tierNames) > 127 {
		return nil, fmt.Errorf("%w: %d tiers, at most 127", ErrInvalidModel, len(s.tierNames))
	}
	for i, t := range s.tierNames {
		s.tierIdx[t] = i
	}
	s.nTiers = len(s.tierNames)

	// Devices, nodes, racks.
	nd := len(m.Devices)
	s.devID = make([]model.DeviceID, nd)
	s.devTier = make([]int8, nd)
	s.devNode = make([]int32, nd)
	s.devRack = make([]int32, nd)
	s.devHealth = make([]Health, nd)
	s.devCap = make([]int64, nd)
	s.devUsed = make([]int64, nd)
	s.devLoad = make([]float64, nd)
	s.devWS = make([]int64, nd)
	s.devVars = make([][]int32, nd)
	nodeIdx := map[model.NodeID]int32{}
	rackIdx := map[string]int32{}
	for i, d := range m.Devices {
		s.devID[i] = d.ID
		s.devTier[i] = int8(s.tierIdx[d.Tier])
		n, ok := nodeIdx[d.Node]
		if !ok {
			n = int32(len(s.nodeIDs))
			nodeIdx[d.Node] = n
			s.nodeIDs = append(s.nodeIDs, d.Node)
			s.nodeDevs = append(s.nodeDevs, nil)
		}
		s.devNode[i] = n
		s.nodeDevs[n] = append(s.nodeDevs[n], int32(i))
		r, ok := rackIdx[d.Rack]
		if !ok {
			r = int32(len(s.rackNames))
			rackIdx[d.Rack] = r
			s.rackNames = append(s.rackNames, d.Rack)
			s.rackDevs = append(s.rackDevs, nil)
		}
		s.devRack[i] = r
		s.rackDevs[r] = append(s.rackDevs[r], int32(i))
		s.devHealth[i] = d.Health
		s.devCap[i] = d.CapacityBytes
		s.devUsed[i] = d.UsedBytes
		s.devLoad[i] = d.Load
	}
	s.nodeWS = make([]int64, len(s.nodeIDs))
	s.nodeTierCap = make([]int64, len(s.nodeIDs)*s.nTiers)
	onlineNode := make([]bool, len(s.nodeIDs))
	onlineRack := make([]bool, len(s.rackNames))
	s.tierDevs = make([][]int32, s.nTiers)
	s.tierOnline = make([]int32, s.nTiers)
	s.tierCap = make([]int64, s.nTiers)
	s.tierUsed = make([]int64, s.nTiers)
	s.tierLoad = make([]float64, s.nTiers)
	s.tierCold = make([]int64, s.nTiers)
	for i := range m.Devices {
		t := s.devTier[i]
		s.tierDevs[t] = append(s.tierDevs[t], int32(i))
		if s.devHealth[i] != HealthOK {
			continue
		}
		onlineNode[s.devNode[i]] = true
		onlineRack[s.devRack[i]] = true
		s.tierOnline[t]++
		s.tierCap[t] += s.devCap[i]
		s.tierUsed[t] += s.devUsed[i]
		s.tierLoad[t] += s.devLoad[i]
		s.nodeTierCap[int(s.devNode[i])*s.nTiers+int(t)] += s.devCap[i]
	}
	s.tierUsed0 = append([]int64(nil), s.tierUsed...)
	for _, b := range onlineNode {
		if b {
			s.onlineNodes++
		}
	}
	for _, b := range onlineRack {
		if b {
			s.onlineRacks++
		}
	}
	s.slowestTier = -1
	for t := s.nTiers - 1; t >= 0; t-- {
		if s.tierOnline[t] > 0 {
			s.slowestTier = t
			break
		}
	}

	// Egroups and variables.
	ne := len(m.Egroups)
	s.egID = make([]uint64, ne)
	s.egSize = make([]int64, ne)
	s.egLoad = make([]float64, ne)
	s.egWS = make([]int64, ne)
	s.egBucket = make([]int32, ne)
	s.egVec = make([]int32, ne)
	s.egCold = make([]bool, ne)
	s.egStart = make([]int32, ne+1)
	nvars := 0
	for i := range m.Egroups {
		e := &m.Egroups[i]
		s.egStart[i] = int32(nvars)
		nvars += max(len(e.Replicas), e.Vector.Total())
	}
	s.egStart[ne] = int32(nvars)
	s.varEg = make([]int32, nvars)
	s.varDev = make([]int32, nvars)
	s.varPos = make([]int32, nvars)
	var vecKey map[string]int32
	var known []knownVector
	perDev := make([]int32, nd)
	for _, d := range replicaDevs {
		perDev[d]++
	}
	rep := 0
	for d := range s.devVars {
		s.devVars[d] = make([]int32, 0, perDev[d]+perDev[d]/4+2)
	}
	for i := range m.Egroups {
		e := &m.Egroups[i]
		s.egID[i] = e.ID
		s.egSize[i] = e.SizeBytes
		s.egLoad[i] = e.Load
		s.egWS[i] = e.WorkingSetBytes
		s.egCold[i] = e.Load <= m.ColdLoad
		b, ok := s.bucketIdx[e.Bucket]
		if !ok {
			b = int32(len(s.bucketNames))
			s.bucketIdx[e.Bucket] = b
			s.bucketNames = append(s.bucketNames, e.Bucket)
		}
		s.egBucket[i] = b
		// Interning compares counts against the known vectors (a cluster
		// has a handful); past maxDistinctVectors a string-keyed map takes
		// over so an unusual model stays linear.
		var v int32
		if len(s.vecModel) < maxDistinctVectors {
			v = int32(findKnown(known, e.Vector))
		} else {
			if vecKey == nil {
				vecKey = map[string]int32{}
				for k, vm := range s.vecModel {
					vecKey[vm.String()] = int32(k)
				}
			}
			var ok bool
			if v, ok = vecKey[e.Vector.String()]; !ok {
				v = -1
			}
		}
		if v < 0 {
			if vecKey != nil {
				vecKey[e.Vector.String()] = int32(len(s.vecs))
			}
			v = int32(len(s.vecs))
			vi := vecInfo{counts: make([]int8, s.nTiers)}
			for t, n := range e.Vector.Counts {
				if t == model.TierAny {
					vi.any = int8(n)
				} else if n > 0 {
					vi.counts[s.tierIdx[t]] = int8(n)
				}
				vi.total += int8(n)
			}
			s.vecs = append(s.vecs, vi)
			s.vecModel = append(s.vecModel, e.Vector)
			known = append(known, newKnown(e.Vector))
		}
		s.egVec[i] = v
		x := s.egStart[i]
		for range e.Replicas {
			d := replicaDevs[rep]
			rep++
			s.varEg[x] = int32(i)
			s.varDev[x] = d
			s.varPos[x] = int32(len(s.devVars[d]))
			s.devVars[d] = append(s.devVars[d], x)
			s.devWS[d] += e.WorkingSetBytes
			if s.devHealth[d] != HealthFailed {
				s.nodeWS[s.devNode[d]] += e.WorkingSetBytes
			}
			x++
		}
		for ; x < s.egStart[i+1]; x++ {
			s.varEg[x] = int32(i)
			s.varDev[x] = -1
			s.varPos[x] = -1
		}
		s.addCold(int32(i), 1)
	}

	// Bucket counters for the buckets rules read.
	for i := range rules.entries {
		br, ok := rules.entries[i].rule.(BucketRule)
		if !ok {
			continue
		}
		for _, name := range br.Buckets() {
			b, ok := s.bucketIdx[name]
			if !ok {
				continue // no egroup in it: every count is 0
			}
			for lvl := ScopeDevice; lvl <= ScopeRack; lvl++ {
				s.countBucket(lvl, b)
			}
		}
	}

	// Domain orderings.
	s.ordLoad = make([]ordering, s.nTiers)
	s.ordFree = make([]ordering, s.nTiers)
	for t := range s.nTiers {
		s.ordLoad[t] = newOrdering(s, s.tierDevs[t], s.lessLoad)
		s.ordFree[t] = newOrdering(s, s.tierDevs[t], s.lessFull)
	}
	return s, nil
}

func (s *state) countBucket(lvl Scope, b int32) {
	for len(s.counters[lvl]) <= int(b) {
		s.counters[lvl] = append(s.counters[lvl], nil)
	}
	if s.counters[lvl][b] != nil {
		return
	}
	c := make([]int32, s.domains(lvl))
	for x, d := range s.varDev {
		if d >= 0 && s.devHealth[d] != HealthFailed && s.egBucket[s.varEg[x]] == b {
			c[s.domainOf(lvl, d)]++
		}
	}
	s.counters[lvl][b] = c
}

func (s *state) domains(lvl Scope) int {
	switch lvl {
	case ScopeEgroup:
		return len(s.egID)
	case ScopeDevice:
		return len(s.devID)
	case ScopeNode:
		return len(s.nodeIDs)
	case ScopeRack:
		return len(s.rackNames)
	case ScopeTier:
		return s.nTiers
	}
	return 0
}

func (s *state) domainOf(lvl Scope, d int32) int32 {
	switch lvl {
	case ScopeNode:
		return s.devNode[d]
	case ScopeRack:
		return s.devRack[d]
	case ScopeTier:
		return int32(s.devTier[d])
	}
	return d
}

func (s *state) tierIndex(t model.Tier) int {
	if i, ok := s.tierIdx[t]; ok {
		return i
	}
	return -1
}

func (s *state) bucketIndex(name string) int32 {
	if b, ok := s.bucketIdx[name]; ok {
		return b
	}
	return -1
}

// addCold adds (sign 1) or removes (sign −1) egroup e's contribution to
// the tiers' cold bytes: the bytes of a cold egroup's replicas on ok
// devices beyond what its vector pins to each tier.
func (s *state) addCold(e int32, sign int64) {
	if !s.egCold[e] {
		return
	}
	var on [model.MaxReplicas]int8
	var tiers [model.MaxReplicas]int8
	n := 0
	for x := s.egStart[e]; x < s.egStart[e+1]; x++ {
		d := s.varDev[x]
		if d < 0 || s.devHealth[d] != HealthOK {
			continue
		}
		t := s.devTier[d]
		j := 0
		for j < n && tiers[j] != t {
			j++
		}
		if j == n {
			tiers[n] = t
			n++
		}
		on[j]++
	}
	vi := &s.vecs[s.egVec[e]]
	for j := range n {
		if movable := int64(on[j]) - int64(vi.counts[tiers[j]]); movable > 0 {
			s.tierCold[tiers[j]] += sign * movable * s.egSize[e]
		}
	}
}

// undo restores the state before one move exactly (floating-point loads
// are restored from saved values, not recomputed, so a tentative move and
// its undo leave no rounding behind).
type undo struct {
	x, from, to  int32
	posFrom      int32
	loadFrom     float64
	loadTo       float64
	tierLoadFrom float64
	tierLoadTo   float64
}

// move reassigns variable x to device to (−1 clears it) and updates every
// aggregate. It does not touch costs or orderings.
func (s *state) move(x, to int32) undo {
	e := s.varEg[x]
	from := s.varDev[x]
	u := undo{x: x, from: from, to: to, posFrom: -1}
	if from >= 0 {
		u.loadFrom = s.devLoad[from]
		u.tierLoadFrom = s.tierLoad[s.devTier[from]]
	}
	if to >= 0 {
		u.loadTo = s.devLoad[to]
		u.tierLoadTo = s.tierLoad[s.devTier[to]]
	}
	s.addCold(e, -1)
	size, load, ws, b := s.egSize[e], s.egLoad[e], s.egWS[e], s.egBucket[e]
	if from >= 0 {
		u.posFrom = s.varPos[x]
		list := s.devVars[from]
		last := list[len(list)-1]
		list[u.posFrom] = last
		s.varPos[last] = u.posFrom
		s.devVars[from] = list[:len(list)-1]
		s.devUsed[from] -= size
		s.devLoad[from] -= load
		s.devWS[from] -= ws
		if s.devHealth[from] != HealthFailed {
			s.nodeWS[s.devNode[from]] -= ws
			s.bumpBucket(b, from, -1)
		}
		if s.devHealth[from] == HealthOK {
			t := s.devTier[from]
			s.tierUsed[t] -= size
			s.tierLoad[t] -= load
		}
	}
	s.varDev[x] = to
	if to >= 0 {
		s.varPos[x] = int32(len(s.devVars[to]))
		s.devVars[to] = append(s.devVars[to], x)
		s.devUsed[to] += size
		s.devLoad[to] += load
		s.devWS[to] += ws
		if s.devHealth[to] != HealthFailed {
			s.nodeWS[s.devNode[to]] += ws
			s.bumpBucket(b, to, 1)
		}
		if s.devHealth[to] == HealthOK {
			t := s.devTier[to]
			s.tierUsed[t] += size
			s.tierLoad[t] += load
		}
	} else {
		s.varPos[x] = -1
	}
	if from >= 0 && to >= 0 && s.devHealth[from] == HealthOK && s.devHealth[to] == HealthOK && s.devTier[from] == s.devTier[to] {
		// Same tier: the total is unchanged; keep it bit-exact.
		s.tierLoad[s.devTier[from]] = u.tierLoadFrom
	}
	s.addCold(e, 1)
	return u
}

// unmove reverts the most recent move exactly (moves are undone LIFO).
func (s *state) unmove(u undo) {
	x, from, to := u.x, u.from, u.to
	e := s.varEg[x]
	s.addCold(e, -1)
	size, ws, b := s.egSize[e], s.egWS[e], s.egBucket[e]
	if to >= 0 {
		list := s.devVars[to]
		s.devVars[to] = list[:len(list)-1] // x was appended last
		s.devUsed[to] -= size
		s.devWS[to] -= ws
		if s.devHealth[to] != HealthFailed {
			s.nodeWS[s.devNode[to]] -= ws
			s.bumpBucket(b, to, -1)
		}
		if s.devHealth[to] == HealthOK {
			s.tierUsed[s.devTier[to]] -= size
		}
		s.devLoad[to] = u.loadTo
		s.tierLoad[s.devTier[to]] = u.tierLoadTo
	}
	s.varDev[x] = from
	if from >= 0 {
		list := s.devVars[from]
		if int(u.posFrom) == len(list) {
			list = append(list, x)
		} else {
			moved := list[u.posFrom]
			list = append(list, moved)
			s.varPos[moved] = int32(len(list) - 1)
			list[u.posFrom] = x
		}
		s.devVars[from] = list
		s.varPos[x] = u.posFrom
		s.devUsed[from] += size
		s.devWS[from] += ws
		if s.devHealth[from] != HealthFailed {
			s.nodeWS[s.devNode[from]] += ws
			s.bumpBucket(b, from, 1)
		}
		if s.devHealth[from] == HealthOK {
			s.tierUsed[s.devTier[from]] += size
		}
		s.devLoad[from] = u.loadFrom
		s.tierLoad[s.devTier[from]] = u.tierLoadFrom
	} else {
		s.varPos[x] = -1
	}
	s.addCold(e, 1)
}

func (s *state) bumpBucket(b, d int32, delta int32) {
	for lvl := ScopeDevice; lvl <= ScopeRack; lvl++ {
		cs := s.counters[lvl]
		if int(b) < len(cs) && cs[b] != nil {
			cs[b][s.domainOf(lvl, d)] += delta
		}
	}
}

// tierLoadChanged reports whether a move between from and to changes any
// tier's load total, and which tiers (−1 for none).
func (s *state) tierLoadChanged(from, to int32) (int, int) {
	tf, tt := -1, -1
	if from >= 0 && s.devHealth[from] == HealthOK {
		tf = int(s.devTier[from])
	}
	if to >= 0 && s.devHealth[to] == HealthOK {
		tt = int(s.devTier[to])
	}
	if tf == tt {
		return -1, -1
	}
	return tf, tt
}

// hasSibling reports whether egroup e already has a replica on device d.
func (s *state) hasSibling(e, d int32) bool {
	for x := s.egStart[e]; x < s.egStart[e+1]; x++ {
		if s.varDev[x] == d {
			return true
		}
	}
	return false
}

// readableSource reports whether egroup e has a replica a copy can read.
func (s *state) readableSource(e int32) bool {
	for x := s.egStart[e]; x < s.egStart[e+1]; x++ {
		if d := s.varDev[x]; d >= 0 && s.devHealth[d].readable() {
			return true
		}
	}
	return false
}

// fits reports whether egroup e's bytes fit on device d now.
func (s *state) fits(e, d int32) bool {
	return s.devUsed[d]+s.egSize[e] <= s.devCap[d]
}

// canTarget reports whether variable x may be copied to device d: d is
// healthy, has room, holds no sibling, and the egroup has a readable
// replica to copy from. These are physical facts, not policy: no rule set
// can make the solver target a failed, full or draining device.
func (s *state) canTarget(x, d int32) bool {
	e := s.varEg[x]
	return d != s.varDev[x] && s.devHealth[d] == HealthOK && s.fits(e, d) && !s.hasSibling(e, d)
}

// pinned reports whether the replica x is pinned to its tier by the
// vector (the tier holds no more replicas than the vector names for it).
func (s *state) pinned(x int32) bool {
	d := s.varDev[x]
	if d < 0 {
		return false
	}
	e := s.varEg[x]
	t := s.devTier[d]
	want := s.vecs[s.egVec[e]].counts[t]
	if want == 0 {
		return false
	}
	n := int8(0)
	for y := s.egStart[e]; y < s.egStart[e+1]; y++ {
		if dd := s.varDev[y]; dd >= 0 && s.devTier[dd] == t && s.devHealth[dd] == HealthOK {
			n++
		}
	}
	return n <= want
}

func (s *state) lessLoad(a, b int32) bool {
	if s.devLoad[a] != s.devLoad[b] {
		return s.devLoad[a] < s.devLoad[b]
	}
	return a < b
}

func (s *state) usedFrac(d int32) float64 {
	if s.devCap[d] <= 0 {
		return 2
	}
	return float64(s.devUsed[d]) / float64(s.devCap[d])
}

func (s *state) lessFull(a, b int32) bool {
	fa, fb := s.usedFrac(a), s.usedFrac(b)
	if fa != fb {
		return fa < fb
	}
	return a < b
}

// ordering keeps a tier's ok devices sorted by one key (Mirador's domain
// priority). A move changes two devices' keys by one egroup's worth, so a
// device moves a short way: repositioning by adjacent swaps is O(distance)
// and needs no allocation, unlike re-sorting or a balanced tree.
type ordering struct {
	devs []int32
	pos  []int32 // by device index; −1 when the device is not in this ordering
	less func(a, b int32) bool
}

func newOrdering(s *state, devs []int32, less func(a, b int32) bool) ordering {
	o := ordering{pos: make([]int32, len(s.devID)), less: less}
	for i := range o.pos {
		o.pos[i] = -1
	}
	for _, d := range devs {
		if s.devHealth[d] == HealthOK {
			o.devs = append(o.devs, d)
		}
	}
	sort.Slice(o.devs, func(i, j int) bool { return less(o.devs[i], o.devs[j]) })
	for i, d := range o.devs {
		o.pos[d] = int32(i)
	}
	return o
}

// fix restores the order after device d's key changed.
func (o *ordering) fix(d int32) {
	i := o.pos[d]
	if i < 0 {
		return
	}
	for i > 0 && o.less(d, o.devs[i-1]) {
		o.devs[i] = o.devs[i-1]
		o.pos[o.devs[i]] = i
		i--
	}
	for int(i) < len(o.devs)-1 && o.less(o.devs[i+1], d) {
		o.devs[i] = o.devs[i+1]
		o.pos[o.devs[i]] = i
		i++
	}
	o.devs[i] = d
	o.pos[d] = i
}

func (s *state) fixOrders(d int32) {
	if d < 0 || s.devHealth[d] != HealthOK {
		return
	}
	t := s.devTier[d]
	s.ordLoad[t].fix(d)
	s.ordFree[t].fix(d)
}
