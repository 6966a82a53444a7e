package tiersim

import (
	"flag"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/model"
)

var simSeed = flag.Uint64("tiersim.seed", 0, "seed for the randomized simulator tests (0: fixed default)")

func seed(t *testing.T) uint64 {
	s := *simSeed
	if s == 0 {
		s = 20260101
	}
	t.Logf("seed %d (replay: go test ./internal/curator/tiersim -run %s -tiersim.seed=%d)", s, t.Name(), s)
	return s
}

// small is a scaled-down configuration that runs in seconds: a 1.8 GB
// ssd, ten minutes of execution.
func small(s uint64) Options {
	return Options{Seed: s, Scale: 1.0 / 256, IOPSScale: 1.0 / 256, Exec: 10 * time.Minute, PretrainSeeds: 1, Check: true}
}

func smallModel(t *testing.T) *learn.Model {
	m, err := learn.NewModel(learn.PaperFeatures, learn.PaperActions, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Same options and seed, same results, including every time series point.
func TestSimulateIsDeterministic(t *testing.T) {
	o := small(seed(t))
	o.Workloads = []string{"oltp-skewed", "oltp-dss"}
	o.Model = smallModel(t)
	a, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Results, b.Results) {
		t.Fatalf("two runs with seed %d differ:\n%+v\n%+v", o.Seed, a.Results, b.Results)
	}
	if len(a.Results) != 4 {
		t.Fatalf("want 2 workloads × 2 schedulers, got %d results", len(a.Results))
	}
}

// Invariants of every run, for every workload, under both schedulers: the
// layout's accounting holds at every sample (Options.Check), both
// schedulers see the same offered operations, latencies are at least the
// fastest device's service time, ssd reads are part of all reads.
func TestSimulateInvariants(t *testing.T) {
	o := small(seed(t))
	o.Model = smallModel(t)
	rep, err := Simulate(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range WorkloadNames {
		th, ql := rep.pair(w)
		if th == nil || ql == nil {
			t.Fatalf("%s: missing results", w)
		}
		if th.ReadBytes != ql.ReadBytes || math.Abs(th.ClientIOPS-ql.ClientIOPS) > 1e-9 {
			t.Errorf("%s: schedulers saw different client load: reads %d vs %d, iops %v vs %v", w, th.ReadBytes, ql.ReadBytes, th.ClientIOPS, ql.ClientIOPS)
		}
		for _, r := range []*Result{th, ql} {
			if r.MeanLatencyMs < ssdProfile.Base.Seconds()*1000 || math.IsNaN(r.MeanLatencyMs) {
				t.Errorf("%s/%s: mean latency %v ms below the ssd's service time", w, r.Scheduler, r.MeanLatencyMs)
			}
			if r.SSDReadBytes > r.ReadBytes || r.ReadBytes <= 0 {
				t.Errorf("%s/%s: ssd reads %d of %d", w, r.Scheduler, r.SSDReadBytes, r.ReadBytes)
			}
			if len(r.Series) != int(o.Exec/sampleEvery) {
				t.Errorf("%s/%s: %d samples, want %d", w, r.Scheduler, len(r.Series), int(o.Exec/sampleEvery))
			}
		}
		if ql.Agent == nil || ql.Agent.Decisions == 0 {
			t.Errorf("%s: the learned scheduler made no decision", w)
		}
	}
}

// Pre-training collects transitions from the threshold behaviour and
// yields a valid model over the requested features.
func TestPretrain(t *testing.T) {
	o := small(seed(t))
	o.Features = []string{learn.FeatSSD, learn.FeatIOPS, learn.FeatLatency}
	pr, err := Pretrain(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Model.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr.Model.Features, o.Features) || pr.Report.Transitions < 50 {
		t.Fatalf("model features %v, %d transitions", pr.Model.Features, pr.Report.Transitions)
	}
	for a, n := range pr.Report.ActionCounts {
		if n == 0 {
			t.Fatalf("action %d never taken in the pre-training data: %v", a, pr.Report.ActionCounts)
		}
	}
	if pr.Seeds[0] == o.Seed {
		t.Fatal("pre-training used the evaluation seed")
	}
}

// Under the threshold scheduler the ssd is tiered back below f after it
// crosses it: the sim runs the Curator's rule, not something else.
func TestThresholdRuleIsApplied(t *testing.T) {
	o := small(seed(t))
	o.EnsureDefaults()
	n, err := prefill(Workloads["oltp"], o, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	r, err := execute(n.clone(), tiersched.Threshold{}, o, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, s := range r.Series {
		if s.SSDUsage > o.Tier.DownAbove+0.05 {
			over++
		}
	}
	if over > len(r.Series)/4 {
		t.Fatalf("ssd above f+5%% in %d of %d samples", over, len(r.Series))
	}
}

// The device model: below saturation the wait follows Pollaczek–Khinchine;
// overloaded, the backlog grows to its bound and latency saturates.
func TestDeviceQueue(t *testing.T) {
	d := &simDevice{Device: model.Device{ID: "n1/hdd0", Tier: model.TierHDD}, prof: hddProfile}
	// 100 random 8 KiB reads in one second: S ≈ 4.05 ms, ρ ≈ 0.405.
	for range 100 {
		d.clientOp(8<<10, true)
	}
	sum, ops := d.settle(1)
	s := hddProfile.service(8<<10, true)
	rho := 100 * s
	want := s + 100*s*s/(2*(1-rho))
	if ops != 100 || math.Abs(sum/ops-want) > 1e-9 {
		t.Fatalf("latency %v s, want %v (ρ=%v)", sum/ops, want, rho)
	}
	if d.backlog != 0 {
		t.Fatalf("backlog %v below saturation", d.backlog)
	}
	// 1000 requests a second for ten seconds: ρ ≈ 4, the backlog reaches
	// its bound and latency stops growing.
	var last float64
	for range 10 {
		for range 1000 {
			d.clientOp(8<<10, true)
		}
		sum, ops = d.settle(1)
		last = sum / ops
	}
	if d.backlog != maxBacklog {
		t.Fatalf("backlog %v, want the bound %v", d.backlog, maxBacklog)
	}
	if last < maxBacklog || last > 2*maxBacklog {
		t.Fatalf("saturated latency %v s, want about the bound %v", last, maxBacklog)
	}
	// Flash: base latency overlaps, only transfer time queues.
	ssd := &simDevice{Device: model.Device{Tier: model.TierSSD}, prof: ssdProfile}
	ssd.clientOp(8<<10, true)
	sum, _ = ssd.settle(1)
	if want := 100e-6 + float64(8<<10)/500e6; math.Abs(sum-want) > 1e-6 {
		t.Fatalf("idle ssd read %v s, want %v", sum, want)
	}
}

// Workload offsets stay inside their section and regions, for random
// seeds.
func TestOffsetsInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 1))
	o := small(1)
	o.EnsureDefaults()
	for _, w := range Workloads {
		n := newNode(w, o, policy())
		for si := range n.secs {
			s := &n.secs[si]
			for ai, a := range s.Accesses {
				for range 2000 {
					bytes := a.Sizes.draw(rng)
					nb := int(bytes / blockBytes)
					b, _ := s.offset(rng, ai, nb)
					unit := b / s.blocks
					in := b % s.blocks
					lo, hi := int(a.Lo*float64(s.blocks)), max(int(a.Lo*float64(s.blocks))+1, int(a.Hi*float64(s.blocks)))
					if unit < 0 || unit >= s.units || in < lo || in+nb > max(hi, lo+nb) {
						t.Fatalf("%s/%s access %d: block %d (unit %d, offset %d, %d blocks) outside [%d, %d) of %d units", w.Name, s.Name, ai, b, unit, in, nb, lo, hi, s.units)
					}
				}
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{Scale: 2}, {IOPSScale: -1}, {Exec: time.Second}, {Promotion: "never"}, {EgroupBytes: 1 << 30},
		{PretrainSeeds: 1000}, {BehaviourEpsilon: 2},
		{ExploreMinSSD: 101}, {EpsilonFloor: 0.5}, {Epsilon: 0.1, EpsilonFloor: 0.2}, {Hold: 48 * time.Hour},
	} {
		o.EnsureDefaults()
		if err := o.Validate(); err == nil {
			t.Errorf("accepted %s", o)
		}
	}
	// Negative exploration settings mean off: the paper's constant ε.
	o := Options{EpsilonFloor: -1, EpsilonHalfLife: -1, ExploreMinSSD: -1}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil || o.EpsilonFloor != 0 || o.EpsilonHalfLife != 0 || o.ExploreMinSSD != 0 {
		t.Errorf("negative exploration settings: %v, %s", err, o)
	}
	if _, err := LookupWorkloads([]string{"oltp", "tpcc"}); err == nil {
		t.Error("unknown workload accepted")
	}
}

// The simulator feeds the learned scheduler the same starvation count the
// Curator master does (decide.Promotions' refusals in its event-driven
// promotion, filtered by decide.StillStarved at each check). On
// oltp-skewed, an agent that never wants to run leaves the ssd between f
// and the ceiling, where promotions are refused: without the starvation
// rule the hot data stays on hdd; with it, forced runs make room,
// promotions follow, and more reads hit the ssd. Each starved run is
// recorded in the series as run/promotion-starved.
func TestPromotionStarvationRule(t *testing.T) {
	o := small(seed(t))
	o.Workloads = []string{"oltp-skewed"}
	o.Exec = 30 * time.Minute
	o.EnsureDefaults()
	n, err := prefill(Workloads["oltp-skewed"], o, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	never := func(starvedMin int) *Result {
		m := smallModel(t)
		m.Bias[1], m.Epsilon, m.EpsilonFloor = -100, 0, 0
		o := o
		o.StarvedMin = starvedMin
		sched, err := o.scheduler(tiersched.NameQLearning, m)
		if err != nil {
			t.Fatal(err)
		}
		r, err := execute(n.clone(), sched, o, o.Seed)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	off, on := never(-1), never(0)
	t.Logf("off: refused %d, ssd reads %.2f GB, %.3f ms, agent %+v", off.Refused, float64(off.SSDReadBytes)/1e9, off.MeanLatencyMs, *off.Agent)
	t.Logf("on:  refused %d, ssd reads %.2f GB, %.3f ms, agent %+v", on.Refused, float64(on.SSDReadBytes)/1e9, on.MeanLatencyMs, *on.Agent)
	if off.Refused == 0 {
		t.Fatal("the never-running agent was never refused a promotion: the scenario does not starve")
	}
	if n := off.Agent.ForcedBy[tiersched.ForcedStarved]; n != 0 {
		t.Fatalf("rule off, yet %d runs forced by it", n)
	}
	starved := on.Agent.ForcedBy[tiersched.ForcedStarved]
	if starved == 0 {
		t.Fatal("rule on: no run forced by promotion starvation")
	}
	marked := 0
	for _, s := range on.Series {
		if s.Action == "run/"+tiersched.ForcedStarved {
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no series sample records a starved run")
	}
	if on.SSDReadBytes <= off.SSDReadBytes || on.Refused >= off.Refused {
		t.Fatalf("with the rule: ssd reads %d (without %d), refusals %d (without %d); want more ssd reads and fewer refusals",
			on.SSDReadBytes, off.SSDReadBytes, on.Refused, off.Refused)
	}
}
