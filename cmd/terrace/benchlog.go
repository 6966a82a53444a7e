package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	benchcli "github.com/terrace-storage/terrace/internal/bench/cli"
	"github.com/terrace-storage/terrace/internal/zlog/logbench"
)

func init() {
	benchcli.RegisterScenario(newBenchLogCmd)
}

func newBenchLogCmd() *cobra.Command {
	var o logbench.Options
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Measure the shared log: sequencer positions/s, leased batching, appends/s, failover time",
		Long: `Start a dev cluster (--nodes real 'terrace server' processes on loopback) and
measure the shared log through its Go client:

  next      sequencer round trips per second (one Next per position), 1, 2, 8 clients
  lease     positions per second with leased batching, by lease size (2 clients)
  append    appends per second of --entry-bytes entries from --clients clients,
            leases off and on, with the lag of an in-order subscriber
  failover  8 appenders while the sequencer host is killed with SIGKILL,
            --failover-rounds times: time until appends resume

Writes results.csv, lease.png, failover.png and summary.md to --out. The log's
stripes use --vector (default ssd=2: the emulated hdd's 4 ms per operation would
measure the disk, not the log).`,
		Example: `  terrace bench log --out bench-log
  terrace bench log --experiment append --clients 16 --duration 20s
  terrace bench log --experiment lease --lease-sizes 10,100,1000,10000,100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Binary = exe
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := logbench.Run(ctx, o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/results.csv, summary.md and plots (%d points)\n", o.Out, len(res.Rows))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "bench-log", "output directory")
	f.StringVar(&o.Dir, "dir", "", "cluster data directory (default: a temporary one)")
	f.IntVar(&o.Nodes, "nodes", 3, "nodes in the cluster")
	f.IntVar(&o.BasePort, "base-port", 34000, "first port of the cluster's block")
	f.BoolVar(&o.Emulate, "emulate", true, "emulate device speeds as 'terrace dev cluster' does")
	f.StringVar(&o.Vector, "vector", "ssd=2", "replication vector of the benchmark logs")
	f.IntVar(&o.Stripes, "stripes", 8, "stripes of the benchmark logs")
	f.StringSliceVar(&o.Experiments, "experiment", nil, "experiments to run: next, lease, append, failover (default all)")
	f.DurationVar(&o.Duration, "duration", 0, "length of each measured point (default 10s)")
	f.IntVar(&o.Clients, "clients", 0, "append clients (default 16)")
	f.IntSliceVar(&o.Depths, "depth", nil, "appends each client keeps in flight, one point per value (default 1,8)")
	f.IntVar(&o.EntryBytes, "entry-bytes", 0, "append entry size (default 4096)")
	f.IntSliceVar(&o.LeaseSizes, "lease-sizes", nil, "lease sizes of the lease experiment (default 1,10,100,1000,10000)")
	f.IntVar(&o.AppendLease, "append-lease", 0, "lease size of the append experiment's leased run (default 64)")
	f.DurationVar(&o.AppendLeaseHold, "append-lease-hold", 0, "lease hold of the append experiment's leased run (default 20ms)")
	f.BoolVar(&o.NoSubscriber, "no-subscriber", false, "append experiment without the in-order subscriber (no lag; its reads leave the CPU to appends)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write the benchmark process's CPU profile (the clients' cost) to this file")
	f.IntVar(&o.FailoverRounds, "failover-rounds", 0, "sequencer kills in the failover experiment (default 3)")
	return cmd
}
