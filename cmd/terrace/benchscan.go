package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	benchcli "github.com/terrace-storage/terrace/internal/bench/cli"
	"github.com/terrace-storage/terrace/internal/experiment/scanbench"
)

func init() {
	benchcli.RegisterScenario(newBenchScanCmd)
}

func newBenchScanCmd() *cobra.Command {
	var o scanbench.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Measure the Curator's scan rate on 1, 3 and 5 local nodes, the map stage on the master alone and spread",
		Long: `For each cluster size in --sizes, start a local cluster of real 'terrace
server' processes (etcd metadata, up to 3 members), load --egroups synthetic
egroup records straight into etcd (sealed, at their vector, on the nodes'
real devices, with dense IDs as the egroup sequence hands them out;
--access-fraction of them with an access record; with --full also
--extents extent records per egroup and an object record referencing each,
in four buckets), and time --runs partial (or full) scans ('curator run
partial --wait' on the Curator master, after one untimed warm-up scan):
first with every partition mapped by the master (a balancer policy that
assigns everything to it), then with the default spread, which deals the
partitions over every node. The servers' own schedules, tiering and live
planning are off, so the scans find nothing to do and their time is the
scan: map (read and decode), join and decide.

Prints per size and mode the median scan time, egroup records/s and all
records/s for the cluster, and per node the records it mapped and its rate
(from 'curator status').`,
		Example: `  # the run docs/perf.md reports
  nice -n 10 terrace bench scan
  # a quick look
  terrace bench scan --sizes 3 --egroups 20000 --runs 1
  # full scans: the owner and extent maps too
  terrace bench scan --sizes 3 --egroups 20000 --full`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Binary == "" {
				if o.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			if o.Dir == "" {
				o.Dir = filepath.Join(os.TempDir(), fmt.Sprintf("terrace-bench-scan-%d", os.Getpid()))
			}
			// Each cluster's directory is removed after its run; the
			// working directory itself goes too if that left it empty
			// (one empty directory per run piled up in /tmp).
			defer os.Remove(o.Dir)
			o.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := scanbench.Run(ctx, o)
			if res != nil && len(res.Rows) > 0 {
				if asJSON {
					b, jerr := json.MarshalIndent(res, "", "  ")
					if jerr != nil {
						return jerr
					}
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
				} else {
					fmt.Fprint(cmd.OutOrStdout(), scanbench.Table(res))
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Sizes, "sizes", []int{1, 3, 5}, "cluster sizes to measure, in nodes")
	f.IntVar(&o.Egroups, "egroups", 100_000, "synthetic egroup records to load")
	f.Float64Var(&o.AccessFraction, "access-fraction", 0.5, "fraction of the egroups with an access record")
	f.IntVar(&o.Runs, "runs", 3, "timed scans per size and mode (the median is reported)")
	f.StringVar(&o.Binary, "binary", "", "terrace binary the cluster's servers run (default: this one), e.g. an older build to compare with")
	f.BoolVar(&o.Full, "full", false, "time full scans: also load --extents extent records per egroup, each referenced by an object in one of four buckets")
	f.IntVar(&o.Extents, "extents", 0, "extent records per egroup with --full (default 4)")
	f.IntVar(&o.BasePort, "base-port", 21000, "first port of the clusters' block (10 per node)")
	f.StringVar(&o.Dir, "dir", "", "working directory of the clusters, removed afterwards (default a temporary directory)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the synthetic records")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
