package placement

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// Objective names one of OctopusFS's four placement objectives (§3.2).
type Objective string

// The four objectives.
const (
	// ObjDataBalance is f_db (Eq. 1): remaining capacity percent.
	ObjDataBalance Objective = "db"
	// ObjLoadBalance is f_lb (Eq. 3): 1/(NrConn+1).
	ObjLoadBalance Objective = "lb"
	// ObjFaultTolerance is f_ft (Eq. 5): distinct tiers, nodes, two racks.
	ObjFaultTolerance Objective = "ft"
	// ObjThroughput is f_tm (Eq. 7): log write throughput ratio.
	ObjThroughput Objective = "tm"
)

// Objectives lists all four in the paper's order.
var Objectives = []Objective{ObjDataBalance, ObjLoadBalance, ObjFaultTolerance, ObjThroughput}

func objectiveIndex(o Objective) int {
	for i, x := range Objectives {
		if x == o {
			return i
		}
	}
	return -1
}

// throughputUnitBps is the unit in which f_tm takes logarithms: MB/s, the
// unit of OctopusFS Table 2. The log ratio depends on the unit
// (log 126/log 1897 = 0.64 in MB/s but 0.75 in B/s); MB/s reproduces the
// paper's spread between HDD, SSD and memory. Throughputs below 1 MB/s
// (or unknown, 0) count as 1 MB/s, i.e. contribute 0.
const throughputUnitBps = 1e6

// tieEpsilon makes scores that differ only by floating-point noise ties;
// ties are broken uniformly at random so that identical idle devices do
// not all lose to the one with the smallest ID.
const tieEpsilon = 1e-12

// Moop is OctopusFS's multi-objective placement policy (§3.2–3.3): each
// replica goes to the media that brings the vector of objective values of
// the chosen list closest (Euclidean norm, Eq. 11) to the ideal vector z*
// (Eqs. 2, 4, 6, 8), greedily one replica at a time (Algorithms 1, 2).
// Pruning: the first replica goes on the client's node when it is
// co-located; after the first replica its rack is pruned and after the
// second the search stays on those two racks. With a subset of Objectives
// it is one of the paper's single-objective comparison policies.
type Moop struct {
	// Objectives is the subset of objectives in the criterion; nil or
	// empty means all four.
	Objectives []Objective
	// AllowMem lets unspecified replicas use the memory tier, for at most
	// a third of a set. Off by default: memory is volatile.
	AllowMem bool
	// LocalFirst puts the first replica on the client's node when possible.
	LocalFirst bool
}

var _ tracedPolicy = (*Moop)(nil)

// Name implements Policy.
func (m *Moop) Name() string {
	if len(m.Objectives) == 0 || len(m.Objectives) == len(Objectives) {
		return "moop"
	}
	parts := make([]string, len(m.Objectives))
	for i, o := range m.Objectives {
		parts[i] = string(o)
	}
	return "moop(" + strings.Join(parts, ",") + ")"
}

// Place implements Policy.
func (m *Moop) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	return m.placeTraced(s, req, rng, nil)
}

func (m *Moop) uses() [4]bool {
	var use [4]bool
	if len(m.Objectives) == 0 {
		return [4]bool{true, true, true, true}
	}
	for _, o := range m.Objectives {
		if i := objectiveIndex(o); i >= 0 {
			use[i] = true
		}
	}
	return use
}

// moopModel holds the per-decision constants of the formulation: the
// cluster-wide maxima behind z* and the sizes k, n, t of Eq. 5.
type moopModel struct {
	s   *model.Snapshot
	use [4]bool
	bs  float64
	// maxRem is max Rem/Cap (Eq. 2); lbStar is 1/min(NrConn+1) (Eq. 4);
	// logMaxW is log max WThru (Eq. 7), in throughputUnitBps.
	maxRem  float64
	lbStar  float64
	logMaxW float64
	k, n, t int
	// tm cache (see tmTerm).
	tmW, tmV    [8]float64
	tmN, tmNext int
}

// newMoopModel computes the constants over "all available storage media":
// online devices on the tiers this decision may use.
func newMoopModel(s *model.Snapshot, use [4]bool, bytes int64, tierOK func(model.Tier) bool) *moopModel {
	mm := &moopModel{s: s, use: use, bs: float64(bytes), n: s.OnlineNodes(), t: s.OnlineRacks()}
	minConn := math.MaxInt
	maxW := 0.0
	for _, t := range s.OnlineTiers() {
		if !tierOK(t) {
			continue
		}
		ts := s.OnlineTierStats(t)
		mm.k++
		mm.maxRem = math.Max(mm.maxRem, ts.MaxFreeFraction)
		minConn = min(minConn, ts.MinActiveStreams)
		maxW = math.Max(maxW, ts.MaxWriteBps)
	}
	if minConn == math.MaxInt {
		minConn = 0
	}
	mm.lbStar = 1 / float64(minConn+1)
	mm.logMaxW = math.Log(math.Max(maxW/throughputUnitBps, 1))
	return mm
}

