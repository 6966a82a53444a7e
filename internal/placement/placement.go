package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// MaxUsage is the fullness above which a device is never a write target
// (Allen §1.1.6: a device over 95 % full is excluded).
const MaxUsage = 0.95

// ErrNoSuitableDevices is wrapped by every "cannot place" error; the message
// names the constraint that failed.
var ErrNoSuitableDevices = errors.New("placement: no suitable devices")

// Request asks for replicas for one new extent group (or for the replicas
// missing from an existing one).
type Request struct {
	// Vector is the replicas to place. For repair it holds only the missing
	// replicas.
	Vector model.Vector
	// Client is the node that issued the write (OctopusFS co-location).
	Client model.NodeID
	// Existing replicas count towards node/rack distinctness and their
	// devices are never chosen again.
	Existing []model.Replica
	// Exclude lists devices that must not be chosen (e.g. one that just
	// failed a write).
	Exclude []model.DeviceID
	// Bytes is the expected size of the data, used for the space check.
	Bytes int64
}

// Policy chooses devices for a request. Implementations are pure and safe
// for concurrent use: they keep no state between calls.
type Policy interface {
	Name() string
	Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error)
}

// tracedPolicy is implemented by every built-in policy: Place is
// placeTraced with a nil tracer, and Explain passes a recording one. There
// is one decision path; the tracer only observes it.
type tracedPolicy interface {
	Policy
	placeTraced(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer) ([]model.Replica, error)
}

// Uniform shuffles the suitable devices and takes the first that fits: the
// baseline policy the fitness thesis replaced. Unspecified replicas go to
// any non-memory tier with equal probability per device.
type Uniform struct {
	// LocalFirst puts the first replica on the client's node when the
	// client is co-located with a suitable device (Stargate's preferred
	// node, HDFS's writer-local first replica). New enables it unless
	// Config.IgnoreClient is set; the zero Uniform keeps it off.
	LocalFirst bool
}

var _ Policy = Uniform{}

// Name implements Policy.
func (Uniform) Name() string { return "uniform" }

// Place implements Policy.
func (u Uniform) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	return u.placeTraced(s, req, rng, nil)
}

func (u Uniform) placeTraced(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer) ([]model.Replica, error) {
	return placeSampled(s, req, rng, tr, sampledPlan{
		sel:        SelectUniform,
		localFirst: u.LocalFirst,
		anyPool:    anyPoolAllTiers,
	})
}

// pick is one replica of the set being built: an existing replica or one
// chosen during this request.
type pick struct {
	dev  int // index into Snapshot.Devices, -1 when unknown
	node int // node ordinal, -1 when the device is unknown
	rack int // rack ordinal, -1 when unknown
	r    model.Replica
}

// state tracks the replicas chosen so far for one request so that the
// distinctness rules hold across tiers. Sets are tiny (at most
// model.MaxReplicas plus the existing replicas), so they are slices scanned
// linearly: cheaper than maps at this size and allocation-light.
type state struct {
	s         *model.Snapshot
	req       Request
	picks     []pick
	nExisting int
	// strictNodes is true when the cluster has enough nodes to put every
	// replica on a distinct node; on a small cluster replicas only need
	// distinct devices.
	strictNodes bool
	// perNode caps the set's replicas on one node when nodes are fewer
	// than replicas: ceil(replicas/nodes), so the set is spread evenly
	// and losing a node loses as few of them as it can (an erasure-coded
	// stripe of K+M strips on fewer than K+M nodes must lose at most M).
	perNode int
	// memAny allows unspecified replicas in memory (moop and rules with
	// Config.AllowMem); memLimit caps the memory replicas of the set at a
	// third (OctopusFS §3.3).
	memAny   bool
	memLimit int
	// clientDevs are the client's devices (nil when not co-located).
	clientDevs []int
}

