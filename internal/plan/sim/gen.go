package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/plan"
)

// ClusterSpec describes a Table 2 cluster: Objects egroups on Devices
// fixed-capacity devices, at most DevicesPerNode per node, sizes and loads
// drawn from a bounded Pareto distribution, placed uniformly at random
// (where they fit) until the cluster is about Fill full.
type ClusterSpec struct {
	Objects, Devices int
	Seed             uint64
	// Replicas per object (default 1: Table 2 counts objects).
	Replicas int
	// Fill is the cluster's used fraction (default 0.65, Mirador §4.1).
	Fill float64
	// Alpha is the Pareto shape (default 1.16, the 80/20 rule).
	Alpha float64
	// MaxShare bounds the largest object's size and load as a fraction of
	// the mean device's (default 0.25). Mirador scales objects so none
	// exceeds a device; balancing loads within ±10 % also needs every
	// object small against a device's share, or no zero-cost layout exists.
	MaxShare float64
	// DevicesPerNode (default 10) and NodesPerRack (default 10).
	DevicesPerNode, NodesPerRack int
	// DeviceBytes is each device's capacity (default 1 TiB).
	DeviceBytes int64
}

func (c *ClusterSpec) ensureDefaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Fill == 0 {
		c.Fill = 0.65
	}
	if c.Alpha == 0 {
		c.Alpha = 1.16
	}
	if c.MaxShare == 0 {
		c.MaxShare = 0.25
	}
	if c.DevicesPerNode == 0 {
		c.DevicesPerNode = 10
	}
	if c.NodesPerRack == 0 {
		c.NodesPerRack = 10
	}
	if c.DeviceBytes == 0 {
		c.DeviceBytes = 1 << 40
	}
}

func (c *ClusterSpec) validate() error {
	switch {
	case c.Objects < 1 || c.Objects > 100_000_000:
		return fmt.Errorf("sim: objects must be in [1, 1e8], got %d", c.Objects)
	case c.Devices < 1 || c.Devices > plan.MaxDevices:
		return fmt.Errorf("sim: devices must be in [1, %d], got %d", plan.MaxDevices, c.Devices)
	case c.Replicas < 1 || c.Replicas > model.MaxReplicas || c.Replicas > c.Devices:
		return fmt.Errorf("sim: replicas must be in [1, min(%d, devices)], got %d", model.MaxReplicas, c.Replicas)
	case c.Fill <= 0 || c.Fill >= 1:
		return fmt.Errorf("sim: fill must be in (0, 1), got %v", c.Fill)
	case c.Alpha <= 1:
		return fmt.Errorf("sim: alpha must be > 1, got %v", c.Alpha)
	case c.MaxShare <= 0 || c.MaxShare > 1:
		return fmt.Errorf("sim: max share must be in (0, 1], got %v", c.MaxShare)
	}
	return nil
}

// paretoMean is the mean of a Pareto(1, alpha) bounded above by r.
func paretoMean(alpha, r float64) float64 {
	return alpha / (alpha - 1) * (1 - math.Pow(r, 1-alpha)) / (1 - math.Pow(r, -alpha))
}

// boundedPareto draws from Pareto(1, alpha) truncated at r (inverse CDF).
func boundedPareto(rng *rand.Rand, alpha, r float64) float64 {
	u := rng.Float64()
	return math.Pow(1-u*(1-math.Pow(r, -alpha)), -1/alpha)
}

// paretoBound finds r such that the largest draw (r) is maxShare of a
// device's mean total, k objects per device: r = maxShare·k·E[X | r].
func paretoBound(alpha, k, maxShare float64) float64 {
	r := 100.0
	for range 100 {
		next := math.Max(1.01, maxShare*k*paretoMean(alpha, r))
		if math.Abs(next-r) < 1e-9 {
			break
		}
		r = next
	}
	return r
}

// Generate builds the cluster. Loads are scaled so the mean device load is
// 100 (an arbitrary unit); sizes so the cluster is Fill full.
func Generate(c ClusterSpec) (*plan.Model, error) {
	c.ensureDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x7461626c6532))
	m := &plan.Model{Devices: make([]plan.Device, c.Devices), Egroups: make([]plan.Egroup, c.Objects)}
	for i := range m.Devices {
		node := i / c.DevicesPerNode
		m.Devices[i] = plan.Device{
			ID:            model.DeviceID(fmt.Sprintf("n%d/ssd%d", node, i%c.DevicesPerNode)),
			Node:          model.NodeID(fmt.Sprintf("n%d", node)),
			Rack:          fmt.Sprintf("r%d", node/c.NodesPerRack),
			Tier:          model.TierSSD,
			CapacityBytes: c.DeviceBytes,
		}
	}
	k := float64(c.Objects*c.Replicas) / float64(c.Devices)
	r := paretoBound(c.Alpha, k, c.MaxShare)
	sizes := make([]float64, c.Objects)
	loads := make([]float64, c.Objects)
	var sumSize, sumLoad float64
	for i := range sizes {
		sizes[i] = boundedPareto(rng, c.Alpha, r)
		loads[i] = boundedPareto(rng, c.Alpha, r)
		sumSize += sizes[i]
		sumLoad += loads[i]
	}
	sizeScale := c.Fill * float64(c.Devices) * float64(c.DeviceBytes) / (sumSize * float64(c.Replicas))
	loadScale := 100 * float64(c.Devices) / (sumLoad * float64(c.Replicas))
	vec := model.Vector{Counts: map[model.Tier]int{model.TierAny: c.Replicas}}
	used := make([]int64, c.Devices)
	load := make([]float64, c.Devices)
	replicas := make([]model.DeviceID, c.Objects*c.Replicas) // one backing array
	var taken [model.MaxReplicas]int
	for i := range m.Egroups {
		e := &m.Egroups[i]
		e.ID = uint64(i + 1)
		e.SizeBytes = max(1, int64(sizes[i]*sizeScale))
		e.Load = loads[i] * loadScale
		e.Vector = vec
		e.Replicas = replicas[i*c.Replicas : i*c.Replicas : (i+1)*c.Replicas]
		for j := range c.Replicas {
			d := pickDevice(rng, c, used, e.SizeBytes, taken[:j])
			if d < 0 {
				return nil, fmt.Errorf("sim: object %d (%d bytes) fits on no device; lower the fill or add devices", e.ID, e.SizeBytes)
			}
			taken[j] = d
			e.Replicas = append(e.Replicas, m.Devices[d].ID)
			used[d] += e.SizeBytes
			load[d] += e.Load
		}
	}
	for i := range m.Devices {
		m.Devices[i].UsedBytes = used[i]
		m.Devices[i].Load = load[i]
	}
	return m, nil
}

// pickDevice draws a device uniformly among those with room that hold no
// replica of the object yet (the data path's conservative first placement).
func pickDevice(rng *rand.Rand, c ClusterSpec, used []int64, size int64, taken []int) int {
	ok := func(d int) bool {
		if used[d]+size > c.DeviceBytes {
			return false
		}
		for _, t := range taken {
			if t == d {
				return false
			}
		}
		return true
	}
	for range 64 {
		if d := rng.IntN(c.Devices); ok(d) {
			return d
		}
	}
	start := rng.IntN(c.Devices)
	for j := range c.Devices {
		if d := (start + j) % c.Devices; ok(d) {
			return d
		}
	}
	return -1
}
