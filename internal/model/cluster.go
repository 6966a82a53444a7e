package model

import (
	"sort"
	"time"
)

// NodeID names a Terrace server process.
type NodeID string

// DeviceID names a device cluster-wide. By convention it is "<node>/<local
// name>", e.g. "n1/ssd0", so that a device ID alone tells where it lives.
type DeviceID string

// DeviceState is the health of a device as the cluster map records it.
type DeviceState uint8

const (
	// DeviceUp devices take reads and new replicas.
	DeviceUp DeviceState = iota
	// DeviceDraining devices serve reads but take no new replicas; recovery
	// moves their replicas away (operator drain or removal).
	DeviceDraining
	// DeviceFailed devices are unreadable; their replicas are lost.
	DeviceFailed
)

func (s DeviceState) String() string {
	switch s {
	case DeviceUp:
		return "up"
	case DeviceDraining:
		return "draining"
	case DeviceFailed:
		return "failed"
	}
	return "unknown"
}

// Device is one device as decision code sees it: static facts plus the live
// counters placement weighs (fullness, queue length, active streams).
type Device struct {
	ID    DeviceID
	Node  NodeID
	Rack  string
	Tier  Tier
	State DeviceState

	CapacityBytes int64
	UsedBytes     int64
	// QueueLen is the number of I/O operations in flight on the device.
	QueueLen int
	// ActiveStreams is the number of files being read or written now
	// (OctopusFS NrConn for the device): files with an operation in
	// flight, not the handles kept open between operations.
	ActiveStreams int
	// ReadBps and WriteBps are measured throughputs in bytes per second.
	ReadBps  float64
	WriteBps float64
}

// FreeBytes is the capacity not yet used (never negative).
func (d Device) FreeBytes() int64 {
	if f := d.CapacityBytes - d.UsedBytes; f > 0 {
		return f
	}
	return 0
}

// Usage is the used fraction of capacity in [0, 1+].
func (d Device) Usage() float64 {
	if d.CapacityBytes <= 0 {
		return 1
	}
	return float64(d.UsedBytes) / float64(d.CapacityBytes)
}

// Node is one server as decision code sees it.
type Node struct {
	ID   NodeID
	Rack string
	Up   bool
	// NetBps is the node's network throughput in bytes per second; 0 means
	// unknown (treated as unbounded by read ordering).
	NetBps float64
	// Conns is the number of active data connections (OctopusFS NrConn).
	Conns int
}

// Replica is one copy of an extent group.
type Replica struct {
	Device DeviceID
	Node   NodeID
	Tier   Tier
}

// Snapshot is an immutable view of the cluster handed to decision code.
// Callers must not mutate a Snapshot after passing it in.
type Snapshot struct {
	Now     time.Time
	Nodes   []Node
	Devices []Device
	// Self is the node the snapshot was taken on ("" when unknown): its
	// replicas are local to it, so reading them crosses no network.
	Self NodeID

	nodeIdx map[NodeID]int
	devIdx  map[DeviceID]int
	ix      snapshotIndex
}

// WithSelf returns s seen from node id.
func (s *Snapshot) WithSelf(id NodeID) *Snapshot {
	c := *s
	c.Self = id
	return &c
}

// NewSnapshot builds a snapshot with sorted nodes and devices so that
// iteration order, and therefore every seeded decision, is deterministic.
func NewSnapshot(now time.Time, nodes []Node, devices []Device) *Snapshot {
	s := &Snapshot{Now: now, Nodes: append([]Node(nil), nodes...), Devices: append([]Device(nil), devices...)}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].ID < s.Nodes[j].ID })
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].ID < s.Devices[j].ID })
	s.nodeIdx = make(map[NodeID]int, len(s.Nodes))
	for i, n := range s.Nodes {
		s.nodeIdx[n.ID] = i
	}
	s.devIdx = make(map[DeviceID]int, len(s.Devices))
	for i, d := range s.Devices {
		s.devIdx[d.ID] = i
	}
	s.buildIndex()
	return s
}

// Device returns the device with the given ID.
func (s *Snapshot) Device(id DeviceID) (Device, bool) {
	i, ok := s.devIdx[id]
	if !ok {
		return Device{}, false
	}
	return s.Devices[i], true
}

// Node returns the node with the given ID.
func (s *Snapshot) Node(id NodeID) (Node, bool) {
	i, ok := s.nodeIdx[id]
	if !ok {
		return Node{}, false
	}
	return s.Nodes[i], true
}

// NodeUp reports whether the node is known and up. A snapshot without node
// entries (a bare device list in a test) treats every node as up.
func (s *Snapshot) NodeUp(id NodeID) bool {
	if len(s.Nodes) == 0 {
		return true
	}
	n, ok := s.Node(id)
	return ok && n.Up
}

// Tiers returns the tiers that have at least one device, fastest first.
func (s *Snapshot) Tiers() []Tier {
	seen := map[Tier]bool{}
	var ts []Tier
	for _, d := range s.Devices {
		if !seen[d.Tier] {
			seen[d.Tier] = true
			ts = append(ts, d.Tier)
		}
	}
	SortTiers(ts)
	return ts
}

// Racks returns the number of distinct racks among up nodes' devices.
func (s *Snapshot) Racks() int {
	seen := map[string]bool{}
	for _, d := range s.Devices {
		seen[d.Rack] = true
	}
	return len(seen)
}

// DistinctNodes returns the number of nodes that own at least one device.
func (s *Snapshot) DistinctNodes() int {
	seen := map[NodeID]bool{}
	for _, d := range s.Devices {
		seen[d.Node] = true
	}
	return len(seen)
}
