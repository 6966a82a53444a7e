package plan

import (
	"errors"
	"fmt"
	"math"

	"github.com/terrace-storage/terrace/internal/model"
)

// Health is a device's condition as the planner weighs it.
type Health uint8

const (
	// HealthOK devices serve reads and take new replicas.
	HealthOK Health = iota
	// HealthDraining devices serve reads but take no new replicas; their
	// replicas should leave (rplset_durable).
	HealthDraining
	// HealthBad devices are suspect (media errors): they take nothing new
	// and are not used as a copy source; their replicas should leave.
	HealthBad
	// HealthFailed devices are gone: their replicas are lost and must be
	// rebuilt from a sibling.
	HealthFailed
)

var healthNames = [...]string{"ok", "draining", "bad", "failed"}

func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("health(%d)", h)
}

// ParseHealth reads the names String prints.
func ParseHealth(s string) (Health, error) {
	for i, n := range healthNames {
		if n == s {
			return Health(i), nil
		}
	}
	return 0, fmt.Errorf("plan: unknown health %q (want ok, draining, bad or failed)", s)
}

// readable reports whether a replica on a device in this state can be the
// source of a copy.
func (h Health) readable() bool { return h == HealthOK || h == HealthDraining }

// Device is one device as the planner sees it. The actuator builds it from
// the cluster snapshot (FromSnapshot does the static part).
type Device struct {
	// ID is "<node>/<local name>", e.g. "n2/hdd0".
	ID   model.DeviceID
	Node model.NodeID
	Rack string
	Tier model.Tier
	// CapacityBytes and UsedBytes are the device's size and its current
	// use, including bytes that are not egroup replicas (the planner moves
	// egroup bytes in and out of UsedBytes; the rest stays).
	CapacityBytes int64
	UsedBytes     int64
	// Load is the device's measured I/O load in any consistent unit (ops/s,
	// bytes/s); Egroup.Load is in the same unit. Moving a replica moves its
	// egroup's load with it.
	Load   float64
	Health Health
}

// Egroup is one extent group: the unit the planner moves. Its replicas are
// the solver's variables.
type Egroup struct {
	ID        uint64
	SizeBytes int64
	// Load is the I/O load one replica puts on its device, in the unit of
	// Device.Load.
	Load float64
	// WorkingSetBytes is how much of the egroup the recent working set
	// touches (Mirador §4.3 footprints); working_set_fits sums it per node.
	WorkingSetBytes int64
	// Replicas are the devices holding a copy. Fewer than the vector's
	// total means missing replicas: the solver may add them (a move with
	// no source device). A replica on an unknown device is a model error.
	Replicas []model.DeviceID
	Vector   model.Vector
	// Bucket names the bucket or workload the egroup belongs to; isolate
	// and co_locate rules refer to it. Empty is a bucket like any other.
	Bucket string
}

// Model is the planner's input: devices and egroups. The planner never
// modifies it.
type Model struct {
	Devices []Device
	Egroups []Egroup
	// ColdLoad: an egroup whose Load is at or below it is cold (tier_fill
	// sheds only cold replicas). Zero means "no I/O in the window".
	ColdLoad float64
}

// ErrInvalidModel wraps every model validation error.
var ErrInvalidModel = errors.New("plan: invalid model")

// Limits on a model, so a bad builder fails fast instead of exhausting memory.
const (
	// MaxDevices is far above any cluster Terrace targets (10K devices in
	// the largest benchmark).
	MaxDevices = 1 << 20
	// MaxEgroups bounds one model; the planner uses about 150 bytes per
	// replica, so the limit is ~10 GB of state at one replica each.
	MaxEgroups = 64 << 20
)

// Validate checks the model is self-consistent: unique IDs, replicas on
// known devices and distinct within an egroup, non-negative sizes, valid
// vectors.
func (m *Model) Validate() error {
	_, _, err := m.validate()
	return err
}

