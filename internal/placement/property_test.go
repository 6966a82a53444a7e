package placement

import (
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

var propSeed = flag.Uint64("placement.seed", 0, "seed for the randomized placement tests (0: fixed default)")
var propIters = flag.Int("placement.iters", 3000, "iterations of the randomized placement tests")

func seed(t *testing.T) uint64 {
	s := *propSeed
	if s == 0 {
		s = 20260101
	}
	t.Logf("seed %d (replay: go test ./internal/placement -run %s -placement.seed=%d)", s, t.Name(), s)
	return s
}

// randCluster builds a random cluster: 1-12 nodes on 1-4 racks, each with
// a random subset of tiers, random usage, load, and failures.
func randCluster(rng *rand.Rand) *model.Snapshot {
	nn := 1 + rng.IntN(12)
	racks := 1 + rng.IntN(4)
	tiers := []model.Tier{model.TierMem, model.TierSSD, model.TierHDD, model.TierRemote, "nvme"}
	var nodes []model.Node
	var devs []model.Device
	for n := range nn {
		id := model.NodeID(fmt.Sprintf("n%02d", n))
		rack := fmt.Sprintf("r%d", rng.IntN(racks))
		nodes = append(nodes, model.Node{ID: id, Rack: rack, Up: rng.IntN(10) > 0})
		for k := range 1 + rng.IntN(4) {
			capb := int64(1+rng.IntN(1000)) << 30
			d := model.Device{
				ID: model.DeviceID(fmt.Sprintf("%s/d%d", id, k)), Node: id, Rack: rack,
				Tier:          tiers[rng.IntN(len(tiers))],
				CapacityBytes: capb,
				UsedBytes:     int64(rng.Float64() * float64(capb)),
				QueueLen:      rng.IntN(200),
				ActiveStreams: rng.IntN(10),
				WriteBps:      float64(rng.IntN(3000)) * 1e6,
				ReadBps:       float64(rng.IntN(3000)) * 1e6,
			}
			switch rng.IntN(12) {
			case 0:
				d.State = model.DeviceFailed
			case 1:
				d.State = model.DeviceDraining
			}
			devs = append(devs, d)
		}
	}
	return model.NewSnapshot(epoch, nodes, devs)
}

func randVector(rng *rand.Rand) model.Vector {
	v := model.Vector{Counts: map[model.Tier]int{}}
	tiers := []model.Tier{model.TierMem, model.TierSSD, model.TierHDD, model.TierAny, model.TierAny, model.TierAny}
	for range 1 + rng.IntN(4) {
		v.Counts[tiers[rng.IntN(len(tiers))]]++
	}
	return v
}

func randConfig(rng *rand.Rand) Config {
	switch rng.IntN(4) {
	case 0:
		return Config{Name: NameUniform, IgnoreClient: rng.IntN(2) == 0}
	case 1:
		c := Config{Name: NameFitness, Selection: Selections[rng.IntN(len(Selections))], IgnoreClient: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			c.Fitness = FitnessAdd
		}
		return c
	case 2:
		c := Config{Name: NameMoop, AllowMem: rng.IntN(2) == 0, IgnoreClient: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			c.Objectives = []Objective{Objectives[rng.IntN(4)]}
		}
		return c
	}
	return Config{Name: NameRules, AllowMem: rng.IntN(2) == 0, IgnoreClient: rng.IntN(2) == 0}
}

// TestRandomizedInvariants places random vectors on random clusters with
// random policies and checks every invariant after every placement:
// distinct devices and nodes, tier counts, online devices, the 95 % rule,
// exclusions, at most a third of the set in memory, determinism for a
// seed, and that failures are ErrNoSuitableDevices naming a constraint.
func TestRandomizedInvariants(t *testing.T) {
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, 1))
	placed, failed := 0, 0
	for it := range *propIters {
		s := randCluster(rng)
		cfg := randConfig(rng)
		p, err := New(cfg)
		if err != nil {
			t.Fatalf("iter %d: New(%s): %v", it, cfg, err)
		}
		req := Request{Vector: randVector(rng), Bytes: int64(rng.IntN(8)) << 28}
		if rng.IntN(2) == 0 {
			req.Client = s.Devices[rng.IntN(len(s.Devices))].Node
		}
		for _, d := range s.Devices {
			switch rng.IntN(20) {
			case 0:
				req.Exclude = append(req.Exclude, d.ID)
			case 1:
				if len(req.Existing)+req.Vector.Total() < model.MaxReplicas {
					req.Existing = append(req.Existing, model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier})
				}
			}
		}
		ps := rng.Uint64()
		rs, err := p.Place(s, req, rand.New(rand.NewPCG(ps, 2)))
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d iter %d policy %q vector %s client %q existing %v exclude %v\ncluster:\n%s\n%s",
				sd, it, cfg, req.Vector, req.Client, req.Existing, req.Exclude, printCluster(s), fmt.Sprintf(format, args...))
		}
		if err != nil {
			if !errors.Is(err, ErrNoSuitableDevices) {
				fail("error %v is not ErrNoSuitableDevices", err)
			}
			if !strings.Contains(err.Error(), "tier") {
				fail("error %q does not name the tier", err)
			}
			failed++
			continue
		}
		placed++
		if err := checkPlacement(s, req, rs, cfg); err != nil {
			fail("placed %s: %v", fmtReplicas(rs), err)
		}
		again, err := p.Place(s, req, rand.New(rand.NewPCG(ps, 2)))
		if err != nil || !reflect.DeepEqual(rs, again) {
			fail("not deterministic: %s then %s (%v)", fmtReplicas(rs), fmtReplicas(again), err)
		}
		// Explain runs the same decision: same seed, same choice.
		e, err := ExplainPolicy(s, req, p, rand.New(rand.NewPCG(ps, 2)))
		if err != nil || e.Err != nil || !reflect.DeepEqual(e.Choice, rs) {
			fail("explain chose %v (%v), place chose %s", e, err, fmtReplicas(rs))
		}
	}
	t.Logf("%d placed, %d could not be placed", placed, failed)
	if placed < *propIters/4 {
		t.Fatalf("only %d of %d random requests placed: the generator is too harsh to test much", placed, *propIters)
	}
}

