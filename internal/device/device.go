package device

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// Errors.
var (
	// ErrFull means the write would take the device past its capacity (or
	// the filesystem returned ENOSPC). Nothing was written.
	ErrFull = errors.New("device: full")
	// ErrFailed means the device has seen an I/O error and is out of service.
	ErrFailed   = errors.New("device: failed")
	ErrNotExist = errors.New("device: file does not exist")
)

// File is one file on a device. Writes are positional; the extent store
// only ever writes at the end of a file.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() int64
	Close() error
}

// FileInfo describes one file on a device.
type FileInfo struct {
	Name string
	Size int64
	// ModTime is the file's last modification: the filesystem's mtime,
	// a mem device's last write, a remote object's upload.
	ModTime time.Time
}

// backend is the raw medium under a Device.
type backend interface {
	open(name string, create bool) (rawFile, error)
	remove(name string) error
	list() ([]string, error)
	listInfo() ([]FileInfo, error)
	stat(name string) (FileInfo, error)
	usedBytes() (int64, error)
}

type rawFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Close() error
	size() (int64, error)
}

// Spec is a device as configured: "tier:path:capacity[:profile]".
type Spec struct {
	Tier     model.Tier
	Path     string // empty for a RAM device
	Capacity int64
	Profile  string // emulation profile name; "" = none
}

// ParseSpec parses "ssd:/data/ssd0:20GiB", "mem::2GiB" or
// "hdd:/data/hdd0:200GiB:hdd" (last field names an emulation profile).
func ParseSpec(s string) (Spec, error) {
	if i := strings.Index(s, "://"); i >= 0 {
		// A remote device: tier:URL:capacity, the URL holding colons.
		tier, rest, _ := strings.Cut(s, ":")
		j := strings.LastIndexByte(rest, ':')
		if j < 0 || !strings.Contains(rest[:j], "://") {
			return Spec{}, fmt.Errorf("device: spec %q: want tier:URL:capacity", s)
		}
		if !model.ValidTierName(tier) || tier == string(model.TierAny) {
			return Spec{}, fmt.Errorf("device: spec %q: bad tier name %q", s, tier)
		}
		capBytes, err := ParseBytes(rest[j+1:])
		if err != nil || capBytes <= 0 {
			return Spec{}, fmt.Errorf("device: spec %q: bad capacity %q", s, rest[j+1:])
		}
		if _, _, _, _, _, err := parseRemoteURL(rest[:j]); err != nil {
			return Spec{}, fmt.Errorf("device: spec %q: %w", s, err)
		}
		return Spec{Tier: model.Tier(tier), Path: rest[:j], Capacity: capBytes}, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 {
		return Spec{}, fmt.Errorf("device: spec %q: want tier:path:capacity[:profile]", s)
	}
	if !model.ValidTierName(parts[0]) || parts[0] == string(model.TierAny) {
		return Spec{}, fmt.Errorf("device: spec %q: bad tier name %q", s, parts[0])
	}
	capBytes, err := ParseBytes(parts[2])
	if err != nil {
		return Spec{}, fmt.Errorf("device: spec %q: %w", s, err)
	}
	if capBytes <= 0 {
		return Spec{}, fmt.Errorf("device: spec %q: capacity must be positive", s)
	}
	sp := Spec{Tier: model.Tier(parts[0]), Path: parts[1], Capacity: capBytes}
	if sp.Tier == model.TierMem && sp.Path != "" {
		return Spec{}, fmt.Errorf("device: spec %q: a mem device has no path (use mem::SIZE)", s)
	}
	if sp.Tier != model.TierMem && sp.Path == "" {
		return Spec{}, fmt.Errorf("device: spec %q: tier %s needs a directory path", s, sp.Tier)
	}
	if len(parts) == 4 {
		if _, ok := LookupProfile(parts[3]); !ok && parts[3] != "none" {
			return Spec{}, fmt.Errorf("device: spec %q: unknown emulation profile %q (have %s, each also as NAME/K: its bandwidth divided by K ≥ 1)", s, parts[3], profileNames())
		}
		sp.Profile = parts[3]
	}
	return sp, nil
}

// DisplayPath is Path with any credentials in a remote URL redacted.
func (s Spec) DisplayPath() string {
	if !s.Remote() {
		return s.Path
	}
	u, err := url.Parse(s.Path)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}

// Remote reports whether the device is a remote bucket (Path is a URL).
func (s Spec) Remote() bool { return strings.Contains(s.Path, "://") }

func (s Spec) String() string {
	out := fmt.Sprintf("%s:%s:%s", s.Tier, s.Path, FormatBytes(s.Capacity))
	if s.Profile != "" {
		out += ":" + s.Profile
	}
	return out
}

// ParseBytes parses sizes like "512", "4KiB", "20GiB", "1.5GB", "10M".
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			mult = u.mult
			s = strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0) { // also rejects NaN
		return 0, fmt.Errorf("bad size %q", s)
	}
	if f*mult > 1<<62 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return int64(f * mult), nil
}