// terms returns device i's contribution to f_db, f_lb and f_tm. A new
// replica subtracts the block size from Rem (Eq. 1); an existing one
// already holds the block, so its Rem already accounts for it.
func (mm *moopModel) terms(i int, isNew bool) (db, lb, tm float64) {
	d := &mm.s.Devices[i]
	if d.CapacityBytes > 0 {
		rem := float64(d.FreeBytes())
		if isNew {
			rem -= mm.bs
		}
		db = rem / float64(d.CapacityBytes)
	}
	lb = 1 / float64(max(d.ActiveStreams, 0)+1)
	return db, lb, mm.tmTerm(d.WriteBps)
}

// tmTerm is one media's term of Eq. 7. Throughput is measured per tier
// (OctopusFS averages it per tier), so a handful of distinct values
// recur; a tiny cache saves a logarithm per option, which is most of the
// cost of evaluating an option.
func (mm *moopModel) tmTerm(w float64) float64 {
	if mm.logMaxW <= 0 {
		return 1 // no throughput known anywhere: the objective is neutral
	}
	for k := range mm.tmN {
		if mm.tmW[k] == w {
			return mm.tmV[k]
		}
	}
	v := 0.0
	if x := w / throughputUnitBps; x > 1 {
		v = math.Log(x) / mm.logMaxW
	}
	k := mm.tmNext % len(mm.tmW)
	mm.tmW[k], mm.tmV[k] = w, v
	mm.tmNext++
	mm.tmN = min(mm.tmN+1, len(mm.tmW))
	return v
}

// moopSet is the running aggregate of a chosen list: sums of the additive
// objectives and the distinct tiers, nodes and racks.
type moopSet struct {
	m                int
	db, lb, tm       float64
	tiers            []model.Tier
	nodes, racks     []int
	tierBuf          [model.MaxReplicas * 2]model.Tier
	nodeBuf, rackBuf [model.MaxReplicas * 2]int
}

func newMoopSet() *moopSet {
	ms := &moopSet{}
	ms.tiers, ms.nodes, ms.racks = ms.tierBuf[:0], ms.nodeBuf[:0], ms.rackBuf[:0]
	return ms
}

func containsTier(ts []model.Tier, t model.Tier) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func (ms *moopSet) add(mm *moopModel, i int, isNew bool) {
	db, lb, tm := mm.terms(i, isNew)
	ms.m++
	ms.db += db
	ms.lb += lb
	ms.tm += tm
	d := &mm.s.Devices[i]
	if !containsTier(ms.tiers, d.Tier) {
		ms.tiers = append(ms.tiers, d.Tier)
	}
	if n := mm.s.DeviceNodeOrdinal(i); !containsInt(ms.nodes, n) {
		ms.nodes = append(ms.nodes, n)
	}
	if r := mm.s.DeviceRackOrdinal(i); !containsInt(ms.racks, r) {
		ms.racks = append(ms.racks, r)
	}
}

// eval returns f(m ∪ {i}) (Eq. 9) and its distance to z*(m ∪ {i}) (Eq. 11).
// i < 0 evaluates the set as it is (replica removal, §5).
func (mm *moopModel) eval(ms *moopSet, i int) (f [4]float64, score float64) {
	f, d2 := mm.evalSq(ms, i)
	return f, math.Sqrt(d2)
}

// evalSq is eval with the squared distance, which orders options the same
// way without a square root per option.
func (mm *moopModel) evalSq(ms *moopSet, i int) (f [4]float64, dist2 float64) {
	m := ms.m
	db, lb, tm := ms.db, ms.lb, ms.tm
	nt, nn, nr := len(ms.tiers), len(ms.nodes), len(ms.racks)
	if i >= 0 {
		m++
		a, b, c := mm.terms(i, true)
		db, lb, tm = db+a, lb+b, tm+c
		d := &mm.s.Devices[i]
		if !containsTier(ms.tiers, d.Tier) {
			nt++
		}
		if !containsInt(ms.nodes, mm.s.DeviceNodeOrdinal(i)) {
			nn++
		}
		if !containsInt(ms.racks, mm.s.DeviceRackOrdinal(i)) {
			nr++
		}
	}
	rackTerm := 1.0
	if mm.t != 1 {
		x := nr - 2
		if x < 0 {
			x = -x
		}
		rackTerm = 1 / float64(x+1)
	}
	f = [4]float64{db, lb, ratio(nt, m, mm.k) + ratio(nn, m, mm.n) + rackTerm, tm}
	fm := float64(m)
	z := [4]float64{fm * mm.maxRem, fm * mm.lbStar, 3, fm}
	for j := range f {
		if mm.use[j] {
			dj := f[j] - z[j]
			dist2 += dj * dj
		}
	}
	return f, dist2
}

// ratio is x/min(a, b) (the fractions of Eq. 5), 1 when the minimum is 0.
func ratio(x, a, b int) float64 {
	if d := min(a, b); d > 0 {
		return float64(x) / float64(d)
	}
	return 1
}

