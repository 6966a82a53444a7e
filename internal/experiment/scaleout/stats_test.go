package scaleout

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/server"
)

var marks = Marks{Warmup: 2, JoinAt: 10, ApplyAt: 15, BalancedAt: 25, End: 30}

func TestPhaseOf(t *testing.T) {
	for _, tc := range []struct {
		t    float64
		m    Marks
		want string
	}{
		{0, marks, PhaseWarmup},
		{1.99, marks, PhaseWarmup},
		{2, marks, PhaseBaseline},
		{9.99, marks, PhaseBaseline},
		{10, marks, PhaseJoined},
		{15, marks, PhaseMoving},
		{24.9, marks, PhaseMoving},
		{25, marks, PhaseAfter},
		{29, marks, PhaseAfter},
		// Never balanced: moving to the end.
		{29, Marks{Warmup: 2, JoinAt: 10, ApplyAt: 15, BalancedAt: -1, End: 30}, PhaseMoving},
	} {
		if got := PhaseOf(tc.t, tc.m); got != tc.want {
			t.Errorf("PhaseOf(%v, %+v) = %s, want %s", tc.t, tc.m, got, tc.want)
		}
	}
}

// Throughput is successful operations over the phase's length; latency
// percentiles skip failures; warm-up operations count nowhere.
func TestSplitPhases(t *testing.T) {
	var ops []Op
	// Warm-up: 100 slow ops that must not count.
	for i := 0; i < 100; i++ {
		ops = append(ops, Op{T: 1, LatMs: 1000, Read: true, Bytes: 1e6})
	}
	// Baseline 8 s: 80 reads at 10 ms, 1 failed write at 5000 ms.
	for i := 0; i < 80; i++ {
		ops = append(ops, Op{T: 2 + float64(i)/10, LatMs: 10, Read: true, Bytes: 1e6})
	}
	ops = append(ops, Op{T: 5, LatMs: 5000, Err: true})
	// Moving 10 s: 50 ops, 49 at 20 ms and one at 200 ms.
	for i := 0; i < 50; i++ {
		lat := 20.0
		if i == 7 {
			lat = 200
		}
		ops = append(ops, Op{T: 15 + float64(i)/5, LatMs: lat, Bytes: 2e6})
	}
	// After 5 s: 100 ops at 5 ms; one starting exactly at End is outside.
	for i := 0; i < 100; i++ {
		ops = append(ops, Op{T: 25 + float64(i)/20, LatMs: 5, Read: true, Bytes: 1e6})
	}
	ops = append(ops, Op{T: 30, LatMs: 1, Read: true})
	ps := SplitPhases(ops, marks)
	base, joined, moving, after := Phase(ps, PhaseBaseline), Phase(ps, PhaseJoined), Phase(ps, PhaseMoving), Phase(ps, PhaseAfter)
	if base.Seconds != 8 || base.Ops != 81 || base.Errors != 1 || base.Writes != 1 || base.OpsPerSec != 10 || base.P99Ms != 10 || base.MBps != 10 {
		t.Errorf("baseline %+v", base)
	}
	if joined.Seconds != 5 || joined.Ops != 0 || !math.IsNaN(joined.P50Ms) || joined.OpsPerSec != 0 {
		t.Errorf("joined %+v", joined)
	}
	if moving.Ops != 50 || moving.OpsPerSec != 5 || moving.P50Ms != 20 || moving.P99Ms != 200 || moving.MBps != 10 {
		t.Errorf("moving %+v", moving)
	}
	if after.Seconds != 5 || after.Ops != 100 || after.OpsPerSec != 20 || after.MaxMs != 5 {
		t.Errorf("after %+v", after)
	}
}

// Each second carries its operations and the latest sample taken by its
// end; a node absent from the samples reads -1.
func TestPerSecond(t *testing.T) {
	ops := []Op{
		{T: 0.5, LatMs: 3, Read: true, Bytes: 1000},
		{T: 0.7, LatMs: 5, Read: true, Bytes: 1000},
		{T: 1.2, LatMs: 9, Err: true},
		{T: 2.9, LatMs: 4, Bytes: 500},
		{T: 3.5, LatMs: 1}, // beyond End: dropped
	}
	samples := []Sample{
		{T: 2.5, NodeBytes: map[string]int64{"n1": 30, "n2": 30, "n3": 30, "n4": 10}, Moved: 10},
		{T: 0.3, NodeBytes: map[string]int64{"n1": 30, "n2": 30, "n3": 30}},
	}
	m := Marks{Warmup: 0, JoinAt: 1, ApplyAt: 2, BalancedAt: -1, End: 3.5} // the partial last second is left out
	secs := PerSecond(ops, samples, []string{"n1", "n4"}, m)
	if len(secs) != 3 {
		t.Fatalf("%d seconds, want 3", len(secs))
	}
	s0, s1, s2 := secs[0], secs[1], secs[2]
	if s0.Ops != 2 || s0.P50Ms != 3 || s0.P99Ms != 5 || s0.MBps != 0.002 || s0.Moved != 0 || s0.NodeBytes[0] != 30 || s0.NodeBytes[1] != -1 || s0.Phase != PhaseBaseline {
		t.Errorf("second 0: %+v", s0)
	}
	if s1.Ops != 0 || s1.Errors != 1 || !math.IsNaN(s1.P99Ms) || s1.NodeBytes[1] != -1 || s1.Phase != PhaseJoined {
		t.Errorf("second 1: %+v", s1)
	}
	if s2.Ops != 1 || s2.Moved != 10 || s2.NodeBytes[1] != 10 || s2.Phase != PhaseMoving {
		t.Errorf("second 2: %+v", s2)
	}
	// Before any sample: -1.
	secs = PerSecond(ops, []Sample{{T: 2.5, NodeBytes: map[string]int64{"n1": 1}}}, []string{"n1"}, m)
	if secs[0].Moved != -1 || secs[0].NodeBytes[0] != -1 || secs[2].NodeBytes[0] != 1 {
		t.Errorf("before the first sample: %+v / %+v", secs[0], secs[2])
	}
}

