package main

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/object"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		root.AddCommand(newPlanCmd(g))
		for _, c := range root.Commands() {
			if c.Name() == "bucket" {
				addSnapshotCmds(c, g)
			}
		}
	})
}

func newPlanCmd(g *globalFlags) *cobra.Command {
	var whatIfs []string
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "What the planner's rules want to move now (a dry run), and planned jobs",
		Long: `The planner (Mirador) weighs the whole cluster against a set of rules —
small objective functions such as device_has_space, rplset_durable,
failure_domain_spread, load_balanced, tier_fill — and searches for the
moves that make their total cost cheapest. 'terrace plan' shows those moves
and each rule's cost before and after; nothing moves. --what-if runs the
same on a changed copy of the cluster: a failed device or node, a new node,
a drained node, or a changed rule. 'plan apply' runs the plan as a job
(copy, verify, switch, delete — through the actuator, checkpointed so a new
Curator master finishes it). Rules are configuration (YAML 'planner:
rules:'); live Lua rule policies join every plan as lua.NAME ('terrace
policy put NAME FILE.lua'); docs/planner.md explains each.`,
		Example: `  terrace plan
  terrace plan --what-if fail:n2/hdd0
  terrace plan --what-if add:n4 --what-if "rule:load_balanced spread=0.1"
  terrace plan explain photos/cat.jpg
  terrace plan apply --wait && terrace plan jobs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for _, w := range whatIfs {
				q.Add("what_if", w)
			}
			var p curator.PlanResult
			if err := g.client().getJSON("/v1/plan", q, &p); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			printPlan(cmd.OutOrStdout(), p)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&whatIfs, "what-if", nil, "plan on a changed copy: fail:DEVICE|fail:NODE|add:NODE|drain:NODE|rule:NAME PARAMS (repeatable)")

	var wait bool
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Plan now and run the plan as a checkpointed job",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if wait {
				q.Set("wait", "1")
			}
			var out struct {
				Plan curator.PlanResult `json:"plan"`
				Job  actuate.Progress   `json:"job"`
			}
			if err := g.client().callJSON("POST", "/v1/plan/apply", q, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			if len(out.Plan.Tasks) == 0 && len(out.Plan.Moves) == 0 {
				fmt.Fprintln(w, "nothing to move: every rule is satisfied (or cannot be helped by moving data)")
				return nil
			}
			fmt.Fprintf(w, "job %s: %d moves (seed %d)\n", out.Job.ID, len(out.Plan.Moves), out.Plan.Seed)
			printProgress(w, []actuate.Progress{out.Job})
			return nil
		},
	}
	apply.Flags().BoolVar(&wait, "wait", false, "wait until the job has run")
	cmd.AddCommand(apply)

	var n int
	jobs := &cobra.Command{
		Use:   "jobs",
		Short: "Running and recent jobs: moves and bytes done, rate, ETA",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ps []actuate.Progress
			if err := g.client().getJSON("/v1/plan/jobs", url.Values{"n": {fmt.Sprint(n)}}, &ps); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), ps)
			}
			printProgress(cmd.OutOrStdout(), ps)
			return nil
		},
	}
	jobs.Flags().IntVarP(&n, "n", "n", 20, "how many recent jobs")
	cmd.AddCommand(jobs)

	cmd.AddCommand(&cobra.Command{
		Use:   "explain BUCKET/KEY",
		Short: "An object's egroups, where their replicas are, and what the planner would move",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[0])
			if err != nil {
				return err
			}
			var out struct {
				Location   object.Location     `json:"location"`
				Moves      []curator.PlanMove  `json:"moves"`
				Unresolved []string            `json:"unresolved"`
				Rules      string              `json:"rules"`
				CostBefore string              `json:"cost_before"`
				CostAfter  string              `json:"cost_after"`
				PerRule    []curator.RuleDelta `json:"rules_cost"`
			}
			if err := g.client().getJSON("/v1/plan/explain", url.Values{"bucket": {b}, "key": {k}}, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			for _, x := range out.Location.Extents {
				var reps []string
				for _, r := range x.Replicas {
					reps = append(reps, fmt.Sprintf("%s(%s)", r.Device, r.Tier))
				}
				fmt.Fprintf(w, "egroup %016x: %s\n", x.Egroup, strings.Join(reps, " "))
			}
			if len(out.Moves) == 0 {
				fmt.Fprintln(w, "not moving: no rule's cost drops by moving these replicas")
			}
			for _, m := range out.Moves {
				fmt.Fprintf(w, "  would move %s %s -> %s for %s (cost %s -> %s)\n", m.Egroup, orNew(m.From), m.To, strings.Join(m.Rules, ","), m.CostBefore, m.CostAfter)
			}
			for _, u := range out.Unresolved {
				fmt.Fprintf(w, "  unresolved: %s\n", u)
			}
			return nil
		},
	})
	return cmd
}

func orNew(s string) string {
	if s == "" {
		return "(new)"
	}
	return s
}

func printPlan(w io.Writer, p curator.PlanResult) {
	fmt.Fprintf(w, "%d egroups on %d devices; cost %s -> %s; %d moves (seed %d, %s)\n",
		p.Egroups, p.Devices, p.CostBefore, p.CostAfter, len(p.Moves), p.Seed, p.Took)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tBEFORE\tAFTER")
	for _, r := range p.PerRule {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Rule, r.Before, r.After)
	}
	tw.Flush()
	if len(p.Moves) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "EGROUP\tFROM\tTO\tRULES\tCOST")
		for i, m := range p.Moves {
			if i == 200 {
				fmt.Fprintf(tw, "... %d more (--json lists all)\n", len(p.Moves)-200)
				break
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s -> %s\n", m.Egroup, orNew(m.From), m.To, strings.Join(m.Rules, ","), m.CostBefore, m.CostAfter)
		}
		tw.Flush()
	}
	for _, u := range p.Unresolved {
		fmt.Fprintf(w, "UNRESOLVED: %s\n", u)
	}
	for _, e := range p.RuleErrors {
		fmt.Fprintf(w, "RULE ERROR: %s\n", e)
	}
	if len(p.Stranded) > 0 {
		fmt.Fprintf(w, "STRANDED (no readable replica): %s\n", strings.Join(p.Stranded, " "))
	}
}

func printProgress(w io.Writer, ps []actuate.Progress) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tSTATE\tTASKS\tDONE\tSTALE\tFAILED\tBYTES\tRATE\tETA\tRULES")
	for _, p := range ps {
		state := "running"
		switch {
		case !p.Finished.IsZero():
			state = "finished"
		case p.Started.IsZero():
			state = "queued"
		case p.Owner != "":
			state = "running on " + p.Owner
		}
		var rules []string
		for r, n := range p.Rules {
			rules = append(rules, fmt.Sprintf("%s:%d", r, n))
		}
		sort.Strings(rules)
		eta := "-"
		if p.ETA > 0 {
			eta = p.ETA.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s/%s\t%s/s\t%s\t%s\n", p.ID, p.Kind, state, p.Tasks,
			p.States["done"], p.States["stale"], p.States["failed"], humanBytes(p.BytesDone), humanBytes(p.BytesTotal),
			humanBytes(int64(p.Rate)), eta, strings.Join(rules, " "))
	}
	tw.Flush()
}

// addSnapshotCmds adds snapshots, clones, versioning and usage to the
// bucket command.
func addSnapshotCmds(bucket *cobra.Command, g *globalFlags) {
	snap := &cobra.Command{
		Use:   "snapshot BUCKET NAME",
		Short: "Take an instant, read-only snapshot (served over S3 as BUCKET--snap-NAME)",
		Long: `A snapshot is metadata only and takes the same time whatever the bucket
holds. It is readable over S3 as the bucket BUCKET--snap-NAME (GET, HEAD,
LIST; writes are refused). Objects overwritten or deleted afterwards keep
their bytes while a snapshot still sees them.`,
		Example: `  terrace bucket snapshot photos monday
  aws s3 ls s3://photos--snap-monday/
  terrace bucket snapshot rm photos monday`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s object.SnapshotInfo
			if err := g.client().callJSON("PUT", "/v1/buckets/"+url.PathEscape(args[0])+"/snapshots/"+url.PathEscape(args[1]), nil, &s); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s of %s at revision %d: read it as bucket %s\n", s.Name, s.Bucket, s.Rev, s.Served)
			return nil
		},
	}
	snap.AddCommand(&cobra.Command{
		Use:   "rm BUCKET NAME",
		Short: "Delete a snapshot (its exclusive bytes are reclaimed by the Curator's next full scans)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.client().callJSON("DELETE", "/v1/buckets/"+url.PathEscape(args[0])+"/snapshots/"+url.PathEscape(args[1]), nil, nil)
		},
	})
	bucket.AddCommand(snap)
	bucket.AddCommand(&cobra.Command{
		Use:   "snapshots BUCKET",
		Short: "List a bucket's snapshots and the pins its clones hold",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ss []object.SnapshotInfo
			if err := g.client().getJSON("/v1/buckets/"+url.PathEscape(args[0])+"/snapshots", nil, &ss); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), ss)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tREVISION\tCREATED\tS3 BUCKET / CLONE")
			for _, s := range ss {
				served := s.Served
				if s.Clone != "" {
					served = "pin of clone " + s.Clone
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Name, s.Rev, time.Unix(0, s.Created).UTC().Format(time.RFC3339), served)
			}
			return tw.Flush()
		},
	})
	bucket.AddCommand(&cobra.Command{
		Use:   "clone SOURCE[--snap-SNAPSHOT] NEW",
		Short: "Create a writable bucket sharing every object of SOURCE (now, or as of a snapshot)",
		Long: `A clone shares its source's extents: nothing is copied. Writes to either
side never change the other. The Curator's snapshot tree reduction copies
the source's records into the clone over time, so reads stop walking up a
chain of clones; 'terrace bucket reduce NEW' does it now.`,
		Example: `  terrace bucket clone photos photos-test
  terrace bucket clone photos--snap-monday photos-monday`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, snapName, _ := strings.Cut(args[0], "--snap-")
			q := url.Values{"to": {args[1]}}
			if snapName != "" {
				q.Set("snapshot", snapName)
			}
			var out map[string]any
			if err := g.client().callJSON("POST", "/v1/buckets/"+url.PathEscape(src)+"/clone", q, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bucket %s is a clone of %s\n", args[1], args[0])
			return nil
		},
	})
	bucket.AddCommand(&cobra.Command{
		Use:   "reduce CLONE",
		Short: "Snapshot tree reduction now: copy what the clone reads through to its parent into it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out map[string]any
			if err := g.client().callJSON("POST", "/v1/buckets/"+url.PathEscape(args[0])+"/reduce", nil, &out); err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	})
	bucket.AddCommand(&cobra.Command{
		Use:   "versioning BUCKET Enabled|Suspended",
		Short: "Turn S3 versioning on or suspend it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.client().callJSON("PUT", "/v1/buckets/"+url.PathEscape(args[0])+"/versioning", url.Values{"state": {args[1]}}, nil)
		},
	})
	bucket.AddCommand(&cobra.Command{
		Use:   "usage BUCKET",
		Short: "Logical bytes, bytes exclusive to the bucket (freed by deleting it) and bytes shared with snapshots, clones and versions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u object.Usage
			if err := g.client().getJSON("/v1/buckets/"+url.PathEscape(args[0])+"/usage", nil, &u); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), u)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d objects, %s logical; %s exclusive, %s shared, %s kept for versions and snapshots\n",
				u.Bucket, u.Objects, humanBytes(u.LogicalBytes), humanBytes(u.ExclusiveBytes), humanBytes(u.SharedBytes), humanBytes(u.HistoryBytes))
			return nil
		},
	})
}
