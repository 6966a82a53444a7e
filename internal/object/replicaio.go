package object

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/replica"
)

// ReplicaIO is the replica I/O seam (package replica). The aliases keep
// callers written against the object layer's names compiling while they
// move to package replica.
type ReplicaIO = replica.IO

// Local serves replicas on this node's devices (replica.Local).
type Local = replica.Local

// NewLocal wraps devices (replica.NewLocal).
func NewLocal(node model.NodeID, rack string, devs []*device.Device) *Local {
	return replica.NewLocal(node, rack, devs)
}

// Topology provides the placement snapshot.
type Topology interface {
	Snapshot() *model.Snapshot
}

// generational is a Topology that says when its node set changed (the
// cluster's membership); the placement snapshot is then refreshed at once.
type generational interface {
	Generation() uint64
}

var _ Topology = (*replica.Local)(nil)

// snapshotCache refreshes the placement snapshot every interval and folds
// in the bytes placed since, so that a burst of writes between refreshes
// does not herd onto the device that looked emptiest (Allen §6.1).
type snapshotCache struct {
	topo  Topology
	order placement.ReadOrder
	// reading counts this node's reads in flight per device (an
	// *atomic.Int32 per device): the read order sees its own load at
	// once, not a heartbeat later.
	reading  sync.Map
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	snap    *model.Snapshot
	taken   time.Time
	gen     uint64 // the topology's generation when snap was taken
	pending map[model.DeviceID]int64
	// adjusted is snap with pending added, built once per change of
	// either (nil: not built yet): several lookups per PUT share it.
	adjusted *model.Snapshot
	rng      *rand.Rand
}

func (c *snapshotCache) get() *model.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var gen uint64
	g, isGen := c.topo.(generational)
	if isGen {
		gen = g.Generation()
	}
	if c.snap == nil || now.Sub(c.taken) >= c.interval || gen != c.gen {
		c.snap = c.topo.Snapshot()
		c.taken, c.gen = now, gen
		c.pending = map[model.DeviceID]int64{}
		c.adjusted = nil
		return c.snap
	}
	if len(c.pending) == 0 {
		return c.snap
	}
	if c.adjusted == nil {
		devs := append([]model.Device(nil), c.snap.Devices...)
		for i := range devs {
			devs[i].UsedBytes += c.pending[devs[i].ID]
		}
		c.adjusted = model.NewSnapshot(c.snap.Now, c.snap.Nodes, devs).WithSelf(c.snap.Self)
	}
	return c.adjusted
}

// topoSnapshot bypasses the cache (reports want live numbers).
func (c *snapshotCache) topoSnapshot() *model.Snapshot { return c.topo.Snapshot() }

func (c *snapshotCache) placed(rs []model.Replica, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[model.DeviceID]int64{}
	}
	for _, r := range rs {
		c.pending[r.Device] += bytes
	}
	c.adjusted = nil
}

func (c *snapshotCache) invalidate() {
	c.mu.Lock()
	c.snap, c.adjusted = nil, nil
	c.mu.Unlock()
}

func (c *snapshotCache) orderReads(rs []model.Replica) []model.Replica {
	snap := c.get()
	var load placement.ReadLoad
	for _, r := range rs {
		if n, ok := c.reading.Load(r.Device); ok {
			if v := n.(*atomic.Int32).Load(); v > 0 {
				if load == nil {
					load = placement.ReadLoad{}
				}
				load[r.Device] = int(v)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order(snap, rs, load, c.rng)
}

// readStarted counts a read this node sends to a device; the caller
// decrements the returned counter when the read ends (a counter, not a
// closure: no allocation per read on the GET path).
func (c *snapshotCache) readStarted(dev model.DeviceID) *atomic.Int32 {
	n, ok := c.reading.Load(dev)
	if !ok {
		n, _ = c.reading.LoadOrStore(dev, new(atomic.Int32))
	}
	ctr := n.(*atomic.Int32)
	ctr.Add(1)
	return ctr
}
