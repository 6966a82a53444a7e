package plan

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// The policy fuzzer (Mirador §5): seeded random models and event sequences
// (device failure, drain, new device, new node, load shift, rule change)
// drive the solver. After every plan it checks:
//
//   - checkPlan's invariants: moves only to ok devices with room, from
//     readable replicas, never fewer live replicas (copy before delete),
//     the cost never rises, reported costs match a fresh evaluation;
//   - determinism: the same input plans the same moves;
//   - completeness on tiny models: if a brute-force search over every
//     layout finds one that breaks no hard rule, the plan's final layout
//     breaks none either.
//
// Everything derives from one seed; a failure prints the seed, the step,
// the model and the rules in the testdata syntax, ready to become a
// datadriven case. Replay: go test ./internal/plan -run 'TestPolicyFuzz/seed=N$'

// fuzzSeeds is how many seeds `go test` runs (the Go fuzz target explores
// further: go test ./internal/plan -run '^$' -fuzz FuzzPolicy).
const fuzzSeeds = 150

func TestPolicyFuzz(t *testing.T) {
	fuzzStats = fuzzCounters{}
	for seed := uint64(1); seed <= fuzzSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if err := runPolicyCase(seed, 4); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("%+v", fuzzStats)
	// The fuzzer must exercise what it checks; a generator change that made
	// every case trivial would otherwise pass silently.
	if fuzzStats.moves == 0 || fuzzStats.hardStart == 0 || fuzzStats.bruteForced == 0 || fuzzStats.groups == 0 {
		t.Errorf("the fuzzer's cases are too easy: %+v", fuzzStats)
	}
}

// fuzzCounters say what the seeds exercised.
type fuzzCounters struct {
	plans, moves, hardStart, hardLeft, bruteForced, infeasible, groups int
}

var fuzzStats fuzzCounters

func FuzzPolicy(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1234, 99991} {
		f.Add(s, uint8(4))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		if err := runPolicyCase(seed, int(steps%8)+1); err != nil {
			t.Fatal(err)
		}
	})
}

// runPolicyCase runs one seeded event sequence and returns the first
// invariant violation, with everything needed to reproduce it.
func runPolicyCase(seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, 0xf022))
	g := &fuzzGen{rng: rng}
	m := g.model()
	rulesText := g.rules()
	var log []string
	for step := 0; step < steps; step++ {
		rules, err := ParseRuleSet(rulesText)
		if err != nil {
			return fmt.Errorf("seed %d step %d: generated rules do not parse: %v\n%s", seed, step, err, rulesText)
		}
		o := Options{Seed: seed}
		if rng.IntN(4) == 0 {
			o.Solver = Restarts{}
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("seed %d step %d (%s solver, events %s): %s\nmodel\n%s----\n\nrules\n%s----\nreplay: go test ./internal/plan -run 'TestPolicyFuzz/seed=%d$'",
				seed, step, o.Solver.Name(), strings.Join(log, ", "), fmt.Sprintf(format, a...), m, rulesText, seed)
		}
		o.EnsureDefaults()
		p, err := Solve(m, rules, o)
		if err != nil {
			return fail("solve: %v", err)
		}
		if err := checkPlan(m, rules, p); err != nil {
			return fail("invariant: %v\nplan:\n%s", err, p)
		}
		again, err := Solve(m, rules, o)
		if err != nil || again.String() != p.String() {
			return fail("not deterministic:\n%s\nvs\n%s", p, again)
		}
		fuzzStats.plans++
		fuzzStats.moves += len(p.Moves)
		fuzzStats.groups += p.Stats.SecondPassApplied
		if p.Initial.Hard > 0 {
			fuzzStats.hardStart++
		}
		if _, greedy := o.Solver.(Greedy); greedy && p.Final.Hard > 0 && !p.Truncated {
			fuzzStats.hardLeft++
			best, ok := bruteForceHard(m, rules)
			if ok {
				fuzzStats.bruteForced++
			}
			if ok && best == 0 {
				return fail("a layout breaking no hard rule exists, the plan ends at %s\nplan:\n%s", p.Final, p)
			}
			if ok {
				fuzzStats.infeasible++
			}
		}
		next, err := m.Apply(p.Moves)
		if err != nil {
			return fail("apply: %v", err)
		}
		m = next
		var ev string
		m, rulesText, ev = g.event(m, rulesText)
		log = append(log, ev)
	}
	return nil
}

