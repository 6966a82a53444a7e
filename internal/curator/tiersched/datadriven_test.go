package tiersched

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestDataDriven runs the scenario files in testdata/. Commands:
//
//	cluster                     body: "device ID tier=T cap=N used=N" lines; prints tier usages
//	options [f=] [d=] [h=]      sets the base thresholds
//	threshold                   selects the threshold scheduler
//	qlearning [run-bias=] [run-ssd=] [epsilon=] [force-above=] [poll=] [hold=] [starved-min=]
//	                            selects a learned scheduler whose model has one
//	                            feature, ssd (mean 50, scale 10), and the paper's
//	                            two actions; run's Q is run-bias + run-ssd·z(ssd)
//	check at=D [seed=S] [starved=N]
//	                            body: an observation (latency, ops, ...); one
//	                            check, with N hot egroups starved of promotion
//	                            (Input.Starved); prints the decision and its options
//	job                         prints the options of a job started for another reason
//
// Rewrite expectations with: go test ./internal/curator/tiersched -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var snap *model.Snapshot
		var base decide.TierOptions
		var sched Scheduler = Threshold{}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, x := range d.CmdArgs {
				args[x.Key] = strings.Join(x.Vals, ",")
			}
			switch d.Cmd {
			case "cluster":
				var devs []model.Device
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) < 2 || f[0] != "device" {
						d.Fatalf(t, "want device lines, got %q", line)
					}
					dev := model.Device{ID: model.DeviceID(f[1]), Node: model.NodeID(strings.Split(f[1], "/")[0])}
					for _, kv := range f[2:] {
						k, v, _ := strings.Cut(kv, "=")
						switch k {
						case "tier":
							dev.Tier = model.Tier(v)
						case "cap":
							dev.CapacityBytes = bytes(t, d, v)
						case "used":
							dev.UsedBytes = bytes(t, d, v)
						}
					}
					devs = append(devs, dev)
				}
				snap = model.NewSnapshot(t0, nil, devs)
				var b strings.Builder
				for _, tier := range snap.Tiers() {
					u, _ := TierUsage(snap, tier)
					fmt.Fprintf(&b, "%s %.1f%%\n", tier, 100*u)
				}
				fast, _ := FastestTier(snap)
				fmt.Fprintf(&b, "fastest: %s", fast)
				return b.String()
			case "options":
				base = decide.TierOptions{DownAbove: flt(t, d, args["f"]), DestBelow: flt(t, d, args["d"]), Reduce: flt(t, d, args["h"])}
				return "ok"
			case "threshold":
				sched = Threshold{}
				return sched.Name()
			case "qlearning":
				m, err := learn.NewModel([]string{learn.FeatSSD}, learn.PaperActions, []float64{50}, []float64{10})
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				m.Bias[1], m.W[1][0] = flt(t, d, args["run-bias"]), flt(t, d, args["run-ssd"])
				m.Epsilon = 0
				if v, ok := args["epsilon"]; ok {
					m.Epsilon = flt(t, d, v)
				}
				var ao learn.AgentOptions
				if v, ok := args["hold"]; ok {
					if ao.Hold, err = time.ParseDuration(v); err != nil {
						d.Fatalf(t, "%v", err)
					}
				}
				a, err := learn.NewAgent(m, ao)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				q := NewQLearning(a)
				if v, ok := args["starved-min"]; ok {
					q.StarvedMin = int(flt(t, d, v))
				}
				if v, ok := args["force-above"]; ok {
					q.ForceAbove = flt(t, d, v)
				}
				if v, ok := args["poll"]; ok {
					if q.Poll, err = time.ParseDuration(v); err != nil {
						d.Fatalf(t, "%v", err)
					}
				}
				sched = q
				return sched.Name()
			case "check":
				at, err := time.ParseDuration(args["at"])
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				o, err := learn.ParseObservation(d.Input)
				if err != nil {
					return "error: " + err.Error()
				}
				s := model.NewSnapshot(t0.Add(at), nil, snap.Devices)
				rng := rand.New(rand.NewPCG(uint64(flt(t, d, args["seed"])), 0))
				dec, err := sched.Check(Input{Now: s.Now, Snapshot: s, Obs: o, Base: base, Starved: int(flt(t, d, args["starved"]))}, rng)
				if err != nil {
					return "error: " + err.Error()
				}
				var b strings.Builder
				if dec.Run {
					fmt.Fprintf(&b, "run: %s\n", dec.Reason)
				} else {
					b.WriteString("no run\n")
				}
				if dec.Agent != nil {
					fmt.Fprintf(&b, "agent: %s (state ssd=%.4g hdd=%.4g lat_ms=%.4g ops=%.4g)\n", dec.Agent, dec.Agent.State.SSDUsage, dec.Agent.State.HDDUsage, dec.Agent.State.LatencyMs, dec.Agent.State.Ops)
				}
				b.WriteString("options: " + fmtOptions(dec.Options))
				return b.String()
			case "job":
				return "options: " + fmtOptions(sched.JobOptions(snap, base))
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

func fmtOptions(o decide.TierOptions) string {
	s := fmt.Sprintf("f=%.4g h=%.4g", o.DownAbove, o.Reduce)
	var ks []string
	for k := range o.DemoteAbove {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	for _, k := range ks {
		s += fmt.Sprintf(" demote-above[%s]=%.4g", k, o.DemoteAbove[model.Tier(k)])
	}
	return s
}

func flt(t *testing.T, d *datadriven.TestData, s string) float64 {
	if s == "" {
		return 0
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return x
}

func bytes(t *testing.T, d *datadriven.TestData, s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "T"):
		mult, s = 1<<40, strings.TrimSuffix(s, "T")
	}
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return x * mult
}
