package rebuild

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
)

func TestPercentileNearestRank(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1) // 1..100
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0.1, 1}, {99.5, 100}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v of 1..100 = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %v", got)
	}
	if !math.IsNaN(Percentile(nil, 99)) || !math.IsNaN(Mean(nil)) {
		t.Error("empty input must be NaN, not a latency of 0 ms")
	}
}

// Property: the p-th percentile has at least p % of the values at or
// below it and fewer than p % strictly below it.
func TestPercentileProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 500; i++ {
		n := 1 + r.IntN(300)
		xs := make([]float64, n)
		for j := range xs {
			xs[j] = math.Floor(r.ExpFloat64() * 10)
		}
		sort.Float64s(xs)
		p := 0.5 + r.Float64()*99.5
		v := Percentile(xs, p)
		atOrBelow, below := 0, 0
		for _, x := range xs {
			if x <= v {
				atOrBelow++
			}
			if x < v {
				below++
			}
		}
		if float64(atOrBelow) < p/100*float64(n)-1e-9 || float64(below) >= p/100*float64(n) {
			t.Fatalf("seed %d: p%.2f of %d values = %v: %d at or below, %d below", seed, p, n, v, atOrBelow, below)
		}
	}
}

func TestSplitPhases(t *testing.T) {
	ops := []Op{
		{T: 0.5, LatMs: 10, Read: true, Bytes: 100},
		{T: 9.9, LatMs: 20, Bytes: 100},
		{T: 10, LatMs: 100, Read: true, Bytes: 100}, // the failure's instant is in the rebuild
		{T: 15, Read: true, Err: true},
		{T: 19, LatMs: 300, Bytes: 100},
		{T: 20, Err: true},
		{T: 25, LatMs: 5, Read: true, Bytes: 100},
	}
	ps := SplitPhases(ops, 10, 20, 30)
	if len(ps) != 3 || ps[0].Name != PhaseBaseline || ps[1].Name != PhaseRebuild || ps[2].Name != PhaseAfter {
		t.Fatalf("phases %+v", ps)
	}
	b, rb, a := ps[0], ps[1], ps[2]
	if b.Ops != 2 || b.MeanMs != 15 || b.P99Ms != 20 || b.Seconds != 10 || b.ReadErrors+b.WriteErrors != 0 {
		t.Errorf("baseline %+v", b)
	}
	if rb.Ops != 3 || rb.ReadErrors != 1 || rb.WriteErrors != 0 || rb.MeanMs != 200 || rb.P99Ms != 300 || rb.Seconds != 10 {
		t.Errorf("rebuild %+v (failed ops must not count as latency)", rb)
	}
	if a.Ops != 2 || a.WriteErrors != 1 || a.MeanMs != 5 || a.Seconds != 10 || a.OpsPerSec != 0.2 {
		t.Errorf("after %+v", a)
	}
	if rb.MBps != 200/10.0/1e6 {
		t.Errorf("rebuild throughput %v MB/s", rb.MBps)
	}
	// Never protected: everything after the failure is the rebuild.
	ps = SplitPhases(ops, 10, -1, 30)
	if ps[1].Ops != 5 || ps[2].Ops != 0 || !math.IsNaN(ps[2].P99Ms) || ps[1].Seconds != 20 {
		t.Errorf("unprotected: rebuild %+v after %+v", ps[1], ps[2])
	}
}

func job(id string, start time.Time, took time.Duration, ur int64, planned, done map[string]int, moved int64) curator.JobRecord {
	return curator.JobRecord{ID: id, Kind: "partial", Start: start, End: start.Add(took),
		Stats: decide.Stats{UnderReplicatedBytes: ur, UnderReplicated: int(ur >> 20)}, Planned: planned, Done: done, Moved: moved}
}

func TestProtectionAfter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := t0.Add(10 * time.Second)
	rec := map[string]int{"recover": 1}
	jobs := []curator.JobRecord{
		job("a", t0, time.Second, 0, nil, nil, 0),                                    // before the failure: ignored
		job("b", fail.Add(time.Second), 100*time.Millisecond, 0, nil, nil, 0),        // failure not seen yet: not a confirmation
		job("c", fail.Add(4*time.Second), 3*time.Second, 8<<20, rec, rec, 4<<20),     // first under-replicated scan
		job("d", fail.Add(15*time.Second), 2*time.Second, 4<<20, rec, rec, 4<<20),    // the re-check copies the rest
		job("e", fail.Add(25*time.Second), 100*time.Millisecond, 0, nil, nil, 0),     // quiet: protected
		job("f", fail.Add(35*time.Second), 100*time.Millisecond, 0, rec, rec, 1<<20), // after: not counted
	}
	// Order and duplicates must not matter.
	shuffled := append([]curator.JobRecord{jobs[4], jobs[2]}, jobs...)
	p := ProtectionAfter(shuffled, fail)
	if !p.Protected || p.FirstUR == nil || p.FirstUR.ID != "c" || p.Quiet == nil || p.Quiet.ID != "e" {
		t.Fatalf("protection %+v", p)
	}
	if want := fail.Add(17 * time.Second); !p.At().Equal(want) {
		t.Errorf("protected at %s, want the last copy's end %s", p.At(), want)
	}
	if p.Moved != 8<<20 || p.Recovered != 2 || p.Jobs != 4 || p.PeakURBytes != 8<<20 {
		t.Errorf("work %+v", p)
	}
	// Without the quiet scan: not protected yet.
	if p := ProtectionAfter(jobs[:4], fail); p.Protected || p.Quiet != nil {
		t.Errorf("protected without a confirming scan: %+v", p)
	}
	// A scan that still plans a recovery (or a seal) does not confirm.
	busy := job("e", fail.Add(25*time.Second), time.Second, 0, map[string]int{"seal": 1}, nil, 0)
	if p := ProtectionAfter([]curator.JobRecord{jobs[2], busy}, fail); p.Protected {
		t.Errorf("a scan planning a seal confirmed protection: %+v", p)
	}
	// A still-running job (no end) is ignored.
	running := job("g", fail.Add(5*time.Second), 0, 0, nil, nil, 0)
	running.End = time.Time{}
	if p := ProtectionAfter([]curator.JobRecord{jobs[2], running}, fail); p.Protected {
		t.Errorf("a running job confirmed protection")
	}
}

