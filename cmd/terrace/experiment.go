package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/experiment/onoff"
)

func newCuratorExperimentCmd() *cobra.Command {
	var o onoff.Options
	var ssd, hdd, data, egroup string
	cmd := &cobra.Command{
		Use:   "curator",
		Short: "The Curator ON/OFF experiment (Curator §3.4.2): same OLTP workload with background tasks on and off",
		Long: `Start a local cluster (emulated small ssd and large hdd tiers per node), run
an OLTP-like workload (Curator Appendix C: prefill a data section of 8/32 KiB
objects, execute 50/50 reads and overwrites skewed to a hot set plus 32 KiB log
appends, destroy everything) once with the Curator on and once off, and
write curator_onoff.csv, two PNG plots and summary.md to --out.`,
		Example: `  # the run docs/perf.md reports (about 10 minutes): open-loop 180 ops/s
  terrace bench curator --rate 180 --exec 150s --warmup 90s --out bench-out/curator
  # closed loop with 4 clients, a larger ssd
  terrace bench curator -c 4 --exec 2m --ssd 64MiB --out /tmp/onoff`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.SSDBytes, err = device.ParseBytes(ssd); err != nil {
				return err
			}
			if o.HDDBytes, err = device.ParseBytes(hdd); err != nil {
				return err
			}
			if egroup != "" {
				if o.EgroupBytes, err = device.ParseBytes(egroup); err != nil {
					return err
				}
			}
			if data != "" {
				if o.DataBytes, err = device.ParseBytes(data); err != nil {
					return err
				}
			}
			if o.Binary == "" {
				if o.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			if o.Dir == "" {
				o.Dir = filepath.Join(o.Out, "work")
			}
			o.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			res, err := onoff.Run(ctx, o)
			if err != nil {
				return err
			}
			b, _ := os.ReadFile(filepath.Join(o.Out, "summary.md"))
			fmt.Fprint(cmd.OutOrStdout(), string(b))
			_ = res
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "bench-out/curator", "output directory")
	f.StringVar(&o.Dir, "dir", "", "working directory for the clusters (default OUT/work)")
	f.IntVar(&o.Nodes, "nodes", 3, "nodes")
	f.IntVar(&o.BasePort, "base-port", 19500, "first port of the clusters")
	f.StringVar(&ssd, "ssd", "48MiB", "ssd capacity per node")
	f.StringVar(&hdd, "hdd", "1GiB", "hdd capacity per node")
	f.StringVar(&o.HDDProfile, "hdd-profile", "", "hdd emulation profile instead of the tier's own: hdd/K is an hdd with 1/K of its bandwidth (slow the hdd in step with the scaled-down data)")
	f.StringVar(&egroup, "egroup", "", "servers' egroup size (default 1/48 of --ssd, at least 256KiB)")
	f.StringVar(&data, "data", "", "data section size (default 75% of the cluster's ssd capacity)")
	f.DurationVar(&o.Exec, "exec", 0, "execution phase length (default 60s)")
	f.IntVarP(&o.Concurrency, "concurrency", "c", 16, "clients for prefill, destroy, and execution when --rate is 0")
	f.Float64Var(&o.Rate, "rate", 0, "open-loop execution: operations per second arriving whatever the cluster's speed, as the paper's fixed-IOPS workloads (0 = closed loop with -c clients)")
	f.DurationVar(&o.Warmup, "warmup", 0, "leave the first part of the execution phase out of the measured latency (both modes), to report the steady state")
	f.IntVar(&o.MaxInFlight, "max-in-flight", 256, "open-loop execution: operations in flight at most; later arrivals wait, and the wait counts as latency")
	f.BoolVar(&o.Emulate, "emulate", true, "emulate tier speeds (the experiment needs them)")
	f.StringSliceVar(&o.Modes, "modes", nil, "modes to run: on, off, threshold, qlearning (default on,off)")
	var schedulers []string
	f.StringSliceVar(&schedulers, "scheduler", nil, "compare tiering schedulers instead of ON/OFF: threshold, qlearning (sets --modes; see docs/qlearning.md)")
	f.StringVar(&o.Workload, "workload", "", "oltp (default) or oltp-skewed (read-only data, 90 % of reads to the hottest 10 %)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if len(schedulers) > 0 {
			o.Modes = schedulers
		}
		return nil
	}
	f.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	return cmd
}
