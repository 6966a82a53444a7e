package tiersim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Promotion modes: how hot data on a slower tier gets back to the fast
// tier.
const (
	// PromoteScan: only Curator jobs promote (a tiering-triggered job or
	// the periodic partial scan), as the Curator does today.
	PromoteScan = "scan"
	// PromoteEvent: egroups that turned hot are promoted at the next poll
	// without waiting for a scan (event-driven promotion).
	PromoteEvent = "event"
)

// Options configure a simulation. Zero values mean defaults.
type Options struct {
	Seed      uint64
	Workloads []string
	// Scale multiplies the paper's per-node capacities and working sets
	// (default 1/32: a 14 GB ssd and two 54 GB hdds per node).
	Scale float64
	// IOPSScale multiplies the paper's per-node IOPS (default 1/16; see
	// docs/design/0006 for why load is scaled less than capacity).
	IOPSScale float64
	// Exec is the length of the execution phase, the measured part
	// (default 2 h); Step the time step (default 1 s).
	Exec time.Duration
	Step time.Duration
	// EgroupBytes is the egroup size (default 4 MiB, 1/3400 of the ssd).
	EgroupBytes int64
	// PrefillMBps is the prefill ingest rate per node at paper scale
	// (default 150 MB/s, scaled by Scale).
	PrefillMBps float64
	// Promotion is PromoteScan (default) or PromoteEvent.
	Promotion string
	// Tier are the thresholds (default the paper's f, d, h).
	Tier decide.TierOptions
	// MoveBytesPerSec, JobTimeLimit, PartialEvery, PollEvery and
	// BusyQueueLen are the Curator's defaults (200 MB/s, 1 min, 1 h, 2 s,
	// 8).
	MoveBytesPerSec float64
	JobTimeLimit    time.Duration
	PartialEvery    time.Duration
	PollEvery       time.Duration
	BusyQueueLen    int
	// Model is the pre-trained model the learned scheduler starts from;
	// nil pre-trains one from PretrainSeeds runs per workload under the
	// threshold policy (seeds disjoint from Seed).
	Model         *learn.Model
	PretrainSeeds int
	// Features and Actions of a pre-trained model (default the paper's).
	Features []string
	Actions  []learn.ActionSpec
	// BehaviourEpsilon is the share of random actions in the pre-training
	// behaviour policy (default 0.2).
	BehaviourEpsilon float64
	// ForceAbove is the learned scheduler's safety ceiling (0: its
	// default; see tiersched.QLearning).
	ForceAbove float64
	// StarvedMin is the learned scheduler's promotion-starvation rule
	// (tiersched.QLearning.StarvedMin: 0 its default, negative off).
	StarvedMin int
	// Epsilon is the deployed agent's exploration rate (default 0.2, the
	// paper's; it overrides the model's), the start of its schedule.
	Epsilon float64
	// EpsilonFloor, EpsilonHalfLife and ExploreMinSSD override the
	// model's exploration schedule and gate (learn.Model; zero: the
	// learn defaults, negative: off — constant ε, explore at any usage).
	EpsilonFloor    float64
	EpsilonHalfLife float64
	ExploreMinSSD   float64
	// Hold is the agent's pause after a run (default learn.DefaultHold).
	Hold time.Duration
	// Check verifies the layout's accounting at every sample (tests).
	Check bool
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Scale == 0 {
		o.Scale = 1.0 / 32
	}
	if o.IOPSScale == 0 {
		o.IOPSScale = 1.0 / 32
	}
	if o.Exec == 0 {
		o.Exec = 2 * time.Hour
	}
	if o.Step == 0 {
		o.Step = time.Second
	}
	if o.EgroupBytes == 0 {
		o.EgroupBytes = 4 << 20
	}
	if o.PrefillMBps == 0 {
		o.PrefillMBps = 150
	}
	if o.Promotion == "" {
		o.Promotion = PromoteEvent
	}
	o.Tier.EnsureDefaults()
	if o.MoveBytesPerSec == 0 {
		o.MoveBytesPerSec = 200e6
	}
	if o.JobTimeLimit == 0 {
		o.JobTimeLimit = time.Minute
	}
	if o.PartialEvery == 0 {
		o.PartialEvery = time.Hour
	}
	if o.PollEvery == 0 {
		o.PollEvery = 2 * time.Second
	}
	if o.BusyQueueLen == 0 {
		o.BusyQueueLen = 8
	}
	if o.PretrainSeeds == 0 {
		o.PretrainSeeds = 3
	}
	if o.Features == nil {
		o.Features = learn.PaperFeatures
	}
	if o.Actions == nil {
		o.Actions = learn.PaperActions
	}
	if o.BehaviourEpsilon == 0 {
		o.BehaviourEpsilon = 0.2
	}
	if o.Epsilon == 0 {
		o.Epsilon = learn.DefaultEpsilon
	}
	o.EpsilonFloor = orDefault(o.EpsilonFloor, learn.DefaultEpsilonFloor)
	o.EpsilonHalfLife = orDefault(o.EpsilonHalfLife, learn.DefaultEpsilonHalfLife)
	o.ExploreMinSSD = orDefault(o.ExploreMinSSD, learn.DefaultExploreMinSSD)
	if o.Hold == 0 {
		o.Hold = learn.DefaultHold
	}
}