type fuzzGen struct {
	rng   *rand.Rand
	nodes int
}

var fuzzVectors = []string{"any=1", "any=2", "ssd=1", "hdd=1", "ssd=1,hdd=1", "hdd=2"}

func (g *fuzzGen) device(node, idx int) Device {
	tier := model.TierSSD
	if g.rng.IntN(2) == 0 {
		tier = model.TierHDD
	}
	h := HealthOK
	switch g.rng.IntN(12) {
	case 0:
		h = HealthFailed
	case 1:
		h = HealthDraining
	case 2:
		h = HealthBad
	}
	return Device{ID: model.DeviceID(fmt.Sprintf("n%d/%s%d", node, tier, idx)), Node: model.NodeID(fmt.Sprintf("n%d", node)),
		Rack: fmt.Sprintf("r%d", node%2+1), Tier: tier, CapacityBytes: int64(3+g.rng.IntN(6)) << 30, Health: h}
}

// model builds a tiny cluster: 3–5 devices on 2–4 nodes, 1–3 egroups of at
// most 2 replicas, so that brute force can enumerate every layout.
func (g *fuzzGen) model() *Model {
	m := &Model{}
	g.nodes = 2 + g.rng.IntN(3)
	ndev := 3 + g.rng.IntN(3)
	for i := range ndev {
		node := i % g.nodes
		m.Devices = append(m.Devices, g.device(node, i))
	}
	if g.rng.IntN(3) == 0 {
		m.ColdLoad = 1
	}
	neg := 1 + g.rng.IntN(3)
	for i := range neg {
		v := model.MustParseVector(fuzzVectors[g.rng.IntN(len(fuzzVectors))])
		e := Egroup{ID: uint64(i + 1), SizeBytes: int64(1+g.rng.IntN(3)) << 30, Load: float64(g.rng.IntN(10)),
			WorkingSetBytes: int64(g.rng.IntN(3)) << 29, Vector: v, Bucket: []string{"a", "b", "c"}[g.rng.IntN(3)]}
		n := v.Total()
		if g.rng.IntN(5) == 0 {
			n-- // a missing replica
		}
		perm := g.rng.Perm(len(m.Devices))
		for _, d := range perm[:min(n, len(perm))] {
			e.Replicas = append(e.Replicas, m.Devices[d].ID)
		}
		m.Egroups = append(m.Egroups, e)
	}
	recount(m)
	return m
}

// recount sets device usage and load from the egroups (the text format's
// default), so a printed model reproduces exactly.
func recount(m *Model) {
	idx := map[model.DeviceID]int{}
	for i := range m.Devices {
		m.Devices[i].UsedBytes, m.Devices[i].Load = 0, 0
		idx[m.Devices[i].ID] = i
	}
	for _, e := range m.Egroups {
		for _, r := range e.Replicas {
			d := &m.Devices[idx[r]]
			d.UsedBytes += e.SizeBytes
			d.Load += e.Load
		}
	}
}

