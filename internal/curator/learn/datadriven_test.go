package learn

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenario files in testdata/. Commands:
//
//	model features=f1,f2 actions=name:reduce,... [mean=m1,m2] [scale=s1,s2] [alpha=] [gamma=] [epsilon=]
//	      [floor=] [half_life=] [explore_min_ssd=] [updates=]
//	                           creates a model; prints it
//	epsilon updates=n1,n2,...  prints ε after each number of updates
//	weights action=A bias=B f1=w1 ...   sets one action's parameters; prints the model
//	q                          body: an observation; prints z(s), Q per action and the greedy action
//	choose seed=S n=N          body: an observation; counts ε-greedy choices over N draws
//	update action=A reward=R   body: "s: obs" and "next: obs" lines; one TD update; prints δ and the model
//	agent [hold=D] [frozen]    starts an agent on the current model
//	step at=D seed=S [force=A] [by=RULE] [holding-at=D]
//	                           body: an observation; one agent step (forced by
//	                           RULE when given); prints the decision, and with
//	                           holding-at whether the agent then holds at D
//	stats                      prints the agent's counters
//	json                       marshals the model, parses it back and prints the JSON
//	parse                      body: JSON; prints the model or the error
//
// Rewrite expectations with: go test ./internal/curator/learn -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Model
		var a *Agent
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			var bare []string
			for _, x := range d.CmdArgs {
				if len(x.Vals) == 0 {
					bare = append(bare, x.Key)
				} else {
					args[x.Key] = strings.Join(x.Vals, ",")
				}
			}
			switch d.Cmd {
			case "model":
				feats := strings.Split(args["features"], ",")
				var acts []ActionSpec
				for _, s := range strings.Split(args["actions"], ",") {
					name, r, _ := strings.Cut(s, ":")
					acts = append(acts, ActionSpec{Name: name, Reduce: num(t, d, r)})
				}
				var err error
				m, err = NewModel(feats, acts, floats(t, d, args["mean"]), floats(t, d, args["scale"]))
				if err != nil {
					return "error: " + err.Error()
				}
				for k, p := range map[string]*float64{"alpha": &m.Alpha, "gamma": &m.Gamma, "epsilon": &m.Epsilon,
					"floor": &m.EpsilonFloor, "half_life": &m.EpsilonHalfLife, "explore_min_ssd": &m.ExploreMinSSD} {
					if v, ok := args[k]; ok {
						*p = num(t, d, v)
					}
				}
				if v, ok := args["updates"]; ok {
					m.Updates = int64(num(t, d, v))
				}
				if err := m.Validate(); err != nil {
					return "error: " + err.Error()
				}
				return m.String()
			case "epsilon":
				var b strings.Builder
				saved := m.Updates
				for _, v := range strings.Split(args["updates"], ",") {
					m.Updates = int64(num(t, d, v))
					fmt.Fprintf(&b, "updates=%d epsilon=%s\n", m.Updates, fmtF(m.EpsilonNow()))
				}
				m.Updates = saved
				return strings.TrimSpace(b.String())
			case "weights":
				ai := m.Action(args["action"])
				if ai < 0 {
					d.Fatalf(t, "unknown action %q", args["action"])
				}
				for k, v := range args {
					switch k {
					case "action":
					case "bias":
						m.Bias[ai] = num(t, d, v)
					default:
						fi := -1
						for i, f := range m.Features {
							if f == k {
								fi = i
							}
						}
						if fi < 0 {
							d.Fatalf(t, "unknown feature %q", k)
						}
						m.W[ai][fi] = num(t, d, v)
					}
				}
				return m.String()
			case "q":
				o := obs(t, d, d.Input)
				var b strings.Builder
				fmt.Fprintf(&b, "z: %s\n", fmtQ(m.Standardize(o)))
				q := m.Q(o)
				for i, s := range m.Actions {
					fmt.Fprintf(&b, "%s: %s\n", s.Name, fmtF(q[i]))
				}
				fmt.Fprintf(&b, "greedy: %s", m.Actions[m.Greedy(o)].Name)
				return b.String()
			case "choose":
				o := obs(t, d, d.Input)
				rng := rand.New(rand.NewPCG(uint64(num(t, d, args["seed"])), 0))
				n := int(num(t, d, args["n"]))
				counts, explored := map[string]int{}, 0
				for range n {
					ai, ex := m.Choose(o, rng)
					counts[m.Actions[ai].Name]++
					if ex {
						explored++
					}
				}
				var keys []string
				for k := range counts {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				var b strings.Builder
				for _, k := range keys {
					fmt.Fprintf(&b, "%s: %d\n", k, counts[k])
				}
				fmt.Fprintf(&b, "explored: %d", explored)
				return b.String()
			case "update":
				var tr Transition
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					k, v, _ := strings.Cut(line, ":")
					switch strings.TrimSpace(k) {
					case "s": // unvalidated: Update must refuse bad input itself
						tr.S, _ = ParseObservation(v)
					case "next":
						tr.Next, _ = ParseObservation(v)
					default:
						d.Fatalf(t, "update body wants s: and next: lines")
					}
				}
				tr.Action = m.Action(args["action"])
				tr.Reward = num(t, d, args["reward"])
				delta, err := m.Update(tr)
				if err != nil {
					return fmt.Sprintf("delta: %s\nerror: %v\n%s", fmtF(delta), err, m)
				}
				return fmt.Sprintf("delta: %s\n%s", fmtF(delta), m)
			case "agent":
				o := AgentOptions{}
				if v, ok := args["hold"]; ok {
					h, err := time.ParseDuration(v)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					o.Hold = h
				}
				for _, x := range bare {
					if x == "frozen" {
						o.Frozen = true
					}
				}
				var err error
				if a, err = NewAgent(m, o); err != nil {
					return "error: " + err.Error()
				}
				return "ok"
			case "step":
				at, err := time.ParseDuration(args["at"])
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				force := NoForce
				if v, ok := args["force"]; ok {
					force = m.Action(v)
					if force < 0 {
						force = int(num(t, d, v))
					}
				}
				rng := rand.New(rand.NewPCG(uint64(num(t, d, args["seed"])), 0))
				o, err := ParseObservation(d.Input)
				if err != nil {
					return "error: " + err.Error()
				}
				dec, err := a.StepForced(t0.Add(at), o, force, args["by"], rng)
				if err != nil {
					return "error: " + err.Error()
				}
				if v, ok := args["holding-at"]; ok {
					h, err := time.ParseDuration(v)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					return fmt.Sprintf("%s\nholding at %s: %v", dec, v, a.Holding(t0.Add(h)))
				}
				return dec.String()
			case "stats":
				return fmt.Sprintf("%+v", a.Stats())
			case "json":
				b, err := m.Marshal()
				if err != nil {
					return "error: " + err.Error()
				}
				back, err := ParseModel(b)
				if err != nil {
					d.Fatalf(t, "round trip: %v", err)
				}
				if back.String() != m.String() {
					d.Fatalf(t, "round trip changed the model:\n%s\nvs\n%s", back, m)
				}
				return string(b)
			case "parse":
				pm, err := ParseModel([]byte(d.Input))
				if err != nil {
					return "error: " + err.Error()
				}
				m = pm
				return m.String()
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

func num(t *testing.T, d *datadriven.TestData, s string) float64 {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return x
}

func floats(t *testing.T, d *datadriven.TestData, s string) []float64 {
	if s == "" {
		return nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		out = append(out, num(t, d, f))
	}
	return out
}

func obs(t *testing.T, d *datadriven.TestData, s string) Observation {
	o, err := ParseObservation(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return o
}