// TestRandomizedReconcile checks that applying Reconcile's plan yields a
// set that meets the vector and that removals never include a counting
// replica the vector still needs.
func TestRandomizedReconcile(t *testing.T) {
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, 3))
	for it := range *propIters / 3 {
		s := randCluster(rng)
		cfg := randConfig(rng)
		p, _ := New(cfg)
		want := randVector(rng)
		var cur []model.Replica
		for _, i := range rng.Perm(len(s.Devices))[:min(len(s.Devices), rng.IntN(5))] {
			d := s.Devices[i]
			cur = append(cur, model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier})
		}
		add, remove, err := Reconcile(s, cur, want, p, rand.New(rand.NewPCG(uint64(it), 4)))
		if err != nil {
			if !errors.Is(err, ErrNoSuitableDevices) {
				t.Fatalf("seed %d iter %d: %v", sd, it, err)
			}
			continue
		}
		removed := map[model.DeviceID]bool{}
		for _, r := range remove {
			removed[r.Device] = true
		}
		counts := map[model.Tier]int{}
		total := 0
		for _, r := range append(append([]model.Replica(nil), cur...), add...) {
			d, ok := s.Device(r.Device)
			if removed[r.Device] {
				continue
			}
			if !ok || d.State != model.DeviceUp || !s.NodeUp(d.Node) {
				if ok && d.State == model.DeviceUp {
					continue // parked on a down node: kept, not counted
				}
				t.Fatalf("seed %d iter %d: kept replica on unusable device %s", sd, it, r.Device)
			}
			counts[d.Tier]++
			total++
		}
		if total != want.Total() {
			t.Fatalf("seed %d iter %d: %d replicas count after plan, want %s\ncur %v add %v remove %v", sd, it, total, want, cur, add, remove)
		}
		for _, tr := range want.Tiers() {
			if tr != model.TierAny && counts[tr] < want.Count(tr) {
				t.Fatalf("seed %d iter %d: tier %s has %d, want %s", sd, it, tr, counts[tr], want)
			}
		}
	}
}