// orDefault maps zero to def and a negative value to zero (off).
func orDefault(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// explore sets the options' exploration schedule and gate on m.
func (o Options) explore(m *learn.Model) {
	m.Epsilon, m.EpsilonFloor, m.EpsilonHalfLife, m.ExploreMinSSD = o.Epsilon, o.EpsilonFloor, o.EpsilonHalfLife, o.ExploreMinSSD
}

// Validate rejects settings the model cannot run.
func (o Options) Validate() error {
	switch {
	case !(o.Scale > 0 && o.Scale <= 1):
		return fmt.Errorf("tiersim: scale %v: want (0, 1]", o.Scale)
	case !(o.IOPSScale > 0 && o.IOPSScale <= 4):
		return fmt.Errorf("tiersim: iops scale %v: want (0, 4]", o.IOPSScale)
	case o.Exec < time.Minute || o.Exec > 48*time.Hour:
		return fmt.Errorf("tiersim: execution %s: want 1m..48h", o.Exec)
	case o.Step < 100*time.Millisecond || o.Step > 10*time.Second:
		return fmt.Errorf("tiersim: step %s: want 100ms..10s", o.Step)
	case o.EgroupBytes < 256<<10 || o.EgroupBytes > 1<<30:
		return fmt.Errorf("tiersim: egroup %d bytes: want 256 KiB..1 GiB", o.EgroupBytes)
	case o.Promotion != PromoteScan && o.Promotion != PromoteEvent:
		return fmt.Errorf("tiersim: promotion %q: want %s or %s", o.Promotion, PromoteScan, PromoteEvent)
	case !(o.PrefillMBps > 0):
		return fmt.Errorf("tiersim: prefill rate %v: want > 0", o.PrefillMBps)
	case o.PretrainSeeds < 1 || o.PretrainSeeds > 100:
		return fmt.Errorf("tiersim: pretrain seeds %d: want 1..100", o.PretrainSeeds)
	case !(o.BehaviourEpsilon >= 0 && o.BehaviourEpsilon <= 1):
		return fmt.Errorf("tiersim: behaviour epsilon %v: want [0, 1]", o.BehaviourEpsilon)
	case o.Hold < 0 || o.Hold > 24*time.Hour:
		return fmt.Errorf("tiersim: hold %s: want 0..24h", o.Hold)
	}
	if m, err := learn.NewModel(o.Features, o.Actions, nil, nil); err == nil {
		o.explore(m)
		if err := m.Validate(); err != nil {
			return fmt.Errorf("tiersim: exploration: %w", err)
		}
	}
	if ssd := paperSSDPerNode * o.Scale; float64(o.EgroupBytes) > ssd/64 {
		return fmt.Errorf("tiersim: egroup %d bytes is over 1/64 of the %.0f-byte ssd: tiering could not shed h in whole egroups", o.EgroupBytes, ssd)
	}
	if o.Model != nil {
		if err := o.Model.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// String prints the options that determine the results.
func (o Options) String() string {
	return fmt.Sprintf("seed=%d scale=1/%.0f iops_scale=1/%.0f exec=%s step=%s egroup=%dMiB prefill=%.0fMB/s promotion=%s f=%.2f d=%.2f h=%.2f move=%.0fMB/s job_limit=%s partial_every=%s pretrain_seeds=%d features=%s actions=%s epsilon=%g epsilon_floor=%g epsilon_half_life=%g explore_min_ssd=%g hold=%s starved_min=%d",
		o.Seed, 1/o.Scale, 1/o.IOPSScale, o.Exec, o.Step, o.EgroupBytes>>20, o.PrefillMBps, o.Promotion, o.Tier.DownAbove, o.Tier.DestBelow, o.Tier.Reduce,
		o.MoveBytesPerSec/1e6, o.JobTimeLimit, o.PartialEvery, o.PretrainSeeds, strings.Join(o.Features, ","), actionNames(o.Actions),
		o.Epsilon, o.EpsilonFloor, o.EpsilonHalfLife, o.ExploreMinSSD, o.Hold, o.StarvedMin)
}

func actionNames(as []learn.ActionSpec) string {
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("%s:%gh", a.Name, a.Reduce))
	}
	return strings.Join(s, ",")
}

// Sample is one point of a run's time series (every 30 s).
type Sample struct {
	Minutes   float64 `json:"minutes"`
	LatencyMs float64 `json:"latency_ms"` // mean over the last 30 s
	SSDUsage  float64 `json:"ssd_usage"`
	IOPS      float64 `json:"iops"`
	SSDReadGB float64 `json:"ssd_read_gb"` // cumulative
	MoveMBps  float64 `json:"move_mbps"`
	Action    string  `json:"action"`
}

// Result is one workload under one scheduler: Table 1's metrics for the
// execution phase and what the scheduler did.
type Result struct {
	Workload      string  `json:"workload"`
	Scheduler     string  `json:"scheduler"`
	MeanLatencyMs float64 `json:"mean_latency_ms"`
	SSDReadBytes  int64   `json:"ssd_read_bytes"`
	// ReadBytes are all client reads; ClientIOPS the offered operations
	// served per second; DeviceIOPS every device request per second
	// (clients and moves, Table 1's "# of IOPS").
	ReadBytes  int64   `json:"read_bytes"`
	ClientIOPS float64 `json:"client_iops"`
	DeviceIOPS float64 `json:"device_iops"`
	Jobs       int     `json:"tiering_jobs"`
	Promotions int     `json:"promotions"`
	// Refused counts event-driven promotion's refusals for lack of room
	// on the ssd (an egroup counts at every poll it stays refused).
	Refused    int   `json:"promotions_refused"`
	Demotions  int   `json:"demotions"`
	MovedBytes int64 `json:"moved_bytes"`
	// Agent counters (qlearning only).
	Agent  *learn.AgentStats `json:"agent,omitempty"`
	Series []Sample          `json:"-"`
}

// Row is the --json record: Table 1's metrics.
type Row struct {
	Workload      string  `json:"workload"`
	Scheduler     string  `json:"scheduler"`
	MeanLatencyMs float64 `json:"mean_latency_ms"`
	SSDReadBytes  int64   `json:"ssd_read_bytes"`
}

// Row returns the --json record.
func (r Result) Row() Row {
	return Row{Workload: r.Workload, Scheduler: r.Scheduler, MeanLatencyMs: r.MeanLatencyMs, SSDReadBytes: r.SSDReadBytes}
}

type metrics struct {
	latSum, ops             float64
	ssdReadBytes, readBytes int64
	moved                   int64
	jobs                    int
	promotions, demotions   int
	lastAction              string
	series                  []Sample
	refused                 int
}

func wlSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

func policy() placement.Policy {
	// The server's default (fitness): new egroups go to the fastest tier
	// with room and the Curator demotes cold data.
	p, err := placement.New(placement.Config{Name: placement.NameFitness})
	if err != nil {
		panic(err) // a built-in configuration always validates
	}
	return p
}

// prefill builds a node for w and lays out every section's data with the
// Curator running the threshold scheduler (the same for both schedulers;
// Table 1 measures the execution phase only).
func prefill(w Workload, o Options, seed uint64) (*node, error) {
	n := newNode(w, o, policy())
	n.sched = tiersched.Threshold{}
	n.drng = rand.New(rand.NewPCG(seed, wlSeed(w.Name)^1))
	dt := o.Step.Seconds()
	limit := int64(o.PrefillMBps * 1e6 * o.Scale * dt)
	now := start
	for i := 0; ; i++ {
		if i > 10_000_000 {
			return nil, errors.New("tiersim: prefill did not finish")
		}
		snap := n.l.snapshot(now)
		more, err := n.prefillStep(now, limit, snap)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		n.mover.step(now, n.l, dt)
		lat, ops := n.settle(dt)
		n.lat.observe(now, lat, ops)
		n.mover.adapt(n.l, lat, n.lat.baseline(), o.BusyQueueLen)
		if err := n.curatorStep(now, n.l.snapshot(now), nil); err != nil {
			return nil, err
		}
		now = now.Add(o.Step)
	}
	// Seal what prefill left open: the object layer seals idle egroups
	// and the Curator seals before each scan.
	for si, ei := range n.l.open {
		if ei >= 0 {
			n.l.seal(ei)
			n.l.open[si] = -1
		}
	}
	n.now = now
	return n, nil
}

// execute runs the execution phase on n under sched and returns Table
// 1's metrics. The client operations are drawn from a stream seeded by
// seed and the workload alone, so both schedulers see the same offered
// load.
func execute(n *node, sched tiersched.Scheduler, o Options, seed uint64) (*Result, error) {
	n.sched = sched
	n.drng = rand.New(rand.NewPCG(seed, wlSeed(n.w.Name)^2))
	n.lastPartial, n.lastCheck, n.lastPromote = n.now, n.now, n.now
	rng := rand.New(rand.NewPCG(seed, wlSeed(n.w.Name)))
	m := &metrics{}
	dt := o.Step.Seconds()
	steps := int(o.Exec / o.Step)
	perSample := max(1, int(sampleEvery/o.Step))
	var winLat, winOps, winMoved float64
	var devReqs0 float64
	for _, d := range n.l.devs {
		devReqs0 += d.totalReqs
	}
	for i := range steps {
		now := n.now.Add(time.Duration(i) * o.Step)
		snap := n.l.snapshot(now)
		if err := n.clientStep(now, n.w.activeAt(time.Duration(i)*o.Step), dt, rng, snap, m); err != nil {
			return nil, err
		}
		moved := n.mover.step(now, n.l, dt)
		n.ring[(n.ringN-1)%signalWindowSecs].moved += float64(moved)
		m.moved += moved
		lat, ops := n.settle(dt)
		n.lat.observe(now, lat, ops)
		n.chkLat += lat * ops
		n.chkOps += ops
		n.mover.adapt(n.l, lat, n.lat.baseline(), o.BusyQueueLen)
		m.latSum += lat * ops
		m.ops += ops
		winLat += lat * ops
		winOps += ops
		winMoved += float64(moved)
		if err := n.curatorStep(now, n.l.snapshot(now), m); err != nil {
			return nil, err
		}
		if (i+1)%perSample == 0 {
			if o.Check {
				if err := n.l.check(); err != nil {
					return nil, fmt.Errorf("%s/%s at %s: %w", n.w.Name, sched.Name(), now.Sub(n.now), err)
				}
			}
			ssd := n.l.devs[0]
			s := Sample{Minutes: float64(i+1) * dt / 60, SSDUsage: ssd.Usage(), SSDReadGB: float64(m.ssdReadBytes) / 1e9,
				MoveMBps: winMoved / 1e6 / (float64(perSample) * dt), IOPS: winOps / (float64(perSample) * dt), Action: m.lastAction}
			if winOps > 0 {
				s.LatencyMs = winLat / winOps
			}
			m.series = append(m.series, s)
			winLat, winOps, winMoved, m.lastAction = 0, 0, 0, ""
		}
	}
	var devReqs float64
	for _, d := range n.l.devs {
		devReqs += d.totalReqs
	}
	secs := o.Exec.Seconds()
	r := &Result{Workload: n.w.Name, Scheduler: sched.Name(), SSDReadBytes: m.ssdReadBytes, ReadBytes: m.readBytes,
		ClientIOPS: m.ops / secs, DeviceIOPS: (devReqs - devReqs0) / secs, Jobs: m.jobs, Promotions: m.promotions,
		Demotions: m.demotions, MovedBytes: m.moved, Series: m.series, Refused: m.refused}
	if m.ops > 0 {
		r.MeanLatencyMs = m.latSum / m.ops
	}
	if q, ok := sched.(*tiersched.QLearning); ok {
		st := q.Agent().Stats()
		r.Agent = &st
	}
	if math.IsNaN(r.MeanLatencyMs) {
		return nil, fmt.Errorf("tiersim: %s/%s: latency is NaN", n.w.Name, sched.Name())
	}
	return r, nil
}

// transitions turns a run's consecutive agent decisions into transitions:
// the state and action of one decision, the reward credited at the next,
// and the next state.
func transitions(ds []learn.Decision) []learn.Transition {
	var out []learn.Transition
	for i := 0; i+1 < len(ds); i++ {
		if !ds[i+1].HasReward {
			continue
		}
		out = append(out, learn.Transition{S: ds[i].State, Action: ds[i].Action, Reward: ds[i+1].Reward, Next: ds[i+1].State})
	}
	return out
}

// thresholdBehaviour is the pre-training behaviour policy: the threshold
// rule (run when the fast tier is over f) with a share eps of uniformly
// random actions, so the dataset shows both actions in every state.
func thresholdBehaviour(o Options, run int, nActions int) func(float64, *rand.Rand) int {
	return func(u float64, rng *rand.Rand) int {
		if rng.Float64() < o.BehaviourEpsilon {
			return rng.IntN(nActions)
		}
		if u > o.Tier.DownAbove {
			return run
		}
		return 0
	}
}

// collect runs workload w under the threshold behaviour with a frozen
// agent that records what it sees, and returns the transitions.
func collect(w Workload, o Options, seed uint64) ([]learn.Transition, error) {
	n, err := prefill(w, o, seed)
	if err != nil {
		return nil, err
	}
	m, err := learn.NewModel(o.Features, o.Actions, nil, nil)
	if err != nil {
		return nil, err
	}
	a, err := learn.NewAgent(m, learn.AgentOptions{Frozen: true})
	if err != nil {
		return nil, err
	}
	q := tiersched.NewQLearning(a)
	if o.ForceAbove != 0 {
		q.ForceAbove = o.ForceAbove
	}
	run := 1
	for i, s := range o.Actions {
		if s.Reduce == 1 {
			run = i
		}
	}
	q.Behaviour = thresholdBehaviour(o, run, len(o.Actions))
	if _, err := execute(n, q, o, seed); err != nil {
		return nil, err
	}
	return transitions(n.decisions), nil
}

// PretrainResult is the pre-training step's output.
type PretrainResult struct {
	Model  *learn.Model
	Report learn.PretrainReport
	Seeds  []uint64
}

// Pretrain collects transitions under the threshold behaviour for every
// workload over PretrainSeeds seeds (Seed+1000+k: disjoint from the
// evaluation seed) and fits the model (Curator §4.3.3).
func Pretrain(o Options, progress func(string)) (*PretrainResult, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ws, err := LookupWorkloads(o.Workloads)
	if err != nil {
		return nil, err
	}
	var ds []learn.Transition
	res := &PretrainResult{}
	for k := range o.PretrainSeeds {
		seed := o.Seed + 1000 + uint64(k)
		res.Seeds = append(res.Seeds, seed)
		for _, w := range ws {
			if progress != nil {
				progress(fmt.Sprintf("pre-training data: %s seed %d", w.Name, seed))
			}
			t, err := collect(w, o, seed)
			if err != nil {
				return nil, err
			}
			ds = append(ds, t...)
		}
	}
	m, rep, err := learn.Pretrain(ds, learn.PretrainOptions{Features: o.Features, Actions: o.Actions}, rand.New(rand.NewPCG(o.Seed, 3)))
	if err != nil {
		return nil, err
	}
	res.Model, res.Report = m, rep
	return res, nil
}

// Report is a whole simulation's output.
type Report struct {
	Options  string          `json:"options"`
	Results  []Result        `json:"results"`
	Pretrain *PretrainResult `json:"-"`
}

// Simulate runs every workload under both schedulers: a prefill, then the
// execution phase once with the threshold scheduler and once with the
// learned one starting from the pre-trained model (learning online,
// ε-greedy).
func Simulate(o Options, progress func(string)) (*Report, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ws, err := LookupWorkloads(o.Workloads)
	if err != nil {
		return nil, err
	}
	rep := &Report{Options: o.String()}
	if o.Model == nil {
		po := o
		po.Workloads = WorkloadNames // pre-train on every workload whatever is evaluated
		pr, err := Pretrain(po, progress)
		if err != nil {
			return nil, fmt.Errorf("tiersim: pretrain: %w", err)
		}
		rep.Pretrain = pr
		o.Model = pr.Model
	}
	for _, w := range ws {
		if progress != nil {
			progress("prefill " + w.Name)
		}
		base, err := prefill(w, o, o.Seed)
		if err != nil {
			return nil, err
		}
		for _, name := range tiersched.Names {
			if progress != nil {
				progress(fmt.Sprintf("execute %s with %s", w.Name, name))
			}
			m := o.Model.Clone()
			o.explore(m)
			sched, err := o.scheduler(name, m)
			if err != nil {
				return nil, err
			}
			r, err := execute(base.clone(), sched, o, o.Seed)
			if err != nil {
				return nil, err
			}
			rep.Results = append(rep.Results, *r)
		}
	}
	return rep, nil
}

// scheduler builds the named scheduler with the options' ceiling.
func (o Options) scheduler(name string, m *learn.Model) (tiersched.Scheduler, error) {
	s, err := tiersched.New(name, m, learn.AgentOptions{Hold: o.Hold})
	if err != nil {
		return nil, err
	}
	if q, ok := s.(*tiersched.QLearning); ok {
		if o.ForceAbove != 0 {
			q.ForceAbove = o.ForceAbove
		}
		q.StarvedMin = o.StarvedMin
	}
	return s, nil
}
