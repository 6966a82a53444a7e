package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
)

// Sentinel errors of replica I/O, whatever the node that served it.
var (
	// ErrCorrupt: a slice failed its checksum.
	ErrCorrupt = extent.ErrCorrupt
	// ErrAppendOnly: an append at an offset other than the file's end.
	ErrAppendOnly = extent.ErrAppendOnly
	// ErrFull: the device has no room.
	ErrFull = device.ErrFull
	// ErrNotExist: no such replica file.
	ErrNotExist = device.ErrNotExist
	// ErrFailed: the device failed.
	ErrFailed = device.ErrFailed
)

// EncodedLen is the on-disk size of n payload bytes (slice headers and
// checksums included).
func EncodedLen(n int64) int64 { return extent.EncodedLen(n) }

// IO moves egroup replica bytes. Local serves this node's devices; the
// cluster's router reaches other nodes' devices over RPC.
type IO interface {
	Create(ctx context.Context, r model.Replica, id uint64) error
	Append(ctx context.Context, r model.Replica, id uint64, off int64, encoded []byte) error
	Sync(ctx context.Context, r model.Replica, id uint64) error
	// AppendSync is Append then Sync in one call (one round trip to a
	// remote device): a writer's last append before it commits.
	AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, encoded []byte) error
	Truncate(ctx context.Context, r model.Replica, id uint64, size int64) error
	Read(ctx context.Context, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error)
	ReadRaw(ctx context.Context, r model.Replica, id uint64, off, n int64) ([]byte, error)
	Verify(ctx context.Context, r model.Replica, id uint64, size int64) error
	Remove(ctx context.Context, r model.Replica, id uint64) error
	// Pull makes dst a verified copy of the first size bytes of replica
	// src. It runs where dst lives (the destination node reads from the
	// source node), so a move's bytes cross the network once and never
	// through a coordinator. A failed pull leaves no file at dst.
	Pull(ctx context.Context, dst, src model.Replica, id uint64, size int64) error
}

// BufferedReader is implemented by IOs that can read into a recycled
// buffer; the object layer's read path uses it to avoid a large
// allocation per chunk.
type BufferedReader interface {
	ReadInto(ctx context.Context, buf []byte, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error)
}

// copyChunk bounds one raw read during a copy: large enough to stream at
// device speed, small enough for one RPC.
const copyChunk = 4 << 20

// Copy copies the first size bytes of egroup id from src to dst through
// io and verifies every slice of the copy. On error the partial copy is
// removed. A copy whose verification finds a corrupt slice returns an
// error wrapping ErrCorrupt: the bad bytes came from the source.
func Copy(ctx context.Context, io IO, id uint64, size int64, src, dst model.Replica) error {
	if err := io.Create(ctx, dst, id); err != nil {
		return fmt.Errorf("replica: copy egroup %016x to %s: create: %w", id, dst.Device, err)
	}
	fail := func(err error) error {
		_ = io.Remove(context.WithoutCancel(ctx), dst, id)
		return fmt.Errorf("replica: copy egroup %016x %s→%s: %w", id, src.Device, dst.Device, err)
	}
	for off := int64(0); off < size; off += copyChunk {
		n := min(copyChunk, size-off)
		b, err := io.ReadRaw(ctx, src, id, off, n)
		if err != nil {
			return fail(err)
		}
		if err := io.Append(ctx, dst, id, off, b); err != nil {
			return fail(err)
		}
	}
	if err := io.Sync(ctx, dst, id); err != nil {
		return fail(err)
	}
	if err := io.Verify(ctx, dst, id, size); err != nil {
		return fail(err)
	}
	return nil
}

// Local serves replicas on this node's devices.
type Local struct {
	Node   model.NodeID
	Rack   string
	stores map[model.DeviceID]*extent.Store
	order  []model.DeviceID

	pullMu sync.Mutex
	pulls  map[pullKey]*pullLock
}