func TestSummaryAndHeadline(t *testing.T) {
	o := Options{}
	o.EnsureDefaults()
	ops := []Op{{T: 5, LatMs: 10, Read: true, Bytes: 1 << 20}, {T: 20, LatMs: 40, Read: true, Bytes: 1 << 20},
		{T: 26, LatMs: 8, Read: true, Bytes: 1 << 20}, {T: 27, LatMs: 8, Read: true, Bytes: 1 << 20}}
	r := &Result{Options: o, Nodes: []string{"n1", "n2", "n3", "n4"}, NewNode: "n4", Marks: marks, Balanced: true, TimeToBalance: 10,
		BytesMoved: 100 << 20, Preloaded: 10, Phases: SplitPhases(ops, marks),
		NodeBytesBefore: map[string]int64{"n1": 3 << 20, "n2": 3 << 20, "n3": 3 << 20},
		NodeBytesAfter:  map[string]int64{"n1": 2 << 20, "n2": 2 << 20, "n3": 2 << 20, "n4": 3 << 20}}
	h := Headline(r)
	for _, want := range []string{"throughput 0.1 -> 0.4 ops/s (3.20x", "balanced 10.0 s after the plan (15.0 s after the join)", "100.0 MiB moved", "p99 while moving 40.0 ms vs 10.0 ms baseline (4.00x)"} {
		if !strings.Contains(h, want) {
			t.Errorf("headline %q lacks %q", h, want)
		}
	}
	s := Summary(r)
	for _, want := range []string{"n4 -", "n4 3.0 MiB", "disk_balanced mean=0 spread=0.01", h} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	r.Balanced = false
	if h := Headline(r); !strings.Contains(h, "not balanced") {
		t.Errorf("unbalanced headline %q", h)
	}
	if b, err := JSON(r); err != nil || !strings.Contains(string(b), `"p50_ms": null`) {
		t.Errorf("JSON: %v\n%s", err, b)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Nodes = 2 }, "want 3..15"},
		{func(o *Options) { o.Vector = "any=4" }, "needs 4 nodes"},
		{func(o *Options) { o.Vector = "bogus" }, "vector"},
		{func(o *Options) { o.Devices = []string{"hdd:x"} }, "tier:NAME:capacity"},
		{func(o *Options) { o.ReadFraction = 1.5 }, "read fraction"},
		{func(o *Options) { o.Clients = -1 }, "clients"},
		{func(o *Options) { o.EgroupBytes = 1000 }, "egroup size"},
		{func(o *Options) { o.Rules = []string{"a\nb"} }, "one rule per entry"},
		{func(o *Options) { o.Tail = -time.Second }, "must be positive"},
		{func(o *Options) { o.ReadOrder = "nearest" }, "read order"},
		{func(o *Options) { o.Rules = []string{"disk_balanced spred=0.1"} }, `unknown parameter "spred"`},
		{func(o *Options) { o.Rules = []string{"no_such_rule"} }, `unknown rule "no_such_rule"`},
	} {
		o := Options{}
		o.EnsureDefaults()
		tc.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", o, err, tc.want)
		}
	}
	o := Options{}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// The servers' configuration parses as the server reads it and carries
// the rules and the Curator settings the experiment depends on.
func TestServerConfig(t *testing.T) {
	o := Options{MoveMBps: 50}
	o.EnsureDefaults()
	cfg := serverConfig(o)
	path := filepath.Join(t.TempDir(), "terrace.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := server.LoadFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg)
	}
	if c.EgroupMaxBytes != 2<<20 || c.Curator.Tiering == nil || *c.Curator.Tiering || c.Curator.Scrub == nil || *c.Curator.Scrub ||
		c.Curator.MoveMBps != 50 || c.ReadOrder != "locality" || strings.Join(c.Planner.Rules, "|") != strings.Join(DefaultRules, "|") {
		t.Errorf("parsed config %+v from:\n%s", c, cfg)
	}
	if err := curator.ValidateRules(strings.Join(c.Planner.Rules, "\n")); err != nil {
		t.Errorf("rules: %v", err)
	}
}

// Disk read rates are the counter's growth between the samples around
// each second's middle; a node missing from a sample, or whose counter
// went back (a restart), has no rate.
func TestPerSecondReadRates(t *testing.T) {
	samples := []Sample{
		{T: 0.2, NodeReadBytes: map[string]int64{"n1": 0}},
		{T: 1.2, NodeReadBytes: map[string]int64{"n1": 2e6, "n4": 0}},
		{T: 2.2, NodeReadBytes: map[string]int64{"n1": 5e6, "n4": 1e6}},
		{T: 3.2, NodeReadBytes: map[string]int64{"n1": 1e6, "n4": 3e6}},
	}
	m := Marks{JoinAt: 1, ApplyAt: 2, BalancedAt: -1, End: 4}
	secs := PerSecond(nil, samples, []string{"n1", "n4"}, m)
	want := [][2]float64{{2, math.NaN()}, {3, 1}, {math.NaN(), 2}, {math.NaN(), math.NaN()}}
	for i, s := range secs {
		for k := range 2 {
			got, w := s.NodeReadMBps[k], want[i][k]
			if !(math.Abs(got-w) < 1e-9 || math.IsNaN(got) && math.IsNaN(w)) {
				t.Errorf("second %d node %d: %v MB/s, want %v", i, k, got, w)
			}
		}
	}
}
