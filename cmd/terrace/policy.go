package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/policy"
	"github.com/terrace-storage/terrace/internal/server"
)

func init() {
	extraCommands = append(extraCommands,
		func(root *cobra.Command, g *globalFlags) { root.AddCommand(newPolicyCmd(g)) },
		func(root *cobra.Command, g *globalFlags) {
			// `object exec` joins the object command defined in commands.go.
			if obj, _, err := root.Find([]string{"object"}); err == nil && obj.Name() == "object" {
				obj.AddCommand(newObjectExecCmd(g))
			}
		},
	)
}

// callBody sends a request with a body and decodes the JSON answer; a
// policy error answer is printed with its Lua line.
func (c *apiClient) callBody(method, path string, q url.Values, body []byte, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the node at %s (is 'terrace server' running? set --endpoint): %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var pe server.PolicyError
		if json.Unmarshal(b, &pe) == nil && pe.Error != "" {
			return fmt.Errorf("%s (%s)", pe.Error, pe.Code)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func defaultAuthor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	if host != "" {
		return name + "@" + host
	}
	return name
}

func readSource(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	}
	return os.ReadFile(file)
}

func newPolicyCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Programmable policies: put, list, show, test, roll back Lua policies",
		Long: `Policies are short Lua programs that fill hooks in Terrace:

  rule      a planner objective: cost(view) for a device, replica set or egroup
  fitness   the placement fitness: fitness(device, cluster) >= 0
  tiering   when and what to tier: tiering(tiers, cluster), heat(egroup, now)
  balancer  who scans what (Mantle): when(), where(), howmuch()
  class     object methods: terrace object exec BUCKET/KEY CLASS.METHOD [ARG]

A put is validated first — compiled in the sandbox and run against the live
model — and rejected with the Lua error and line if it fails. Accepted
versions are stored through the metadata consensus with an increasing
version, author and time; every node swaps them in within milliseconds. A
version that misbehaves later falls back to the last good version (or the
built-in default) and is disabled after repeated failures. Examples are in
examples/policies/; docs/policies.md teaches each hook.`,
		Example: `  terrace policy put counter examples/policies/counter.lua
  terrace policy test fit --file my_fitness.lua --what-if n1/ssd0.queue=80
  terrace policy history fit
  terrace policy rollback fit 3`,
	}
	cmd.AddCommand(newPolicyPutCmd(g), newPolicyLsCmd(g), newPolicyShowCmd(g), newPolicyHistoryCmd(g),
		newPolicyRollbackCmd(g), newPolicyRmCmd(g), newPolicyTestCmd(g), newPolicyEventsCmd(g))
	return cmd
}

func printPut(cmd *cobra.Command, g *globalFlags, res policy.PutResult, verb string) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), res)
	}
	out := cmd.OutOrStdout()
	r := res.Record
	if r.Deleted {
		fmt.Fprintf(out, "%s %s: version %d removes it; the %s hook is back to its built-in default\n", verb, r.Name, r.Version, r.Hook)
		return nil
	}
	fmt.Fprintf(out, "%s %s: %s policy version %d by %s (sha256 %s)\n", verb, r.Name, r.Hook, r.Version, r.Author, short(r.SHA256))
	for _, w := range res.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func newPolicyPutCmd(g *globalFlags) *cobra.Command {
	var hook, author, comment string
	var ifVersion int64
	c := &cobra.Command{
		Use:   "put NAME FILE",
		Short: "Validate a Lua policy against the live model and store it as NAME's next version",
		Long: `Store FILE (- for stdin) as the next version of policy NAME. The source is
compiled in the sandbox and run against the node's current model as its hook
would run; if that fails the policy is rejected with the Lua error and line and
nothing is stored. The hook is --hook, else the existing policy's, else inferred
from the functions the file defines (cost: rule; fitness: fitness; when+where:
balancer; tiering or heat: tiering; anything else: class).

fitness, tiering and balancer take one policy each: put a new version of the
one there, or rm it first.`,
		Example: `  terrace policy put counter examples/policies/counter.lua
  terrace policy put fit examples/policies/fitness_queue_aware.lua --hook fitness
  terrace policy put fit fit.lua --if-version 4      # fails if someone else changed it`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := readSource(args[1])
			if err != nil {
				return err
			}
			q := url.Values{"author": {author}, "if_version": {strconv.FormatInt(ifVersion, 10)}}
			if hook != "" {
				q.Set("hook", hook)
			}
			if comment != "" {
				q.Set("comment", comment)
			}
			var res policy.PutResult
			if err := g.client().callBody(http.MethodPut, "/v1/policies/"+url.PathEscape(args[0]), q, src, &res); err != nil {
				return err
			}
			return printPut(cmd, g, res, "stored")
		},
	}
	c.Flags().StringVar(&hook, "hook", "", "hook to fill: rule, fitness, tiering, balancer or class")
	c.Flags().StringVar(&author, "author", defaultAuthor(), "author recorded with the version")
	c.Flags().StringVar(&comment, "comment", "", "note recorded with the version")
	c.Flags().Int64Var(&ifVersion, "if-version", -1, "only store if the current version is this (0: must not exist)")
	return c
}