// FormatBytes prints a size with a binary unit.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + []string{"KiB", "MiB", "GiB", "TiB"}[exp]
}

// Device is one medium with a tier, a capacity, live counters and an
// optional emulation throttle.
type Device struct {
	id       model.DeviceID
	tier     model.Tier
	capacity int64
	spec     Spec
	be       backend
	throttle *Throttle

	used     atomic.Int64
	inflight atomic.Int64 // operations in flight (QueueLen)
	streams  atomic.Int64 // files with an operation in flight (ActiveStreams)
	failed   atomic.Bool
	// fault is the injected fault (test hook, faults.go); nil: none.
	fault atomic.Pointer[Fault]

	readBps, writeBps atomic.Uint64 // float64 bits

	reads, writes, readBytes, writeBytes, syncs atomic.Int64

	// group, when set, shares syncs among concurrent writers (SyncFS).
	group atomic.Pointer[groupSync]
	// fileSyncs counts the fsyncs of single files (SyncFile mode).
	fileSyncs atomic.Int64
}

// Open opens (creating) the device described by spec under the given ID.
func Open(id model.DeviceID, spec Spec) (*Device, error) {
	var be backend
	if spec.Remote() {
		r, err := newRemoteBackend(spec.Path)
		if err != nil {
			return nil, fmt.Errorf("device %s: %w", id, err)
		}
		be = r
	} else if spec.Tier == model.TierMem {
		be = newMemBackend()
	} else {
		d, err := newDirBackend(spec.Path)
		if err != nil {
			return nil, err
		}
		be = d
	}
	d := &Device{id: id, tier: spec.Tier, capacity: spec.Capacity, spec: spec, be: be}
	if p, ok := LookupProfile(spec.Profile); ok {
		d.throttle = NewThrottle(p)
	}
	used, err := be.usedBytes()
	if err != nil {
		return nil, fmt.Errorf("device %s: scan usage: %w", id, err)
	}
	d.used.Store(used)
	return d, nil
}

func (d *Device) ID() model.DeviceID { return d.id }
func (d *Device) Tier() model.Tier   { return d.tier }
func (d *Device) Spec() Spec         { return d.spec }
func (d *Device) Capacity() int64    { return d.capacity }
func (d *Device) Used() int64        { return d.used.Load() }
func (d *Device) Failed() bool       { return d.failed.Load() }

// Stats is a point-in-time copy of the live counters.
type Stats struct {
	ID            model.DeviceID
	Tier          model.Tier
	Path          string
	Profile       string
	CapacityBytes int64
	UsedBytes     int64
	QueueLen      int
	ActiveStreams int
	ReadBps       float64
	WriteBps      float64
	Failed        bool
	Reads, Writes int64
	ReadBytes     int64
	WriteBytes    int64
	Syncs         int64
	// SyncRounds are the flushes that served Syncs: syncfs rounds in
	// group sync mode (SyncFS), where Syncs/SyncRounds is how many writers
	// shared a flush, and one fsync per Sync in SyncFile mode.
	SyncRounds int64
}

// Stats returns the live counters.
func (d *Device) Stats() Stats {
	return Stats{
		ID: d.id, Tier: d.tier, Path: d.spec.DisplayPath(), Profile: d.spec.Profile,
		CapacityBytes: d.capacity, UsedBytes: d.used.Load(),
		QueueLen: int(d.inflight.Load()), ActiveStreams: int(d.streams.Load()),
		ReadBps: f64(d.readBps.Load()), WriteBps: f64(d.writeBps.Load()),
		Failed: d.failed.Load(), Reads: d.reads.Load(), Writes: d.writes.Load(),
		ReadBytes: d.readBytes.Load(), WriteBytes: d.writeBytes.Load(), Syncs: d.syncs.Load(), SyncRounds: d.syncRounds(),
	}
}

// Model returns the device as decision code sees it.
func (d *Device) Model(node model.NodeID, rack string) model.Device {
	st := model.DeviceUp
	if d.failed.Load() {
		st = model.DeviceFailed
	}
	return model.Device{
		ID: d.id, Node: node, Rack: rack, Tier: d.tier, State: st,
		CapacityBytes: d.capacity, UsedBytes: d.used.Load(),
		QueueLen: int(d.inflight.Load()), ActiveStreams: int(d.streams.Load()),
		ReadBps: f64(d.readBps.Load()), WriteBps: f64(d.writeBps.Load()),
	}
}

// MarkFailed takes the device out of service.
func (d *Device) MarkFailed() { d.failed.Store(true) }

