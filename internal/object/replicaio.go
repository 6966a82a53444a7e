package object

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// ReplicaIO moves egroup replica bytes. The single-node implementation is
// Local; the cluster adds one that reaches remote devices over RPC.
type ReplicaIO interface {
	Create(ctx context.Context, r model.Replica, id uint64) error
	Append(ctx context.Context, r model.Replica, id uint64, off int64, encoded []byte) error
	Sync(ctx context.Context, r model.Replica, id uint64) error
	Truncate(ctx context.Context, r model.Replica, id uint64, size int64) error
	Read(ctx context.Context, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error)
	ReadRaw(ctx context.Context, r model.Replica, id uint64, off, n int64) ([]byte, error)
	Verify(ctx context.Context, r model.Replica, id uint64, size int64) error
	Remove(ctx context.Context, r model.Replica, id uint64) error
}

// Topology provides the placement snapshot.
type Topology interface {
	Snapshot() *model.Snapshot
}

// Local serves replicas on this node's devices.
type Local struct {
	Node   model.NodeID
	Rack   string
	stores map[model.DeviceID]*extent.Store
	order  []model.DeviceID
}

var (
	_ ReplicaIO = (*Local)(nil)
	_ Topology  = (*Local)(nil)
)

// NewLocal wraps devices.
func NewLocal(node model.NodeID, rack string, devs []*device.Device) *Local {
	l := &Local{Node: node, Rack: rack, stores: map[model.DeviceID]*extent.Store{}}
	for _, d := range devs {
		l.stores[d.ID()] = extent.NewStore(d)
		l.order = append(l.order, d.ID())
	}
	return l
}

// Store returns the extent store of a local device.
func (l *Local) Store(id model.DeviceID) (*extent.Store, bool) {
	s, ok := l.stores[id]
	return s, ok
}

// Devices returns local devices in configuration order.
func (l *Local) Devices() []*device.Device {
	out := make([]*device.Device, 0, len(l.order))
	for _, id := range l.order {
		out = append(out, l.stores[id].Device())
	}
	return out
}

// Snapshot builds a model snapshot from live device counters.
func (l *Local) Snapshot() *model.Snapshot {
	devs := make([]model.Device, 0, len(l.order))
	for _, id := range l.order {
		devs = append(devs, l.stores[id].Device().Model(l.Node, l.Rack))
	}
	return model.NewSnapshot(time.Now(), []model.Node{{ID: l.Node, Rack: l.Rack, Up: true}}, devs)
}

func (l *Local) store(r model.Replica) (*extent.Store, error) {
	s, ok := l.stores[r.Device]
	if !ok {
		return nil, fmt.Errorf("object: device %s is not on node %s", r.Device, l.Node)
	}
	return s, nil
}

func (l *Local) Create(_ context.Context, r model.Replica, id uint64) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Create(id)
}

func (l *Local) Append(_ context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Append(id, off, enc)
}

func (l *Local) Sync(_ context.Context, r model.Replica, id uint64) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Sync(id)
}

func (l *Local) Truncate(_ context.Context, r model.Replica, id uint64, size int64) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Truncate(id, size)
}

func (l *Local) Read(_ context.Context, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	s, err := l.store(r)
	if err != nil {
		return nil, err
	}
	return s.Read(id, extOff, extLen, from, to)
}

// ReadInto is Read into a caller-provided buffer (see bufferedReader).
func (l *Local) ReadInto(_ context.Context, buf []byte, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	s, err := l.store(r)
	if err != nil {
		return nil, err
	}
	return s.ReadInto(buf, id, extOff, extLen, from, to)
}

// bufferedReader is implemented by ReplicaIOs that can read into a
// recycled buffer; the read path uses it to avoid a large allocation per
// chunk.
type bufferedReader interface {
	ReadInto(ctx context.Context, buf []byte, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error)
}

func (l *Local) ReadRaw(_ context.Context, r model.Replica, id uint64, off, n int64) ([]byte, error) {
	s, err := l.store(r)
	if err != nil {
		return nil, err
	}
	return s.ReadRaw(id, off, n)
}

func (l *Local) Verify(_ context.Context, r model.Replica, id uint64, size int64) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Verify(id, size)
}

func (l *Local) Remove(_ context.Context, r model.Replica, id uint64) error {
	s, err := l.store(r)
	if err != nil {
		return err
	}
	return s.Remove(id)
}

// snapshotCache refreshes the placement snapshot every interval and folds
// in the bytes placed since, so that a burst of writes between refreshes
// does not herd onto the device that looked emptiest (Allen §6.1).
type snapshotCache struct {
	topo     Topology
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	snap    *model.Snapshot
	taken   time.Time
	pending map[model.DeviceID]int64
	rng     *rand.Rand
}

func (c *snapshotCache) get() *model.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.snap == nil || now.Sub(c.taken) >= c.interval {
		c.snap = c.topo.Snapshot()
		c.taken = now
		c.pending = map[model.DeviceID]int64{}
		return c.snap
	}
	if len(c.pending) == 0 {
		return c.snap
	}
	devs := append([]model.Device(nil), c.snap.Devices...)
	for i := range devs {
		devs[i].UsedBytes += c.pending[devs[i].ID]
	}
	return model.NewSnapshot(c.snap.Now, c.snap.Nodes, devs)
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
}

func (c *snapshotCache) invalidate() {
	c.mu.Lock()
	c.snap = nil
	c.mu.Unlock()
}

func (c *snapshotCache) orderReads(rs []model.Replica) []model.Replica {
	snap := c.get()
	c.mu.Lock()
	defer c.mu.Unlock()
	return placement.OrderReads(snap, rs, c.rng)
}
