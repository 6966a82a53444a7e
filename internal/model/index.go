package model

// This file holds the derived indexes NewSnapshot precomputes so that
// decision code can answer "which devices are on tier t", "is device i
// writable" and "which node/rack is device i on" in O(1) without maps or
// allocation on its hot path. Placement with two-choice sampling touches a
// handful of devices per replica; a scan over every device would dominate
// its cost on a 1,000-device cluster.

// snapshotIndex is the derived, read-only part of a Snapshot. It is computed
// once by NewSnapshot (and recomputed by MapDevices) and never mutated.
type snapshotIndex struct {
	// tierDevs maps a tier to the indexes (into Devices) of its devices,
	// in device-ID order.
	tierDevs map[Tier][]int
	// online[i] is true when device i is DeviceUp and its node is up.
	online []bool
	// devNode[i] and devRack[i] are small dense ordinals of device i's
	// node and rack; they compare equal exactly when the IDs/names do.
	devNode []int
	devRack []int
	// onlineNodes and onlineRacks count distinct nodes and racks that own
	// at least one online device.
	onlineNodes int
	onlineRacks int
	// tierRacks counts, per tier, the distinct racks with an online device
	// on that tier.
	tierRacks map[Tier]int
	// onlineTiers lists tiers with at least one online device, fastest first.
	onlineTiers []Tier
	// nodeDevs maps a node to the indexes of its devices.
	nodeDevs map[NodeID][]int
	numNodes int
	numRacks int
	// tierStats aggregates each tier's online devices.
	tierStats map[Tier]TierStats
}

// TierStats aggregates the online devices of one tier. Placement's MOOP
// ideal vector needs these cluster-wide extremes for every decision;
// computing them once per snapshot keeps a decision from scanning every
// device just to find them.
type TierStats struct {
	// Devices is the number of online devices on the tier.
	Devices int
	// MaxFreeFraction is the largest FreeBytes/CapacityBytes (devices
	// with a positive capacity).
	MaxFreeFraction float64
	// MinActiveStreams is the smallest ActiveStreams.
	MinActiveStreams int
	// MaxWriteBps is the largest WriteBps.
	MaxWriteBps float64
}

func computeTierStats(s *Snapshot, online []bool) map[Tier]TierStats {
	out := map[Tier]TierStats{}
	for i := range s.Devices {
		if !online[i] {
			continue
		}
		d := &s.Devices[i]
		ts, seen := out[d.Tier]
		if !seen {
			ts.MinActiveStreams = d.ActiveStreams
		}
		ts.Devices++
		if d.CapacityBytes > 0 {
			ts.MaxFreeFraction = max(ts.MaxFreeFraction, float64(d.FreeBytes())/float64(d.CapacityBytes))
		}
		ts.MinActiveStreams = min(ts.MinActiveStreams, d.ActiveStreams)
		ts.MaxWriteBps = max(ts.MaxWriteBps, d.WriteBps)
		out[d.Tier] = ts
	}
	return out
}

// OnlineTierStats returns the aggregates of tier t's online devices.
func (s *Snapshot) OnlineTierStats(t Tier) TierStats { return s.ix.tierStats[t] }

func (s *Snapshot) buildIndex() {
	ix := snapshotIndex{
		tierDevs:  map[Tier][]int{},
		online:    make([]bool, len(s.Devices)),
		devNode:   make([]int, len(s.Devices)),
		devRack:   make([]int, len(s.Devices)),
		tierRacks: map[Tier]int{},
		nodeDevs:  map[NodeID][]int{},
	}
	nodeOrd := map[NodeID]int{}
	rackOrd := map[string]int{}
	onlineNode := map[int]bool{}
	onlineRack := map[int]bool{}
	tierRack := map[Tier]map[int]bool{}
	for i, d := range s.Devices {
		ix.tierDevs[d.Tier] = append(ix.tierDevs[d.Tier], i)
		ix.nodeDevs[d.Node] = append(ix.nodeDevs[d.Node], i)
		n, ok := nodeOrd[d.Node]
		if !ok {
			n = len(nodeOrd)
			nodeOrd[d.Node] = n
		}
		r, ok := rackOrd[d.Rack]
		if !ok {
			r = len(rackOrd)
			rackOrd[d.Rack] = r
		}
		ix.devNode[i], ix.devRack[i] = n, r
		if d.State == DeviceUp && s.NodeUp(d.Node) {
			ix.online[i] = true
			onlineNode[n] = true
			onlineRack[r] = true
			if tierRack[d.Tier] == nil {
				tierRack[d.Tier] = map[int]bool{}
			}
			tierRack[d.Tier][r] = true
		}
	}
	ix.onlineNodes, ix.onlineRacks = len(onlineNode), len(onlineRack)
	ix.numNodes, ix.numRacks = len(nodeOrd), len(rackOrd)
	for t, rs := range tierRack {
		ix.tierRacks[t] = len(rs)
		ix.onlineTiers = append(ix.onlineTiers, t)
	}
	SortTiers(ix.onlineTiers)
	ix.tierStats = computeTierStats(s, ix.online)
	s.ix = ix
}

