package policy

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// TestPutRejectsBadPolicies: what the sandbox removes, what never ends,
// what returns the wrong type and what lacks the hook's functions is
// refused at put, with the Lua line, and nothing is committed.
func TestPutRejectsBadPolicies(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	for _, tc := range []struct {
		name string
		hook Hook
		src  string
		kind sandbox.Kind // a loop may hit the instruction budget or the deadline first
		line int
	}{
		{"exec", HookClass, "function run(obj)\n  os.execute('rm -rf /')\nend", sandbox.KindForbidden, 2},
		{"files", HookFitness, "function fitness(d)\n  local f = io.open('/etc/passwd')\n  return 1\nend", sandbox.KindForbidden, 2},
		{"modules", HookRule, "local json = require('json')\nfunction cost(v) return 0 end", sandbox.KindForbidden, 1},
		{"loop", HookFitness, "function fitness(d)\n  while true do end\nend", sandbox.KindBudget, 2},
		{"loadloop", HookBalancer, "while true do end", sandbox.KindBudget, 1},
		{"classloop", HookClass, "function spin(obj)\n  repeat until false\nend", sandbox.KindBudget, 2},
		{"recursion", HookTiering, "function tiering(t) return tiering(t) + 1 end", sandbox.KindRuntime, 0},
		{"wrongtype", HookFitness, "function fitness(d) return 'fast' end", sandbox.KindType, 0},
		{"negative", HookFitness, "function fitness(d) return -1 end", sandbox.KindType, 0},
		{"badfield", HookTiering, "function tiering(t) return {down_above = 2} end", sandbox.KindType, 0},
		{"missing", HookBalancer, "function when() return true end", sandbox.KindMissing, 0},
		{"syntax", HookRule, "function cost(v)\n  return 1 +\nend", sandbox.KindSyntax, 3},
		{"runtime", HookRule, "function cost(v)\n  return v.nothing.deeper\nend", sandbox.KindRuntime, 2},
		{"where", HookBalancer, "function when() return true end\nfunction where() return {nx = 1} end", sandbox.KindType, 0},
	} {
		_, err := m.Put(context.Background(), PutRequest{Name: tc.name, Hook: tc.hook, Source: tc.src, IfVersion: -1}, testEnv())
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", tc.name, err)
			continue
		}
		var se *sandbox.Error
		if !errors.As(err, &se) {
			t.Errorf("%s: no *sandbox.Error in %v", tc.name, err)
			continue
		}
		kindOK := se.Kind == tc.kind || (tc.kind == sandbox.KindBudget && se.Kind == sandbox.KindDeadline)
		if !kindOK || (tc.line > 0 && se.Line != tc.line) {
			t.Errorf("%s: want %s at line %d, got %v", tc.name, tc.kind, tc.line, err)
		}
		if _, _, gerr := m.reg.Get(context.Background(), tc.name); !errors.Is(gerr, ErrNotFound) {
			t.Errorf("%s: rejected policy was committed", tc.name)
		}
	}
	// A class method that fails on an empty object is accepted with a
	// warning: it may need real input.
	res := put(t, m, "strict", HookClass, "function need(obj)\n  assert(obj.exists, 'no object')\nend")
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no object") {
		t.Fatalf("warnings: %v", res.Warnings)
	}
}

func TestInferHook(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	for src, want := range map[string]Hook{
		"function cost(v) return 0 end":                                   HookRule,
		"function fitness(d) return 1 end":                                HookFitness,
		"function when() return false end function where() return {} end": HookBalancer,
		"function heat(e) return 0 end":                                   HookTiering,
		"function incr(o) end":                                            HookClass,
	} {
		res, err := m.Put(context.Background(), PutRequest{Name: "p" + string(want), Source: src, IfVersion: -1}, testEnv())
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if res.Record.Hook != want {
			t.Errorf("%s: inferred %s, want %s", src, res.Record.Hook, want)
		}
	}
}

