package tiersim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// blockBytes is the block granularity of the simulated data: every
// operation reads or writes whole 8 KiB blocks (the smallest OLTP block).
const blockBytes = 8 << 10

// maxRequestBytes is the largest request a device serves at once; larger
// operations and moves are split (as the kernel's block layer and the
// device emulator do), so a small client request waits for one piece of
// a big transfer, not all of it.
const maxRequestBytes = 512 << 10

// maxBacklog bounds a device's queued work (seconds): about 60 random
// hdd requests, what a few clients with an I/O depth of 16–32 keep
// outstanding.
const maxBacklog = 0.25

// profile is a device's service model: the emulation profiles' figures.
type profile struct {
	// Seek is the positioning time of a random request on a serial
	// device (hdd: 4 ms); SeqSeek that of a request continuing a
	// sequential stream interleaved with other work (a short seek).
	Seek    time.Duration
	SeqSeek time.Duration
	// Base is per-request latency that overlaps across requests (flash
	// parallelism): it adds to latency but not to the device's queue.
	Base        time.Duration
	BytesPerSec float64
}

var (
	hddProfile = profile{Seek: 4 * time.Millisecond, SeqSeek: time.Millisecond, BytesPerSec: 150e6}
	ssdProfile = profile{Base: 100 * time.Microsecond, BytesPerSec: 500e6}
)

// service is the queueing work (seconds) of one request of n bytes.
func (p profile) service(n int64, random bool) float64 {
	s := float64(n) / p.BytesPerSec
	if random {
		s += p.Seek.Seconds()
	} else {
		s += p.SeqSeek.Seconds()
	}
	return s
}

// simDevice is one device with an M/G/1 queue per time step: requests
// arriving in a step see the Pollaczek–Khinchine mean wait for the step's
// load, plus the backlog left by earlier overloaded steps (a fluid
// queue), so an overloaded device's latency grows with its backlog.
type simDevice struct {
	model.Device
	prof profile

	// Per step: queueing work (s), Σ work², requests; client requests
	// and their own service (s, without waiting).
	work, work2 float64
	reqs        int
	cReqs       float64
	cOps        float64
	cSvc        float64
	backlog     float64 // seconds of work left from earlier steps
	wait        float64 // mean wait of the last step (s)
	totalReqs   float64 // every request ever served
	util        float64 // utilisation of the last step
}

// request adds one request of n bytes (client or background).
func (d *simDevice) request(n int64, random, client bool) float64 {
	var total float64
	for n > 0 {
		part := min(n, maxRequestBytes)
		s := d.prof.service(part, random)
		d.work += s
		d.work2 += s * s
		d.reqs++
		d.totalReqs++
		total += s
		if client {
			d.cReqs++
		}
		n -= part
		random = false // the rest of a big request continues sequentially
	}
	return total
}

// clientOp accounts a client operation of n bytes.
func (d *simDevice) clientOp(n int64, random bool) {
	s := d.request(n, random, true)
	d.cOps++
	d.cSvc += s + d.prof.Base.Seconds()
}

// settle ends a step of length dt: it computes the mean wait and returns
// the sum of client latencies (s) and the client operation count.
func (d *simDevice) settle(dt float64) (latSum, ops float64) {
	rho := d.work / dt
	var wq float64
	if d.reqs > 0 {
		lambda := float64(d.reqs) / dt
		es2 := d.work2 / float64(d.reqs)
		wq = lambda * es2 / (2 * (1 - math.Min(rho, 0.95)))
	}
	// Clients keep a bounded number of requests outstanding (fio's
	// iodepth): work beyond maxBacklog is never issued, so an overloaded
	// device's latency saturates instead of growing without bound.
	next := math.Min(maxBacklog, math.Max(0, d.backlog+d.work-dt))
	wq += (d.backlog + next) / 2
	d.backlog = next
	d.wait, d.util = wq, rho
	// A client operation split into several requests waits once.
	latSum, ops = d.cSvc+d.cOps*wq, d.cOps
	d.work, d.work2, d.reqs, d.cReqs, d.cOps, d.cSvc = 0, 0, 0, 0, 0, 0
	return latSum, ops
}