func newPolicyLsCmd(g *globalFlags) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "ls",
		Short: "List policies with the version each node runs",
		Long: `List the stored policies. VERSION is the newest version this node has swapped
in, RUNNING the version its decisions use (lower after a failure made it fall
back; 0 means the built-in default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if all {
				q.Set("all", "1")
			}
			var list server.PolicyList
			if err := g.client().getJSON("/v1/policies", q, &list); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintf(w, "NAME\tHOOK\tVERSION\tRUNNING\tAUTHOR\tCOMMITTED\tSTATE\n")
			for _, p := range list.Policies {
				state := "ok"
				switch {
				case p.Deleted:
					state = "removed"
				case p.Disabled:
					state = "disabled: " + truncateLine(p.LastError, 60)
				case p.Errors > 0:
					state = fmt.Sprintf("%d errors", p.Errors)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.Hook, p.Version, p.Running, p.Author,
					p.Time.Local().Format(time.DateTime), state)
			}
			fmt.Fprintf(w, "(as seen by node %s)\n", list.Node)
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&all, "all", false, "include removed policies")
	return c
}

func truncateLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func newPolicyShowCmd(g *globalFlags) *cobra.Command {
	var version int64
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a policy's source, record, this node's state and recent events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if version > 0 {
				q.Set("version", strconv.FormatInt(version, 10))
			}
			var sh server.PolicyShow
			if err := g.client().getJSON("/v1/policies/"+url.PathEscape(args[0]), q, &sh); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), sh)
			}
			out := cmd.OutOrStdout()
			r := sh.Record
			fmt.Fprintf(out, "-- %s: %s policy, version %d by %s at %s", r.Name, r.Hook, r.Version, r.Author, r.Time.Local().Format(time.DateTime))
			if r.Comment != "" {
				fmt.Fprintf(out, " (%s)", r.Comment)
			}
			fmt.Fprintln(out)
			if sh.Node != nil {
				st := sh.Node
				fmt.Fprintf(out, "-- on this node: version %d live since %s, running %d, %d calls, %d errors", st.Version,
					st.LoadedAt.Local().Format(time.DateTime), st.Running, st.Calls, st.Errors)
				if st.Disabled {
					fmt.Fprint(out, ", DISABLED")
				}
				fmt.Fprintln(out)
				if st.LastError != "" {
					fmt.Fprintf(out, "-- last error: %s\n", truncateLine(st.LastError, 200))
				}
			}
			for _, e := range sh.Events {
				fmt.Fprintf(out, "-- event %s %s on %s, version %d: %s\n", e.Time.Local().Format(time.DateTime), e.Kind, e.Node, e.Version, truncateLine(e.Message, 160))
			}
			if r.Deleted {
				fmt.Fprintln(out, "-- (removed; `terrace policy history` lists the versions with source)")
				return nil
			}
			fmt.Fprint(out, r.Source)
			if !strings.HasSuffix(r.Source, "\n") {
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	c.Flags().Int64Var(&version, "version", 0, "show this version (default: the current one)")
	return c
}

func newPolicyHistoryCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME",
		Short: "List every kept version of a policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hist []policy.Record
			if err := g.client().getJSON("/v1/policies/"+url.PathEscape(args[0])+"/history", nil, &hist); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), hist)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tHOOK\tAUTHOR\tCOMMITTED\tSHA256\tCOMMENT")
			for _, r := range hist {
				sum := short(r.SHA256)
				if r.Deleted {
					sum = "(removed)"
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Version, r.Hook, r.Author, r.Time.Local().Format(time.DateTime), sum, r.Comment)
			}
			return w.Flush()
		},
	}
}

func newPolicyRollbackCmd(g *globalFlags) *cobra.Command {
	var author string
	c := &cobra.Command{
		Use:   "rollback NAME VERSION",
		Short: "Make an old version current again (stored as a new version, validated again)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := strconv.ParseInt(args[1], 10, 64); err != nil {
				return fmt.Errorf("VERSION must be a number, got %q", args[1])
			}
			var res policy.PutResult
			q := url.Values{"version": {args[1]}, "author": {author}}
			if err := g.client().callBody(http.MethodPost, "/v1/policies/"+url.PathEscape(args[0])+"/rollback", q, nil, &res); err != nil {
				return err
			}
			return printPut(cmd, g, res, "rolled back")
		},
	}
	c.Flags().StringVar(&author, "author", defaultAuthor(), "author recorded with the version")
	return c
}

func newPolicyRmCmd(g *globalFlags) *cobra.Command {
	var author string
	var ifVersion int64
	c := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a policy: its hook reverts to the built-in default on every node (history is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res policy.PutResult
			q := url.Values{"author": {author}, "if_version": {strconv.FormatInt(ifVersion, 10)}}
			if err := g.client().callBody(http.MethodDelete, "/v1/policies/"+url.PathEscape(args[0]), q, nil, &res); err != nil {
				return err
			}
			return printPut(cmd, g, res, "removed")
		},
	}
	c.Flags().StringVar(&author, "author", defaultAuthor(), "author recorded with the removal")
	c.Flags().Int64Var(&ifVersion, "if-version", -1, "only remove if the current version is this")
	return c
}

func newPolicyTestCmd(g *globalFlags) *cobra.Command {
	var req policy.TestRequest
	var file, obj, hook string
	c := &cobra.Command{
		Use:   "test NAME",
		Short: "Show what a policy would decide now on the live model (nothing is applied)",
		Long: `Run policy NAME (or --file, before you put it) against the node's live model
