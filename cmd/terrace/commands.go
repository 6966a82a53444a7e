package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTierCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "tier", Short: "Inspect storage tiers"}
	cmd.AddCommand(&cobra.Command{
		Use:   "report",
		Short: "Per-tier and per-device capacity, usage, egroups, throughput and queue",
		Long: `Show each tier's capacity and use, then every device: its tier, capacity,
bytes used on the medium, committed egroup bytes and count (from metadata),
measured throughput (start-up probe) and current queue length.

"used" counts everything on the device (including bytes not yet
reclaimed); "egroup bytes" counts what live metadata references.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep object.TierReport
			if err := g.client().getJSON("/v1/tier/report", nil, &rep); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "TIER\tDEVICES\tCAPACITY\tUSED\tUSE%\tEGROUPS\tEGROUP BYTES\tHOT\tCOLD\tPENDING MOVES")
			for _, t := range rep.Tiers {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d (%s)\n", t.Tier, t.Devices, humanBytes(t.CapacityBytes),
					humanBytes(t.UsedBytes), pct(t.UsedBytes, t.CapacityBytes), t.Egroups, humanBytes(t.EgroupBytes),
					humanBytes(t.HotBytes), humanBytes(t.ColdBytes), t.PendingMoves, humanBytes(t.PendingBytes))
			}
			printTransformSavings(w, rep.Tiers)
			fmt.Fprintln(w)
			fmt.Fprintln(w, "DEVICE\tTIER\tSTATE\tCAPACITY\tUSED\tUSE%\tEGROUPS\tEGROUP BYTES\tBAD\tREAD MB/s\tWRITE MB/s\tQUEUE\tSTREAMS")
			for _, d := range rep.Devices {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%.0f\t%.0f\t%d\t%d\n", d.ID, d.Tier, d.State,
					humanBytes(d.CapacityBytes), humanBytes(d.UsedBytes), pct(d.UsedBytes, d.CapacityBytes),
					d.Egroups, humanBytes(d.EgroupBytes), d.BadReplicas, d.ReadBps/1e6, d.WriteBps/1e6, d.QueueLen, d.ActiveStreams)
			}
			return w.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "policy",
		Short: "Show tiering thresholds and what the Curator would move now (dry run)",
		Long: `Show the tiering and balancing thresholds (Curator §3.3: a tier over
f = 75 % sheds its coldest unpinned replicas to the next slower tier under
d = 90 % until its usage fell by h = 15 %; devices of a tier are balanced when
their mean usage exceeds m = 35 % and the spread exceeds s = 15 %; egroups read
often within the hot window climb back to a faster tier), then run the
decision on the current state and list the moves it would make. Nothing moves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p server.TierPolicy
			if err := g.client().getJSON("/v1/tier/policy", nil, &p); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			out := cmd.OutOrStdout()
			th := p.Thresholds
			fmt.Fprintf(out, "automatic tiering: %v\n", p.Enabled)
			fmt.Fprintf(out, "demote when a tier is over f=%.0f%% to a tier under d=%.0f%%, by h=%.0f%% of capacity, coldest first\n", 100*th.DownAbove, 100*th.DestBelow, 100*th.Reduce)
			fmt.Fprintf(out, "promote egroups read >= %d times within %s to the fastest tier under f\n", th.PromoteReads, th.HotWindow)
			fmt.Fprintf(out, "balance a tier when mean use > m=%.0f%% and spread > s=%.0f%%\n\n", 100*th.BalanceMean, 100*th.BalanceSpread)
			w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "TIER\tUSE%\tOVER f?\tHOT\tCOLD")
			for _, t := range p.Tiers {
				over := "no"
				if t.CapacityBytes > 0 && float64(t.UsedBytes)/float64(t.CapacityBytes) > th.DownAbove {
					over = "YES"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Tier, pct(t.UsedBytes, t.CapacityBytes), over, humanBytes(t.HotBytes), humanBytes(t.ColdBytes))
			}
			w.Flush()
			fmt.Fprintf(out, "\nwould do now: %s\n", counts(p.Counts))
			for _, m := range p.Moves {
				fmt.Fprintln(out, "  "+m)
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "recall BUCKET[/PREFIX]",
		Short:   "Bring objects' replicas back from the remote tier to local tiers",
		Example: "  terrace tier recall archive/2023/\n  terrace tier recall logs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, prefix, _ := strings.Cut(strings.TrimPrefix(args[0], "s3://"), "/")
			var rec curator.JobRecord
			c := g.client()
			if err := watchJobs(c, newProgress("recall "+args[0], g.json), "recall", func() error {
				return c.callJSON("POST", "/v1/tier/recall", url.Values{"bucket": {b}, "prefix": {prefix}}, &rec)
			}); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rec)
			}
			printJob(cmd.OutOrStdout(), rec)
			return nil
		},
	})
	return cmd
}

func newObjectCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "object", Short: "Inspect and manage individual objects"}
	cmd.AddCommand(&cobra.Command{
		Use:   "locate BUCKET/KEY",
		Short: "Show an object's extents, egroups and replicas (device and tier)",
		Example: `  terrace object locate photos/2024/cat.jpg
  terrace object locate photos/2024/cat.jpg --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[0])
			if err != nil {
				return err
			}
			var loc object.Location
			if err := g.client().getJSON("/v1/object/locate", url.Values{"bucket": {b}, "key": {k}}, &loc); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), loc)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s/%s  size %s  etag %s  vector %s", loc.Bucket, loc.Key, humanBytes(loc.Size), loc.ETag, loc.Vector)
			if loc.Class != "" {
				fmt.Fprintf(out, "  class %s", loc.Class)
			}
			var tiers []string
			for t, n := range loc.Tiers {
				tiers = append(tiers, fmt.Sprintf("%s=%d", t, n))
			}
			sort.Strings(tiers)
			fmt.Fprintf(out, "\nreplicas by tier (distinct egroups): %s   placement policy: %s\n\n", strings.Join(tiers, ","), loc.Policy)
			w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "EXTENT\tOFFSET\tLENGTH\tEGROUP\tSTATE\tTRANSFORM\tREPLICAS")
			for _, x := range loc.Extents {
				var reps []string
				for _, r := range x.Replicas {
					s := fmt.Sprintf("%s(%s)", r.Device, r.Tier)
					if r.Bad {
						s += "!bad"
					}
					reps = append(reps, s)
				}
				if x.Error != "" {
					reps = append(reps, "ERROR: "+x.Error)
				}
				tf := x.Transform
				if tf == "" {
					tf = "-"
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", meta.FormatID(x.Extent), x.Offset, x.Length, meta.FormatID(x.Egroup), x.State, tf, strings.Join(reps, " "))
			}
			return w.Flush()
		},
	})
	var wait bool
	setRep := &cobra.Command{
		Use:   "set-replication BUCKET/KEY VECTOR",
		Short: "Change an object's replication vector (replicas are added, moved or dropped in the background)",
		Long: `Change an object's replication vector, like OctopusFS setReplication.

The object's bytes are copied into extent groups placed for the new vector,
verified, and the object is switched over with compare-and-swap; the old
copies become garbage for the Curator. A concurrent overwrite of the object
wins and the move is dropped.`,
		Example: `  terrace object set-replication logs/2024-01.gz hdd=2
  terrace object set-replication hot/index.db ssd=1,hdd=1 --wait`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[0])
			if err != nil {
				return err
			}
			q := url.Values{"bucket": {b}, "key": {k}, "vector": {args[1]}}
			if wait {
				q.Set("wait", "1")
			}
			var res map[string]string
			c := g.client()
			call := func() error { return c.callJSON("POST", "/v1/object/set-replication", q, &res) }
			if wait {
				call = spinWhile(c, newProgress("set-replication "+args[0], g.json), b, k, args[1], call)
			}
			if err := call(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: vector %s %s\n", b, k, res["vector"], res["status"])
			return nil
		},
	}
	setRep.Flags().BoolVar(&wait, "wait", false, "wait until the data has moved")
	cmd.AddCommand(setRep)
	return cmd
}

func newBucketCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "bucket", Short: "Create, list and configure buckets"}
	var vec string
	create := &cobra.Command{
		Use:     "create BUCKET",
		Short:   "Create a bucket, optionally with a default replication vector",
		Example: "  terrace bucket create logs --vector hdd=2\n  terrace bucket create hot --vector ssd=1,hdd=1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if vec != "" {
				q.Set("vector", vec)
			}
			return g.client().callJSON("PUT", "/v1/buckets/"+url.PathEscape(args[0]), q, nil)
		},
	}
	create.Flags().StringVar(&vec, "vector", "", "default replication vector, e.g. ssd=1,hdd=2 (default: the node's)")
	cmd.AddCommand(create)
	cmd.AddCommand(&cobra.Command{
		Use:   "set-vector BUCKET VECTOR",
		Short: "Set a bucket's default replication vector (applies to new writes)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.client().callJSON("POST", "/v1/buckets/"+url.PathEscape(args[0])+"/vector", url.Values{"vector": {args[1]}}, nil)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List buckets with their default vectors",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return listBuckets(cmd, g) },
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "rm BUCKET",
		Short: "Delete an empty bucket",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.client().callJSON("DELETE", "/v1/buckets/"+url.PathEscape(args[0]), nil, nil)
		},
	})
	return cmd
}

func listBuckets(cmd *cobra.Command, g *globalFlags) error {
	var rows []struct {
		Name   string `json:"name"`
		Vector string `json:"vector"`
	}
	if err := g.client().getJSON("/v1/buckets", nil, &rows); err != nil {
		return err
	}
	if g.json {
		return printJSON(cmd.OutOrStdout(), rows)
	}
	for _, r := range rows {
		v := r.Vector
		if v == "" {
			v = "(node default)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", r.Name, v)
	}
	return nil
}

func newPutCmd(g *globalFlags) *cobra.Command {
	var vec, class string
	cmd := &cobra.Command{
		Use:     "put FILE BUCKET/KEY",
		Short:   "Upload a file (- for stdin) as an object",
		Example: "  terrace put ./report.pdf docs/report.pdf --vector ssd=1,hdd=1",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[1])
			if err != nil {
				return err
			}
			var r io.Reader = os.Stdin
			size := int64(-1)
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return err
				}
				r, size = f, st.Size()
			}
			q := url.Values{}
			if vec != "" {
				q.Set("vector", vec)
			}
			if class != "" {
				q.Set("class", class)
			}
			resp, err := g.client().do("PUT", "/v1/data/"+url.PathEscape(b)+"/"+escapeKey(k), q, r, size)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var res map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %s/%s (%.0f bytes, vector %v, etag %v)\n", b, k, res["size"], res["vector"], res["etag"])
			return nil
		},
	}
	cmd.Flags().StringVar(&vec, "vector", "", "replication vector, e.g. ssd=1,hdd=1")
	cmd.Flags().StringVar(&class, "class", "", "S3 storage class (mapped to a vector)")
	return cmd
}

func escapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func newGetCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get BUCKET/KEY [FILE]",
		Short: "Download an object to a file or stdout",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[0])
			if err != nil {
				return err
			}
			resp, err := g.client().do("GET", "/v1/data/"+url.PathEscape(b)+"/"+escapeKey(k), nil, nil, -1)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var w io.Writer = cmd.OutOrStdout()
			if len(args) == 2 && args[1] != "-" {
				f, err := os.Create(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			n, err := io.Copy(w, resp.Body)
			if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
				err = fmt.Errorf("short read: %d of %d bytes", n, resp.ContentLength)
			}
			return err
		},
	}
}

func newLsCmd(g *globalFlags) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "ls [BUCKET[/PREFIX]]",
		Short: "List buckets, or objects under a prefix",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listBuckets(cmd, g)
			}
			b, prefix, _ := strings.Cut(strings.TrimPrefix(args[0], "s3://"), "/")
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			after := ""
			for {
				q := url.Values{"prefix": {prefix}, "after": {after}}
				if !recursive {
					q.Set("delimiter", "/")
				}
				var page struct {
					Objects   []server.ListEntry `json:"objects"`
					Prefixes  []string           `json:"prefixes"`
					Truncated bool               `json:"truncated"`
					Next      string             `json:"next"`
				}
				if err := g.client().getJSON("/v1/data/"+url.PathEscape(b), q, &page); err != nil {
					return err
				}
				for _, p := range page.Prefixes {
					fmt.Fprintf(w, "PRE\t%s\t\t\n", p)
				}
				for _, o := range page.Objects {
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", o.Mtime.Format("2006-01-02 15:04:05"), o.Key, o.Size, o.Vector)
				}
				if !page.Truncated {
					break
				}
				after = page.Next
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "list every key, not just one level")
	return cmd
}

func newRmCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm BUCKET/KEY...",
		Short: "Delete objects",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				b, k, err := splitBucketKey(a)
				if err != nil {
					return err
				}
				if err := g.client().callJSON("DELETE", "/v1/data/"+url.PathEscape(b)+"/"+escapeKey(k), nil, nil); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newStatusCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the node, its devices and their health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st server.Status
			if err := g.client().getJSON("/v1/status", nil, &st); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), st)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "node %s (rack %s)  s3 %s  admin %s  placement %s  default vector %s\n\n",
				st.Node, st.Rack, st.S3Address, st.AdminAddress, st.Placement, st.Vector)
			w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "DEVICE\tTIER\tHEALTH\tPATH\tPROFILE\tUSED\tCAPACITY")
			for _, d := range st.Devices {
				h := "ok"
				if d.Failed {
					h = "FAILED"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Tier, h, d.Path, d.Profile, humanBytes(d.UsedBytes), humanBytes(d.CapacityBytes))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if st.Cluster != nil {
				fmt.Fprintln(out)
				w = tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "NODE	RACK	STATE	RPC	S3	DEVICES	USED	CAPACITY")
				for _, nv := range st.Cluster.Nodes {
					state := "up"
					if !nv.Up {
						state = "DOWN"
					}
					if nv.Draining {
						state += ",draining"
					}
					var used, capacity int64
					if nv.Heartbeat != nil {
						for _, d := range nv.Heartbeat.Devices {
							used += d.Used
						}
					}
					for _, d := range nv.Devices {
						capacity += d.CapacityBytes
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", nv.ID, nv.Rack, state, nv.RPCAddress, nv.S3Address, len(nv.Devices), humanBytes(used), humanBytes(capacity))
				}
				fmt.Fprintln(w)
				fmt.Fprintln(w, "META MEMBER	ENDPOINT	HEALTH	LEADER")
				for _, m := range st.Cluster.Members {
					h := "ok"
					if !m.Healthy {
						h = "UNHEALTHY " + m.Error
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", m.Name, m.Endpoint, h, m.Leader)
				}
				return w.Flush()
			}
			return nil
		},
	}
}