// TestWatchSwapsOnEveryNode: two managers over one store stand for two
// nodes; a put through one is live on the other within a second, and a
// call that started on the old version finishes on it.
func TestWatchSwapsOnEveryNode(t *testing.T) {
	kv := newKV(t)
	m1, m2 := newManager(t, kv, "n1"), newManager(t, kv, "n2")
	put(t, m1, "fit", HookFitness, fitA)
	waitVersion(t, m2, "fit", 1, time.Second)
	old := m2.single(HookFitness).cur.Load()
	put(t, m1, "fit", HookFitness, fitB)
	waitVersion(t, m2, "fit", 2, time.Second)
	ws, err := fitnessWeights(context.Background(), old, testSnapshot(), 1)
	if err != nil || ws[0] != 1 {
		t.Fatalf("the old version, held by an in-flight call, changed: %v %v", ws, err)
	}
	if got := m2.Placement(nil).Name(); got != "lua-fitness:fit@v2" {
		t.Fatalf("placement name %q", got)
	}
	sw := m2.Swaps("fit")
	if len(sw) != 2 || sw[1].Version != 2 || sw[1].Swapped.Before(sw[1].Commit) {
		t.Fatalf("swaps: %+v", sw)
	}
	// rm reverts the hook to the built-in default on every node.
	if _, err := m1.Remove(context.Background(), "fit", "test", -1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for m2.single(HookFitness) != nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if m2.single(HookFitness) != nil {
		t.Fatal("fitness hook still filled after rm")
	}
	def, _ := placement.New(placement.Config{})
	if got := m2.Placement(def).Name(); got != def.Name() {
		t.Fatalf("after rm the placement is %q", got)
	}
}

// TestFallbackToLastGoodThenDisable: a version that fails at run time
// (on input validation did not see) hands its decisions to the last good
// version, is disabled after three failures in a row, and the event
// reaches the cluster-wide log.
func TestFallbackToLastGoodThenDisable(t *testing.T) {
	kv := newKV(t)
	m := newManager(t, kv, "n1")
	def, _ := placement.New(placement.Config{Name: "uniform"})
	pol := m.Placement(def)
	s := testSnapshot()
	rng := rand.New(rand.NewPCG(1, 1))
	req := placement.Request{Vector: model.MustParseVector("hdd=1"), Bytes: 1 << 20}

	// SUS never draws a zero-weight device while a positive one is left.
	put(t, m, "fit", HookFitness, `params = {selection = "sus"}
function fitness(d) if d.id == "n3/hdd0" then return 1 end return 0 end`)
	if rs, err := pol.Place(s, req, rng); err != nil || rs[0].Device != "n3/hdd0" {
		t.Fatalf("v1 placed %v, %v", rs, err)
	}
	// v2 breaks when a queue is long, which the validation model lacks.
	put(t, m, "fit", HookFitness, `
function fitness(d)
  if d.queue > 50 then error("queue too long: " .. d.queue) end
  return 1
end`)
	busy, err := ApplyWhatIf(s, []string{"n1/ssd0.queue=60"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		rs, err := pol.Place(busy, req, rng)
		if err != nil || rs[0].Device != "n3/hdd0" {
			t.Fatalf("call %d: want v1's choice n3/hdd0, got %v %v; status %+v", i, rs, err, m.Status())
		}
	}
	st := m.Status()[0]
	if !st.Disabled || st.Version != 2 || st.Running != 1 || !strings.Contains(st.LastError, "queue too long") {
		t.Fatalf("status: %+v", st)
	}
	var events []Event
	deadline := time.Now().Add(2 * time.Second)
	for len(events) == 0 && time.Now().Before(deadline) {
		events, _ = m.reg.Events(context.Background(), "fit", 10)
		time.Sleep(5 * time.Millisecond)
	}
	if len(events) == 0 || events[0].Kind != "disabled" || events[0].Version != 2 {
		t.Fatalf("events: %+v", events)
	}
	// A failing policy with no good version falls back to the default.
	put(t, m, "fit", HookFitness, `function fitness(d) if d.queue > 50 then return "x" end return 1 end`)
	m.single(HookFitness).good.Store(nil)
	if _, err := pol.Place(busy, req, rng); err != nil {
		t.Fatalf("default fallback: %v", err)
	}
	// Metrics expose the running version per hook.
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	if got := gauge(t, reg, "terrace_policy_version", "fit"); got != 3 {
		t.Fatalf("terrace_policy_version = %v", got)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name, policy string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			if labelOf(mm, "policy") == policy {
				return mm.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{policy=%q}", name, policy)
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestRollback(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	put(t, m, "fit", HookFitness, fitA)
	put(t, m, "fit", HookFitness, fitB)
	res, err := m.Rollback(context.Background(), "fit", 1, "ana", testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Version != 3 || !strings.Contains(res.Record.Comment, "rollback to version 1") {
		t.Fatalf("rollback record: %+v", res.Record)
	}
	ws, err := fitnessWeights(context.Background(), m.single(HookFitness).cur.Load(), testSnapshot(), 1)
	if err != nil || ws[0] != 1 {
		t.Fatalf("after rollback the weights are %v (%v)", ws, err)
	}
}

// TestStarvedCallsDoNotDisable: deadlines missed because the node was too
// busy fall back but never disable a policy.
func TestStarvedCallsDoNotDisable(t *testing.T) {
	m := newManager(t, newKV(t), "n1")
	put(t, m, "fit", HookFitness, fitA)
	sl := m.single(HookFitness)
	v := sl.cur.Load()
	for i := 0; i < 10; i++ {
		m.failed(sl, v, &sandbox.Error{Kind: sandbox.KindDeadline, Policy: "fit", Msg: "deadline exceeded", Starved: true})
	}
	if v.disabled.Load() || v.errs.Load() != 10 {
		t.Fatalf("disabled=%v errors=%d", v.disabled.Load(), v.errs.Load())
	}
	m.failed(sl, v, &sandbox.Error{Kind: sandbox.KindDeadline, Policy: "fit", Msg: "deadline exceeded"})
	m.failed(sl, v, &sandbox.Error{Kind: sandbox.KindBudget, Policy: "fit", Msg: "budget"})
	m.failed(sl, v, &sandbox.Error{Kind: sandbox.KindRuntime, Policy: "fit", Msg: "boom"})
	if !v.disabled.Load() {
		t.Fatal("three real failures did not disable")
	}
}

// TestStarvedFitnessOnThePlacementPathDoesNotDisable: the same rule when
// the starved deadline comes back through placement.Weighted (which wraps
// it in ErrWeigher) on the real placement path, not handed to failed()
// directly.
func TestStarvedFitnessOnThePlacementPathDoesNotDisable(t *testing.T) {
	kv := newKV(t)
	limits := func(h Hook) sandbox.Limits {
		l := h.Limits()
		if h == HookFitness {
			// A quarter of this budget is never reached in 5 ms: every
			// deadline is starved.
			l.Deadline, l.Instructions = 5*time.Millisecond, 1_000_000_000
		}
		return l
	}
	m := NewManager(kv, Options{Node: "n1", Logger: quiet, ResyncEvery: time.Hour, LimitsFor: limits})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Slow only on an input validation does not use (a long queue),
	// standing in for a node too busy to give the policy a CPU.
	put(t, m, "fit", HookFitness, `
function fitness(d)
  if d.queue > 50 then
    local x = 0
    while true do x = x + 1 end
  end
  return 1
end`)
	busy, err := ApplyWhatIf(testSnapshot(), []string{"n1/ssd0.queue=60"})
	if err != nil {
		t.Fatal(err)
	}
	def, _ := placement.New(placement.Config{Name: "uniform"})
	pol := m.Placement(def)
	rng := rand.New(rand.NewPCG(1, 1))
	req := placement.Request{Vector: model.MustParseVector("hdd=1"), Bytes: 1 << 20}
	for i := 0; i < 5; i++ {
		if _, err := pol.Place(busy, req, rng); err != nil {
			t.Fatalf("place %d: %v", i, err)
		}
	}
	st := m.Status()[0]
	if st.Disabled || st.Errors != 5 {
		t.Fatalf("want 5 counted, starved failures and the version enabled: %+v", st)
	}
	if !strings.Contains(st.LastError, "[deadline]") {
		t.Fatalf("last error: %q", st.LastError)
	}
}

// TestHookChangeAfterAWatchGapClearsTheOldSingleton: a node whose watch
// missed "rm fit" and then saw fit come back as a tiering policy (a resync
// reads only current records, so it never sees the tombstone) must stop
// running fit's old version as its fitness hook.
func TestHookChangeAfterAWatchGapClearsTheOldSingleton(t *testing.T) {
	kv := newKV(t)
	m1 := newManager(t, kv, "n1")
	// n2 is not watching: its resyncs are what it sees after a watch gap.
	m2 := NewManager(kv, Options{Node: "n2", Logger: quiet, ResyncEvery: time.Hour})
	ctx := context.Background()

	put(t, m1, "fit", HookFitness, fitA)
	if err := m2.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if m2.single(HookFitness) == nil {
		t.Fatal("n2 did not install fit v1")
	}
	// While n2's watch is down: rm fit (v2), then fit returns as tiering (v3).
	if _, err := m1.Remove(ctx, "fit", "ana", -1); err != nil {
		t.Fatal(err)
	}
	put(t, m1, "fit", HookTiering, `function tiering(t) return {run = true} end`)
	if err := m2.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if sl := m2.single(HookFitness); sl != nil {
		t.Fatalf("n2 still runs %s@v%d as its fitness hook after the registry removed it", sl.name, sl.cur.Load().Version)
	}
	if sl := m2.single(HookTiering); sl == nil || sl.name != "fit" || sl.cur.Load().Version != 3 {
		t.Fatalf("n2's tiering hook: %+v", sl)
	}
	def, _ := placement.New(placement.Config{Name: "uniform"})
	if got := m2.Placement(def).Name(); got != def.Name() {
		t.Fatalf("n2 places with %q, want the built-in %q", got, def.Name())
	}

	// A resync also repairs a singleton left pointing at a slot that is
	// not installed (whatever path left it there).
	m2.singles[HookBalancer].Store(&slot{name: "ghost", hook: HookBalancer})
	if err := m2.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if sl := m2.single(HookBalancer); sl != nil {
		t.Fatalf("resync kept the uninstalled %q as the balancer", sl.name)
	}
}
