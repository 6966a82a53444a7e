package tiersim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// The paper's cluster (§3.4.2): 4 nodes, 4 SSDs (1.85 TB) and 8 HDDs
// (13.80 TB). A simulated node is one of them: one ssd, two hdds.
const (
	paperNodes       = 4
	paperSSDPerNode  = 1.85e12 / 4
	paperHDDPerDisk  = 13.80e12 / 8
	hddsPerNode      = 2
	sampleEvery      = 30 * time.Second
	signalWindowSecs = 30
)

// start is the simulated clock's origin (any fixed instant: runs replay).
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// node is one simulated node with its Curator.
type node struct {
	o     Options
	w     Workload
	l     *layout
	secs  []simSection
	mover mover
	lat   latencyTracker

	// Curator state.
	sched       tiersched.Scheduler
	lastPartial time.Time
	lastCheck   time.Time
	lastPromote time.Time
	job         *jobState
	jobs        int
	drng        *rand.Rand // decisions

	// Signals: per-second ring of client counts for rates, and latency
	// since the last check.
	ring      [signalWindowSecs]secCounts
	ringN     int
	chkLat    float64
	chkOps    float64
	decisions []learn.Decision
	// now is where prefill ended (the execution phase starts there).
	now time.Time
	// prefillPos is each section's next block to lay out.
	prefillPos []int
}

type secCounts struct {
	reads, writes float64
	moved         float64
}

type simSection struct {
	section
	blocks     int // per unit
	units      int
	iopsPerSec float64
	cursor     []int // per access
}

type jobState struct {
	tasks  int
	reason string
}

// newNode builds a node with empty devices for workload w.
func newNode(w Workload, o Options, pol placement.Policy) *node {
	n := &node{o: o, w: w}
	id := model.NodeID("n1")
	devs := []*simDevice{{Device: model.Device{ID: "n1/ssd0", Node: id, Rack: "r1", Tier: model.TierSSD,
		CapacityBytes: int64(paperSSDPerNode * o.Scale)}, prof: ssdProfile}}
	for i := range hddsPerNode {
		devs = append(devs, &simDevice{Device: model.Device{ID: model.DeviceID(fmt.Sprintf("n1/hdd%d", i)), Node: id, Rack: "r1",
			Tier: model.TierHDD, CapacityBytes: int64(paperHDDPerDisk * o.Scale)}, prof: hddProfile})
	}
	var sizes []int64
	for _, s := range w.Sections {
		units := max(1, s.Units)
		bytes := s.SizeGB * 1e9 / paperNodes * o.Scale
		per := max(1, int(bytes/float64(units)/blockBytes))
		n.secs = append(n.secs, simSection{section: s, blocks: per, units: units,
			iopsPerSec: s.IOPS / paperNodes * o.IOPSScale, cursor: make([]int, len(s.Accesses))})
		sizes = append(sizes, int64(per*units))
	}
	n.l = newLayout(devs, sizes, pol, o.EgroupBytes, o.Tier.HotWindow)
	n.mover = mover{maxRate: o.MoveBytesPerSec, rate: o.MoveBytesPerSec, workers: 2}
	return n
}

// clone deep-copies the node's data and device state (not its Curator):
// both schedulers start the execution phase from the same prefill.
func (n *node) clone() *node {
	c := *n
	l := *n.l
	l.devs = make([]*simDevice, len(n.l.devs))
	for i, d := range n.l.devs {
		dd := *d
		l.devs[i] = &dd
	}
	l.egs = make([]*egroup, len(n.l.egs))
	for i, e := range n.l.egs {
		ee := *e
		ee.moving = false
		l.egs[i] = &ee
	}
	l.blocks = make([][]int32, len(n.l.blocks))
	for i, b := range n.l.blocks {
		l.blocks[i] = append([]int32(nil), b...)
	}
	l.open = append([]int(nil), n.l.open...)
	l.readBytes = map[model.Tier]int64{}
	c.l = &l
	c.secs = make([]simSection, len(n.secs))
	for i, s := range n.secs {
		s.cursor = append([]int(nil), s.cursor...)
		c.secs[i] = s
	}
	c.mover = mover{maxRate: n.mover.maxRate, rate: n.mover.maxRate, workers: n.mover.workers}
	c.job, c.decisions = nil, nil
	c.prefillPos = append([]int(nil), n.prefillPos...)
	c.lat = n.lat
	return &c
}

