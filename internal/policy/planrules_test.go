package policy

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/plan"
)

// planModel is testSnapshot's devices with n egroups, each with one
// replica on n1/hdd0 and one on n2/hdd0 (vector hdd=2).
func planModel(t *testing.T, s *model.Snapshot, n int) *plan.Model {
	t.Helper()
	vec, err := model.ParseVector("hdd=2")
	if err != nil {
		t.Fatal(err)
	}
	m := &plan.Model{Devices: plan.FromSnapshot(s)}
	for i := 0; i < n; i++ {
		m.Egroups = append(m.Egroups, plan.Egroup{ID: uint64(i + 1), SizeBytes: 1 << 30, Vector: vec,
			Replicas: []model.DeviceID{"n1/hdd0", "n2/hdd0"}})
	}
	return m
}

func solveWith(t *testing.T, m *plan.Model, set *PlanRuleSet, rules string) *plan.Plan {
	t.Helper()
	rs, err := plan.ParseRuleSetWith(rules, set.Specs())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Solve(m, rs, plan.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func replicasOn(t *testing.T, m *plan.Model, p *plan.Plan, node model.NodeID) int {
	t.Helper()
	after, err := m.Apply(p.Moves)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range after.Egroups {
		for _, d := range e.Replicas {
			if strings.HasPrefix(string(d), string(node)+"/") {
				n++
			}
		}
	}
	return n
}

// TestPlanRulesDriveTheSolver: a Lua rule joins a plan like a built-in
// one — an egroup-scope rule that charges for replicas on n1 moves them
// all off n1 (and without it nothing moves); a device-scope rule sees the
// planner's usage after each move, not the snapshot's, or its cost would
// never fall and nothing would move.
func TestPlanRulesDriveTheSolver(t *testing.T) {
	s := testSnapshot()
	m := newManager(t, newKV(t), "n1")
	put(t, m, "off-n1", HookRule, `scope = "egroup"
function cost(view)
  local c = 0
  for _, r in ipairs(view.replicas) do
    if r.node == "n1" then c = c + 1 end
  end
  return c
end
function hints(view)
  return { { kind = "prefer-distinct", target = "node" } }
end`)
	put(t, m, "drain-n1-hdd", HookRule, `scope = "device"
function cost(view)
  if view.device.node == "n1" and view.device.tier == "hdd" then
    return 100 * view.device.used / view.device.capacity
  end
  return 0
end`)
	set := m.PlanRules(s)
	if got := strings.Join(set.Names(), ","); got != "lua.drain-n1-hdd,lua.off-n1" {
		t.Fatalf("names: %s", got)
	}
	base := "device_has_space\nrplset_durable\n"

	// Without the Lua rules the model is already fine.
	if p := solveWith(t, planModel(t, s, 20), set, base); len(p.Moves) != 0 {
		t.Fatalf("built-in rules alone moved %d replicas: the test proves nothing", len(p.Moves))
	}
	for _, rule := range []string{"lua.off-n1", "lua.drain-n1-hdd"} {
		pm := planModel(t, s, 20)
		p := solveWith(t, pm, set, base+rule)
		if n := replicasOn(t, pm, p, "n1"); n != 0 {
			t.Fatalf("%s: %d replicas left on n1 after %d moves; unresolved %v", rule, n, len(p.Moves), p.Unresolved)
		}
		for _, mv := range p.Moves {
			if !strings.HasPrefix(string(mv.From), "n1/") || strings.HasPrefix(string(mv.To), "n2/") {
				t.Fatalf("%s: move %v: want n1 -> not n2 (the sibling's node)", rule, mv)
			}
			if !contains(mv.Lowers, rule) {
				t.Fatalf("%s: move %v does not name the rule", rule, mv)
			}
		}
		if errs := set.Errors(); len(errs) != 0 {
			t.Fatalf("%s: errors: %v", rule, errs)
		}
	}
}

// TestPlanRuleFailures: an evaluation that fails counts as cost 0 and is
// reported; the plan still completes and the other rules still act.
func TestPlanRuleFailures(t *testing.T) {
	s := testSnapshot()
	m := newManager(t, newKV(t), "n1")
	put(t, m, "flaky", HookRule, `scope = "egroup"
function cost(view)
  if view.egroup.size == 1234567 then error("no rule for egroup " .. view.egroup.id) end
  local c = 0
  for _, r in ipairs(view.replicas) do
    if r.node == "n1" then c = c + 1 end
  end
  return c
end`)
	set := m.PlanRules(s)
	pm := planModel(t, s, 20)
	pm.Egroups[2].SizeBytes, pm.Egroups[18].SizeBytes = 1234567, 1234567
	p := solveWith(t, pm, set, "rplset_durable\nlua.flaky")
	errs := set.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0], "lua.flaky") || !strings.Contains(errs[0], "no rule for egroup") {
		t.Fatalf("errors: %v", errs)
	}
	// Egroups 3 and 19 fail; the other 18 move.
	if n := replicasOn(t, pm, p, "n1"); n != 2 {
		t.Fatalf("%d replicas left on n1, want the 2 of the failing egroups", n)
	}
}