func TestPerSecond(t *testing.T) {
	ops := []Op{{T: 0.1, LatMs: 2, Bytes: 1e6}, {T: 0.9, LatMs: 4, Bytes: 1e6}, {T: 2.5, Err: true}, {T: 2.6, LatMs: 8, Bytes: 2e6}, {T: 9, LatMs: 1}}
	ur := []URPoint{{T: 2.2, Bytes: 0}, {T: 1.5, Bytes: 5}, {T: 1.7, Bytes: 7}}
	secs := PerSecond(ops, ur, 1, 2, 3.2)
	if len(secs) != 4 {
		t.Fatalf("%d seconds for 3.2 s", len(secs))
	}
	if s := secs[0]; s.Ops != 2 || s.MeanMs != 3 || s.P99Ms != 4 || s.MBps != 2 || s.URBytes != -1 || s.Phase != PhaseBaseline {
		t.Errorf("second 0: %+v", s)
	}
	if s := secs[1]; s.Ops != 0 || !math.IsNaN(s.MeanMs) || s.URBytes != 7 || s.Phase != PhaseRebuild {
		t.Errorf("second 1: %+v (the last scan ending in it wins)", s)
	}
	if s := secs[2]; s.Ops != 2 || s.Errors != 1 || s.MeanMs != 8 || s.URBytes != 0 || s.Phase != PhaseAfter {
		t.Errorf("second 2: %+v", s)
	}
	if s := secs[3]; s.Ops != 0 || s.URBytes != 0 {
		t.Errorf("second 3: %+v (an op past the end is dropped)", s)
	}
}

func TestSummaryReportsGoalAndFailures(t *testing.T) {
	o := Options{}
	o.EnsureDefaults()
	res := &Result{Options: o, EntryNode: "n1", FailedDevice: "n4/ssd0", FailAt: 40, DetectedAt: 41,
		Protected: true, ProtectedAt: 70, ConfirmedAt: 80, BytesMoved: 100 << 20,
		Phases:       []PhaseStats{{Name: PhaseBaseline, P99Ms: 10}, {Name: PhaseRebuild, P99Ms: 25, ReadErrors: 1}, {Name: PhaseAfter, P99Ms: 9}},
		ReadFailures: 1}
	s := Summary(res)
	for _, want := range []string{"time to protection: 30.0 s", "2.50x (OVER the 2x goal)", "failed reads of acknowledged data during the load: 1", "n4/ssd0", "100.0 MiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	res.Phases[1].P99Ms = 15
	res.Protected = false
	s = Summary(res)
	for _, want := range []string{"1.50x (within the 2x goal)", "NOT reached"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	for name, mut := range map[string]func(*Options){
		"entry node fails":   func(o *Options) { o.FailNode = 0 },
		"node out of range":  func(o *Options) { o.FailNode = 9 },
		"unknown device":     func(o *Options) { o.FailDevice = "nvme9" },
		"one replica":        func(o *Options) { o.Vector = "any=1" },
		"vector needs nodes": func(o *Options) { o.Vector = "any=4" },
		"bad vector":         func(o *Options) { o.Vector = "any=" },
		"bad device spec":    func(o *Options) { o.Devices = []string{"ssd0"} },
		"read fraction":      func(o *Options) { o.ReadFraction = 1.5 },
		"negative rate":      func(o *Options) { o.Rate = -1 },
		"two nodes":          func(o *Options) { o.Nodes = 2; o.FailNode = 1 },
	} {
		o := Options{}
		o.EnsureDefaults()
		mut(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, o)
		}
	}
	o := Options{}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if o.FailNode != 3 || o.FailDevice != "ssd0" {
		t.Errorf("default victim %d/%s, want the last node's first device", o.FailNode, o.FailDevice)
	}
}

func TestWindowStatsAndURPoints(t *testing.T) {
	ops := []Op{{T: 1, LatMs: 50}, {T: 2, LatMs: 10, Bytes: 4e6}, {T: 2.9, LatMs: 30, Bytes: 4e6}, {T: 3, LatMs: 99}}
	w := WindowStats("copying", ops, 2, 3)
	if w.Name != "copying" || w.Ops != 2 || w.Seconds != 1 || w.MeanMs != 20 || w.P99Ms != 30 || w.MBps != 8 {
		t.Errorf("window %+v", w)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	half := job("x", t0.Add(10*time.Second), 2*time.Second, 100, map[string]int{"recover": 4}, map[string]int{"recover": 2}, 50)
	pts := URPoints([]curator.JobRecord{half}, t0)
	if len(pts) != 2 || pts[0] != (URPoint{T: 10, Bytes: 100}) || pts[1] != (URPoint{T: 12, Bytes: 50}) {
		t.Errorf("points %+v: want the scan's total at the start and half left after half the recover tasks", pts)
	}
}
