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
	"github.com/terrace-storage/terrace/internal/experiment/rebuild"
)

func init() {
	benchcli.RegisterScenario(newBenchRebuildCmd)
}

func newBenchRebuildCmd() *cobra.Command {
	var o rebuild.Options
	var data, object, egroup string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "The Mirador failure experiment (Mirador §4.1): fail a device under load, time the re-protection",
		Long: `Start a local cluster (--nodes real 'terrace server' processes with
--fault-injection), preload --data of --object-size objects, and run an
open-loop Poisson client load (--rate ops/s, --read-fraction reads of the
preloaded objects, the rest writes of new ones) through the first node.

After --baseline, one device on another node (--fail-node, --fail-device)
starts returning EIO on every read and write, so the node marks it failed at
the first I/O that touches it, as it would a dying disk. The Curator's
event-driven partial scan finds the under-replicated egroups and its actuator
copies them at its own adaptive rate (not tuned here: measuring it is the
point). The load keeps running until the Curator's job records show every
egroup protected again (a scan after the failure's under-replication that
finds none and plans no recovery), then for --tail more.

Reports the time to protection (failure to the last copy), the bytes
re-replicated, client mean/p50/p99 latency and errors per phase (baseline,
rebuild, after) and the rebuild's p99 against the baseline's (the goal: at most
2x); then checks every acknowledged object (replicas meet the vector off the
failed device, bytes intact). Writes rebuild.csv (per second: latency,
throughput, under-replicated bytes), rebuild.png, summary.txt, result.json and
curator_jobs.json to --out.`,
		Example: `  # the run docs/perf.md reports (about 4 minutes on 2 cores)
  nice -n 10 terrace bench rebuild --out bench-out/rebuild
  # a quick look: 100 MiB, short phases, machine-readable result
  terrace bench rebuild --data 100MiB --baseline 10s --tail 5s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.DataBytes, err = device.ParseBytes(data); err != nil {
				return fmt.Errorf("--data: %w", err)
			}
			if o.ObjectBytes, err = device.ParseBytes(object); err != nil {
				return fmt.Errorf("--object-size: %w", err)
			}
			if egroup != "" {
				if o.EgroupBytes, err = device.ParseBytes(egroup); err != nil {
					return fmt.Errorf("--egroup: %w", err)
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
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := rebuild.Run(ctx, o)
			if res != nil && len(res.Phases) > 0 {
				if asJSON {
					b, jerr := rebuild.JSON(res)
					if jerr != nil {
						return jerr
					}
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
				} else {
					fmt.Fprint(cmd.OutOrStdout(), rebuild.Summary(res))
					fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s, %s, %s, %s and %s to %s\n", rebuild.CSVFile, rebuild.PNGFile,
						rebuild.SummaryFile, rebuild.JSONFile, rebuild.JobsFile, o.Out)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "bench-out/rebuild", "output directory")
	f.StringVar(&o.Dir, "dir", "", "working directory of the cluster, removed afterwards (default OUT/work)")
	f.IntVar(&o.Nodes, "nodes", 4, "nodes in the cluster (node 1 is the clients' entry node)")
	f.IntVar(&o.BasePort, "base-port", 19800, "first port of the cluster's block (10 per node)")
	f.StringSliceVar(&o.Devices, "devices", []string{"ssd:ssd0:1GiB", "ssd:ssd1:1GiB"}, "devices per node, tier:NAME:capacity")
	f.StringVar(&o.Vector, "vector", "any=2", "replication vector of the data")
	f.StringVar(&egroup, "egroup", "", "servers' egroup size (default: the server's)")
	f.BoolVar(&o.Emulate, "emulate", true, "emulate device speeds, so the rebuild competes with clients for the media")
	f.StringVar(&data, "data", "400MiB", "logical data to preload (stored --vector times)")
	f.StringVar(&object, "object-size", "256KiB", "size of preloaded and newly written objects")
	f.IntVar(&o.PreloadWorkers, "preload-workers", 8, "concurrent writers during the preload")
	f.Float64Var(&o.Rate, "rate", 50, "client operations per second arriving whatever the cluster's speed (Poisson)")
	f.Float64Var(&o.ReadFraction, "read-fraction", 0.8, "share of the operations that read (and verify) a preloaded object; the rest write new objects")
	f.IntVar(&o.MaxInFlight, "max-in-flight", 256, "operations in flight at most; later arrivals wait, and the wait counts as latency")
	f.DurationVar(&o.Baseline, "baseline", 0, "load before the failure (default 40s)")
	f.DurationVar(&o.Tail, "tail", 0, "load after every egroup is protected again (default 30s)")
	f.DurationVar(&o.MaxRebuild, "max-rebuild", 0, "give up if not protected this long after the failure (default 10m)")
	f.IntVar(&o.FailNode, "fail-node", 0, "index of the node whose device fails, 1..nodes-1 (default the last node)")
	f.StringVar(&o.FailDevice, "fail-device", "", "NAME of the device that fails (default the first of --devices)")
	f.DurationVar(&o.PartialEvery, "partial-every", 0, "the Curator's periodic partial scan (default: the server's, hourly; the failure triggers a scan at once and under-replication is re-checked within seconds)")
	f.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON instead of the summary")
	return cmd
}