type pullKey struct {
	dev model.DeviceID
	id  uint64
}

// pullLock serialises the pulls of one replica; refs counts the pulls
// holding or waiting on it (guarded by Local.pullMu).
type pullLock struct {
	mu   sync.Mutex
	refs int
}

var _ IO = (*Local)(nil)

// NewLocal wraps devices.
func NewLocal(node model.NodeID, rack string, devs []*device.Device) *Local {
	l := &Local{Node: node, Rack: rack, stores: map[model.DeviceID]*extent.Store{}, pulls: map[pullKey]*pullLock{}}
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
	return model.NewSnapshot(time.Now(), []model.Node{{ID: l.Node, Rack: l.Rack, Up: true}}, devs).WithSelf(l.Node)
}

// Has reports whether a device is on this node.
func (l *Local) Has(id model.DeviceID) bool {
	_, ok := l.stores[id]
	return ok
}

func (l *Local) store(r model.Replica) (*extent.Store, error) {
	s, ok := l.stores[r.Device]
	if !ok {
		return nil, fmt.Errorf("replica: device %s is not on node %s", r.Device, l.Node)
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

func (l *Local) AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	if err := l.Append(ctx, r, id, off, enc); err != nil {
		return err
	}
	return l.Sync(ctx, r, id)
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

// ReadInto is Read into a caller-provided buffer (BufferedReader).
func (l *Local) ReadInto(_ context.Context, buf []byte, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	s, err := l.store(r)
	if err != nil {
		return nil, err
	}
	return s.ReadInto(buf, id, extOff, extLen, from, to)
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

// Pull copies between two of this node's devices (a single node has no
// other kind).
func (l *Local) Pull(ctx context.Context, dst, src model.Replica, id uint64, size int64) error {
	return l.PullFrom(ctx, l, dst, src, id, size)
}

// PullFrom makes dst, one of this node's devices, a verified copy of src,
// reading src through via (this node's devices or the cluster's router).
//
// Pulls are idempotent: concurrent pulls of one replica are serialised,
// and a pull that finds a complete, verified copy already in place (an
// earlier attempt of the same move, e.g. by a Curator master that lost
// its lease) keeps it instead of truncating it. Moved egroups are sealed,
// so a copy that verifies at the egroup's size holds the same bytes.
func (l *Local) PullFrom(ctx context.Context, via IO, dst, src model.Replica, id uint64, size int64) error {
	if !l.Has(dst.Device) {
		return fmt.Errorf("replica: pull to %s: not a device of node %s", dst.Device, l.Node)
	}
	k := pullKey{dst.Device, id}
	// The entry is reference-counted and leaves the map only when no pull
	// holds or waits on it: deleting it while others waited let a later
	// pull make a second mutex, and two copies to one file ran at once
	// (each Create truncating the other's, one's cleanup removing a copy
	// the other had just verified).
	l.pullMu.Lock()
	p, ok := l.pulls[k]
	if !ok {
		p = &pullLock{}
		l.pulls[k] = p
	}
	p.refs++
	l.pullMu.Unlock()
	p.mu.Lock()
	defer func() {
		p.mu.Unlock()
		l.pullMu.Lock()
		if p.refs--; p.refs == 0 {
			delete(l.pulls, k)
		}
		l.pullMu.Unlock()
	}()
	derr := l.Verify(ctx, dst, id, size)
	if derr == nil {
		return nil
	}
	if !errors.Is(derr, ErrNotExist) {
		// A file is there (a bad replica repaired in place, where no
		// other device was left). Copy truncates it before the new copy
		// verifies, and it may hold the only good copy of some slices:
		// overwrite it only from a source that verifies whole.
		if err := via.Verify(ctx, src, id, size); err != nil {
			return fmt.Errorf("replica: pull egroup %016x to %s over its existing file: source %s does not verify, the file is kept: %w", id, dst.Device, src.Device, err)
		}
	}
	return Copy(ctx, via, id, size, src, dst)
}
