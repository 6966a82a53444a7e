package sim

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// The closed-loop engine behind the hot-tier, disparity and stale-stats
// experiments. It models what the thesis's fio workers do (§4.2): each
// worker node keeps a fixed number of egroup writes outstanding (fio's
// iodepth); each write is placed by the policy under test and completes
// when all its replicas are durable, and the worker then issues the next.
// A device serves the writes sent to it first in first out at its write
// bandwidth, so its queue length is the number of its writes not yet
// finished: exactly what Stargate reports as a disk's queue length.
//
// The placer sees device statistics only as of the last refresh (every
// interval of simulated time), folded with placement.Pending when enabled,
// the way the object layer runs placement.

var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return simEpoch.Add(time.Duration(sec * float64(time.Second))) }

type simDevice struct {
	dev       model.Device // static facts; counters are filled at refresh
	used      int64
	busyUntil float64
	// done holds completion times of unfinished writes, ascending (FIFO).
	done []float64
	// replicas counts replicas placed on the device (secondaries included).
	replicas int
}

func (d *simDevice) queue(now float64) int {
	k := 0
	for k < len(d.done) && d.done[k] <= now {
		k++
	}
	d.done = d.done[k:]
	return len(d.done)
}

// write appends a write of bytes at now and returns its completion time.
func (d *simDevice) write(now float64, bytes int64) float64 {
	start := max(now, d.busyUntil)
	end := start + float64(bytes)/d.dev.WriteBps
	d.busyUntil = end
	d.done = append(d.done, end)
	d.used += bytes
	d.replicas++
	return end
}

type engine struct {
	nodes    []model.Node
	devs     []*simDevice
	byID     map[model.DeviceID]*simDevice
	policy   placement.Policy
	rng      *rand.Rand
	interval float64
	pending  bool

	now         float64
	lastRefresh float64
	stats       *model.Snapshot
	pend        placement.Pending
	placeErrs   int
	maxQueue    map[model.DeviceID]int
}

func newEngine(nodes []model.Node, devs []model.Device, p placement.Policy, rng *rand.Rand, interval time.Duration, pending bool) *engine {
	e := &engine{nodes: nodes, policy: p, rng: rng, interval: interval.Seconds(), pending: pending,
		byID: map[model.DeviceID]*simDevice{}, lastRefresh: -1e18, maxQueue: map[model.DeviceID]int{}}
	for _, d := range devs {
		sd := &simDevice{dev: d, used: d.UsedBytes}
		e.devs = append(e.devs, sd)
		e.byID[d.ID] = sd
	}
	return e
}

// snapshot returns the true state now (what a refresh reports).
func (e *engine) snapshot() *model.Snapshot {
	ds := make([]model.Device, len(e.devs))
	for i, d := range e.devs {
		x := d.dev
		x.UsedBytes = d.used
		x.QueueLen = d.queue(e.now)
		x.ActiveStreams = x.QueueLen
		ds[i] = x
	}
	return model.NewSnapshot(at(e.now), e.nodes, ds)
}

// place runs the policy against the placer's view and applies the result.
func (e *engine) place(req placement.Request) ([]model.Replica, error) {
	if e.now-e.lastRefresh >= e.interval {
		e.stats = e.snapshot()
		e.lastRefresh = e.now
		e.pend.Reset()
	}
	view := e.stats
	if e.pending {
		view = e.pend.Adjust(e.stats, at(e.now))
	}
	rs, err := e.policy.Place(view, req, e.rng)
	if err != nil {
		e.placeErrs++
		return nil, err
	}
	if e.pending {
		e.pend.Record(e.stats, at(e.now), rs, req.Bytes)
	}
	return rs, nil
}

// writeReplicas issues the writes and returns when the last completes.
func (e *engine) writeReplicas(rs []model.Replica, bytes int64) float64 {
	done := e.now
	for _, r := range rs {
		d := e.byID[r.Device]
		done = max(done, d.write(e.now, bytes))
		if q := d.queue(e.now); q > e.maxQueue[r.Device] {
			e.maxQueue[r.Device] = q
		}
	}
	return done
}

// worker is one fio-like closed-loop writer on a node.
type worker struct {
	node        model.NodeID
	vector      model.Vector
	depth       int
	quota       int64 // bytes of primaries still to write
	issued      int
	localMisses int // writes whose first replica could not be on the node
	stalled     bool
	latencies   []float64
}

// event: a worker's slot becomes free at t.
type event struct {
	t      float64
	w      int
	issued float64
}

type eventQ []event

func (q eventQ) Len() int           { return len(q) }
func (q eventQ) Less(i, j int) bool { return q[i].t < q[j].t || q[i].t == q[j].t && q[i].w < q[j].w }
func (q eventQ) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *eventQ) Push(x any)        { *q = append(*q, x.(event)) }
func (q *eventQ) Pop() any          { old := *q; x := old[len(old)-1]; *q = old[:len(old)-1]; return x }

// runClosedLoop runs the workers until every quota is written, every
// worker stalls, or the simulated time reaches limit. sample is called at
// every multiple of every seconds of simulated time.
func (e *engine) runClosedLoop(ws []*worker, egroup int64, limit, every float64, sample func(now float64)) {
	q := &eventQ{}
	for i, w := range ws {
		for range w.depth {
			heap.Push(q, event{t: 0, w: i, issued: -1})
		}
	}
	nextSample := 0.0
	for q.Len() > 0 {
		ev := heap.Pop(q).(event)
		for nextSample <= ev.t && nextSample <= limit {
			e.now = nextSample
			sample(nextSample)
			nextSample += every
		}
		if ev.t > limit {
			break
		}
		e.now = ev.t
		w := ws[ev.w]
		if ev.issued >= 0 {
			w.latencies = append(w.latencies, ev.t-ev.issued)
		}
		if w.quota <= 0 || w.stalled {
			continue
		}
		rs, err := e.place(placement.Request{Vector: w.vector, Client: w.node, Bytes: egroup})
		if err != nil {
			w.stalled = true
			continue
		}
		if rs[0].Node != w.node {
			w.localMisses++
		}
		w.quota -= egroup
		w.issued++
		done := e.writeReplicas(rs, egroup)
		heap.Push(q, event{t: done, w: ev.w, issued: e.now})
	}
	e.now = max(e.now, nextSample-every)
	sample(e.now)
}
