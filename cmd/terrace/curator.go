package main

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/server"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) { root.AddCommand(newCuratorCmd(g)) })
}

func newCuratorCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "curator",
		Short: "Background management: scans, recovery, space reclamation, scrubbing",
		Long: `The Curator scans the metadata (partial scans: egroups and access records;
full scans: also objects, uploads and extents) and runs the tasks its
decisions produce: re-replication after failures (recover), sealing egroups
of dead writers, data removal (unreferenced extents, then empty egroups),
garbage collection (compact mostly-dead or small egroups), and scrubbing
(verify every replica's checksums). Every task is applied with
compare-and-swap against the metadata version it was computed from.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show schedules, the running job and the last job",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st curator.Status
			if err := g.client().getJSON("/v1/curator/status", nil, &st); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), st)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "master: %v\noptions: %s\n", st.Leader, st.Options)
			for k, v := range st.LastRun {
				fmt.Fprintf(out, "last %s scan started %s ago\n", k, ago(v))
			}
			for n, since := range st.Down {
				fmt.Fprintf(out, "node %s down for %s\n", n, ago(since))
			}
			if st.Running != nil {
				fmt.Fprintf(out, "running: %s job (%s) for %s\n", st.Running.Kind, st.Running.Trigger, ago(st.Running.Start))
			}
			printTieringStatus(out, st.Tiering)
			if len(st.ScanNodes) > 0 {
				fmt.Fprintln(out, "\nlast scan's map work and tasks queued, per node:")
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "NODE\tPARTITIONS\tRECORDS\tRECORDS/S\tTASKS QUEUED")
				for _, ns := range st.ScanNodes {
					fmt.Fprintf(w, "%s\t%d\t%d\t%.0f\t%d\n", ns.Node, ns.Partitions, ns.Records, ns.RecordsPerS, ns.TasksQueued)
				}
				w.Flush()
			}
			if st.Last != nil {
				fmt.Fprintln(out, "\nlast job:")
				printJob(out, *st.Last)
			}
			return nil
		},
	})
	var n int
	hist := &cobra.Command{
		Use:   "history",
		Short: "List recent jobs with their tasks and outcomes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var h []curator.JobRecord
			if err := g.client().getJSON("/v1/curator/history", url.Values{"n": {fmt.Sprint(n)}}, &h); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), h)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "STARTED\tKIND\tTRIGGER\tTOOK\tRECORDS\tUNDER-REPL\tGARBAGE\tDONE\tSTALE\tFAILED\tMOVED\tFREED\tBAD\tPLANNER (COST, RULES FIRED)")
			for _, r := range h {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", r.Start.Format("15:04:05"), r.Kind, r.Trigger,
					r.End.Sub(r.Start).Round(time.Millisecond), r.Records, humanBytes(r.Stats.UnderReplicatedBytes),
					humanBytes(r.Stats.GarbageBytes), counts(r.Done), r.Stale, r.Failed, humanBytes(r.Moved), humanBytes(r.Freed), r.BadFound,
					planSummary(r.Plan))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			printHistoryTotals(cmd.OutOrStdout(), h)
			return nil
		},
	}
	hist.Flags().IntVarP(&n, "num", "n", 20, "number of jobs")
	cmd.AddCommand(hist)
	var qn int
	queue := &cobra.Command{
		Use:   "queue [NODE]",
		Short: "Show the node task queues: moves waiting for the node that runs them",
		Long: `A scan job runs its tasks until job_time_limit; the moves it did not start