// ioErr classifies an I/O error: ENOSPC becomes ErrFull, anything else
// that is not "file missing" marks the device failed.
func (d *Device) ioErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("device %s: %s %s: %w", d.id, op, name, ErrFull)
	}
	if errors.Is(err, ErrNotExist) || errors.Is(err, ErrFull) {
		return fmt.Errorf("device %s: %s %s: %w", d.id, op, name, err)
	}
	d.failed.Store(true)
	return fmt.Errorf("device %s: %s %s: %w: %v", d.id, op, name, ErrFailed, err)
}

// Create creates (or truncates) a file.
func (d *Device) Create(name string) (File, error) { return d.open(name, true) }

// OpenFile opens an existing file.
func (d *Device) OpenFile(name string) (File, error) { return d.open(name, false) }

func (d *Device) open(name string, create bool) (File, error) {
	if d.failed.Load() {
		return nil, fmt.Errorf("device %s: %w", d.id, ErrFailed)
	}
	// Create truncates an existing file: its bytes stop counting as used.
	// (For a remote bucket that costs a HEAD, once per replica copied
	// there.)
	var prev int64
	if create {
		if old, err := d.be.open(name, false); err == nil {
			prev, _ = old.size()
			old.Close()
		}
	}
	raw, err := d.be.open(name, create)
	if err != nil {
		return nil, d.ioErr("open", name, err)
	}
	sz, err := raw.size()
	if err != nil {
		raw.Close()
		return nil, d.ioErr("stat", name, err)
	}
	d.used.Add(-prev)
	f := &file{d: d, name: name, raw: raw}
	f.sz.Store(sz)
	return f, nil
}

// Remove deletes a file and releases its space.
func (d *Device) Remove(name string) error {
	f, err := d.be.open(name, false)
	if err != nil {
		return d.ioErr("remove", name, err)
	}
	sz, _ := f.size()
	f.Close()
	if err := d.be.remove(name); err != nil {
		return d.ioErr("remove", name, err)
	}
	d.used.Add(-sz)
	return nil
}

// List returns every file name on the device.
func (d *Device) List() ([]string, error) {
	names, err := d.be.list()
	if err != nil {
		return nil, d.ioErr("list", "", err)
	}
	return names, nil
}

// ListInfo returns every file on the device with its size and
// modification time, sorted by name.
func (d *Device) ListInfo() ([]FileInfo, error) {
	infos, err := d.be.listInfo()
	if err != nil {
		return nil, d.ioErr("list", "", err)
	}
	return infos, nil
}

// Stat returns one file's size and modification time; ErrNotExist
// (wrapped) when there is no such file.
func (d *Device) Stat(name string) (FileInfo, error) {
	fi, err := d.be.stat(name)
	if err != nil {
		return FileInfo{}, d.ioErr("stat", name, err)
	}
	return fi, nil
}

// Probe runs the start-up throughput test (OctopusFS §3.2): write, sync and
// read back size bytes through the emulation throttle, and record the
// measured throughputs. clock is injected so tests can run it fast.
func (d *Device) Probe(size int) error {
	const name = ".probe"
	// A full device must still start (its data has to stay readable):
	// probe with the whole 64 KiB blocks that fit, or not at all.
	if free := d.capacity - d.used.Load(); int64(size) > free {
		size = int(max(free, 0) &^ (64<<10 - 1))
	}
	if size <= 0 {
		return nil
	}
	f, err := d.Create(name)
	if err != nil {
		return err
	}
	defer func() { f.Close(); _ = d.Remove(name) }()
	buf := make([]byte, min(size, 1<<20))
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	for off := 0; off < size; off += len(buf) {
		if _, err := f.WriteAt(buf[:min(len(buf), size-off)], int64(off)); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	w := time.Since(start)
	start = time.Now()
	for off := 0; off < size; off += len(buf) {
		if _, err := f.ReadAt(buf[:min(len(buf), size-off)], int64(off)); err != nil && err != io.EOF {
			return err
		}
	}
	r := time.Since(start)
	d.writeBps.Store(bits(float64(size) / max(w.Seconds(), 1e-6)))
	d.readBps.Store(bits(float64(size) / max(r.Seconds(), 1e-6)))
	return nil
}

// SetThroughput records measured throughputs (e.g. from a previous probe).
func (d *Device) SetThroughput(readBps, writeBps float64) {
	d.readBps.Store(bits(readBps))
	d.writeBps.Store(bits(writeBps))
}

// file wraps a raw file with accounting, capacity checks and throttling.
type file struct {
	d      *Device
	name   string
	raw    rawFile
	mu     sync.Mutex // serialises size changes
	sz     atomic.Int64
	closed atomic.Bool
	ops    atomic.Int32 // operations in flight on this file
}

// busy counts an operation in flight on the file until the returned func
// runs: the device's queue length counts operations, its active streams
// the files with at least one in flight. That is OctopusFS's NrConn(m),
// the connections reading or writing the medium now — not the handles
// the extent store keeps open between operations, which grow with the
// number of egroups on a device, not with its load.
func (f *file) busy() func() {
	d := f.d
	d.inflight.Add(1)
	if f.ops.Add(1) == 1 {
		d.streams.Add(1)
	}
	return f.idle
}

func (f *file) idle() {
	if f.ops.Add(-1) == 0 {
		f.d.streams.Add(-1)
	}
	f.d.inflight.Add(-1)
}

func (f *file) Size() int64 { return f.sz.Load() }

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	d := f.d
	if d.failed.Load() {
		return 0, fmt.Errorf("device %s: %w", d.id, ErrFailed)
	}
	defer f.busy()()
	if d.throttle != nil {
		d.throttle.Wait(len(p), true)
	}
	n, err := 0, d.injected(faultRead, false) // test hook: nil unless a fault is injected
	if err == nil {
		n, err = f.raw.ReadAt(p, off)
	}
	d.reads.Add(1)
	d.readBytes.Add(int64(n))
	if err != nil && err != io.EOF {
		return n, d.ioErr("read", f.name, err)
	}
	return n, err
}