// DeviceIndex returns the position of a device in s.Devices.
func (s *Snapshot) DeviceIndex(id DeviceID) (int, bool) {
	i, ok := s.devIdx[id]
	return i, ok
}

// TierDevices returns the indexes (into s.Devices) of every device on tier
// t, in device-ID order. The slice is shared: callers must not modify it.
func (s *Snapshot) TierDevices(t Tier) []int { return s.ix.tierDevs[t] }

// NodeDevices returns the indexes (into s.Devices) of node id's devices.
// The slice is shared: callers must not modify it.
func (s *Snapshot) NodeDevices(id NodeID) []int { return s.ix.nodeDevs[id] }

// DeviceOnline reports whether device i is up and on an up node, i.e. may
// take reads and, space permitting, new replicas.
func (s *Snapshot) DeviceOnline(i int) bool { return s.ix.online[i] }

// DeviceNodeOrdinal returns a dense ordinal of device i's node in
// [0, NodeOrdinals()). Two devices share a node exactly when their ordinals
// are equal.
func (s *Snapshot) DeviceNodeOrdinal(i int) int { return s.ix.devNode[i] }

// DeviceRackOrdinal returns a dense ordinal of device i's rack in
// [0, RackOrdinals()).
func (s *Snapshot) DeviceRackOrdinal(i int) int { return s.ix.devRack[i] }

// NodeOrdinals is the number of distinct nodes that own a device.
func (s *Snapshot) NodeOrdinals() int { return s.ix.numNodes }

// RackOrdinals is the number of distinct racks that own a device.
func (s *Snapshot) RackOrdinals() int { return s.ix.numRacks }

// OnlineNodes counts distinct nodes with at least one online device.
func (s *Snapshot) OnlineNodes() int { return s.ix.onlineNodes }

// OnlineRacks counts distinct racks with at least one online device.
func (s *Snapshot) OnlineRacks() int { return s.ix.onlineRacks }

// OnlineTierRacks counts distinct racks with an online device on tier t.
func (s *Snapshot) OnlineTierRacks(t Tier) int { return s.ix.tierRacks[t] }

// OnlineTiers lists the tiers with at least one online device, fastest
// first. The slice is shared: callers must not modify it.
func (s *Snapshot) OnlineTiers() []Tier { return s.ix.onlineTiers }

// MapDevices returns a copy of s whose devices have been passed through f.
// f may change counters (usage, queue, streams, throughput, state) but not
// a device's ID, node or tier; MapDevices panics if it does, because the
// ID indexes are shared with s. Nodes are shared with s. It is how callers
// fold fresher information (placements made since the last statistics
// refresh, a simulated clock's load) into an existing snapshot in O(devices)
// without re-sorting.
func (s *Snapshot) MapDevices(f func(d *Device)) *Snapshot {
	c := &Snapshot{Now: s.Now, Nodes: s.Nodes, Devices: append([]Device(nil), s.Devices...), nodeIdx: s.nodeIdx, devIdx: s.devIdx}
	for i := range c.Devices {
		d := &c.Devices[i]
		f(d)
		o := s.Devices[i]
		if d.ID != o.ID || d.Node != o.Node || d.Tier != o.Tier || d.Rack != o.Rack {
			panic("model: MapDevices changed a device's identity")
		}
	}
	c.buildIndexFast(s)
	return c
}

// buildIndexFast recomputes only what can change under MapDevices (device
// state, hence online-ness) and shares everything else with the parent.
func (c *Snapshot) buildIndexFast(p *Snapshot) {
	same := true
	for i := range c.Devices {
		if c.Devices[i].State != p.Devices[i].State {
			same = false
			break
		}
	}
	if same {
		// Same devices online; only the counters behind the per-tier
		// aggregates may have changed.
		c.ix = p.ix
		c.ix.tierStats = computeTierStats(c, c.ix.online)
		return
	}
	c.buildIndex()
}