// TestRandomizedSatisfied checks Satisfied against Reconcile: whenever
// Satisfied says a replica set meets its vector, Reconcile adds and
// removes nothing; and it says so for the sets Reconcile's own plans
// produce, once applied, whenever they count exactly (the fast path must
// not miss the common case).
func TestRandomizedSatisfied(t *testing.T) {
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, 9))
	agreed, fast := 0, 0
	for it := range *propIters / 3 {
		s := randCluster(rng)
		p, _ := New(randConfig(rng))
		want := randVector(rng)
		var cur []model.Replica
		for _, i := range rng.Perm(len(s.Devices))[:min(len(s.Devices), rng.IntN(5))] {
			d := s.Devices[i]
			cur = append(cur, model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier})
		}
		for round := 0; round < 2; round++ {
			add, remove, err := Reconcile(s, cur, want, p, rand.New(rand.NewPCG(uint64(it), 4)))
			sat := Satisfied(s, cur, want)
			if sat {
				fast++
				if err != nil || len(add) != 0 || len(remove) != 0 {
					t.Fatalf("seed %d iter %d: Satisfied(%v, %s) but Reconcile adds %v removes %v (%v)", sd, it, cur, want, add, remove, err)
				}
			}
			if err != nil {
				break
			}
			if len(add) == 0 && len(remove) == 0 {
				agreed++
				// Nothing to do and nothing parked: Satisfied must see it.
				parked := false
				for _, r := range cur {
					if d, ok := s.Device(r.Device); ok && !s.NodeUp(d.Node) {
						parked = true
					}
				}
				if !parked && !sat {
					t.Fatalf("seed %d iter %d: Reconcile has nothing to do for %v (%s) but Satisfied says no", sd, it, cur, want)
				}
				break
			}
			// Apply the plan and ask again.
			next := append([]model.Replica(nil), add...)
			for _, r := range cur {
				if !isIn(remove, r.Device) {
					next = append(next, r)
				}
			}
			cur = next
		}
	}
	t.Logf("%d sets needed nothing, %d answered by the fast path", agreed, fast)
	if fast < *propIters/30 {
		t.Fatalf("only %d sets took the fast path: the generator does not exercise it", fast)
	}
}

// TestWeightedVector checks the thesis's WeightedVector unit-test phases
// (Allen §3.4.2): no duplicate samples, uniform weights sample uniformly,
// and SUS samples in proportion to weight.
func TestWeightedVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 5))
	const n = 50
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	for _, sel := range Selections {
		wv := NewWeightedVector(func(i int) float64 { return float64(i + 1) }, sel, 10)
		wv.SetItems(items)
		seen := map[int]bool{}
		for {
			x, ok := wv.Sample(rng)
			if !ok {
				break
			}
			if seen[x] {
				t.Fatalf("%s: %d sampled twice", sel, x)
			}
			seen[x] = true
		}
		if len(seen) != n {
			t.Fatalf("%s: sampled %d of %d", sel, len(seen), n)
		}
	}
	const draws = 200000
	check := func(sel Selection, w func(int) float64, expect func(int) float64) {
		wv := NewWeightedVector(w, sel, 10)
		wv.SetItems(items)
		counts := make([]int, n)
		for range draws {
			wv.Reset()
			x, _ := wv.Sample(rng)
			counts[x]++
		}
		for i, c := range counts {
			got, want := float64(c)/draws, expect(i)
			if d := got - want; d > 0.006 || d < -0.006 {
				t.Fatalf("%s: item %d sampled %.4f, want %.4f", sel, i, got, want)
			}
		}
	}
	check(SelectSUS, func(int) float64 { return 1 }, func(int) float64 { return 1.0 / n })
	check(SelectSUS, func(i int) float64 { return float64(i + 1) }, func(i int) float64 { return float64(i+1) / (n * (n + 1) / 2) })
	check(SelectUniform, func(i int) float64 { return float64(i + 1) }, func(int) float64 { return 1.0 / n })
	// Two-choice: item i wins when it is the larger of two uniform draws
	// (with replacement): P = (2i+1)/n^2.
	check(SelectTwoChoice, func(i int) float64 { return float64(i + 1) }, func(i int) float64 { return float64(2*i+1) / (n * n) })
	// Truncation at 10 %: uniform over the top 5 items.
	check(SelectTruncation, func(i int) float64 { return float64(i + 1) }, func(i int) float64 {
		if i >= n-5 {
			return 0.2
		}
		return 0
	})
}

