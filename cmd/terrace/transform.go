package main

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

// The Curator's transformations of cold data (docs/transforms.md): the
// bucket setting, and the tier report's logical-vs-physical section.

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "bucket" {
				c.AddCommand(newSetTransformCmd(g))
			}
		}
	})
}

func newSetTransformCmd(g *globalFlags) *cobra.Command {
	var compress, coldAfter string
	cmd := &cobra.Command{
		Use:   "set-transform BUCKET [--compress zstd|none] [--cold-after DURATION]",
		Short: "Let the Curator compress a bucket's cold data (and say when data is cold)",
		Long: `Set what the Curator may do to a bucket's cold data in the background.

--compress zstd rewrites the extents of egroups nobody has read or written for
--cold-after into compressed egroups, packing several cold egroups into one.
Reads decompress transparently and check a checksum of the decompressed
bytes. Data that does not shrink by at least 10 % (curator.transform.max_ratio)
is left plain and remembered, so it is not tried again. A compressed egroup
that is read often again (curator.transform.hot_reads within hot_window) is
rewritten plain; so is every compressed egroup of a bucket set back to
--compress none.

An egroup holds data of several buckets when they share a replication vector;
it is compressed only when every bucket whose data it holds asks for it, and it
is cold only after the longest cold-after among them.

Flags not given keep their current value. 'terrace object locate' shows the
result per egroup (zstd 0.41 = stored/logical), 'terrace tier report' the
savings per tier, 'terrace curator history' the tasks.`,
		Example: `  terrace bucket set-transform logs --compress zstd --cold-after 24h
  terrace bucket set-transform logs --compress none`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if cmd.Flags().Changed("compress") {
				q.Set("compress", compress)
			}
			if cmd.Flags().Changed("cold-after") {
				q.Set("cold_after", coldAfter)
			}
			if len(q) == 0 {
				return fmt.Errorf("nothing to set: give --compress and/or --cold-after")
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
			fmt.Fprintf(cmd.OutOrStdout(), "%s: compress %s, cold after %s\n", res.Bucket, res.Compress, cold)
			return nil
		},
	}
	cmd.Flags().StringVar(&compress, "compress", "", "codec for cold data: zstd or none")
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