func newState(s *model.Snapshot, req Request) *state {
	st := &state{s: s, req: req}
	st.picks = make([]pick, 0, len(req.Existing)+req.Vector.Total())
	for _, r := range req.Existing {
		p := pick{dev: -1, node: -1, rack: -1, r: r}
		if i, ok := s.DeviceIndex(r.Device); ok {
			p.dev, p.node, p.rack = i, s.DeviceNodeOrdinal(i), s.DeviceRackOrdinal(i)
		}
		st.picks = append(st.picks, p)
	}
	st.nExisting = len(st.picks)
	total, nodes := req.Vector.Total()+len(req.Existing), s.OnlineNodes()
	st.strictNodes = nodes >= total
	if !st.strictNodes && nodes > 0 {
		st.perNode = (total + nodes - 1) / nodes
	}
	st.memLimit = (req.Vector.Total() + len(req.Existing)) / 3
	if req.Client != "" {
		st.clientDevs = s.NodeDevices(req.Client)
	}
	return st
}

func (st *state) take(i int) model.Replica {
	d := &st.s.Devices[i]
	r := model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}
	st.picks = append(st.picks, pick{dev: i, node: st.s.DeviceNodeOrdinal(i), rack: st.s.DeviceRackOrdinal(i), r: r})
	return r
}

// chosen returns the replicas chosen during this request.
func (st *state) chosen() []model.Replica {
	out := make([]model.Replica, 0, len(st.picks)-st.nExisting)
	for _, p := range st.picks[st.nExisting:] {
		out = append(out, p.r)
	}
	return out
}

func (st *state) memCount() int {
	n := 0
	for _, p := range st.picks {
		if p.r.Tier == model.TierMem {
			n++
		}
	}
	return n
}

// sameNode reports whether device i shares a node with pick p.
func (st *state) sameNode(i int, p *pick) bool {
	if p.node >= 0 {
		return st.s.DeviceNodeOrdinal(i) == p.node
	}
	return st.s.Devices[i].Node == p.r.Node
}

// suitable reports whether device i may take a replica of tier t, and if
// not, names the hard constraint that failed. The reasons are the words
// explainFailure prints.
func (st *state) suitable(i int, t model.Tier) (bool, string) {
	d := &st.s.Devices[i]
	if t != model.TierAny {
		if d.Tier != t {
			return false, "tier"
		}
	} else if d.Tier == model.TierRemote {
		// The remote tier only takes replicas a vector names explicitly
		// or that the Curator demotes (model.Tier.ForAny).
		return false, "tier"
	} else if d.Tier == model.TierMem {
		// Memory is volatile; unspecified replicas use it only when the
		// policy allows it, and then for at most a third of the set.
		if !st.memAny {
			return false, "tier"
		}
		if st.memCount() >= st.memLimit {
			return false, "memory limit"
		}
	}
	if !st.s.DeviceOnline(i) {
		return false, "down"
	}
	for _, x := range st.req.Exclude {
		if x == d.ID {
			return false, "excluded"
		}
	}
	onNode := 0
	for k := range st.picks {
		p := &st.picks[k]
		if p.dev == i || (p.dev < 0 && p.r.Device == d.ID) {
			return false, "distinct devices"
		}
		if st.sameNode(i, p) {
			if st.strictNodes {
				return false, "distinct nodes"
			}
			onNode++
		}
	}
	if st.perNode > 0 && onNode >= st.perNode {
		return false, "node spread"
	}
	if d.CapacityBytes <= 0 || float64(d.UsedBytes+st.req.Bytes) > MaxUsage*float64(d.CapacityBytes) {
		return false, "space"
	}
	return true, ""
}

func (st *state) ok(i int, t model.Tier) bool {
	ok, _ := st.suitable(i, t)
	return ok
}

// localWanted reports whether the next replica should go on the client's
// node: the client is co-located and no replica is there yet.
func (st *state) localWanted() bool {
	if len(st.clientDevs) == 0 {
		return false
	}
	for k := range st.picks {
		if st.picks[k].r.Node == st.req.Client {
			return false
		}
	}
	return true
}