// queueLen estimates requests in flight (for placement and back-off):
// Little's law over the last step.
func (d *simDevice) queueLen() int {
	if d.util <= 0 {
		return 0
	}
	q := d.util / math.Max(0.02, 1-math.Min(d.util, 0.98))
	return int(math.Round(q + d.backlog/0.004))
}

// egroup is one simulated extent group holding whole blocks of one
// section.
type egroup struct {
	id       uint64
	dev      int
	size     int64 // bytes appended (live and dead)
	live     int32 // live blocks
	open     bool
	removed  bool
	moving   bool
	section  int
	mtime    time.Time
	atime    time.Time
	winStart time.Time
	winReads int64
	// refusedAt is when promotion last refused the egroup for lack of
	// room on the ssd (decide.Promotions).
	refusedAt time.Time
}

// layout is the node's data: devices, egroups and each section's block
// map (block → egroup).
type layout struct {
	node    model.NodeID
	devs    []*simDevice
	egs     []*egroup
	blocks  [][]int32 // per section
	open    []int     // per section: open egroup index or -1
	pol     placement.Policy
	egBytes int64
	window  time.Duration
	nextID  uint64
	// Counters (whole run): client bytes read per device tier.
	readBytes map[model.Tier]int64
}

func newLayout(devs []*simDevice, sections []int64, pol placement.Policy, egBytes int64, window time.Duration) *layout {
	l := &layout{node: devs[0].Node, devs: devs, pol: pol, egBytes: egBytes, window: window, readBytes: map[model.Tier]int64{}}
	for _, n := range sections {
		b := make([]int32, n)
		for i := range b {
			b[i] = -1
		}
		l.blocks = append(l.blocks, b)
		l.open = append(l.open, -1)
	}
	return l
}

// snapshot is the cluster view decision code sees.
func (l *layout) snapshot(now time.Time) *model.Snapshot {
	devs := make([]model.Device, len(l.devs))
	for i, d := range l.devs {
		devs[i] = d.Device
		devs[i].QueueLen = d.queueLen()
	}
	return model.NewSnapshot(now, []model.Node{{ID: l.node, Rack: "r1", Up: true}}, devs)
}

func (l *layout) devIndex(id model.DeviceID) int {
	for i, d := range l.devs {
		if d.ID == id {
			return i
		}
	}
	return -1
}

var anyOne = model.Vector{Counts: map[model.Tier]int{model.TierAny: 1}}

// openEgroup starts a new egroup for section s where the production
// placement policy puts a new one-replica egroup (the fastest tier with
// room).
func (l *layout) openEgroup(now time.Time, s int, snap *model.Snapshot, rng *rand.Rand) (int, error) {
	rs, err := l.pol.Place(snap, placement.Request{Vector: anyOne, Bytes: l.egBytes}, rng)
	if err != nil {
		return -1, fmt.Errorf("tiersim: placing a new egroup: %w", err)
	}
	di := l.devIndex(rs[0].Device)
	if di < 0 {
		return -1, fmt.Errorf("tiersim: placement chose unknown device %s", rs[0].Device)
	}
	l.nextID++
	l.egs = append(l.egs, &egroup{id: l.nextID, dev: di, open: true, section: s, mtime: now})
	l.open[s] = len(l.egs) - 1
	return l.open[s], nil
}

// write appends n bytes starting at block b of section s to the
// section's open egroup (Terrace never overwrites in place: the old
// copies become garbage) and returns the device index written.
func (l *layout) write(now time.Time, s int, b int, n int64, snap *model.Snapshot, rng *rand.Rand) (int, error) {
	blocks := l.blocks[s]
	nb := int(max(1, n/blockBytes))
	oi := l.open[s]
	if oi < 0 || l.egs[oi].size+int64(nb)*blockBytes > l.egBytes {
		if oi >= 0 {
			l.seal(oi)
		}
		var err error
		if oi, err = l.openEgroup(now, s, snap, rng); err != nil {
			return -1, err
		}
	}
	eg := l.egs[oi]
	for k := 0; k < nb; k++ {
		bi := (b + k) % len(blocks)
		if old := blocks[bi]; old >= 0 {
			l.kill(int(old))
		}
		blocks[bi] = int32(oi)
		eg.live++
	}
	add := int64(nb) * blockBytes
	eg.size += add
	eg.mtime = now
	l.devs[eg.dev].UsedBytes += add
	return eg.dev, nil
}

