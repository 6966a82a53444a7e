package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/node"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) { root.AddCommand(newLogCmd(g)) })
}

func newLogCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Shared logs (CORFU): append, read, tail and trim totally ordered logs",
		Long: `A shared log is a totally ordered sequence of entries that many clients append
to at once, the base of state machines, event stores and replicated databases.
Terrace runs CORFU: a sequencer hosted by one node hands out positions from an
in-memory counter, entries go straight to write-once stripe replicas (striped
over the nodes, replicated by the log's vector), and epochs make the
sequencer's failure safe: a new host seals the replicas and resumes within
seconds. docs/log.md has the protocol, the guarantees and the Go client.

These commands talk to any node's admin API (--endpoint); every node serves
every log.`,
		Example: `  terrace log create orders --vector any=2
  terrace log append orders '{"id": 1}'          # prints the position
  echo hello | terrace log append orders -
  terrace log read orders 0 > entry.bin
  terrace log tail orders
  terrace log status orders
  terrace log trim orders 1000 --prefix          # reclaim everything below 1000`,
	}
	cmd.AddCommand(newLogCreateCmd(g), newLogAppendCmd(g), newLogReadCmd(g), newLogTailCmd(g), newLogTrimCmd(g),
		newLogFillCmd(g), newLogLsCmd(g), newLogStatusCmd(g), newLogRmCmd(g))
	return cmd
}

func logPath(name string, rest ...string) string {
	p := "/v1/logs/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func newLogCreateCmd(g *globalFlags) *cobra.Command {
	var vector string
	var stripes, leasePositions int
	var leaseHold time.Duration
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a log",
		Long: `Create a log. Its positions are striped over --stripes stripe replica sets,
each placed like an extent group by the node's placement policy with the
log's --vector (default any=2: two replicas on distinct nodes). The first
node the balancer picks hosts the sequencer.

Leased batching (--lease-positions, --lease-hold) lets a client take a block
of positions for up to the hold time instead of asking the sequencer for each:
more positions per second for a longer wait before readers see a complete
prefix (unused positions are filled when the lease ends).`,
		Example: `  terrace log create orders
  terrace log create events --vector ssd=2 --stripes 16 --lease-positions 1000 --lease-hold 10ms`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := layout.CheckName(args[0]); err != nil {
				return err
			}
			q := url.Values{}
			if vector != "" {
				q.Set("vector", vector)
			}
			if stripes > 0 {
				q.Set("stripes", strconv.Itoa(stripes))
			}
			if leasePositions > 0 {
				q.Set("lease-positions", strconv.Itoa(leasePositions))
			}
			if leaseHold > 0 {
				q.Set("lease-hold", leaseHold.String())
			}
			var st node.Status
			if err := g.client().callJSON("PUT", logPath(args[0]), q, &st); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), st)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created log %s (id %d, vector %s, %d stripes)\n", st.Name, st.ID, st.Vector, st.Stripes)
			return nil
		},
	}
	c.Flags().StringVar(&vector, "vector", "", "replication vector of the log's stripes (default any=2)")
	c.Flags().IntVar(&stripes, "stripes", 0, fmt.Sprintf("stripes the positions are spread over (default %d)", node.DefaultStripes))
	c.Flags().IntVar(&leasePositions, "lease-positions", 0, "most positions one client lease may hold (0: leases off)")
	c.Flags().DurationVar(&leaseHold, "lease-hold", 0, "longest a lease may be held, e.g. 10ms")
	return c
}

func newLogAppendCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "append NAME [DATA|-]",
		Short: "Append an entry; prints its position (alone) on stdout",
		Long: `Append DATA (or standard input with '-' or no DATA) as one entry, at most
1 MiB. The position is printed only once the entry is durable on every
replica of its stripe.`,
		Example: `  terrace log append orders 'hello'
  pos=$(terrace log append orders - < event.json)`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			if len(args) == 2 && args[1] != "-" {
				data = []byte(args[1])
			} else {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), layout.MaxEntryBytes+1))
				if err != nil {
					return err
				}
				if len(b) > layout.MaxEntryBytes {
					return fmt.Errorf("entry larger than %d bytes", layout.MaxEntryBytes)
				}
				data = b
			}
			resp, err := g.client().do("POST", logPath(args[0], "append"), nil, bytes.NewReader(data), int64(len(data)))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var out struct {
				Position uint64 `json:"position"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out.Position)
			return nil
		},
	}
}

func newLogReadCmd(g *globalFlags) *cobra.Command {
	var fill bool
	c := &cobra.Command{
		Use:   "read NAME POS",
		Short: "Write the entry at POS to stdout (its bytes and nothing else)",
		Long: `Write the entry's bytes to stdout. A position not written yet, filled (a hole
skipped by readers) or trimmed is an error naming which. --fill fills the
position first if it is a hole (use it only for a position below the tail whose
writer is gone).`,
		Example: `  terrace log read orders 42 > entry.bin
  terrace log read orders 42 --json     # {"position": 42, "kind": "data", "data": "<base64>"}`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := strconv.ParseUint(args[1], 10, 64); err != nil {
				return fmt.Errorf("position %q: want a non-negative integer", args[1])
			}
			if fill {
				// Filling is a POST of its own; it keeps an existing entry.
				var out map[string]any
				if err := g.client().callJSON("POST", logPath(args[0], "fill"), url.Values{"pos": {args[1]}}, &out); err != nil {
					return err
				}
			}
			resp, err := g.client().do("GET", logPath(args[0], "entries", args[1]), nil, nil, -1)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if g.json {
				pos, _ := strconv.ParseUint(args[1], 10, 64)
				return printJSON(cmd.OutOrStdout(), struct {
					Position uint64 `json:"position"`
					Kind     string `json:"kind"`
					Data     []byte `json:"data"`
				}{pos, "data", data})
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	c.Flags().BoolVar(&fill, "fill", false, "fill the position if it is a hole")
	return c
}

func newLogTailCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "tail NAME",
		Short: "Print the log's tail: the next position the sequencer hands out",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Tail  uint64 `json:"tail"`
				Epoch uint64 `json:"epoch"`
			}
			if err := g.client().getJSON(logPath(args[0], "tail"), nil, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out.Tail)
			return nil
		},
	}
}

func newLogTrimCmd(g *globalFlags) *cobra.Command {
	var prefix bool
	c := &cobra.Command{
		Use:   "trim NAME POS",
		Short: "Trim position POS (or, with --prefix, every position below POS)",
		Long: `Trim marks positions whose entries the application no longer needs; reads
answer 'trimmed' and the space is reclaimed (a node removes a journal file once
nothing in it is live). --prefix trims every position below POS at once: the
cheap way to drop a log's history after a checkpoint.`,
		Example: `  terrace log trim orders 17
  terrace log trim orders 100000 --prefix`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := strconv.ParseUint(args[1], 10, 64); err != nil {
				return fmt.Errorf("position %q: want a non-negative integer", args[1])
			}
			q := url.Values{"pos": {args[1]}}
			if prefix {
				q = url.Values{"before": {args[1]}}
			}
			var out map[string]uint64
			if err := g.client().callJSON("POST", logPath(args[0], "trim"), q, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			if prefix {
				fmt.Fprintf(cmd.OutOrStdout(), "trimmed every position of %s below %s\n", args[0], args[1])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "trimmed position %s of %s\n", args[1], args[0])
			}
			return nil
		},
	}
	c.Flags().BoolVar(&prefix, "prefix", false, "trim every position below POS")
	return c
}

func newLogFillCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "fill NAME POS",
		Short: "Fill a hole at POS so readers skip it (an existing entry is kept)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := strconv.ParseUint(args[1], 10, 64); err != nil {
				return fmt.Errorf("position %q: want a non-negative integer", args[1])
			}
			var out map[string]any
			if err := g.client().callJSON("POST", logPath(args[0], "fill"), url.Values{"pos": {args[1]}}, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "position %s holds: %v\n", args[1], out["holds"])
			return nil
		},
	}
}

func newLogLsCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List logs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var logs []node.Status
			if err := g.client().getJSON("/v1/logs", nil, &logs); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), logs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVECTOR\tSTRIPES\tEPOCH\tSEQUENCER\tSEGMENTS\tTRIMMED BELOW")
			for _, l := range logs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\n", l.Name, l.Vector, l.Stripes, l.Epoch, orDash(l.Sequencer), len(l.Segments), l.TrimBefore)
			}
			return w.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newLogStatusCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show a log's epoch, tail, sequencer host and stripes",
		Long: `Show a log's epoch (bumped by every recovery), tail (next position), the node
hosting its sequencer, and its segments: each is a range of positions written
in one epoch, striped over replica sets (the first replica of a stripe is its
primary; 'stale' replicas missed a recovery and are being repaired).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st node.Status
			if err := g.client().getJSON(logPath(args[0]), nil, &st); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), st)
			}
			out := cmd.OutOrStdout()
			tail := "-"
			if st.Tail != nil {
				tail = strconv.FormatUint(*st.Tail, 10)
			}
			fmt.Fprintf(out, "log:        %s (id %d)\nvector:     %s\nstripes:    %d\nepoch:      %d\ntail:       %s\nsequencer:  %s\n",
				st.Name, st.ID, st.Vector, st.Stripes, st.Epoch, tail, orDash(st.Sequencer))
			if st.TrimBefore > 0 {
				fmt.Fprintf(out, "trimmed:    below %d\n", st.TrimBefore)
			}
			if st.MaxLeasePositions > 1 {
				fmt.Fprintf(out, "leases:     up to %d positions for %s\n", st.MaxLeasePositions, st.MaxLeaseHold)
			}
			for _, seg := range st.Segments {
				end := "open"
				if seg.End != 0 {
					end = strconv.FormatUint(seg.End, 10)
				}
				fmt.Fprintf(out, "\nsegment %d: positions [%d, %s), epoch %d\n", seg.ID, seg.Start, end, seg.Epoch)
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "  STRIPE\tREPLICAS (primary first)")
				for i, reps := range seg.Stripes {
					var rs []string
					for _, r := range reps {
						rs = append(rs, r.String())
					}
					fmt.Fprintf(w, "  %d\t%s\n", i, strings.Join(rs, ", "))
				}
				w.Flush()
			}
			return nil
		},
	}
}

func newLogRmCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a log (nodes reclaim its space)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out map[string]string
			if err := g.client().callJSON("DELETE", logPath(args[0]), nil, &out); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted log %s\n", args[0])
			return nil
		},
	}
}