// racksUsed returns the distinct rack ordinals of the known picks.
func (st *state) racksUsed(buf []int) []int {
	buf = buf[:0]
outer:
	for k := range st.picks {
		r := st.picks[k].rack
		if r < 0 {
			continue
		}
		for _, x := range buf {
			if x == r {
				continue outer
			}
		}
		buf = append(buf, r)
	}
	return buf
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// newRackPossible reports whether tier t has an online device on a rack no
// pick uses yet ("distinct racks when the cluster has them").
func (st *state) newRackPossible(t model.Tier, used []int) bool {
	if t == model.TierAny {
		return len(used) < st.s.OnlineRacks()
	}
	return len(used) < st.s.OnlineTierRacks(t)
}

// twoRackOK is OctopusFS's pruning (§3.3): after the first replica, prune
// its rack; after the second, stay on those two racks. It is a preference:
// callers fall back to all suitable devices when it leaves none.
func (st *state) twoRackOK(i int, used []int) bool {
	if st.s.OnlineRacks() < 2 {
		return true
	}
	r := st.s.DeviceRackOrdinal(i)
	switch len(used) {
	case 0:
		return true
	case 1:
		return r != used[0]
	default:
		return containsInt(used, r)
	}
}

// explainFailure names the constraint that eliminated the last candidates.
func (st *state) explainFailure(t model.Tier) error {
	reasons := map[string]int{}
	for i := range st.s.Devices {
		if ok, why := st.suitable(i, t); !ok {
			reasons[why]++
		}
	}
	if reasons["tier"] == len(st.s.Devices) {
		return fmt.Errorf("%w: no device on tier %s", ErrNoSuitableDevices, t)
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		if k != "tier" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var msg strings.Builder
	for i, k := range keys {
		if i > 0 {
			msg.WriteString(", ")
		}
		fmt.Fprintf(&msg, "%d failed %s", reasons[k], k)
		if k == "space" {
			fmt.Fprintf(&msg, " (need %d bytes under %.0f%% full)", st.req.Bytes, MaxUsage*100)
		}
	}
	return fmt.Errorf("%w: tier %s: %s", ErrNoSuitableDevices, t, msg.String())
}

// slots expands a vector into one tier per replica, in the order replicas
// are placed: explicit tiers fastest first, then unspecified ones
// (OctopusFS Algorithm 2 iterates the vector's entries).
func slots(v model.Vector) []model.Tier {
	out := make([]model.Tier, 0, v.Total())
	for _, t := range v.Tiers() {
		for range v.Count(t) {
			out = append(out, t)
		}
	}
	return out
}

func checkRequest(s *model.Snapshot, req Request) error {
	if s == nil {
		return errors.New("placement: nil snapshot")
	}
	if err := req.Vector.Validate(); err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	if req.Bytes < 0 {
		return fmt.Errorf("placement: negative request size %d", req.Bytes)
	}
	if n := req.Vector.Total() + len(req.Existing); n > model.MaxReplicas {
		return fmt.Errorf("placement: %d replicas with the existing ones exceeds the maximum of %d", n, model.MaxReplicas)
	}
	return nil
}

// anyPool says where unspecified (TierAny) replicas are sampled from.
type anyPool uint8

const (
	// anyPoolAllTiers samples every non-memory device (uniform, HDFS-like).
	anyPoolAllTiers anyPool = iota
	// anyPoolFastestTier uses the fastest non-memory tier that has a
	// suitable device (Stargate writes new extent groups to the hot tier).
	anyPoolFastestTier
)

// sampledPlan parameterises the sampling policies (uniform, fitness).
type sampledPlan struct {
	sel        Selection
	truncPct   float64
	weight     func(d *model.Device) float64 // nil: all weights equal
	localFirst bool
	anyPool    anyPool
	// scoreCols and scores feed Explain only.
	scoreCols []string
	scores    func(d *model.Device) []float64
}

// placeSampled is Stargate's DetermineNewReplicas with a WeightedVector
// (Allen §1.1.6, §3.5): for each replica, draw candidates from the tier in
// weighted-random order and take the first suitable one. Preferences are
// tried as passes: the client's node for the first replica, then a rack
// no replica uses yet, then any suitable device.
func placeSampled(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer, p sampledPlan) ([]model.Replica, error) {
	if err := checkRequest(s, req); err != nil {
		return nil, err
	}
	st := newState(s, req)
	wfn := func(i int) float64 { return 1 }
	if p.weight != nil {
		wfn = func(i int) float64 { return p.weight(&s.Devices[i]) }
	}
	wv := NewWeightedVector(wfn, p.sel, p.truncPct)
	var rackBuf [model.MaxReplicas * 2]int
	var localBuf [64]int
	var allDevs []int
	for _, t := range slots(req.Vector) {
		var pools [][]int
		switch {
		case t != model.TierAny:
			pools = [][]int{s.TierDevices(t)}
		case p.anyPool == anyPoolFastestTier:
			for _, tt := range s.OnlineTiers() {
				if tt.ForAny(false) {
					pools = append(pools, s.TierDevices(tt))
				}
			}
		default:
			if allDevs == nil {
				allDevs = make([]int, len(s.Devices))
				for i := range allDevs {
					allDevs[i] = i
				}
			}
			pools = [][]int{allDevs}
		}
		if tr != nil {
			tr.beginSlot(st, t, pools, p.scoreCols, func(i int) []float64 {
				if p.scores == nil {
					return nil
				}
				return p.scores(&s.Devices[i])
			})
		}
		used := st.racksUsed(rackBuf[:0])
		found := -1
		// Pass 1: the client's own node, pool by pool, so that with
		// anyPoolFastestTier the local replica also lands on the fastest
		// tier that has room (Stargate writes locally to the hot tier).
		if p.localFirst && st.localWanted() {
			for _, pool := range pools {
				local := st.clientDevs
				if len(pools) > 1 && len(pool) > 0 {
					// Tier pools: keep the client's devices of this tier.
					local = localBuf[:0]
					for _, i := range st.clientDevs {
						if s.Devices[i].Tier == s.Devices[pool[0]].Tier {
							local = append(local, i)
						}
					}
				}
				if len(local) == 0 {
					continue
				}
				wv.SetItems(local)
				if found = drawSuitable(wv, rng, tr, func(i int) bool { return st.ok(i, t) }); found >= 0 {
					break
				}
			}
		}
		for _, pool := range pools {
			if found >= 0 {
				break
			}
			// Pass 2: a rack no replica uses yet, when the cluster has one.
			if len(used) > 0 && st.newRackPossible(t, used) {
				wv.SetItems(pool)
				found = drawSuitable(wv, rng, tr, func(i int) bool {
					return !containsInt(used, s.DeviceRackOrdinal(i)) && st.ok(i, t)
				})
			}
			// Pass 3: any suitable device of the pool.
			if found < 0 {
				wv.SetItems(pool)
				found = drawSuitable(wv, rng, tr, func(i int) bool { return st.ok(i, t) })
			}
		}
		if found < 0 {
			return nil, st.explainFailure(t)
		}
		st.take(found)
		if tr != nil {
			tr.choose(found)
		}
	}
	return st.chosen(), nil
}

// drawSuitable samples until ok accepts a device or the pool is exhausted.
func drawSuitable(wv *WeightedVector[int], rng *rand.Rand, tr *tracer, ok func(i int) bool) int {
	for {
		i, more := wv.Sample(rng)
		if !more {
			return -1
		}
		if tr != nil {
			tr.sampled(i)
		}
		if ok(i) {
			return i
		}
	}
}
