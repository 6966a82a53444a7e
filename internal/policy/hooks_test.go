package policy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TestExamplesValidate puts every example policy, with its hook inferred,
// against the test model: the shipped examples must stay valid.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../../examples/policies/*.lua")
	if err != nil || len(files) < 8 {
		t.Fatalf("examples: %v %v", files, err)
	}
	m := newManager(t, newKV(t), "n1")
	want := map[string]Hook{"counter": HookClass, "append": HookClass, "checksum": HookClass}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".lua")
		name := strings.ReplaceAll(base, "_", "-")
		res, err := m.Put(context.Background(), PutRequest{Name: name, Source: string(src), Author: "examples", IfVersion: -1}, testEnv())
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		hook := want[base]
		if hook == "" {
			hook = Hook(strings.SplitN(base, "_", 2)[0])
		}
		if res.Record.Hook != hook {
			t.Errorf("%s: inferred hook %s, the file name says %s", f, res.Record.Hook, hook)
		}
		if len(res.Warnings) > 0 && hook != HookClass {
			t.Errorf("%s: warnings %v", f, res.Warnings)
		}
	}
}

func TestTieringHook(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	tun := m.Tiering()
	var base decide.TierOptions
	base.EnsureDefaults()
	s := testSnapshot()
	if o, run := tun.TuneTiering(s, nil, base); !run || o.DownAbove != base.DownAbove {
		t.Fatalf("no policy: %+v %v", o, run)
	}
	put(t, m, "tier", HookTiering, `
function tiering(tiers, cluster)
  if tiers.ssd.usage > 0.5 then return {run = false} end
  return {down_above = 0.6, reduce = 0.3}
end
function heat(eg, now) return eg.reads - (now - eg.atime) / 86400 end`)
	o, run := tun.TuneTiering(s, nil, base)
	if !run || o.DownAbove != 0.6 || o.Reduce != 0.3 || o.DestBelow != base.DestBelow {
		t.Fatalf("thresholds: %+v %v", o, run)
	}
	full, _ := ApplyWhatIf(s, []string{"tier:ssd.used=80%"})
	if _, run := tun.TuneTiering(full, nil, base); run {
		t.Fatal("run=false ignored")
	}
	egs := []decide.Egroup{
		{ID: 1, Reads: 9, Atime: testNow},
		{ID: 2, Reads: 0, Atime: testNow.Add(-48 * time.Hour)},
		{ID: 3, Reads: 2, Atime: testNow},
	}
	o, _ = tun.TuneTiering(s, egs, base)
	sort.Slice(egs, func(i, j int) bool { return o.Rank(egs[i]) < o.Rank(egs[j]) })
	if egs[0].ID != 2 || egs[1].ID != 3 || egs[2].ID != 1 {
		t.Fatalf("heat order: %v %v %v", egs[0].ID, egs[1].ID, egs[2].ID)
	}
}

func TestBalancerHook(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	b := m.Balancer()
	s := testSnapshot()
	parts := samplePartitions()
	if a := b.AssignPartitions(s, "n1", parts); a != nil {
		t.Fatalf("no balancer policy, yet an assignment: %v", a)
	}
	src, err := os.ReadFile("../../examples/policies/balancer_mantle.lua")
	if err != nil {
		t.Fatal(err)
	}
	put(t, m, "mantle", HookBalancer, string(src))
	a := b.AssignPartitions(s, "n1", parts)
	count := map[model.NodeID]int{}
	for _, n := range a {
		count[n]++
	}
	if len(a) != 32 || len(count) != 3 || count["n1"] >= count["n2"] {
		t.Fatalf("mantle spread: %v", count)
	}
	// Once every node scans, when() says no: the assignment stands.
	for i := range parts {
		parts[i].Node = a[parts[i].Name]
		parts[i].Records = 100
	}
	again := b.AssignPartitions(s, "n1", parts)
	for k, v := range a {
		if again[k] != v {
			t.Fatalf("when() was false, yet %s moved %s -> %s", k, v, again[k])
		}
	}
	// A balancer naming a node that is down fails: the master scans all.
	put(t, m, "mantle", HookBalancer, `
function when() return true end
function where(nodes) local t = {} for _, n in ipairs(nodes) do t[n.id] = 1 end return t end
function howmuch(nodes, units, targets)
  local a = {}
  for _, u in ipairs(units) do a[u.name] = "n2" end
  return a
end`)
	a = b.AssignPartitions(s, "n1", parts)
	for _, n := range a {
		if n != "n2" {
			t.Fatalf("howmuch ignored: %v", a)
		}
	}
	down, _ := ApplyWhatIf(s, []string{"n2.up=false"})
	if a := b.AssignPartitions(down, "n1", parts); a == nil {
		t.Fatal("the previous good version should decide")
	} else {
		for k, n := range a {
			if n == "n2" {
				t.Fatalf("%s assigned to a down node", k)
			}
		}
	}
}

func TestBigFirstIsBalancedAndDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 50; trial++ {
		var parts []curator.PartitionLoad
		total := 0
		for i := 0; i < 32; i++ {
			r := rng.IntN(1000)
			parts = append(parts, curator.PartitionLoad{Name: fmt.Sprintf("p%02d", i), Records: r})
			total += max(r, 1)
		}
		targets := map[string]float64{"a": 1, "b": 1, "c": 2}
		a := bigFirst(parts, targets, "self")
		b := bigFirst(parts, targets, "self")
		load := map[string]int{}
		for _, p := range parts {
			if a[p.Name] != b[p.Name] {
				t.Fatalf("trial %d (seed 7): not deterministic", trial)
			}
			load[string(a[p.Name])] += max(p.Records, 1)
		}
		for id, sh := range targets {
			want := float64(total) * sh / 4
			if math.Abs(float64(load[id])-want) > 1000 {
				t.Fatalf("trial %d (seed 7): %s got %d, target %.0f (a unit is at most 1000)", trial, id, load[id], want)
			}
		}
	}
}