// validate is Validate returning the device index it builds and every
// replica's device number in egroup order (the solver reuses both rather
// than hash each replica's device ID again). It is linear in the model and
// cheap per egroup: vectors are validated once per distinct vector, and
// IDs given in increasing order (as a metadata scan yields them) need no
// set to prove them unique.
func (m *Model) validate() (map[model.DeviceID]int32, []int32, error) {
	if len(m.Devices) > MaxDevices {
		return nil, nil, fmt.Errorf("%w: %d devices exceeds the limit of %d", ErrInvalidModel, len(m.Devices), MaxDevices)
	}
	if len(m.Egroups) > MaxEgroups {
		return nil, nil, fmt.Errorf("%w: %d egroups exceeds the limit of %d", ErrInvalidModel, len(m.Egroups), MaxEgroups)
	}
	if math.IsNaN(m.ColdLoad) || math.IsInf(m.ColdLoad, 0) {
		return nil, nil, fmt.Errorf("%w: cold load %v", ErrInvalidModel, m.ColdLoad)
	}
	devs := make(map[model.DeviceID]int32, len(m.Devices))
	for i := range m.Devices {
		d := &m.Devices[i]
		_, dup := devs[d.ID]
		switch {
		case d.ID == "":
			return nil, nil, fmt.Errorf("%w: device %d has no ID", ErrInvalidModel, i)
		case dup:
			return nil, nil, fmt.Errorf("%w: device %s listed twice", ErrInvalidModel, d.ID)
		case d.Node == "":
			return nil, nil, fmt.Errorf("%w: device %s has no node", ErrInvalidModel, d.ID)
		case !model.ValidTierName(string(d.Tier)) || d.Tier == model.TierAny:
			return nil, nil, fmt.Errorf("%w: device %s has bad tier %q", ErrInvalidModel, d.ID, d.Tier)
		case d.CapacityBytes < 0 || d.UsedBytes < 0:
			return nil, nil, fmt.Errorf("%w: device %s has negative capacity or usage", ErrInvalidModel, d.ID)
		case math.IsNaN(d.Load) || math.IsInf(d.Load, 0) || d.Load < 0:
			return nil, nil, fmt.Errorf("%w: device %s has bad load %v", ErrInvalidModel, d.ID, d.Load)
		case int(d.Health) >= len(healthNames):
			return nil, nil, fmt.Errorf("%w: device %s has unknown health %d", ErrInvalidModel, d.ID, d.Health)
		}
		devs[d.ID] = int32(i)
	}
	increasing := true
	for i := 1; i < len(m.Egroups) && increasing; i++ {
		increasing = m.Egroups[i-1].ID < m.Egroups[i].ID
	}
	var ids map[uint64]bool
	if !increasing {
		ids = make(map[uint64]bool, len(m.Egroups))
	}
	var vectors []knownVector // validated already
	nrep := 0
	for i := range m.Egroups {
		nrep += len(m.Egroups[i].Replicas)
	}
	replicaDevs := make([]int32, 0, nrep)
	for i := range m.Egroups {
		e := &m.Egroups[i]
		if ids != nil {
			if ids[e.ID] {
				return nil, nil, fmt.Errorf("%w: egroup %d listed twice", ErrInvalidModel, e.ID)
			}
			ids[e.ID] = true
		}
		if e.SizeBytes < 0 || e.WorkingSetBytes < 0 {
			return nil, nil, fmt.Errorf("%w: egroup %d has a negative size", ErrInvalidModel, e.ID)
		}
		if math.IsNaN(e.Load) || math.IsInf(e.Load, 0) || e.Load < 0 {
			return nil, nil, fmt.Errorf("%w: egroup %d has bad load %v", ErrInvalidModel, e.ID, e.Load)
		}
		if findKnown(vectors, e.Vector) < 0 {
			if err := e.Vector.Validate(); err != nil {
				return nil, nil, fmt.Errorf("%w: egroup %d: %v", ErrInvalidModel, e.ID, err)
			}
			for t := range e.Vector.Counts {
				if !model.ValidTierName(string(t)) {
					return nil, nil, fmt.Errorf("%w: egroup %d: bad tier %q in vector", ErrInvalidModel, e.ID, t)
				}
			}
			if len(vectors) < maxDistinctVectors {
				vectors = append(vectors, newKnown(e.Vector))
			}
		}
		if len(e.Replicas) > model.MaxReplicas {
			return nil, nil, fmt.Errorf("%w: egroup %d has %d replicas, more than %d", ErrInvalidModel, e.ID, len(e.Replicas), model.MaxReplicas)
		}
		for j, r := range e.Replicas {
			d, ok := devs[r]
			if !ok {
				return nil, nil, fmt.Errorf("%w: egroup %d has a replica on unknown device %q", ErrInvalidModel, e.ID, r)
			}
			replicaDevs = append(replicaDevs, d)
			for _, o := range e.Replicas[:j] {
				if o == r {
					return nil, nil, fmt.Errorf("%w: egroup %d has two replicas on %s", ErrInvalidModel, e.ID, r)
				}
			}
		}
	}
	return devs, replicaDevs, nil
}

// maxDistinctVectors bounds the vectors remembered as validated (a
// cluster uses a handful; beyond this each is simply validated again).
const maxDistinctVectors = 64

// knownVector is a vector flattened for fast comparison: its non-zero
// counts as pairs, compared against another vector with map lookups only
// (iterating a map costs more than looking a key up, and a model compares
// a vector per egroup).
type knownVector struct {
	v     model.Vector
	pairs []tierCount
	plain bool // no zero counts: equal length plus equal pairs is equality
}

type tierCount struct {
	t model.Tier
	n int
}

