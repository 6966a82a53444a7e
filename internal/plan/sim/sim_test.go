package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/plan"
)

// The generator is seeded and meets the paper's setup: about 65 % full,
// at most ten devices per node, no object above its share bound.
func TestGenerate(t *testing.T) {
	spec := ClusterSpec{Objects: 20_000, Devices: 200, Seed: 3}
	a, err := Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(spec)
	if a.String() != b.String() {
		t.Fatal("same spec and seed, different clusters")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	var used, capacity int64
	var load float64
	perNode := map[string]int{}
	for _, d := range a.Devices {
		used += d.UsedBytes
		capacity += d.CapacityBytes
		load += d.Load
		perNode[string(d.Node)]++
		if d.UsedBytes > d.CapacityBytes {
			t.Fatalf("%s over capacity", d.ID)
		}
	}
	if f := float64(used) / float64(capacity); f < 0.6 || f > 0.7 {
		t.Fatalf("cluster %.2f full, want ~0.65", f)
	}
	for n, c := range perNode {
		if c > 10 {
			t.Fatalf("node %s has %d devices", n, c)
		}
	}
	meanLoad := load / float64(len(a.Devices))
	meanUsed := float64(used) / float64(len(a.Devices))
	for _, e := range a.Egroups {
		if e.Load > 0.26*meanLoad || float64(e.SizeBytes) > 0.26*meanUsed {
			t.Fatalf("egroup %d exceeds the share bound: load %.2f (mean device %.2f), size %d (mean device %.0f)", e.ID, e.Load, meanLoad, e.SizeBytes, meanUsed)
		}
	}
	if _, err := Generate(ClusterSpec{Objects: 10, Devices: 0}); err == nil {
		t.Fatal("zero devices accepted")
	}
}

// A small Table 2 run reaches zero cost and writes its CSV and PNG.
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	rs, err := Run(Options{Sizes: []Size{{1_000, 10}, {10_000, 100}}, Seed: 1, Runs: 2, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.FinalCost != 0 || r.FinalHard != 0 {
			t.Errorf("%d/%d: final cost %v (hard %v), want 0", r.Objects, r.Devices, r.FinalCost, r.FinalHard)
		}
		if r.InitialCost <= 0 || r.Moves <= 0 {
			t.Errorf("%d/%d: initial %v moves %v: the generated cluster should start unbalanced", r.Objects, r.Devices, r.InitialCost, r.Moves)
		}
	}
	for _, f := range []string{"planner-table2.csv", "planner-table2.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if _, err := Run(Options{Runs: -1}); err == nil {
		t.Error("negative runs accepted")
	}
}

// Plans of the generated clusters hold the planner's guarantees when
// replayed on the model: every move fits, and the final layout is
// balanced within the spread.
func TestTable2PlanHolds(t *testing.T) {
	m, err := Generate(ClusterSpec{Objects: 5_000, Devices: 50, Seed: 9, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	rules := table2Rules(t)
	p, err := plan.Solve(m, rules, plan.Options{Seed: 9, BatchEgroups: 1_000})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Final.IsZero() {
		t.Fatalf("final cost %s", p.Final)
	}
	fin, err := m.Apply(p.Moves)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, sum := math.Inf(1), 0.0, 0.0
	for _, d := range fin.Devices {
		if d.UsedBytes > d.CapacityBytes {
			t.Fatalf("%s over capacity after the plan", d.ID)
		}
		lo, hi, sum = math.Min(lo, d.Load), math.Max(hi, d.Load), sum+d.Load
	}
	mean := sum / float64(len(fin.Devices))
	if (hi-lo)/mean > 0.2+1e-9 {
		t.Fatalf("load spread %.3f of the mean after a zero-cost plan, want ≤ 0.2", (hi-lo)/mean)
	}
}