by then wait in the durable queue of the node that receives the data, and
every node executes its own queue at its own pace (docs/curator.md, "Node
task queues"). Without NODE: how many tasks wait per node. With NODE: also
its first --num tasks, oldest decision first in egroup order.`,
		Example: "  terrace curator queue\n  terrace curator queue n2 -n 20",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"n": {fmt.Sprint(qn)}}
			if len(args) == 1 {
				q.Set("node", args[0])
			}
			var l server.QueueList
			if err := g.client().getJSON("/v1/curator/queue", q, &l); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), l)
			}
			out := cmd.OutOrStdout()
			if len(l.Counts) == 0 {
				fmt.Fprintln(out, "no tasks queued")
			} else {
				nodes := make([]string, 0, len(l.Counts))
				for n := range l.Counts {
					nodes = append(nodes, string(n))
				}
				sort.Strings(nodes)
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "NODE\tTASKS QUEUED")
				for _, n := range nodes {
					fmt.Fprintf(w, "%s\t%d\n", n, l.Counts[model.NodeID(n)])
				}
				w.Flush()
			}
			if len(l.Tasks) > 0 {
				fmt.Fprintf(out, "\n%s's queue:\n", l.Node)
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "QUEUED\tJOB\tTASK\tATTEMPTS\tLAST ERROR")
				for _, t := range l.Tasks {
					fmt.Fprintf(w, "%s ago\t%s\t%s\t%d\t%s\n", ago(t.Enqueued), t.Job, t.Task.String(), t.Attempts, t.LastErr)
				}
				w.Flush()
			}
			return nil
		},
	}
	queue.Flags().IntVarP(&qn, "num", "n", 50, "tasks to list for NODE")
	cmd.AddCommand(queue)
	var wait bool
	run := &cobra.Command{
		Use:       "run full|partial",
		Short:     "Run a scan now",
		Example:   "  terrace curator run full --wait\n  terrace curator run partial",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"full", "partial"},
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"kind": {args[0]}}
			if !wait {
				if err := g.client().callJSON("POST", "/v1/curator/run", q, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s scan triggered; 'terrace curator history' shows the result\n", args[0])
				return nil
			}
			q.Set("wait", "1")
			var r curator.JobRecord
			c := g.client()
			if err := watchJobs(c, newProgress(args[0]+" scan", g.json), args[0], func() error {
				return c.callJSON("POST", "/v1/curator/run", q, &r)
			}); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), r)
			}
			printJob(cmd.OutOrStdout(), r)
			return nil
		},
	}
	run.Flags().BoolVar(&wait, "wait", false, "wait for the job and print its record (a progress bar on stderr meanwhile)")
	cmd.AddCommand(run)
	return cmd
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func printJob(out interface{ Write([]byte) (int, error) }, r curator.JobRecord) {
	fmt.Fprintf(out, "  %s scan (%s) at %s, took %s, %d records from %s\n", r.Kind, r.Trigger, r.Start.Format(time.RFC3339),
		r.End.Sub(r.Start).Round(time.Millisecond), r.Records, strings.Join(r.Maps, ","))
	if r.Spilled > 0 {
		fmt.Fprintf(out, "  extent arrays spilled to mapped files: %s at most (curator.scan_memory_bytes)\n", humanBytes(r.Spilled))
	}
	switch {
	case r.Shuffle != "":
		fmt.Fprintf(out, "  joins on the nodes (shuffle %s)\n", r.Shuffle)
	case r.ShuffleError != "":
		fmt.Fprintf(out, "  shuffle abandoned, joins on the master: %s\n", r.ShuffleError)
	}
	fmt.Fprintf(out, "  egroups %d, under-replicated %d (%s), live %s, garbage %s, bad replicas %d\n", r.Stats.Egroups,
		r.Stats.UnderReplicated, humanBytes(r.Stats.UnderReplicatedBytes), humanBytes(r.Stats.LiveBytes), humanBytes(r.Stats.GarbageBytes), r.Stats.BadReplicas)
	fmt.Fprintf(out, "  planned %s; done %s; stale %d; failed %d; moved %s; freed %s; scrubbed %s; bad found %d\n",
		counts(r.Planned), counts(r.Done), r.Stale, r.Failed, humanBytes(r.Moved), humanBytes(r.Freed), humanBytes(r.Scrubbed), r.BadFound)
	for _, k := range sortedKeys(r.Transformed) {
		tb := r.Transformed[k]
		fmt.Fprintf(out, "  %s: %s → %s\n", k, humanBytes(tb.Logical), humanBytes(tb.Stored))
	}
	if r.Plan != nil {
		fmt.Fprintf(out, "  planner over %d egroups: %s\n", r.Plan.Egroups, planSummary(r.Plan))
		for _, d := range r.Plan.PerRule {
			fmt.Fprintf(out, "    %s: %s → %s\n", d.Rule, d.Before, d.After)
		}
		for _, u := range r.Plan.Unresolved {
			fmt.Fprintf(out, "    unresolved: %s\n", u)
		}
	}
	for _, d := range r.Dangling {
		fmt.Fprintf(out, "  DANGLING: %s\n", d)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(out, "  error: %s\n", e)
	}
}

// planSummary is a job's live planning in one line: the cost before and
// after its moves and the rules the executed moves lowered.
func planSummary(p *curator.LivePlan) string {
	switch {
	case p == nil:
		return "-"
	case p.Error != "":
		return "error: " + p.Error
	case p.Moves == 0:
		return fmt.Sprintf("cost %s, no moves", p.CostBefore)
	}
	s := fmt.Sprintf("cost %s → %s, %d moves", p.CostBefore, p.CostAfter, p.Moves)
	if len(p.Fired) > 0 {
		s += "; " + counts(p.Fired)
	}
	return s
}