and print what it would decide, with nothing applied:

  fitness   every device's fitness and where --samples placements of --vector land,
            next to the built-in policy's choices
  tiering   the thresholds, whether tiering runs, the moves it would plan and the
            coldest egroups by heat(), next to the built-in thresholds
  balancer  when(), the target shares, and which node would scan each partition
  rule      the cost of every egroup's replica set (or every device), worst first
  class     --method on --object (a dry run: the result and the object size after)

--what-if changes the model first (repeatable): DEVICE.FIELD=VALUE with used
(bytes or %), capacity, queue, streams, state (up|draining|failed);
NODE.FIELD=VALUE with up (true|false), conns; tier:TIER.used=VALUE.`,
		Example: `  terrace policy test fit --what-if n1/ssd0.queue=80 --vector ssd=1
  terrace policy test tiering --file tiering.lua --what-if tier:ssd.used=85%
  terrace policy test mantle --what-if n3.up=false
  terrace policy test counter --object mybucket/visits --method incr --arg 5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				src, err := readSource(file)
				if err != nil {
					return err
				}
				req.Source = string(src)
			}
			req.Hook = policy.Hook(hook)
			if obj != "" {
				b, k, err := splitBucketKey(obj)
				if err != nil {
					return err
				}
				req.Bucket, req.Key = b, k
			}
			body, _ := json.Marshal(req)
			var rep policy.TestReport
			if err := g.client().callBody(http.MethodPost, "/v1/policies/"+url.PathEscape(args[0])+"/test", nil, body, &rep); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			out := cmd.OutOrStdout()
			what := fmt.Sprintf("version %d", rep.Version)
			if rep.Version == 0 {
				what = "unsaved source " + file
			}
			fmt.Fprintf(out, "%s policy %s, %s", rep.Hook, rep.Name, what)
			if len(rep.WhatIf) > 0 {
				fmt.Fprintf(out, ", what if %s", strings.Join(rep.WhatIf, ", "))
			}
			fmt.Fprintf(out, " (nothing applied)\n%s", rep.Text)
			if rep.Log != "" {
				fmt.Fprintf(out, "print output:\n%s", rep.Log)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&file, "file", "", "test this source instead of the stored policy (- for stdin)")
	f.StringVar(&hook, "hook", "", "hook of --file (default: the stored policy's, or inferred)")
	f.Int64Var(&req.Version, "version", 0, "test an older stored version")
	f.StringArrayVar(&req.WhatIf, "what-if", nil, "change the model first, e.g. n1/ssd0.used=90% (repeatable)")
	f.StringVar(&req.Vector, "vector", "", "fitness: the vector to place (default any=2)")
	f.IntVar(&req.Samples, "samples", 1000, "fitness: placements to sample")
	f.Uint64Var(&req.Seed, "seed", 1, "random seed")
	f.StringVar(&obj, "object", "", "class: BUCKET/KEY to run on")
	f.StringVar(&req.Method, "method", "", "class: the method")
	f.StringVar(&req.Arg, "arg", "", "class: the argument")
	return c
}