// WriteAt writes p at off. Growth beyond the device's capacity fails with
// ErrFull before any byte is written.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	d := f.d
	if d.failed.Load() {
		return 0, fmt.Errorf("device %s: %w", d.id, ErrFailed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	growth := off + int64(len(p)) - f.sz.Load()
	if growth > 0 {
		if d.used.Add(growth) > d.capacity {
			d.used.Add(-growth)
			return 0, fmt.Errorf("device %s: write %s: %w (capacity %s)", d.id, f.name, ErrFull, FormatBytes(d.capacity))
		}
	}
	defer f.busy()()
	if d.throttle != nil {
		d.throttle.Wait(len(p), false)
	}
	n, err := 0, d.injected(faultWrite, growth > 0) // test hook: nil unless a fault is injected
	if err == nil {
		n, err = f.raw.WriteAt(p, off)
	}
	d.writes.Add(1)
	d.writeBytes.Add(int64(n))
	if err != nil {
		// Re-read the real size so accounting stays exact after a short write.
		if growth > 0 {
			d.used.Add(-growth)
		}
		if sz, serr := f.raw.size(); serr == nil {
			if g := sz - f.sz.Load(); g > 0 {
				d.used.Add(g)
				f.sz.Store(sz)
			}
		}
		return n, d.ioErr("write", f.name, err)
	}
	if growth > 0 {
		f.sz.Store(off + int64(len(p)))
	}
	return n, nil
}

// Sync makes the file's writes durable. A sync that fails takes the
// device out of service, ENOSPC included (fsyncgate): the kernel reports a
// writeback error once and marks the pages clean, so a later fsync that
// succeeds says nothing about writes made before the failure — and with
// syncfs the lost pages may be any file's. A sync on a failed device, or
// one during which the device failed, fails.
func (f *file) Sync() error {
	d := f.d
	if d.failed.Load() {
		return fmt.Errorf("device %s: sync %s: %w", d.id, f.name, ErrFailed)
	}
	defer f.busy()()
	if d.throttle != nil {
		d.throttle.Wait(0, false)
	}
	d.syncs.Add(1)
	err := d.injected(faultSync, false) // test hook
	if err == nil {
		if g := d.group.Load(); g != nil {
			err = g.sync(func() error { return syncfs(g.root) })
		} else {
			d.fileSyncs.Add(1)
			err = f.raw.Sync()
		}
	}
	if err != nil && !errors.Is(err, ErrNotExist) {
		d.failed.Store(true)
		return fmt.Errorf("device %s: sync %s: %w: %v", d.id, f.name, ErrFailed, err)
	}
	if err != nil {
		return d.ioErr("sync", f.name, err)
	}
	if d.failed.Load() {
		return fmt.Errorf("device %s: sync %s: %w (failed during the sync)", d.id, f.name, ErrFailed)
	}
	return nil
}

func (f *file) Truncate(size int64) error {
	if size < 0 {
		// A caller bug or corrupt metadata, not a device fault.
		return fmt.Errorf("device %s: truncate %s to negative size %d", f.d.id, f.name, size)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.raw.Truncate(size); err != nil {
		return f.d.ioErr("truncate", f.name, err)
	}
	f.d.used.Add(size - f.sz.Load())
	f.sz.Store(size)
	return nil
}

func (f *file) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	// A remote file uploads its unsynced bytes here; if that fails they
	// are lost and the device is failed (a later Sync on a new handle
	// could not tell).
	return f.d.ioErr("close", f.name, f.raw.Close())
}