// seal closes an open egroup (it becomes movable).
func (l *layout) seal(i int) {
	eg := l.egs[i]
	eg.open = false
	if eg.live == 0 {
		l.remove(i)
	}
}

// kill marks one block of egroup i dead; a sealed egroup with no live
// block is removed (data removal returns its space).
func (l *layout) kill(i int) {
	eg := l.egs[i]
	eg.live--
	if eg.live == 0 && !eg.open {
		l.remove(i)
	}
}

func (l *layout) remove(i int) {
	eg := l.egs[i]
	if eg.removed {
		return
	}
	eg.removed = true
	l.devs[eg.dev].UsedBytes -= eg.size
}

// read serves n bytes at block b of section s and records the access;
// it returns the device index (-1 for never-written blocks).
func (l *layout) read(now time.Time, s int, b int, n int64) int {
	ei := l.blocks[s][b%len(l.blocks[s])]
	if ei < 0 {
		return -1
	}
	eg := l.egs[ei]
	eg.atime = now
	if eg.winStart.IsZero() || now.Sub(eg.winStart) > l.window {
		eg.winStart, eg.winReads = now, 0
	}
	eg.winReads++
	l.readBytes[l.devs[eg.dev].Tier] += n
	return eg.dev
}

// egroups returns the egroups decision code sees (the join of a scan):
// live, with their replica, access record and vector any=1. only, when
// set, filters them.
func (l *layout) egroups(now time.Time, only func(*egroup) bool) []decide.Egroup {
	out := make([]decide.Egroup, 0, len(l.egs))
	for _, eg := range l.egs {
		if eg.removed || eg.moving || only != nil && !only(eg) {
			continue
		}
		d := l.devs[eg.dev]
		reads := eg.winReads
		if now.Sub(eg.winStart) > l.window {
			reads = 0
		}
		out = append(out, decide.Egroup{
			ID: eg.id, Open: eg.open, Size: eg.size, Vector: anyOne, Mtime: eg.mtime, Atime: eg.atime, Reads: reads,
			LiveBytes: int64(eg.live) * blockBytes, LiveExtents: int(eg.live),
			Replicas: []decide.Replica{{Replica: model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}}},
		})
	}
	return out
}

// check verifies the layout's accounting: every device's used bytes are
// the sum of its live egroups' sizes, and every block points at a live
// egroup that counts it.
func (l *layout) check() error {
	used := make([]int64, len(l.devs))
	live := make([]int32, len(l.egs))
	for _, eg := range l.egs {
		if !eg.removed {
			used[eg.dev] += eg.size
		}
	}
	for i, d := range l.devs {
		if used[i] != d.UsedBytes {
			return fmt.Errorf("tiersim: device %s used %d, egroups sum to %d", d.ID, d.UsedBytes, used[i])
		}
		if d.UsedBytes > d.CapacityBytes {
			return fmt.Errorf("tiersim: device %s over capacity (%d > %d)", d.ID, d.UsedBytes, d.CapacityBytes)
		}
	}
	for s, bs := range l.blocks {
		for b, ei := range bs {
			if ei < 0 {
				continue
			}
			if l.egs[ei].removed {
				return fmt.Errorf("tiersim: section %d block %d points at removed egroup %d", s, b, l.egs[ei].id)
			}
			live[ei]++
		}
	}
	for i, eg := range l.egs {
		if !eg.removed && live[i] != eg.live {
			return fmt.Errorf("tiersim: egroup %d counts %d live blocks, %d point at it", eg.id, eg.live, live[i])
		}
	}
	return nil
}