func newPolicyEventsCmd(g *globalFlags) *cobra.Command {
	var n int
	c := &cobra.Command{
		Use:   "events [NAME]",
		Short: "Show the cluster-wide policy event log (versions disabled, failed loads)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"n": {strconv.Itoa(n)}}
			if len(args) == 1 {
				q.Set("name", args[0])
			}
			var evs []policy.Event
			if err := g.client().getJSON("/v1/policies/events", q, &evs); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), evs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "TIME\tNODE\tPOLICY\tVERSION\tEVENT\tMESSAGE")
			for _, e := range evs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", e.Time.Local().Format(time.DateTime), e.Node, e.Name, e.Version, e.Kind, truncateLine(e.Message, 100))
			}
			return w.Flush()
		},
	}
	c.Flags().IntVarP(&n, "n", "n", 50, "events to show")
	return c
}

func newObjectExecCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "exec BUCKET/KEY CLASS.METHOD [ARG]",
		Short: "Run an object-class method: an atomic read-modify-write of one object",
		Long: `Run METHOD of the class policy CLASS on the object, on a node holding one of
its replicas (the request is forwarded there). The method reads the object,
may write new contents, and returns a value, printed on stdout. The write is a
compare-and-swap on the object: if another writer changed it in between, the
method runs again on the new contents, so concurrent calls never lose updates.
A missing object starts empty.`,
		Example: `  terrace policy put counter examples/policies/counter.lua
  terrace object exec mybucket/visits counter.incr
  terrace object exec mybucket/audit append.record "user bob logged in"
  terrace object exec mybucket/report.pdf checksum.sha256`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, k, err := splitBucketKey(args[0])
			if err != nil {
				return err
			}
			if !strings.Contains(args[1], ".") {
				return fmt.Errorf("want CLASS.METHOD, got %q", args[1])
			}
			var arg []byte
			if len(args) == 3 {
				arg = []byte(args[2])
			}
			var res policy.ExecResult
			q := url.Values{"bucket": {b}, "key": {k}, "method": {args[1]}}
			if err := g.client().callBody(http.MethodPost, "/v1/object/exec", q, arg, &res); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			if res.Text != "" {
				fmt.Fprintln(cmd.OutOrStdout(), res.Text)
			}
			return nil
		},
	}
}
