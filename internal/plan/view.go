package plan

import "github.com/terrace-storage/terrace/internal/model"

// View is a rule's read-only window on the solver's current (possibly
// tentative) layout, bound to one scope instance. Devices, egroups, nodes,
// racks and tiers are small integers; the accessors turn them into names
// and quantities. A rule must not keep a View, or anything it returns,
// beyond the call it was given in.
//
// Every accessor is O(1) except where noted, so rules stay cheap: the
// solver evaluates a few rule instances per candidate move and hundreds of
// thousands of candidates per second.
type View struct {
	s    *state
	inst int32
}

// Instance is the scope instance being evaluated: an egroup, device, node,
// rack or tier number depending on the rule's scope.
func (v *View) Instance() int { return int(v.inst) }

// Devices, Egroups, Nodes, Racks and Tiers count the model's instances.
func (v *View) Devices() int { return len(v.s.devID) }
func (v *View) Egroups() int { return len(v.s.egID) }
func (v *View) Nodes() int   { return len(v.s.nodeIDs) }
func (v *View) Racks() int   { return len(v.s.rackNames) }
func (v *View) Tiers() int   { return v.s.nTiers }

// OnlineNodes and OnlineRacks count nodes and racks with an ok device.
func (v *View) OnlineNodes() int { return v.s.onlineNodes }
func (v *View) OnlineRacks() int { return v.s.onlineRacks }

// Device accessors.
func (v *View) DeviceID(d int) model.DeviceID { return v.s.devID[d] }
func (v *View) DeviceNode(d int) int          { return int(v.s.devNode[d]) }
func (v *View) DeviceRack(d int) int          { return int(v.s.devRack[d]) }
func (v *View) DeviceTier(d int) int          { return int(v.s.devTier[d]) }
func (v *View) DeviceHealth(d int) Health     { return v.s.devHealth[d] }
func (v *View) DeviceCapacity(d int) int64    { return v.s.devCap[d] }
func (v *View) DeviceUsed(d int) int64        { return v.s.devUsed[d] }
func (v *View) DeviceLoad(d int) float64      { return v.s.devLoad[d] }

// DeviceWorkingSet is the sum of WorkingSetBytes of the device's replicas.
func (v *View) DeviceWorkingSet(d int) int64 { return v.s.devWS[d] }

// DeviceReplicas counts the replicas on device d; DeviceEgroup(d, i) is the
// egroup of the i'th (in no particular order).
func (v *View) DeviceReplicas(d int) int        { return len(v.s.devVars[d]) }
func (v *View) DeviceEgroup(d int, i int) int   { return int(v.s.varEg[v.s.devVars[d][i]]) }
func (v *View) NodeID(n int) model.NodeID       { return v.s.nodeIDs[n] }
func (v *View) NodeDevices(n int) int           { return len(v.s.nodeDevs[n]) }
func (v *View) NodeDevice(n, i int) int         { return int(v.s.nodeDevs[n][i]) }
func (v *View) RackName(r int) string           { return v.s.rackNames[r] }
func (v *View) RackDevices(r int) int           { return len(v.s.rackDevs[r]) }
func (v *View) RackDevice(r, i int) int         { return int(v.s.rackDevs[r][i]) }
func (v *View) NodeWorkingSet(n int) int64      { return v.s.nodeWS[n] }
func (v *View) NodeTierCapacity(n, t int) int64 { return v.s.nodeTierCap[n*v.s.nTiers+t] }

// Egroup accessors.
func (v *View) EgroupID(e int) uint64           { return v.s.egID[e] }
func (v *View) EgroupSize(e int) int64          { return v.s.egSize[e] }
func (v *View) EgroupLoad(e int) float64        { return v.s.egLoad[e] }
func (v *View) EgroupWorkingSet(e int) int64    { return v.s.egWS[e] }
func (v *View) EgroupBucket(e int) string       { return v.s.bucketNames[v.s.egBucket[e]] }
func (v *View) EgroupCold(e int) bool           { return v.s.egCold[e] }
func (v *View) EgroupVector(e int) model.Vector { return v.s.vecModel[v.s.egVec[e]] }

// EgroupVectorCount is the vector's count for tier index t (explicit
// counts only); EgroupVectorAny is its "any" count and EgroupVectorTotal
// the whole replica count.
func (v *View) EgroupVectorCount(e, t int) int { return int(v.s.vecs[v.s.egVec[e]].counts[t]) }
func (v *View) EgroupVectorAny(e int) int      { return int(v.s.vecs[v.s.egVec[e]].any) }
func (v *View) EgroupVectorTotal(e int) int    { return int(v.s.vecs[v.s.egVec[e]].total) }

// EgroupSlots is the number of replica slots (max of the recorded replicas
// and the vector's total); EgroupReplica(e, i) is the device of slot i, or
// −1 for a missing replica.
func (v *View) EgroupSlots(e int) int { return int(v.s.egStart[e+1] - v.s.egStart[e]) }
func (v *View) EgroupReplica(e, i int) int {
	return int(v.s.varDev[int(v.s.egStart[e])+i])
}

// Tier accessors. Totals are over ok devices.
func (v *View) TierName(t int) model.Tier { return v.s.tierNames[t] }

// TierIndex returns the index of tier name, or −1 if the model has no such
// tier.
func (v *View) TierIndex(name model.Tier) int { return v.s.tierIndex(name) }
func (v *View) TierOnlineDevices(t int) int   { return int(v.s.tierOnline[t]) }
func (v *View) TierCapacity(t int) int64      { return v.s.tierCap[t] }
func (v *View) TierUsed(t int) int64          { return v.s.tierUsed[t] }
func (v *View) TierLoad(t int) float64        { return v.s.tierLoad[t] }
func (v *View) TierInitialUsed(t int) int64   { return v.s.tierUsed0[t] }
func (v *View) TierColdBytes(t int) int64     { return v.s.tierCold[t] }
func (v *View) SlowestOnlineTier() int        { return v.s.slowestTier }

// BucketReplicas counts the replicas of bucket on the domain (a device,
// node or rack number, by level), excluding failed devices; an unknown
// bucket counts 0. The first call for a bucket builds its counters in
// O(replicas); a rule that names its buckets in BucketRule.Buckets has them
// built up front.
func (v *View) BucketReplicas(level Scope, domain int, bucket string) int {
	b := v.s.bucketIndex(bucket)
	if b < 0 || level < ScopeDevice || level > ScopeRack {
		return 0
	}
	cs := v.s.counters[level]
	if int(b) >= len(cs) || cs[b] == nil {
		// Counting now is exact even mid-evaluation: the counters start
		// from the current layout and every later move (and its undo)
		// updates them.
		v.s.countBucket(level, b)
		cs = v.s.counters[level]
	}
	return int(cs[b][domain])
}
