package main

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	benchcli "github.com/terrace-storage/terrace/internal/bench/cli"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
	"github.com/terrace-storage/terrace/internal/transformbench"
)

// The Curator's transformations of cold data (docs/transforms.md): the
// bucket setting, and the tier report's logical-vs-physical section.

func init() {
	benchcli.RegisterScenario(newBenchTransformCmd)
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "bucket" {
				c.AddCommand(newSetTransformCmd(g))
			}
		}
	})
}

func newSetTransformCmd(g *globalFlags) *cobra.Command {
	var compress, ec, dedup, coldAfter string
	cmd := &cobra.Command{
		Use:   "set-transform BUCKET [--compress zstd|none] [--ec K+M|none] [--dedup on|off] [--cold-after DURATION]",
		Short: "Let the Curator compress, erasure-code and deduplicate a bucket's data (and say when data is cold)",
		Long: `Set what the Curator may do to a bucket's cold data in the background.

--compress zstd rewrites the extents of egroups nobody has read or written for
--cold-after into compressed egroups, packing several cold egroups into one.
Reads decompress transparently and check a checksum of the decompressed
bytes. Data that does not shrink by at least 10 % (curator.transform.max_ratio)
is left plain and remembered, so it is not tried again. A compressed egroup
that is read often again (curator.transform.hot_reads within hot_window) is
rewritten plain; so is every compressed egroup of a bucket set back to
--compress none.

--ec K+M converts cold egroups from replicas to K data + M parity strips, each
on its own device (on distinct nodes where the cluster has enough): a cold
any=3 bucket at --ec 4+2 takes 1.5x its size instead of 3x and survives the
loss of any two strips' devices. Replicas are removed only after every strip
is durable and verified. Reads of an intact stripe read the data strips; a
missing or corrupt strip is reconstructed on the fly, the Curator rebuilds
lost strips on other devices, and scrubbing checks strips and parity.
Erasure-coded data read often again goes back to replicas. K >= M >= 1,
K+M <= 8, and the cluster must have K+M usable devices (refused otherwise).
With --compress zstd too, the encode compresses in the same pass.

--dedup on fingerprints (SHA-256) every extent written to the bucket from now
on; full scans find extents stored more than once and, after comparing their
bytes, point the duplicates at one copy (fixed-size chunks of sequential data
dedup when aligned: identical objects, VM images with repeated blocks). A
copy stays as long as any object, version, snapshot or clone references it.

An egroup holds data of several buckets when they share a replication vector;
it is compressed only when every bucket whose data it holds asks for it, and it
is cold only after the longest cold-after among them.

Flags not given keep their current value. 'terrace object locate' shows the
result per egroup (zstd 0.41 = stored/logical), 'terrace tier report' the
savings per tier, 'terrace curator history' the tasks.`,
		Example: `  terrace bucket set-transform logs --compress zstd --cold-after 24h
  terrace bucket set-transform archive --ec 4+2 --cold-after 168h
  terrace bucket set-transform logs --compress none --ec none`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if cmd.Flags().Changed("compress") {
				q.Set("compress", compress)
			}
			if cmd.Flags().Changed("ec") {
				q.Set("ec", ec)
			}
			if cmd.Flags().Changed("dedup") {
				q.Set("dedup", dedup)
			}
			if cmd.Flags().Changed("cold-after") {
				q.Set("cold_after", coldAfter)
			}
			if len(q) == 0 {
				return fmt.Errorf("nothing to set: give --compress, --ec, --dedup and/or --cold-after")
			}
			var res server.BucketTransform
			if err := g.client().callJSON("POST", "/v1/buckets/"+url.PathEscape(args[0])+"/transform", q, &res); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			cold := res.ColdAfter
			if cold == "" {
				cold = "(curator default)"
			}
			dd := "off"
			if res.Dedup {
				dd = "on"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: compress %s, ec %s, dedup %s, cold after %s\n", res.Bucket, res.Compress, res.EC, dd, cold)
			return nil
		},
	}
	cmd.Flags().StringVar(&compress, "compress", "", "codec for cold data: zstd or none")
	cmd.Flags().StringVar(&ec, "ec", "", "erasure code for cold data: K+M (e.g. 4+2) or none")
	cmd.Flags().StringVar(&dedup, "dedup", "", "deduplicate the bucket's data: on or off")
	cmd.Flags().StringVar(&coldAfter, "cold-after", "", "how long unread and unwritten before data is cold, e.g. 24h, 30m")
	return cmd
}

