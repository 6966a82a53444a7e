package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersim"
)

// sim_tiering.go adds `terrace sim tiering` under the `sim` command that
// sim.go registers (files initialise in name order, so sim.go's
// registration runs first).
func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "sim" {
				c.AddCommand(newSimTieringCmd(g))
				return
			}
		}
		sim := &cobra.Command{Use: "sim", Short: "Simulators that drive the production policy code at scale"}
		sim.AddCommand(newSimTieringCmd(g))
		root.AddCommand(sim)
	})
}

func newSimTieringCmd(g *globalFlags) *cobra.Command {
	var o tiersim.Options
	var out, modelPath, features string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "tiering",
		Short: "Fixed thresholds vs the Q-learning tiering scheduler on the Curator paper's five workloads (Table 1)",
		Long: `Simulate one node (one ssd, two hdds, the paper's per-node capacities scaled
down) on a simulated clock, running the production tiering code — decide.Tiering,
the default placement policy, and each tiering scheduler — under the five
workloads of the Curator paper's Appendix D (oltp, oltp-skewed, oltp-varying,
oltp-vdi, oltp-dss). Each workload is laid out (prefill), then its execution
phase runs twice from the same layout and the same client operations: once
with the fixed thresholds (f, d, h) and once with the Q-learning scheduler,
which starts from a model pre-trained on simulator runs of the threshold
policy (seeds disjoint from --seed) and keeps learning, ε-greedy with ε
decaying from --epsilon as its experience (pre-training included) grows, and
never exploring a run while the ssd is below --explore-min-ssd. Two safety
rules outside the learned values force a run: the ssd above --force-above,
and promotion starvation (hot data refused promotion for lack of ssd room
since the agent's last decision while the ssd is at or above f; see
--starved-min).

Devices follow the emulation profiles (hdd 150 MB/s and 4 ms per random
request, one at a time; ssd 500 MB/s and 0.1 ms) with an M/G/1 queue per
time step. Printed per workload: Table 1's metrics — mean client latency and
client bytes read from ssd — plus device IOPS and what each scheduler did.
--out gets table1.csv, series.csv, PNG plots, model.json (the pre-trained
model, loadable with --model and by the Curator) and summary.md.
docs/design/0006-learned-tiering.md explains the model and its limits.`,
		Example: `  terrace sim tiering
  terrace sim tiering --workload oltp-skewed --seed 7
  terrace sim tiering --json > table1.json
  terrace sim tiering --promotion scan          # promotion only in Curator jobs
  terrace sim tiering --epsilon-half-life -1 --explore-min-ssd -1 --hold 5m   # the paper's constant ε = 0.2, 5-minute hold
  terrace sim tiering --model sim-out/tiering/model.json --workload oltp
  terrace sim tiering --starved-min -1          # without the promotion-starvation rule`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if features != "" {
				o.Features = strings.Split(features, ",")
			}
			if modelPath != "" {
				b, err := os.ReadFile(modelPath)
				if err != nil {
					return err
				}
				if o.Model, err = learn.ParseModel(b); err != nil {
					return fmt.Errorf("%s: %w", modelPath, err)
				}
			}
			start := time.Now()
			progress := func(s string) {
				if !quiet {
					fmt.Fprintf(cmd.ErrOrStderr(), "%6s  %s\n", time.Since(start).Round(time.Second), s)
				}
			}
			rep, err := tiersim.Simulate(o, progress)
			if err != nil {
				return err
			}
			if out != "" {
				if err := rep.Write(out); err != nil {
					return err
				}
			}
			if g.json {
				rows := make([]tiersim.Row, 0, len(rep.Results))
				for _, r := range rep.Results {
					rows = append(rows, r.Row())
				}
				return printJSON(cmd.OutOrStdout(), rows)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-13s %-10s %16s %14s %12s %10s %10s\n", "WORKLOAD", "SCHEDULER", "MEAN_LATENCY_MS", "SSD_READS_GB", "DEVICE_IOPS", "JOBS", "MOVED_GB")
			for _, r := range rep.Results {
				fmt.Fprintf(w, "%-13s %-10s %16.3f %14.2f %12.1f %10d %10.1f\n", r.Workload, r.Scheduler, r.MeanLatencyMs,
					float64(r.SSDReadBytes)/1e9, r.DeviceIOPS, r.Jobs, float64(r.MovedBytes)/1e9)
			}
			for _, wl := range uniqueWorkloads(rep) {
				var th, ql *tiersim.Result
				for i := range rep.Results {
					r := &rep.Results[i]
					if r.Workload == wl && r.Scheduler == "threshold" {
						th = r
					}
					if r.Workload == wl && r.Scheduler == "qlearning" {
						ql = r
					}
				}
				if th != nil && ql != nil {
					fmt.Fprintf(w, "%s: q-learning mean latency %+.1f %%, ssd reads %+.1f %%\n", wl,
						100*tiersim.Change(th.MeanLatencyMs, ql.MeanLatencyMs), 100*tiersim.Change(float64(th.SSDReadBytes), float64(ql.SSDReadBytes)))
				}
			}
			if out != "" {
				fmt.Fprintf(w, "wrote %s/summary.md, CSV, plots and model in %s\n", out, time.Since(start).Round(time.Second))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Workloads, "workload", nil, "workloads to run: oltp, oltp-skewed, oltp-varying, oltp-vdi, oltp-dss (default all)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same results; pre-training uses seed+1000…)")
	f.StringVar(&out, "out", "sim-out/tiering", "output directory (empty: print only)")
	f.DurationVar(&o.Exec, "exec", 0, "length of each execution phase, the measured part (default 2h)")
	f.Float64Var(&o.Scale, "scale", 0, "capacity scale against the paper's per-node figures (default 1/32)")
	f.Float64Var(&o.IOPSScale, "iops-scale", 0, "load scale against the paper's per-node IOPS (default 1/32, like capacity)")
	f.StringVar(&o.Promotion, "promotion", "", "how hot data returns to ssd: event (at the next poll) or scan (only in Curator jobs) (default event)")
	f.Float64Var(&o.Epsilon, "epsilon", 0, "the learned scheduler's initial exploration rate ε0 (default 0.2, the paper's)")
	f.Float64Var(&o.EpsilonFloor, "epsilon-floor", 0, "the ε the exploration schedule decays to (default 0; negative: 0)")
	f.Float64Var(&o.EpsilonHalfLife, "epsilon-half-life", 0, "experience (pre-training transitions + online updates, one per 30 s decision) after which ε has decayed half way to the floor (default 100; negative: constant ε, the paper's)")
	f.Float64Var(&o.ExploreMinSSD, "explore-min-ssd", 0, "ssd usage in percent below which exploration never picks a run (default 70; negative: explore runs at any usage)")
	f.DurationVar(&o.Hold, "hold", 0, "the agent's pause after a run, the interval its reward averages (default 10m; the paper's is 5m)")
	f.Float64Var(&o.ForceAbove, "force-above", 0, "ssd usage above which tiering runs whatever the agent says (default 0.9; negative: f)")
	f.IntVar(&o.StarvedMin, "starved-min", 0, "promotion-starvation rule: promotions refused for lack of ssd room since the agent's last decision that force a run shedding the ssd to f − h while it is at or above f (default 1; negative: off)")
	f.IntVar(&o.PretrainSeeds, "pretrain-seeds", 0, "simulator runs per workload collected for pre-training (default 3)")
	f.StringVar(&modelPath, "model", "", "start from this model (JSON from --out) instead of pre-training")
	f.StringVar(&features, "features", "", "model features when pre-training (default the paper's cpu,mem,ssd,iops,riops,wiops; also lat_ms, hdd)")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

// forcedBy prints the forced decisions by rule: ": 3 ceiling, 2 promotion-starved".
func forcedBy(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return ": " + strings.Join(parts, ", ")
}

func uniqueWorkloads(rep *tiersim.Report) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.Workload] {
			seen[r.Workload] = true
			out = append(out, r.Workload)
		}
	}
	return out
}