// rules picks 1–4 built-in rules with random parameters, as text, so the
// parser is exercised too.
func (g *fuzzGen) rules() string {
	all := []func() string{
		func() string { return fmt.Sprintf("device_has_space max_fill=%.2f", 0.5+0.5*g.rng.Float64()) },
		func() string { return fmt.Sprintf("load_balanced spread=%.2f", 0.1+g.rng.Float64()) },
		func() string {
			return fmt.Sprintf("disk_balanced mean=%.2f spread=%.2f", 0.3*g.rng.Float64(), 0.05+0.5*g.rng.Float64())
		},
		func() string { return "rplset_durable" },
		func() string { return "failure_domain_spread level=" + []string{"node", "rack"}[g.rng.IntN(2)] },
		func() string { return "vector_satisfied weight=" + []string{"1", "5"}[g.rng.IntN(2)] },
		func() string {
			return fmt.Sprintf("tier_fill f=%.2f d=%.2f h=%.2f", 0.3+0.5*g.rng.Float64(), 0.6+0.4*g.rng.Float64(), 0.05+0.3*g.rng.Float64())
		},
		func() string { return fmt.Sprintf("working_set_fits fill=%.2f", 0.2+g.rng.Float64()) },
		func() string { return "isolate bucket=a from=b domain=" + domainEnum[g.rng.IntN(3)] },
		func() string { return "co_locate bucket=b with=c domain=" + domainEnum[g.rng.IntN(3)] },
	}
	n := 1 + g.rng.IntN(4)
	var lines []string
	for _, k := range g.rng.Perm(len(all))[:n] {
		lines = append(lines, all[k]())
	}
	return strings.Join(lines, "\n") + "\n"
}

// event changes the model or the rules and says what it did.
func (g *fuzzGen) event(m *Model, rules string) (*Model, string, string) {
	m = m.Clone()
	switch g.rng.IntN(6) {
	case 0:
		d := &m.Devices[g.rng.IntN(len(m.Devices))]
		d.Health = HealthFailed
		return m, rules, "fail " + string(d.ID)
	case 1:
		d := &m.Devices[g.rng.IntN(len(m.Devices))]
		d.Health = HealthDraining
		return m, rules, "drain " + string(d.ID)
	case 2:
		d := g.device(g.rng.IntN(g.nodes), len(m.Devices))
		d.Health = HealthOK
		m.Devices = append(m.Devices, d)
		return m, rules, "new device " + string(d.ID)
	case 3:
		d := g.device(g.nodes, len(m.Devices))
		d.Health = HealthOK
		g.nodes++
		m.Devices = append(m.Devices, d)
		return m, rules, "new node " + string(d.Node)
	case 4:
		for i := range m.Egroups {
			m.Egroups[i].Load = float64(g.rng.IntN(10))
		}
		recount(m)
		return m, rules, "load shift"
	default:
		return m, g.rules(), "rule change"
	}
}

// bruteForceHard returns the least hard cost over every layout the solver
// could reach: each replica stays or moves to an ok device (a missing one
// may stay missing), replicas of an egroup on distinct devices, an egroup
// without a readable replica fixed, and every device that receives a
// replica within its capacity at the end. ok is false when the model is
// too large to enumerate.
func bruteForceHard(m *Model, rules *RuleSet) (float64, bool) {
	if len(m.Devices) > 7 || len(m.Egroups) > 3 {
		return 0, false
	}
	st, err := newState(m, rules)
	if err != nil {
		return 0, false
	}
	o := Options{}
	o.EnsureDefaults()
	s := newSearch(st, rules, o)
	orig := append([]int32(nil), st.varDev...)
	received := make([]int, len(st.devID))
	best := s.total.Hard
	leaves := 0
	var rec func(x int32)
	rec = func(x int32) {
		if leaves > 2_000_000 {
			return
		}
		if int(x) == len(st.varEg) {
			leaves++
			for d, n := range received {
				if n > 0 && st.devUsed[d] > st.devCap[d] {
					return
				}
			}
			best = min(best, s.total.Hard)
			return
		}
		e := st.varEg[x]
		opts := []int32{orig[x]}
		if st.readableSource(e) {
			for d := range int32(len(st.devID)) {
				if d != orig[x] && st.devHealth[d] == HealthOK && !st.hasSibling(e, d) {
					opts = append(opts, d)
				}
			}
		}
		for _, d := range opts {
			if d >= 0 && d != orig[x] && st.hasSibling(e, d) {
				continue
			}
			mark := s.mark()
			if d != orig[x] {
				s.apply(x, d, false)
				received[d]++
			}
			rec(x + 1)
			if d != orig[x] {
				received[d]--
			}
			s.rollback(mark)
		}
	}
	rec(0)
	return best, leaves <= 2_000_000
}