// TestPlanRuleHardConstraint: math.huge is a hard violation the solver
// repairs before soft costs.
func TestPlanRuleHardConstraint(t *testing.T) {
	s := testSnapshot()
	m := newManager(t, newKV(t), "n1")
	put(t, m, "never-n1", HookRule, `scope = "egroup"
function cost(view)
  for _, r in ipairs(view.replicas) do
    if r.node == "n1" then return math.huge end
  end
  return 0
end`)
	set := m.PlanRules(s)
	pm := planModel(t, s, 5)
	p := solveWith(t, pm, set, "rplset_durable\nlua.never-n1")
	if p.Initial.Hard == 0 || p.Final.Hard != 0 || math.IsInf(p.Final.Soft, 0) {
		t.Fatalf("cost %v -> %v: want hard violations repaired", p.Initial, p.Final)
	}
	if n := replicasOn(t, pm, p, "n1"); n != 0 {
		t.Fatalf("%d replicas left on n1", n)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// BenchmarkPlanLuaRule: a plan over 1000 egroups driven by an egroup-scope
// Lua rule (each evaluation is one sandboxed call).
func BenchmarkPlanLuaRule(b *testing.B) {
	s := testSnapshot()
	m := NewManager(newKVB(b), Options{Node: "n1", Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := m.Put(ctx, PutRequest{Name: "off-n1", Hook: HookRule, Author: "bench", IfVersion: -1, Source: `scope = "egroup"
function cost(view)
  local c = 0
  for _, r in ipairs(view.replicas) do
    if r.node == "n1" then c = c + 1 end
  end
  return c
end`}, testEnv()); err != nil {
		b.Fatal(err)
	}
	vec, _ := model.ParseVector("hdd=2")
	pm := &plan.Model{Devices: plan.FromSnapshot(s)}
	for i := 0; i < 1000; i++ {
		pm.Egroups = append(pm.Egroups, plan.Egroup{ID: uint64(i + 1), SizeBytes: 1 << 20, Vector: vec,
			Replicas: []model.DeviceID{"n1/hdd0", "n2/hdd0"}})
	}
	set := m.PlanRules(s)
	rs, err := plan.ParseRuleSetWith("rplset_durable\nlua.off-n1", set.Specs())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var evals int
	for i := 0; i < b.N; i++ {
		p, err := plan.Solve(pm, rs, plan.Options{Seed: uint64(i)})
		if err != nil || len(p.Moves) != 1000 {
			b.Fatalf("%v, %d moves", err, len(p.Moves))
		}
		evals += p.Stats.Evaluations
	}
	b.ReportMetric(float64(evals)/float64(b.N), "evals/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(evals), "ns/eval")
}