// best tracks the minimum score with uniform random tie-breaking.
type best struct {
	i     int
	score float64
	ties  int
}

func (b *best) offer(i int, score float64, rng *rand.Rand) {
	eps := tieEpsilon
	if b.score > 1 {
		eps *= b.score
	}
	switch {
	case b.i < 0 || score < b.score-eps:
		b.i, b.score, b.ties = i, score, 1
	case score <= b.score+eps:
		b.ties++
		if rng.IntN(b.ties) == 0 {
			b.i = i
		}
	}
}

func (m *Moop) tierOK(req Request) func(model.Tier) bool {
	anyN := req.Vector.Count(model.TierAny)
	return func(t model.Tier) bool {
		if req.Vector.Count(t) > 0 {
			return true
		}
		if anyN == 0 {
			return false
		}
		return t.ForAny(m.AllowMem)
	}
}

func (m *Moop) placeTraced(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer) ([]model.Replica, error) {
	if err := checkRequest(s, req); err != nil {
		return nil, err
	}
	st := newState(s, req)
	st.memAny = m.AllowMem
	tierOK := m.tierOK(req)
	mm := newMoopModel(s, m.uses(), req.Bytes, tierOK)
	ms := newMoopSet()
	for _, p := range st.picks {
		if p.dev >= 0 && s.DeviceOnline(p.dev) {
			ms.add(mm, p.dev, false)
		}
	}
	var rackBuf [model.MaxReplicas * 2]int
	for _, t := range slots(req.Vector) {
		var pools [][]int
		if t != model.TierAny {
			pools = [][]int{s.TierDevices(t)}
		} else {
			for _, tt := range s.OnlineTiers() {
				if tierOK(tt) {
					pools = append(pools, s.TierDevices(tt))
				}
			}
		}
		if tr != nil {
			tr.beginSlot(st, t, pools, []string{"f_db", "f_lb", "f_ft", "f_tm", "score"}, func(i int) []float64 {
				f, sc := mm.eval(ms, i)
				return []float64{f[0], f[1], f[2], f[3], sc}
			})
		}
		// GenOptions + SolveMoop in one pass. Options are the suitable
		// devices; pruning is a preference, so the pass keeps the best
		// pruned option and the best overall and falls back when pruning
		// leaves nothing (e.g. the only SSDs are on one rack).
		local, pruned, all := best{i: -1}, best{i: -1}, best{i: -1}
		if m.LocalFirst && st.localWanted() {
			for _, i := range st.clientDevs {
				if st.ok(i, t) && (t != model.TierAny || tierOK(s.Devices[i].Tier)) {
					_, sc := mm.evalSq(ms, i)
					local.offer(i, sc, rng)
				}
			}
		}
		if local.i < 0 {
			used := st.racksUsed(rackBuf[:0])
			// Pruned options first; evaluate the rest only when pruning
			// leaves nothing, so the third replica (restricted to two
			// racks) scans a fraction of the cluster.
			for _, pool := range pools {
				for _, i := range pool {
					if st.twoRackOK(i, used) && st.ok(i, t) {
						_, sc := mm.evalSq(ms, i)
						pruned.offer(i, sc, rng)
					}
				}
			}
			if pruned.i < 0 {
				for _, pool := range pools {
					for _, i := range pool {
						if st.ok(i, t) {
							_, sc := mm.evalSq(ms, i)
							all.offer(i, sc, rng)
						}
					}
				}
			}
		}
		pickI := local.i
		if pickI < 0 {
			pickI = pruned.i
		}
		if tr != nil && pickI >= 0 {
			used := st.racksUsed(rackBuf[:0])
			tr.prunedWhere(func(i int) string {
				switch {
				case local.i >= 0 && s.Devices[i].Node != req.Client:
					return "pruned: client's node first"
				case local.i < 0 && pruned.i >= 0 && !st.twoRackOK(i, used):
					return "pruned: two racks"
				}
				return ""
			})
		}
		if pickI < 0 {
			pickI = all.i
		}
		if pickI < 0 {
			return nil, st.explainFailure(t)
		}
		st.take(pickI)
		ms.add(mm, pickI, true)
		if tr != nil {
			tr.choose(pickI)
		}
	}
	return st.chosen(), nil
}

// ScoreSet returns the Eq. 11 distance of a replica set from the ideal
// vector, as replica removal (§5) compares candidate sets; lower is
// better. Replicas on unknown devices are ignored.
func (m *Moop) ScoreSet(s *model.Snapshot, replicas []model.Replica) float64 {
	tiers := map[model.Tier]bool{}
	for _, r := range replicas {
		tiers[r.Tier] = true
	}
	mm := newMoopModel(s, m.uses(), 0, func(t model.Tier) bool {
		return tiers[t] || t.ForAny(m.AllowMem)
	})
	ms := newMoopSet()
	for _, r := range replicas {
		if i, ok := s.DeviceIndex(r.Device); ok {
			ms.add(mm, i, false)
		}
	}
	_, sc := mm.eval(ms, -1)
	return sc
}
