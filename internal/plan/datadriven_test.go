package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the policy tests in testdata/ (Mirador §5's
// declarative policy tests): a model and a rule set in text, the plan and
// per-rule costs out. Commands:
//
//	model                 body: the model text format (text.go); echoes it
//	add                   body: more device/egroup lines
//	set <device> key=val  changes a device (health, cap, used, load)
//	rules                 body: a rule set; echoes it normalised or the error
//	cost                  per-rule costs and violations of the current model
//	layout                per-device usage, load and replicas
//	plan [solver=greedy|restarts] [seed=N] [batch=N] [rounds=N] [max_moves=N]
//	     [second_pass=off] [group=N] [budget=N] [apply] [summary]
//	                      plans, checks the plan's invariants (checkPlan),
//	                      prints it; apply makes the result the current model
//	batches [batch=N]     runs batch by batch and prints each batch's moves
//
// Rewrite expectations with: go test ./internal/plan -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	// Only the files directly in testdata/: testdata/fuzz holds the Go
	// fuzzer's corpus.
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if ent.IsDir() {
			continue
		}
		path := filepath.Join("testdata", ent.Name())
		t.Run(ent.Name(), func(t *testing.T) { runDataDriven(t, path) })
	}
}

func runDataDriven(t *testing.T, path string) {
	{
		var m *Model
		var rules *RuleSet
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			var bare []string
			for _, a := range d.CmdArgs {
				if len(a.Vals) == 0 {
					bare = append(bare, a.Key)
				} else {
					args[a.Key] = strings.Join(a.Vals, ",")
				}
			}
			switch d.Cmd {
			case "model":
				var err error
				if m, err = ParseModel(d.Input); err != nil {
					return "error: " + err.Error()
				}
				return m.String()
			case "add":
				next, err := ParseModel(m.String() + "\n" + d.Input)
				if err != nil {
					return "error: " + err.Error()
				}
				m = next
				return "ok"
			case "set":
				if len(bare) != 1 {
					d.Fatalf(t, "set needs one device")
				}
				next := m.Clone()
				found := false
				for i := range next.Devices {
					dev := &next.Devices[i]
					if string(dev.ID) != bare[0] {
						continue
					}
					found = true
					for k, v := range args {
						var err error
						switch k {
						case "health":
							dev.Health, err = ParseHealth(v)
						case "cap":
							dev.CapacityBytes, err = parseBytes(v)
						case "used":
							dev.UsedBytes, err = parseBytes(v)
						case "load":
							dev.Load, err = parseLoad(v)
						default:
							d.Fatalf(t, "set: unknown key %s", k)
						}
						if err != nil {
							return "error: " + err.Error()
						}
					}
				}
				if !found {
					d.Fatalf(t, "set: no device %s", bare[0])
				}
				m = next
				return "ok"
			case "rules":
				rs, err := ParseRuleSet(d.Input)
				if err != nil {
					return "error: " + err.Error()
				}
				rules = rs
				return rs.String()
			case "cost":
				return costTable(t, m, rules)
			case "layout":
				return layout(m)
			case "plan", "batches":
				o := optionsFromArgs(t, d, args)
				if d.Cmd == "batches" {
					r, err := Start(m, rules, o)
					if err != nil {
						return "error: " + err.Error()
					}
					var b strings.Builder
					for {
						bt, ok := r.Next()
						if !ok {
							break
						}
						fmt.Fprintf(&b, "batch %d round %d: %d moves, cost %s\n", bt.Index, bt.Round, len(bt.Moves), bt.Cost)
						for _, mv := range bt.Moves {
							fmt.Fprintf(&b, "  %s\n", mv)
						}
					}
					p := r.Plan()
					if err := checkPlan(m, rules, p); err != nil {
						d.Fatalf(t, "invariant: %v\nplan:\n%s", err, p)
					}
					fmt.Fprintf(&b, "cost %s -> %s, %d moves\n", p.Initial, p.Final, len(p.Moves))
					return b.String()
				}
				p, err := Solve(m, rules, o)
				if err != nil {
					return "error: " + err.Error()
				}
				if err := checkPlan(m, rules, p); err != nil {
					d.Fatalf(t, "invariant: %v\nplan:\n%s", err, p)
				}
				// Same input, same plan.
				again, _ := Solve(m, rules, o)
				if again.String() != p.String() {
					d.Fatalf(t, "plan is not deterministic:\n%s\nvs\n%s", p, again)
				}
				out := p.String()
				if hasArg(bare, "summary") {
					out = fmt.Sprintf("cost %s -> %s, %d moves\n", p.Initial, p.Final, len(p.Moves))
					if len(p.Unresolved) > 0 {
						out += fmt.Sprintf("unresolved: %d\n", len(p.Unresolved))
					}
				}
				if hasArg(bare, "stats") {
					out += fmt.Sprintf("second pass: %d groups tried, %d applied\n", p.Stats.SecondPassGroups, p.Stats.SecondPassApplied)
				}
				if hasArg(bare, "apply") {
					next, err := m.Apply(p.Moves)
					if err != nil {
						d.Fatalf(t, "apply: %v", err)
					}
					m = next
				}
				return out
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	}
}

func hasArg(bare []string, s string) bool {
	for _, b := range bare {
		if b == s {
			return true
		}
	}
	return false
}

func optionsFromArgs(t *testing.T, d *datadriven.TestData, args map[string]string) Options {
	var o Options
	num := func(k string) int {
		if v, ok := args[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", k, err)
			}
			return n
		}
		return 0
	}
	o.Seed = uint64(num("seed"))
	o.BatchEgroups = num("batch")
	o.MaxRounds = num("rounds")
	o.MaxMoves = num("max_moves")
	o.SecondPassGroup = num("group")
	o.SecondPassBudget = num("budget")
	o.NoSecondPass = args["second_pass"] == "off"
	switch args["solver"] {
	case "", "greedy":
	case "restarts":
		o.Solver = Restarts{}
	default:
		d.Fatalf(t, "unknown solver %q", args["solver"])
	}
	return o
}

func costTable(t *testing.T, m *Model, rules *RuleSet) string {
	st, err := newState(m, rules)
	if err != nil {
		return "error: " + err.Error()
	}
	o := Options{}
	o.EnsureDefaults()
	s := newSearch(st, rules, o)
	var b strings.Builder
	for _, rc := range s.ruleCosts() {
		fmt.Fprintf(&b, "%s: %s (%d)\n", rc.Rule, rc.Before, rc.ViolationsBefore)
	}
	fmt.Fprintf(&b, "total: %s\n", s.exactTotal())
	for _, v := range s.unresolved() {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", v.Rule, v.Scope, v.Instance, v.Cost)
	}
	return b.String()
}

func layout(m *Model) string {
	on := map[string][]string{}
	for _, e := range m.Egroups {
		for _, r := range e.Replicas {
			on[string(r)] = append(on[string(r)], strconv.FormatUint(e.ID, 10))
		}
	}
	var b strings.Builder
	for _, d := range m.Devices {
		pct := 0.0
		if d.CapacityBytes > 0 {
			pct = 100 * float64(d.UsedBytes) / float64(d.CapacityBytes)
		}
		ids := on[string(d.ID)]
		sort.Slice(ids, func(i, j int) bool {
			a, _ := strconv.Atoi(ids[i])
			c, _ := strconv.Atoi(ids[j])
			return a < c
		})
		fmt.Fprintf(&b, "%s %s %s used=%.0f%% load=%s: %s\n", d.ID, d.Tier, d.Health, pct, fmtLoad(d.Load), strings.Join(ids, " "))
	}
	return b.String()
}