// poisson draws a Poisson count with mean lambda (normal approximation
// above 50).
func poisson(rng *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 50 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func (m sizeMix) draw(rng *rand.Rand) int64 {
	if len(m.Bytes) == 1 {
		return m.Bytes[0]
	}
	x := rng.Float64()
	for i, p := range m.P {
		if x < p {
			return m.Bytes[i]
		}
		x -= p
	}
	return m.Bytes[len(m.Bytes)-1]
}

// offset picks the first block of an operation of nb blocks for access a
// of section s.
func (s *simSection) offset(rng *rand.Rand, ai int, nb int) (block int, random bool) {
	a := s.Accesses[ai]
	lo := int(a.Lo * float64(s.blocks))
	hi := max(lo+1, int(a.Hi*float64(s.blocks)))
	span := hi - lo
	if rng.Float64() < a.RandomFrac {
		var x int
		switch a.Pattern {
		case zoned:
			hot := max(1, int(a.HotFrac*float64(span)))
			if rng.Float64() < a.HotShare {
				x = rng.IntN(hot)
			} else {
				x = hot + rng.IntN(max(1, span-hot))
			}
		default:
			x = rng.IntN(span)
		}
		u := rng.IntN(s.units)
		return u*s.blocks + lo + min(x, span-nb), true
	}
	// Sequential: one cursor per access over the concatenated regions of
	// every unit.
	c := s.cursor[ai] % (span * s.units)
	s.cursor[ai] = (c + nb) % (span * s.units)
	u, x := c/span, c%span
	return u*s.blocks + lo + min(x, span-nb), false
}

// clientStep offers one step of the active sections' operations.
func (n *node) clientStep(now time.Time, phaseIdx int, dt float64, rng *rand.Rand, snap *model.Snapshot, m *metrics) error {
	active := map[string]bool{}
	for _, name := range n.w.Phases[phaseIdx].Active {
		active[name] = true
	}
	var c secCounts
	for si := range n.secs {
		s := &n.secs[si]
		if !active[s.Name] {
			continue
		}
		for ai, a := range s.Accesses {
			k := poisson(rng, s.iopsPerSec*a.Share*dt)
			for range k {
				bytes := a.Sizes.draw(rng)
				nb := int(max(1, bytes/blockBytes))
				b, random := s.offset(rng, ai, nb)
				if a.Write {
					di, err := n.l.write(now, si, b, bytes, snap, n.drng)
					if err != nil {
						return err
					}
					// Appends are sequential on the device whatever the
					// logical offset (egroups are written log-structured).
					n.l.devs[di].clientOp(bytes, false)
					c.writes++
					continue
				}
				di := n.l.read(now, si, b, bytes)
				if di < 0 {
					continue
				}
				n.l.devs[di].clientOp(bytes, random)
				c.reads++
				if m != nil && n.l.devs[di].Tier == model.TierSSD {
					m.ssdReadBytes += bytes
				}
				if m != nil {
					m.readBytes += bytes
				}
			}
		}
	}
	n.ring[n.ringN%signalWindowSecs] = c
	n.ringN++
	return nil
}

// prefillStep writes the next bytes of every section sequentially (the
// prefill stage: each workload lays out its data, fio-style, from offset
// 0), at most limit bytes. It returns false when everything is written.
func (n *node) prefillStep(now time.Time, limit int64, snap *model.Snapshot) (bool, error) {
	const chunk = 1 << 20
	var c secCounts
	for limit > 0 {
		si := -1
		for i := range n.secs {
			if n.prefilled(i) < len(n.l.blocks[i]) {
				si = i
				break
			}
		}
		if si < 0 {
			return false, nil
		}
		b := n.prefilled(si)
		nb := min(chunk/blockBytes, len(n.l.blocks[si])-b)
		di, err := n.l.write(now, si, b, int64(nb)*blockBytes, snap, n.drng)
		if err != nil {
			return false, err
		}
		n.l.devs[di].clientOp(int64(nb)*blockBytes, false)
		n.prefillPos[si] = b + nb
		limit -= int64(nb) * blockBytes
		c.writes++
	}
	n.ring[n.ringN%signalWindowSecs] = c
	n.ringN++
	return true, nil
}

func (n *node) prefilled(si int) int {
	if n.prefillPos == nil {
		n.prefillPos = make([]int, len(n.secs))
	}
	return n.prefillPos[si]
}

// settle ends a step on every device and returns the mean client latency
// (ms) of the step and the client operation count.
func (n *node) settle(dt float64) (float64, float64) {
	var sum, ops float64
	for _, d := range n.l.devs {
		s, k := d.settle(dt)
		sum += s
		ops += k
	}
	if ops == 0 {
		return 0, 0
	}
	return 1000 * sum / ops, ops
}

// observation is the agent's state: client rates over the last 30 s,
// usage (filled by the scheduler), latency since the last check, and a
// crude CPU and memory model (an 8-core node: 150 µs of CPU per client
// operation and 1.5 ns per byte moved; memory 40 % plus move buffers).
func (n *node) observation() learn.Observation {
	var r, w, mv float64
	k := min(n.ringN, signalWindowSecs)
	for i := range k {
		c := n.ring[i]
		r += c.reads
		w += c.writes
		mv += c.moved
	}
	secs := math.Max(1, float64(k)*n.o.Step.Seconds())
	o := learn.Observation{
		ReadIOPS: r / secs, WriteIOPS: w / secs, IOPS: (r + w) / secs,
		CPU:       math.Min(100, 5+100*((r+w)*150e-6+mv*1.5e-9)/(8*secs)),
		Mem:       math.Min(100, 40+10*math.Min(1, mv/secs/n.o.MoveBytesPerSec)),
		LatencyMs: 0, Ops: n.chkOps,
	}
	if n.chkOps > 0 {
		o.LatencyMs = n.chkLat / n.chkOps
	}
	return o
}

// curatorStep runs the Curator's schedule: periodic partial scans, the
// scheduler's tiering checks, and (with event promotion) promotions of
// egroups that turned hot.
func (n *node) curatorStep(now time.Time, snap *model.Snapshot, m *metrics) error {
	if n.job != nil && n.mover.jobDone() {
		n.job = nil
	}
	base := n.o.Tier
	if n.o.Promotion == PromoteEvent && now.Sub(n.lastPromote) >= n.o.PollEvery && !n.mover.promoting() {
		n.lastPromote = now
		hot := n.l.egroups(now, func(eg *egroup) bool {
			return !eg.open && n.l.devs[eg.dev].Tier != model.TierSSD && eg.winReads >= base.PromoteReads && now.Sub(eg.winStart) <= base.HotWindow
		})
		if len(hot) > 0 {
			// The master's PromoteHot: the same decision, and the same
			// count of egroups refused for lack of room on the ssd, which
			// the scheduler's next check receives.
			tasks, refused := decide.Promotions(snap, hot, n.l.pol, n.sched.JobOptions(snap, base), n.drng)
			for _, id := range refused {
				n.l.egs[int(id)-1].refusedAt = now // egroup IDs are 1 + their index
			}
			if m != nil {
				m.refused += len(refused)
			}
			n.queue(now, tasks, m, false)
		}
	}
	if n.job != nil {
		return nil
	}
	var opts *decide.TierOptions
	reason := ""
	if now.Sub(n.lastPartial) >= n.o.PartialEvery {
		o := n.sched.JobOptions(snap, base)
		opts, reason = &o, "periodic"
	} else if now.Sub(n.lastPartial) >= base.MinInterval && now.Sub(n.lastCheck) >= n.o.PollEvery {
		obs := n.observation()
		n.lastCheck, n.chkLat, n.chkOps = now, 0, 0
		d, err := n.sched.Check(tiersched.Input{Now: now, Snapshot: snap, Obs: obs, Base: base, Starved: n.starved(now, snap)}, n.drng)
		if err != nil {
			return err
		}
		if d.Agent != nil && !d.Agent.Held {
			n.decisions = append(n.decisions, *d.Agent)
			if m != nil {
				m.lastAction = d.Agent.Name
				if d.Agent.ForcedBy != "" {
					m.lastAction += "/" + d.Agent.ForcedBy
				}
			}
		}
		if d.Run {
			opts, reason = &d.Options, d.Reason
		}
	}
	if opts == nil {
		return nil
	}
	n.lastPartial = now
	tasks := decide.Tiering(snap, n.l.egroups(now, nil), n.l.pol, *opts, n.drng)
	n.job = &jobState{tasks: len(tasks), reason: reason}
	n.jobs++
	if m != nil {
		m.jobs++
	}
	n.queue(now, tasks, m, true)
	return nil
}

// starved is the Curator master's count for the learned scheduler: the
// egroups refused promotion for lack of room within the last hot window
// that are still starved (decide.StillStarved).
func (n *node) starved(now time.Time, snap *model.Snapshot) int {
	if _, ok := n.sched.(*tiersched.QLearning); !ok {
		return 0
	}
	window := n.o.Tier.HotWindow
	k := 0
	for _, eg := range n.l.egroups(now, func(eg *egroup) bool { return !eg.refusedAt.IsZero() && now.Sub(eg.refusedAt) <= window }) {
		if decide.StillStarved(snap, eg, n.o.Tier) {
			k++
		}
	}
	return k
}

// queue hands tasks to the mover; tasks not started within the job time
// limit are dropped (the next scan re-plans them).
func (n *node) queue(now time.Time, tasks []decide.Task, m *metrics, job bool) {
	for _, t := range tasks {
		if len(t.Add) != 1 || len(t.Remove) != 1 {
			continue
		}
		ei := int(t.Egroup) - 1 // egroup IDs are 1 + their index
		to := n.l.devIndex(t.Add[0].Device)
		if ei < 0 || ei >= len(n.l.egs) || to < 0 {
			continue
		}
		n.mover.queue = append(n.mover.queue, &moveTask{eg: ei, to: to, kind: t.Kind, deadline: now.Add(n.o.JobTimeLimit), job: job})
		if m != nil {
			switch t.Kind {
			case decide.KindTierUp:
				m.promotions++
			case decide.KindTierDown:
				m.demotions++
			}
		}
	}
}

// moveTask is one replica move in the mover's queue.
type moveTask struct {
	eg, to   int
	kind     decide.Kind
	deadline time.Time
	job      bool
	done     int64
}

// mover executes moves two at a time under an AIMD byte rate (the
// actuator's scheduler): halved when clients are slow (over twice their
// quiet baseline) or a device involved has a deep queue, raised by 5 % of
// the maximum otherwise.
type mover struct {
	queue   []*moveTask
	active  []*moveTask
	rate    float64
	maxRate float64
	workers int
	dropped int
}

func (m *mover) jobDone() bool {
	for _, t := range m.queue {
		if t.job {
			return false
		}
	}
	for _, t := range m.active {
		if t.job {
			return false
		}
	}
	return true
}

func (m *mover) promoting() bool {
	for _, t := range m.queue {
		if !t.job {
			return true
		}
	}
	for _, t := range m.active {
		if !t.job {
			return true
		}
	}
	return false
}

// step moves up to rate × dt bytes and returns the bytes moved. Up to
// `workers` moves run at once and share the budget; a finished move's
// worker takes the next task within the same step.
func (m *mover) step(now time.Time, l *layout, dt float64) int64 {
	budget := int64(m.rate * dt)
	var moved int64
	for budget > 0 {
		for len(m.active) < m.workers && len(m.queue) > 0 {
			t := m.queue[0]
			m.queue = m.queue[1:]
			eg := l.egs[t.eg]
			if now.After(t.deadline) || eg.removed || eg.moving || eg.open || eg.dev == t.to {
				m.dropped++
				continue
			}
			eg.moving = true
			m.active = append(m.active, t)
		}
		if len(m.active) == 0 {
			break
		}
		share := max(1, budget/int64(len(m.active)))
		keep := m.active[:0]
		for _, t := range m.active {
			eg := l.egs[t.eg]
			if eg.removed { // all its blocks died meanwhile: nothing to move
				eg.moving = false
				continue
			}
			part := min(share, eg.size-t.done, budget)
			l.devs[eg.dev].request(part, true, false)
			l.devs[t.to].request(part, true, false)
			t.done += part
			moved += part
			budget -= part
			if t.done >= eg.size {
				l.devs[eg.dev].UsedBytes -= eg.size
				l.devs[t.to].UsedBytes += eg.size
				eg.dev, eg.moving = t.to, false
				continue
			}
			keep = append(keep, t)
		}
		m.active = keep
	}
	return moved
}

// adapt applies the AIMD rule after a step.
func (m *mover) adapt(l *layout, latMs float64, base float64, busyQueue int) {
	if len(m.active) == 0 {
		return
	}
	congested := base > 0 && latMs > 2*base
	for _, t := range m.active {
		if l.devs[t.to].queueLen() > busyQueue || l.devs[l.egs[t.eg].dev].queueLen() > busyQueue {
			congested = true
		}
	}
	if congested {
		m.rate = math.Max(0.01*m.maxRate, m.rate/2)
	} else {
		m.rate = math.Min(m.maxRate, m.rate+0.05*m.maxRate)
	}
}

// latencyTracker keeps the quiet baseline the actuator compares against:
// the lowest per-minute mean of the last ten minutes (with at least 20
// operations), as the object layer's tracker does.
type latencyTracker struct {
	mins   [10]float64
	counts [10]float64
	slot   int64
}

func (t *latencyTracker) observe(now time.Time, latMs, ops float64) {
	if ops == 0 {
		return
	}
	m := now.Unix() / 60
	if m != t.slot {
		for s := t.slot + 1; s <= m && s-t.slot <= 10; s++ {
			t.mins[s%10], t.counts[s%10] = 0, 0
		}
		t.slot = m
	}
	i := m % 10
	t.mins[i] = (t.mins[i]*t.counts[i] + latMs*ops) / (t.counts[i] + ops)
	t.counts[i] += ops
}

func (t *latencyTracker) baseline() float64 {
	b := 0.0
	for i, c := range t.counts {
		if c >= 20 && (b == 0 || t.mins[i] < b) {
			b = t.mins[i]
		}
	}
	return b
}
