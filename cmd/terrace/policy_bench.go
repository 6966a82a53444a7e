package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/policy/propbench"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, _ *globalFlags) {
		// `bench policy` joins the bench command registered in extras.go.
		if b, _, err := root.Find([]string{"bench"}); err == nil && b.Name() == "bench" {
			b.AddCommand(newPolicyBenchCmd())
		}
	})
}

func newPolicyBenchCmd() *cobra.Command {
	var o propbench.Options
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Measure policy propagation: commit-to-swap delay on every node of a local cluster",
		Long: `Start a local N-node cluster (embedded etcd, loopback), commit --updates new
versions of a policy through node 1, --interval apart, and read back from every
node when each version went live there (Malacology §6.1.2). The delay is swap
time minus commit time on the one clock the local nodes share. Prints p50, p90,
p99 and max per node and writes policy_propagation.csv (every sample),
policy_propagation_cdf.png (a CDF per node), policy_propagation.md and .json to
--out. Node 1 swaps in the same request that commits, so "others" is the
cluster-wide propagation.`,
		Example: `  # the run docs/perf.md reports
  terrace bench policy --nodes 5 --updates 500 --out bench-out/policy
  terrace bench policy --nodes 3 --updates 100 --interval 50ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Binary = exe
			}
			if o.Dir == "" {
				dir, err := os.MkdirTemp("", "terrace-propbench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				o.Dir = filepath.Join(dir, "cluster")
			}
			o.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			res, err := propbench.Run(ctx, o)
			if err != nil {
				return err
			}
			if err := propbench.WriteOutputs(o.Out, res); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), propbench.Summary(res))
			fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s, %s, %s under %s\n", propbench.CSVFile, propbench.PNGFile, propbench.SummaryFile, o.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 5, "cluster nodes (the first 3 or 5 run etcd members)")
	f.IntVar(&o.Updates, "updates", 500, "versions to commit (at most 4000)")
	f.DurationVar(&o.Interval, "interval", 0, "pause between versions (default 20ms)")
	f.StringVar(&o.Out, "out", "bench-out/policy", "directory for the CSV, PNG and summary")
	f.StringVar(&o.Dir, "dir", "", "cluster data directory (default: a temporary one, removed after)")
	f.IntVar(&o.BasePort, "base-port", 0, "first port of the cluster (default: the first free block from 19600)")
	f.StringVar(&o.Binary, "binary", "", "terrace binary to run (default: this one)")
	return cmd
}