// TestImportsOnlyModelAndStdlib enforces the package contract: decision
// code imports internal/model and the standard library, nothing else.
func TestImportsOnlyModelAndStdlib(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			first, _, _ := strings.Cut(path, "/")
			if path == "github.com/terrace-storage/terrace/internal/model" || !strings.Contains(first, ".") {
				if path == "os" || path == "net" || strings.HasPrefix(path, "net/") || path == "time" && f != "pending.go" || path == "sync" {
					t.Errorf("%s imports %s: placement does no I/O, keeps no shared state and reads no clock", f, path)
				}
				continue
			}
			t.Errorf("%s imports %s: placement may import only internal/model and the standard library", f, path)
		}
	}
}

// TestSatisfiedRefusesWhatReconcileWouldChange covers the cases the
// random generator rarely draws: an invalid vector (Reconcile refuses
// it), an empty set, a draining or unknown device, a missing explicit
// tier.
func TestSatisfiedRefusesWhatReconcileWouldChange(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := model.NewSnapshot(now, []model.Node{{ID: "n1", Up: true}, {ID: "n2", Up: true}}, []model.Device{
		{ID: "n1/ssd", Node: "n1", Tier: model.TierSSD, State: model.DeviceUp, CapacityBytes: 1 << 40},
		{ID: "n2/hdd", Node: "n2", Tier: model.TierHDD, State: model.DeviceUp, CapacityBytes: 1 << 40},
		{ID: "n2/hdd2", Node: "n2", Tier: model.TierHDD, State: model.DeviceDraining, CapacityBytes: 1 << 40},
	})
	rep := func(id model.DeviceID) model.Replica {
		d, _ := s.Device(id)
		return model.Replica{Device: id, Node: d.Node, Tier: d.Tier}
	}
	ok := []model.Replica{rep("n1/ssd"), rep("n2/hdd")}
	if !Satisfied(s, ok, model.MustParseVector("ssd=1,hdd=1")) || !Satisfied(s, ok, model.MustParseVector("any=2")) {
		t.Fatal("a set that meets its vector is not satisfied")
	}
	for name, c := range map[string]struct {
		cur  []model.Replica
		want model.Vector
	}{
		"negative count":  {ok, model.Vector{Counts: map[model.Tier]int{model.TierHDD: -1, model.TierAny: 3}}},
		"huge count":      {ok, model.Vector{Counts: map[model.Tier]int{model.TierHDD: 1 << 30, model.TierAny: 2 - 1<<30}}},
		"empty set":       {nil, model.Vector{Counts: map[model.Tier]int{}}},
		"draining device": {[]model.Replica{rep("n1/ssd"), {Device: "n2/hdd2", Node: "n2", Tier: model.TierHDD}}, model.MustParseVector("any=2")},
		"unknown device":  {[]model.Replica{rep("n1/ssd"), {Device: "n9/x", Node: "n9", Tier: model.TierHDD}}, model.MustParseVector("any=2")},
		"missing tier":    {ok, model.MustParseVector("hdd=2")},
		"one short":       {ok[:1], model.MustParseVector("any=2")},
		"one to spare":    {ok, model.MustParseVector("any=1")},
	} {
		if Satisfied(s, c.cur, c.want) {
			t.Errorf("%s: satisfied", name)
		}
	}
}