// printTieringStatus shows the tiering scheduler in `terrace curator
// status`: for the learned one, the agent's last state, action and reward.
func printTieringStatus(w io.Writer, st *curator.TieringStatus) {
	if st == nil {
		return
	}
	fmt.Fprintf(w, "tiering scheduler: %s\n", st.Scheduler)
	if !st.LastRun.IsZero() {
		fmt.Fprintf(w, "  last tiering run %s ago: %s\n", ago(st.LastRun), st.LastReason)
	}
	if a := st.Agent; a != nil {
		s := a.State
		fmt.Fprintf(w, "  agent decided %s ago: %s (ε %.3g)\n", ago(a.At), a, a.Epsilon)
		fmt.Fprintf(w, "  state: cpu %.0f%% mem %.0f%% ssd %.0f%% iops %.0f (r %.0f w %.0f) latency %.2f ms\n",
			s.CPU, s.Mem, s.SSDUsage, s.IOPS, s.ReadIOPS, s.WriteIOPS, s.LatencyMs)
	}
	if a := st.AgentStats; a != nil {
		fmt.Fprintf(w, "  agent: %d decisions, %d runs (%d explored, %d forced%s), %d updates\n", a.Decisions, a.Runs, a.Explored, a.Forced, forcedBy(a.ForcedBy), a.Updates)
	}
	if st.PromotionsRefused > 0 {
		fmt.Fprintf(w, "  promotions refused for lack of room on the faster tier: %d (hot egroups starved at the last check: %d)\n", st.PromotionsRefused, st.Starved)
	}
	if st.Error != "" {
		fmt.Fprintf(w, "  last check failed (threshold rule used): %s\n", st.Error)
	}
}