func TestRuleHook(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	src, err := os.ReadFile("../../examples/policies/rule_spread_racks.lua")
	if err != nil {
		t.Fatal(err)
	}
	put(t, m, "spread", HookRule, string(src))
	put(t, m, "prefer-ssd", HookRule, `scope = "device"
function cost(v) if v.device.tier == "ssd" then return -1 end return 0 end`)
	rules := m.Rules()
	if len(rules) != 2 || rules[0].Name() != "prefer-ssd" || rules[1].Name() != "spread" {
		t.Fatalf("rules: %v", rules)
	}
	spread := rules[1]
	if spread.Scope() != ScopeReplicaSet || spread.Params()["same_rack_cost"] != 10.0 {
		t.Fatalf("scope %s params %v", spread.Scope(), spread.Params())
	}
	s := testSnapshot()
	r := func(dev string) model.Replica {
		d, _ := s.Device(model.DeviceID(dev))
		return model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}
	}
	for _, tc := range []struct {
		reps []model.Replica
		want float64
	}{
		{[]model.Replica{r("n1/ssd0"), r("n2/hdd0")}, 0},                // racks r1, r2
		{[]model.Replica{r("n1/ssd0"), r("n3/hdd0")}, 10},               // both on r1
		{[]model.Replica{r("n1/ssd0"), r("n1/hdd0")}, math.Inf(1)},      // one node
		{[]model.Replica{r("n1/ssd0"), r("n2/ssd0"), r("n3/ssd0")}, 10}, // r1 twice
	} {
		c, err := spread.Cost(RuleView{Snapshot: s, Replicas: tc.reps})
		if err != nil || c != tc.want {
			t.Errorf("%v: cost %v (%v), want %v", tc.reps, c, err, tc.want)
		}
	}
	hs, err := spread.Hints(RuleView{Snapshot: s})
	if err != nil || len(hs) != 1 || hs[0].Kind != "prefer-distinct" {
		t.Fatalf("hints %v %v", hs, err)
	}
	d, _ := s.Device("n2/ssd0")
	if c, err := rules[0].Cost(RuleView{Snapshot: s, Device: &d}); err != nil || c != -1 {
		t.Fatalf("device rule: %v %v", c, err)
	}
	// A rule list is bound to versions: a put does not change a plan in
	// progress, the next Rules() sees it.
	put(t, m, "prefer-ssd", HookRule, `scope = "device"
function cost(v) return 5 end`)
	if c, _ := rules[0].Cost(RuleView{Snapshot: s, Device: &d}); c != -1 {
		t.Fatalf("bound rule changed version mid-plan: %v", c)
	}
	if c, _ := m.Rules()[0].Cost(RuleView{Snapshot: s, Device: &d}); c != 5 {
		t.Fatalf("new version not used: %v", c)
	}
}

func TestWhatIfAndTest(t *testing.T) {
	s := testSnapshot()
	w, err := ApplyWhatIf(s, []string{"n1/ssd0.used=90%", "n2.up=false", "n3/hdd0.queue=7", "tier:hdd.capacity=2T"})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := w.Device("n1/ssd0")
	h, _ := w.Device("n3/hdd0")
	n2, _ := w.Node("n2")
	if d.Usage() < 0.89 || d.Usage() > 0.91 || n2.Up || h.QueueLen != 7 || h.CapacityBytes != 2<<40 {
		t.Fatalf("what-if not applied: %+v %+v %+v", d, h, n2)
	}
	if orig, _ := s.Device("n1/ssd0"); orig.Usage() > 0.2 {
		t.Fatal("what-if changed the live snapshot")
	}
	for _, bad := range []string{"n1/ssd0.used", "nx.up=true", "n1/ssd0.color=red", "n1.up=maybe", "n1/ssd0.used=lots"} {
		if _, err := ApplyWhatIf(s, []string{bad}); err == nil {
			t.Errorf("what-if %q accepted", bad)
		}
	}
	m := newManager(t, newKV(t), "n1")
	def, _ := placement.New(placement.Config{})
	env := testEnv()
	env.Placement = def
	rep, err := m.Test(context.Background(), TestRequest{Name: "fit", Hook: HookFitness, Samples: 300, Vector: "ssd=1",
		Source: `params = {selection = "sus"}
function fitness(d) if d.id == "n2/ssd0" then return 0 end return 1 end`,
		WhatIf: []string{"n3/ssd0.state=failed"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Text, "n1/ssd0") || rep.Version != 0 {
		t.Fatalf("report:\n%s", rep.Text)
	}
	rows := rep.Data.(map[string]any)["devices"]
	text := fmt.Sprintf("%+v", rows)
	if !strings.Contains(text, "Device:n1/ssd0 Tier:ssd") {
		t.Fatalf("rows: %s", text)
	}
	// With n3 failed and n2 weighted 0, SUS sent every ssd replica to n1.
	if !strings.Contains(rep.Text, "n1/ssd0  ssd   10.0%  1      1        300") || !strings.Contains(rep.Text, "selection sus") {
		t.Fatalf("placements:\n%s", rep.Text)
	}
}
