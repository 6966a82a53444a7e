package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	plansim "github.com/terrace-storage/terrace/internal/plan/sim"
)

// `terrace sim planner` hangs under the `sim` command that sim.go
// registers; extra commands run in file order, so sim exists by now.
func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "sim" {
				c.AddCommand(newSimPlannerCmd(g))
				return
			}
		}
		sim := &cobra.Command{Use: "sim", Short: "Simulators that drive the production policy code at scale"}
		sim.AddCommand(newSimPlannerCmd(g))
		root.AddCommand(sim)
	})
}

func newSimPlannerCmd(g *globalFlags) *cobra.Command {
	var o plansim.Options
	var objects, devices int
	cmd := &cobra.Command{
		Use:   "planner",
		Short: "Reproduce Mirador's solver benchmark (Table 2) with the real planner",
		Long: `Plan simulated clusters with the real planner (internal/plan) under the
policy of Mirador's Table 2 — device_has_space + load_balanced with a 20 %
spread — and report, per cluster size, the solve time, the initial and final
cost and the number of moves.

Clusters have N objects on M = N/100 fixed-capacity ssd devices (ten per
node), object sizes and loads from a Pareto distribution (alpha 1.16, bounded
so no object exceeds a quarter of a device's mean share), about 65 % full,
placed uniformly at random where they fit. Every run generates a new cluster
(seed, seed+1, ...); the times exclude generation and include validating the
model and the planner's set-up.

By default the four sizes of the paper run: 1K/10, 10K/100, 100K/1K and
1M/10K. --objects and --devices run one size instead. Results are written to
--out as planner-table2.csv and planner-table2.png (solve time vs objects,
log-log); --json prints them as
[{"objects","devices","runs","seconds","max_seconds","initial_cost","final_cost","moves","final_hard"}].
Costs are the planner's: load_balanced charges each device its distance
outside the band in units of the mean load, so 0 means every device is within
±10 % of the mean.`,
		Example: `  terrace sim planner
  terrace sim planner --objects 100000 --devices 1000 --json
  terrace sim planner --objects 1000000 --devices 10000 --runs 1 --out sim-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (objects == 0) != (devices == 0) {
				return fmt.Errorf("--objects and --devices go together")
			}
			if objects != 0 {
				o.Sizes = []plansim.Size{{Objects: objects, Devices: devices}}
			}
			if !g.json {
				o.Progress = func(sz plansim.Size, run int, r plansim.RunResult) {
					fmt.Fprintf(cmd.ErrOrStderr(), "%d objects / %d devices, run %d: %.3f s, cost %.4g -> %.4g, %d moves\n",
						sz.Objects, sz.Devices, run+1, r.Seconds, r.InitialCost, r.FinalCost, r.Moves)
				}
			}
			rs, err := plansim.Run(o)
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "objects\tdevices\truns\tseconds\tmax s\tinitial cost\tfinal cost\tmoves\t")
			for _, r := range rs {
				fmt.Fprintf(w, "%d\t%d\t%d\t%.3f\t%.3f\t%.4g\t%.4g\t%.0f\t\n", r.Objects, r.Devices, r.Runs, r.Seconds, r.MaxSeconds, r.InitialCost, r.FinalCost, r.Moves)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if o.Out != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/planner-table2.csv and planner-table2.png\n", o.Out)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&objects, "objects", 0, "objects (egroups) in the one cluster size to run (with --devices)")
	cmd.Flags().IntVar(&devices, "devices", 0, "devices in the one cluster size to run (with --objects)")
	cmd.Flags().Uint64Var(&o.Seed, "seed", 1, "seed of the first generated cluster (same seed, same clusters and plans)")
	cmd.Flags().IntVar(&o.Runs, "runs", 3, "runs per size, averaged (the paper averages 10)")
	cmd.Flags().IntVar(&o.Replicas, "replicas", 1, "replicas per object")
	cmd.Flags().IntVar(&o.BatchEgroups, "batch", 0, "egroups per planner batch (default 10000, as Mirador)")
	cmd.Flags().StringVar(&o.Out, "out", "sim-out", "directory for the CSV and PNG (empty: write none)")
	return cmd
}
