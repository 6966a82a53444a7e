package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/placement/sim"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, _ *globalFlags) { root.AddCommand(newSimCmd()) })
}

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "Simulators that drive the production policy code at scale"}
	var o sim.Options
	var out string
	pl := &cobra.Command{
		Use:   "placement",
		Short: "Reproduce the placement papers' experiments; write CSV, PNG plots and summary.md",
		Long: `Run the real placement package against simulated clusters on a simulated
clock: sampler distributions and herding (Allen Figs 5–12), sampler run time
vs pool size (Fig 13), hot-tier skew d_hot_tier over time for uniform, f_add
and f_mult (Figs 14, 17), tier-size disparity, an OctopusFS-style write
throughput comparison of every policy, and a stale-statistics sweep.
Results go to --out as CSV files, PNG plots and summary.md.`,
		Example: `  terrace sim placement --out sim-out
  terrace sim placement --out sim-out --stats-interval 60s --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := sim.Run(o, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/summary.md and plots in %s\n", out, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	pl.Flags().StringVar(&out, "out", "sim-out", "output directory")
	pl.Flags().Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same results)")
	pl.Flags().StringSliceVar(&o.Experiments, "experiment", nil, "experiments to run (default all)")
	pl.Flags().Float64Var(&o.Scale, "scale", 0, "capacity/bandwidth scale factor (default 0.25)")
	pl.Flags().DurationVar(&o.StatsInterval, "stats-interval", 0, "statistics refresh period (default 10s)")
	cmd.AddCommand(pl)
	return cmd
}