// printTransformSavings is the tier report's section on transformations:
// per tier, the bytes replicas hold, what they would hold untransformed,
// and the savings by transform.
func printTransformSavings(w *tabwriter.Writer, tiers []object.TierUsage) {
	found := false
	for _, t := range tiers {
		if len(t.Savings) > 0 {
			found = true
		}
	}
	if !found {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TIER\tPHYSICAL\tLOGICAL\tSAVED\tBY TRANSFORM")
	for _, t := range tiers {
		var by []string
		var saved int64
		for k, v := range t.Savings {
			by = append(by, fmt.Sprintf("%s=%s", k, humanBytes(v)))
			saved += v
		}
		sort.Strings(by)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s (%s)\t%s\n", t.Tier, humanBytes(t.EgroupBytes), humanBytes(t.LogicalBytes),
			humanBytes(saved), pct(saved, t.LogicalBytes), strings.Join(by, " "))
	}
}

// printHistoryTotals sums the listed jobs' tasks by kind and the bytes
// each transform rewrote.
func printHistoryTotals(out interface{ Write([]byte) (int, error) }, h []curator.JobRecord) {
	done := map[string]int{}
	tf := map[string]curator.TransformBytes{}
	for _, r := range h {
		for k, v := range r.Done {
			done[k] += v
		}
		for k, v := range r.Transformed {
			t := tf[k]
			t.Logical += v.Logical
			t.Stored += v.Stored
			tf[k] = t
		}
	}
	fmt.Fprintf(out, "\ntasks done by kind over these %d jobs: %s\n", len(h), counts(done))
	for _, k := range sortedKeys(tf) {
		if k == "dedup" {
			fmt.Fprintf(out, "dedup: %s no longer stored twice\n", humanBytes(tf[k].Logical))
			continue
		}
		fmt.Fprintf(out, "%s rewrote %s into %s\n", k, humanBytes(tf[k].Logical), humanBytes(tf[k].Stored))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func newBenchTransformCmd() *cobra.Command {
	var (
		sizeMiB    int64
		seed       uint64
		reads, dev int
		dir, csv   string
		profile    string
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "transform",
		Short: "Measure the Curator's compression and truncation of cold data on a scratch node",
		Long: `Build a single node in a scratch directory (real Pebble, real files on
--devices hdd devices, replication hdd=2), write a mixed data set — JSON logs,
already-compressed media (random bytes) and VM-image-like 4 KiB blocks with
zeros and duplicates, a third each — and measure:

  physical bytes over all replicas before and after compression,
  the compression job's throughput (logical MB/s) and ratio,
  GET latency p50/p99 and MB/s per class, plain and compressed,
  the bytes truncation frees after each egroup's tail object is deleted
  (and that it copies nothing),
  erasure coding of a cold any=3 bucket of media to 4+2: bytes before and
  after, the encode's throughput, and GET latency from replicas, intact
  stripes and stripes with a failed device (degraded reads).

Every object is read back and compared byte for byte at the end. Rows go to
--csv (phase,class,metric,value); the summary to stdout.`,
		Example: `  terrace bench transform --size 256 --csv transform.csv
  terrace bench transform --size 64 --reads 500 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				d, err := os.MkdirTemp("", "terrace-bench-transform-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			progress := func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "...", s) }
			res, err := transformbench.Run(cmd.Context(), transformbench.Options{Dir: dir, LogicalBytes: sizeMiB << 20, Seed: seed, Reads: reads, Devices: dev, Profile: profile}, progress)
			if err != nil {
				return err
			}
			if csv != "" {
				if err := res.WriteCSV(csv); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			for _, line := range res.Summary {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&sizeMiB, "size", 96, "logical size of the data set in MiB")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the data set")
	cmd.Flags().IntVar(&reads, "reads", 200, "whole-object GETs per class and phase for the latency percentiles")
	cmd.Flags().IntVar(&dev, "devices", 6, "hdd devices of the scratch node")
	cmd.Flags().StringVar(&dir, "dir", "", "scratch directory (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&csv, "csv", "", "write every measurement as CSV to this file")
	cmd.Flags().StringVar(&profile, "profile", "", "device emulation profile (hdd: 150 MB/s, 4 ms per op); default none (page-cache speed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the measurements as JSON")
	return cmd
}