func newKnown(v model.Vector) knownVector {
	k := knownVector{v: v, plain: true}
	for t, n := range v.Counts {
		if n == 0 {
			k.plain = false
			continue
		}
		k.pairs = append(k.pairs, tierCount{t, n})
	}
	return k
}

func (k *knownVector) equal(v model.Vector) bool {
	if k.plain && len(v.Counts) == len(k.pairs) {
		for _, p := range k.pairs {
			if v.Counts[p.t] != p.n {
				return false
			}
		}
		return true
	}
	return vectorsEqual(k.v, v)
}

// findKnown returns the index of a vector equal to v, or −1. Most recent
// first: egroups of one bucket share a vector.
func findKnown(ks []knownVector, v model.Vector) int {
	for i := len(ks) - 1; i >= 0; i-- {
		if ks[i].equal(v) {
			return i
		}
	}
	return -1
}

// vectorsEqual compares counts, treating a missing tier as 0, without
// allocating (model.Vector.Equal formats both vectors).
func vectorsEqual(a, b model.Vector) bool {
	for t, n := range a.Counts {
		if b.Counts[t] != n {
			return false
		}
	}
	for t, n := range b.Counts {
		if a.Counts[t] != n {
			return false
		}
	}
	return true
}

// Clone returns a deep copy (replica slices and vectors are not shared).
func (m *Model) Clone() *Model {
	c := &Model{Devices: append([]Device(nil), m.Devices...), Egroups: make([]Egroup, len(m.Egroups)), ColdLoad: m.ColdLoad}
	for i, e := range m.Egroups {
		e.Replicas = append([]model.DeviceID(nil), e.Replicas...)
		e.Vector = e.Vector.Clone()
		c.Egroups[i] = e
	}
	return c
}

// Apply returns a copy of m with the plan's moves applied in order: each
// move adds its destination to the egroup's replicas and removes its
// source, and carries the egroup's size and load from the source device to
// the destination. It fails if a move does not match the model (unknown
// egroup, source not holding a replica, destination already holding one).
func (m *Model) Apply(moves []Move) (*Model, error) {
	c := m.Clone()
	egIdx := make(map[uint64]int, len(c.Egroups))
	for i, e := range c.Egroups {
		egIdx[e.ID] = i
	}
	devIdx := make(map[model.DeviceID]int, len(c.Devices))
	for i, d := range c.Devices {
		devIdx[d.ID] = i
	}
	for _, mv := range moves {
		i, ok := egIdx[mv.Egroup]
		if !ok {
			return nil, fmt.Errorf("plan: move of unknown egroup %d", mv.Egroup)
		}
		e := &c.Egroups[i]
		to, ok := devIdx[mv.To]
		if !ok {
			return nil, fmt.Errorf("plan: egroup %d moves to unknown device %q", mv.Egroup, mv.To)
		}
		for _, r := range e.Replicas {
			if r == mv.To {
				return nil, fmt.Errorf("plan: egroup %d already has a replica on %s", mv.Egroup, mv.To)
			}
		}
		if mv.From != "" {
			pos := -1
			for j, r := range e.Replicas {
				if r == mv.From {
					pos = j
				}
			}
			if pos < 0 {
				return nil, fmt.Errorf("plan: egroup %d has no replica on %s to move", mv.Egroup, mv.From)
			}
			from := devIdx[mv.From]
			c.Devices[from].UsedBytes = max(0, c.Devices[from].UsedBytes-e.SizeBytes)
			c.Devices[from].Load = math.Max(0, c.Devices[from].Load-e.Load)
			e.Replicas[pos] = mv.To
		} else {
			e.Replicas = append(e.Replicas, mv.To)
		}
		c.Devices[to].UsedBytes += e.SizeBytes
		c.Devices[to].Load += e.Load
	}
	return c, nil
}

// FromSnapshot converts a cluster snapshot's devices into planner devices.
// Load is the snapshot's read plus write throughput (bytes/s). On a live
// cluster those are the devices' probed speeds, not their load: a caller
// with measured loads (the Curator's planner model sums its replicas'
// read loads) replaces it, and egroup loads must be in the same unit. A device whose node is down keeps its
// state: the caller decides (with the Curator's stabilisation interval)
// whether the node's devices count as failed before building the model.
func FromSnapshot(s *model.Snapshot) []Device {
	out := make([]Device, 0, len(s.Devices))
	for _, d := range s.Devices {
		h := HealthOK
		switch d.State {
		case model.DeviceDraining:
			h = HealthDraining
		case model.DeviceFailed:
			h = HealthFailed
		}
		out = append(out, Device{ID: d.ID, Node: d.Node, Rack: d.Rack, Tier: d.Tier,
			CapacityBytes: d.CapacityBytes, UsedBytes: d.UsedBytes, Load: d.ReadBps + d.WriteBps, Health: h})
	}
	return out
}
