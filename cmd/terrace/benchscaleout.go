package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	benchcli "github.com/terrace-storage/terrace/internal/bench/cli"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/experiment/scaleout"
)

func init() {
	benchcli.RegisterScenario(newBenchScaleoutCmd)
}

func newBenchScaleoutCmd() *cobra.Command {
	var o scaleout.Options
	var data, object, egroup string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scaleout",
		Short: "The Mirador scale-out experiment (Mirador §4.2): a node joins a loaded cluster, the planner moves data onto it",
		Long: `Start a local cluster of --nodes real 'terrace server' processes with one
more configured but held back, preload --data of --object-size objects over
S3, and run a closed-loop S3 load: --clients clients, each starting its next
operation when the last ends, --read-fraction of them verified GETs of the
preloaded objects and the rest PUTs of new ones, each through a random
running node's S3 endpoint.

After --warmup and --baseline the held-back node starts and joins (it
registers itself through the metadata store; the run waits until the cluster
view lists it with its devices) and, with --new-node-serves-clients, takes
client requests too. After --joined the planner runs on the live cluster
('terrace plan apply' on the Curator master) with --rules, which the servers
are configured with (default: the standard rules plus disk_balanced mean=0
spread=0.01, which fills the new node with its share of bytes, and
load_balanced spread=0.2, which makes that share the read-hot data); the
actuator executes the moves —
copy on the new node, verify, switch the egroup record, delete the source —
at its own adaptive rate (not tuned here: measuring it is the point). When
the job finishes the planner is asked again and, if it still wants moves,
applied again (up to --max-rounds). The load runs --tail longer.

The Curator's own tiering and disk balancing are off, so every move onto the
new node is the planner's. Devices are emulated (--emulate): on one machine a
fourth server process brings no new CPU, only its disks, so the disks must be
what limits the clients for a join to raise throughput; 1 MiB objects keep the
emulated disks, not the two cores, the bottleneck. The servers read with
--read-order locality (a node's own replica, else a random one): the server
default (Eq. 12 over probed disk speeds) herds remote reads onto the disk whose
probe read fastest, which says more about probe noise than about the join.

Reports client throughput, p50/p99 latency per phase (baseline, joined,
moving, after), the time to balance (plan to last move), bytes moved and
every node's used bytes; then reads every acknowledged object back (bytes
checked) and checks each extent has its vector's replicas on distinct nodes.
Writes scaleout.csv (per second: ops, MB/s, p50, p99, bytes moved, each
node's used bytes), scaleout.png, summary.txt and result.json to --out.`,
		Example: `  # the run docs/perf.md reports (about 3½ minutes on 2 cores)
  nice -n 10 terrace bench scaleout --out bench-out/scaleout
  # a quick look: 60 MiB, short phases, machine-readable result
  terrace bench scaleout --data 60MiB --baseline 10s --joined 5s --tail 10s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.DataBytes, err = device.ParseBytes(data); err != nil {
				return fmt.Errorf("--data: %w", err)
			}
			if o.ObjectBytes, err = device.ParseBytes(object); err != nil {
				return fmt.Errorf("--object-size: %w", err)
			}
			if o.EgroupBytes, err = device.ParseBytes(egroup); err != nil {
				return fmt.Errorf("--egroup: %w", err)
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
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := scaleout.Run(ctx, o)
			if res != nil && len(res.Phases) > 0 {
				if asJSON {
					b, jerr := scaleout.JSON(res)
					if jerr != nil {
						return jerr
					}
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
				} else {
					fmt.Fprint(cmd.OutOrStdout(), scaleout.Summary(res))
					fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s, %s, %s and %s to %s\n", scaleout.CSVFile, scaleout.PNGFile,
						scaleout.SummaryFile, scaleout.JSONFile, o.Out)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "bench-out/scaleout", "output directory")
	f.StringVar(&o.Dir, "dir", "", "working directory of the cluster, removed afterwards (default OUT/work)")
	f.IntVar(&o.Nodes, "nodes", 3, "nodes the cluster starts with (3 are etcd members); one more joins")
	f.IntVar(&o.BasePort, "base-port", 19900, "first port of the cluster's block (10 per node, nodes+1 nodes)")
	f.StringSliceVar(&o.Devices, "devices", []string{"hdd:hdd0:8GiB"}, "devices per node, tier:NAME:capacity")
	f.StringVar(&o.Vector, "vector", "any=2", "replication vector of the data")
	f.StringVar(&egroup, "egroup", "2MiB", "servers' egroup size (small egroups: many small moves)")
	f.BoolVar(&o.Emulate, "emulate", true, "emulate device speeds, so the disks limit the clients and a new node's disks add capacity")
	f.StringVar(&data, "data", "300MiB", "logical data to preload (stored --vector times)")
	f.StringVar(&object, "object-size", "1MiB", "size of preloaded and newly written objects")
	f.IntVar(&o.PreloadWorkers, "preload-workers", 8, "concurrent writers during the preload")
	f.IntVar(&o.Clients, "clients", 16, "closed-loop S3 clients (each runs one operation at a time)")
	f.Float64Var(&o.ReadFraction, "read-fraction", 0.97, "share of operations that GET (and verify) a preloaded object; the rest PUT new objects")
	f.BoolVar(&o.NewNodeServesClients, "new-node-serves-clients", true, "send client requests to the new node's S3 endpoint too once it has joined")
	f.DurationVar(&o.Warmup, "warmup", 0, "load before the measured baseline (default 5s)")
	f.DurationVar(&o.Baseline, "baseline", 0, "measured load before the join (default 40s)")
	f.DurationVar(&o.Joined, "joined", 0, "load with the new node up and empty, before the plan (default 15s)")
	f.DurationVar(&o.Tail, "tail", 0, "load after the last planned move (default 40s)")
	f.DurationVar(&o.MaxBalance, "max-balance", 0, "give up if the planned jobs have not finished this long after the plan (default 10m)")
	f.IntVar(&o.MaxRounds, "max-rounds", 3, "plan-apply rounds at most (the planner is asked again after each job)")
	f.StringArrayVar(&o.Rules, "rules", nil, "planner rule, repeatable (default: device_has_space max_fill=0.95, rplset_durable, failure_domain_spread level=node, disk_balanced mean=0 spread=0.01, load_balanced spread=0.2)")
	f.StringVar(&o.ReadOrder, "read-order", "locality", "servers' read_order: locality (own replica, else a random one) or octopus (the server default: Eq. 12 over probed device speeds, which herds remote reads onto the fastest-probing disk)")
	f.Float64Var(&o.MoveMBps, "move-mbps", 0, "the actuator's maximum move rate in MB/s (default: the server's)")
	f.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON instead of the summary")
	return cmd
}
