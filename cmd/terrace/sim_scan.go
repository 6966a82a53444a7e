package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/curator/scansim"
)

// sim_scan.go adds `terrace sim scan` under the `sim` command that sim.go
// registers (files initialise in name order, so sim.go's registration
// runs first).
func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "sim" {
				c.AddCommand(newSimScanCmd(g))
				return
			}
		}
		sim := &cobra.Command{Use: "sim", Short: "Simulators that drive the production policy code at scale"}
		sim.AddCommand(newSimScanCmd(g))
		root.AddCommand(sim)
	})
}

func newSimScanCmd(g *globalFlags) *cobra.Command {
	var o scansim.Options
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Time a Curator scan over N synthetic egroup records and report its peak memory",
		Long: `Load N synthetic egroup records into an in-process Pebble metadata store and
run the Curator's production scan over them — the map stage over the 16
partitions of the egroup and access maps, the reduce into one decision view
per egroup, then decide.Plan and tiering on the result (nothing is
executed; dedup and the live planner are not run) — and print
the scan's wall time, records per second and the process's peak memory.

The records: egroup IDs 1..N with two replicas on distinct nodes of a
--nodes cluster (each node an ssd and two hdds; vector hdd=2, or ssd=1,hdd=1
for one in four), sizes of 1 to 16 MiB, one in a thousand open and one in a
thousand with a bad replica (recovery has work to plan), and an access
record for three in five. --full adds --extents extent records per egroup
and an object record for each extent but about one in ten (garbage), and
runs a full scan (data removal, GC and the consistency check read those).
Records are drawn from --seed: the same seed loads the same records.

Printed: the load time; the scan's wall time (map, shuffle, reduce), records
and egroups scanned per second, the decide time and tasks decided; the peak
resident set and Go heap during the scan (sampled every 50 ms); and the peak
RSS of scan and decide together (the kernel's VmHWM, reset after loading, so
it does not cover the load — "rss reset: no" says the reset failed and it
does). Go's collector lets the heap grow to twice what is live before it
collects (GOGC=100); GOMEMLIMIT caps that headroom, at some CPU. docs/perf.md ("Curator
scan rate") records runs at 1M and 10M egroups; a 10M-egroup partial scan
needs about 15 GiB of free disk for the store and several GiB of memory.
Timed runs on a shared machine belong under the bench lock.`,
		Example: `  terrace sim scan --egroups 1000000
  terrace sim scan --egroups 1000000 --cpuprofile scan.pprof   # then: go tool pprof -top scan.pprof
  terrace sim scan --egroups 10000000 --nodes 20 --dir /var/tmp/scan10m
  terrace sim scan --egroups 200000 --full --extents 4 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !g.json {
				o.Progress = func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), msg) }
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				o.CPUProfile = f
			}
			r, err := scansim.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			kind := "partial"
			if r.Full {
				kind = "full"
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s scan of %d egroups on %d nodes (%d metadata records)\n", kind, r.Egroups, r.Nodes, r.Records)
			fmt.Fprintf(w, "load:     %.1f s\n", r.LoadSecs)
			fmt.Fprintf(w, "scan:     %.2f s wall, %.0f records/s, %.0f egroups/s\n", r.ScanSecs, r.RecordsPerSec, r.EgroupsPerSec)
			fmt.Fprintf(w, "decide:   %.2f s, %d tasks\n", r.DecideSecs, r.Tasks)
			reset := "yes"
			if !r.RSSReset {
				reset = "no"
			}
			fmt.Fprintf(w, "scan mem: peak rss %s, peak heap %s (sampled), %.0f bytes per egroup\n",
				gib(r.ScanRSS), gib(r.ScanHeap), float64(r.ScanRSS)/float64(r.Egroups))
			if r.Full {
				fmt.Fprintf(w, "spilled:  %s of extent arrays to mapped files; peak anonymous rss during the scan %s\n", gib(uint64(r.Spilled)), gib(r.ScanAnon))
			}
			fmt.Fprintf(w, "peak rss: %s scan + decide (rss reset: %s; load peak %s), peak heap %s, %.0f bytes per egroup\n",
				gib(r.PeakRSS), reset, gib(r.LoadPeakRSS), gib(r.PeakHeap), float64(r.PeakRSS)/float64(r.Egroups))
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Egroups, "egroups", 100_000, "egroup records to load and scan")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10, "nodes the replicas spread over (three devices each, at least 2)")
	cmd.Flags().BoolVar(&o.Full, "full", false, "a full scan: also load extent and object records")
	cmd.Flags().IntVar(&o.Extents, "extents", 4, "extent records per egroup with --full (1 to 63)")
	cmd.Flags().Uint64Var(&o.Seed, "seed", 1, "seed of the synthetic records")
	cmd.Flags().Int64Var(&o.ScanMemory, "scan-memory", 0, "heap budget of a full scan's extent arrays in bytes, past which they spill to mapped files in --dir (0: the default, 1 GiB; -1: no bound)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the scan and decide (not the load) to this file, for go tool pprof")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "directory for the metadata store, kept afterwards (default: a temporary one, removed)")
	return cmd
}

// gib prints a byte count in GiB (MiB under one GiB).
func gib(b uint64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}
