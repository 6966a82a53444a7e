package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/chaos"
	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/chaos/history/checker"
	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) { root.AddCommand(newChaosCmd(g)) })
}

func newChaosCmd(g *globalFlags) *cobra.Command {
	var o chaos.Options
	var faults string
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a cluster under faults and check that no acknowledged write is lost",
		Long: `Start an N-node dev cluster on loopback (every node-to-node byte through the
suite's fault-injecting proxies), run a mixed S3 load (PUT, GET, DELETE,
multipart, LIST; many sizes; some keys written over and over) through every
node, and inject faults on a seeded schedule: kill -9 of nodes (including
the etcd leader and the Curator master) with restart, SIGSTOP pauses,
isolated nodes and two-sided partitions (cut or silent), slow and lossy
links, device EIO, full and slow devices, and flipped bytes in egroup files.

Then heal everything, wait for the Curator until every object is back at
its vector, read every key, and check the recorded history: every
acknowledged write readable with its bytes (or superseded), no deleted
object back, per-key reads linearizable (porcupine), no corrupt read, and
no dangling reference or undetected bit rot. The last line of the summary
is "ok: …" (exit 0) or "FAIL: …" (exit 1).

The run directory keeps schedule.txt, events.jsonl (what each fault did),
history.jsonl (every operation, for 'terrace chaos check'), summary.json
and every node's log. The seed reproduces the schedule; see
docs/reliability.md.`,
		Example: `  terrace chaos --nodes 5 --events 60 --seed 7 --dir /tmp/chaos-7
  terrace chaos --events 1000 --interval 2s --dir /tmp/chaos-long     # the documented long run
  terrace chaos --faults kill,partition --events 30 --dir /tmp/c      # only some faults
  terrace chaos plan --seed 7 --events 60                              # print a schedule
  terrace chaos check /tmp/chaos-7/history.jsonl                       # re-check a history`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kinds, err := nemesis.ParseKinds(faults)
			if err != nil {
				return err
			}
			o.Kinds = kinds
			if o.Binary == "" {
				if o.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			if o.Dir == "" {
				o.Dir = filepath.Join(os.TempDir(), fmt.Sprintf("terrace-chaos-%d", time.Now().Unix()))
			}
			out := cmd.OutOrStdout()
			if !g.json {
				o.Progress = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := chaos.Run(ctx, o)
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.Encode(res)
			} else {
				chaos.PrintSummary(out, res)
			}
			if !res.OK() {
				if g.json {
					fmt.Fprintln(cmd.ErrOrStderr(), res.Line())
				}
				os.Exit(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 5, "nodes in the cluster")
	f.IntVar(&o.Members, "members", 3, "etcd members among them (odd)")
	f.StringVar(&o.Vector, "vector", "any=3", "replication vector of the bucket under test")
	f.IntVar(&o.Events, "events", 60, "faults to inject")
	f.DurationVar(&o.Interval, "interval", time.Second, "mean gap between faults")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the schedule and the load (0: random, printed)")
	f.StringVar(&o.Dir, "dir", "", "new directory for the cluster, history and summary (default: a fresh one under $TMPDIR)")
	f.StringVar(&faults, "faults", "all", "faults to inject: all, or a list of "+kindList())
	f.IntVar(&o.MaxImpairedNodes, "max-impaired", 2, "most nodes down, paused, cut off or with a failed device at once (below the vector's replicas)")
	f.IntVar(&o.Clients, "clients", 6, "concurrent S3 clients")
	f.DurationVar(&o.OpTimeout, "op-timeout", 15*time.Second, "client timeout per operation (then its outcome is unknown)")
	f.DurationVar(&o.SettleTimeout, "settle-timeout", 0, "how long the Curator may take to bring every object back to its vector (0: 5m + 0.3s per event)")
	f.DurationVar(&o.NodeDownAfter, "node-down-after", 6*time.Second, "the Curator's stabilisation interval in the chaos cluster")
	f.IntVar(&o.BasePort, "base-port", 0, "first cluster port (0: a free block from 21000)")
	f.StringVar(&o.Binary, "binary", "", "terrace binary for the nodes (default: this one)")
	cmd.AddCommand(newChaosCheckCmd(g), newChaosPlanCmd())
	return cmd
}

func kindList() string {
	s := ""
	for i, k := range nemesis.Kinds {
		if i > 0 {
			s += ","
		}
		s += string(k)
	}
	return s
}

func newChaosCheckCmd(g *globalFlags) *cobra.Command {
	var visualize string
	cmd := &cobra.Command{
		Use:   "check HISTORY.jsonl",
		Short: "Check a recorded chaos history again (lost, corrupt, linearizability)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ops, err := history.ReadFile(args[0])
			if err != nil {
				return err
			}
			rep := checker.Check(ops, checker.Options{})
			out := cmd.OutOrStdout()
			if g.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.Encode(rep)
			} else {
				fmt.Fprintf(out, "%d operations on %d keys: %d linearizable, %d undecided\n", rep.Ops, rep.Keys, rep.LinearizableKeys, len(rep.Undecided))
				for _, fs := range []struct {
					name string
					f    checker.Findings
				}{{"lost", rep.Lost}, {"corrupt", rep.Corrupt}, {"resurrected", rep.Resurrected}, {"anomaly", rep.Anomalies}} {
					for _, x := range fs.f.List {
						fmt.Fprintf(out, "%s: %s\n", fs.name, x)
					}
				}
			}
			if visualize != "" && !rep.OK() {
				files, err := rep.Visualize(visualize)
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(cmd.ErrOrStderr(), "wrote", f)
				}
			}
			anomalies := rep.Anomalies.Count + rep.Resurrected.Count + len(rep.Undecided)
			word := "ok"
			if !rep.OK() || len(rep.Undecided) > 0 {
				word = "FAIL"
			}
			fmt.Fprintf(out, "%s: %d operations, %d lost, %d corrupt, %d anomalies\n", word, rep.Ops, rep.Lost.Count, rep.Corrupt.Count, anomalies)
			if word != "ok" {
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&visualize, "visualize", "", "directory for porcupine's HTML rendering of non-linearizable keys")
	return cmd
}

func newChaosPlanCmd() *cobra.Command {
	var nodes, members, events, maxImpaired int
	var seed uint64
	var interval time.Duration
	var faults string
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the fault schedule a seed gives (without running anything)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kinds, err := nemesis.ParseKinds(faults)
			if err != nil {
				return err
			}
			c := nemesis.Cluster{Devices: []string{"ssd0", "hdd0", "hdd1"}}
			for i := 1; i <= nodes; i++ {
				c.Nodes = append(c.Nodes, fmt.Sprintf("n%d", i))
				if i <= members {
					c.Members = append(c.Members, fmt.Sprintf("n%d", i))
				}
			}
			o := nemesis.Options{Events: events, Interval: interval, Kinds: kinds, MaxImpairedNodes: maxImpaired}
			evs, err := nemesis.Plan(c, o, seed)
			if err != nil {
				return err
			}
			for _, e := range evs {
				fmt.Fprintln(cmd.OutOrStdout(), e.String())
			}
			n, m := nemesis.Peak(c, o, evs)
			fmt.Fprintf(cmd.OutOrStdout(), "# %d events; at most %d nodes and %d etcd member impaired at once\n", len(evs), n, m)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 5, "nodes")
	f.IntVar(&members, "members", 3, "etcd members")
	f.IntVar(&events, "events", 60, "faults")
	f.IntVar(&maxImpaired, "max-impaired", 2, "most nodes impaired at once")
	f.Uint64Var(&seed, "seed", 1, "seed")
	f.DurationVar(&interval, "interval", time.Second, "mean gap between faults")
	f.StringVar(&faults, "faults", "all", "faults: all, or a list of "+kindList())
	return cmd
}
