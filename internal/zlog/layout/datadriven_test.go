package layout

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenario files in testdata/. Commands:
//
//	layout                     body: a layout as String prints it; echoes it and its validation
//	find pos=P [w=W]           segment and stripe of P in the current layout
//	settle start=S w=W         body: one line per stripe, "0: live=0-4,6 live=0-4;fill=2 dead";
//	                           prints K and the settle plan
//	recover w=W k=K [trim=T]   body: "live: 1,1 1,0 ..." (per stripe, per replica of the
//	                           active segment) and "fresh: 0=n1/a,n2/b 1=..." ; prints the new layout
//	trim before=B              drops closed segments ending at or below B
//	fresh segment=ID stripe=S replica=R [device=D]   (D: the replica's own by default)
//	stale up=n1,n2             stale replicas repair would bring back
//	lost gone=n2               replicas of closed segments on gone nodes
//	rehome segment=ID stripe=S replica=R to=n4/ssd0
//	host log=L [exclude=N]     body: "n1 up 3" per node; prints the chosen host
//
// Rewrite expectations with: go test ./internal/zlog/layout -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var cur Layout
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			num := func(k string, def uint64) uint64 {
				v, ok := args[k]
				if !ok {
					return def
				}
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "%s=%q: %v", k, v, err)
				}
				return n
			}
			w := int(num("w", 2))
			switch d.Cmd {
			case "layout":
				l, err := Parse(d.Input)
				if err != nil {
					return "error: " + err.Error()
				}
				cur = l
				out := l.String()
				if err := l.Validate(w); err != nil {
					out += "invalid: " + err.Error() + "\n"
				}
				return out
			case "find":
				pos := num("pos", 0)
				i, err := cur.Find(pos)
				if err != nil {
					return "error: " + err.Error()
				}
				s := StripeOf(pos, w)
				p, _ := cur.Segments[i].Primary(s)
				return fmt.Sprintf("segment %d stripe %d local %d primary %s\n", cur.Segments[i].ID, s, Local(pos, w), p.Device)
			case "settle":
				sealed, err := parseSealed(d.Input)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				start := num("start", 0)
				k := Tail(start, w, sealed)
				plan, err := PlanSettle(start, k, w, sealed)
				if err != nil {
					return fmt.Sprintf("k %d\nerror: %v\n", k, err)
				}
				return fmt.Sprintf("k %d\n%s", k, printPlan(plan))
			case "recover":
				var live [][]bool
				var fresh [][]Replica
				for _, line := range strings.Split(d.Input, "\n") {
					line = strings.TrimSpace(line)
					switch {
					case strings.HasPrefix(line, "live:"):
						for _, f := range strings.Fields(strings.TrimPrefix(line, "live:")) {
							var st []bool
							for _, b := range strings.Split(f, ",") {
								st = append(st, b == "1")
							}
							live = append(live, st)
						}
					case strings.HasPrefix(line, "fresh:"):
						fl, err := Parse("epoch 0 next 1\nsegment 0 [0, open) epoch 0:" + strings.TrimPrefix(line, "fresh:"))
						if err != nil {
							d.Fatalf(t, "%v", err)
						}
						fresh = fl.Segments[0].Stripes
					}
				}
				nl, err := Recover(cur, w, num("k", 0), live, fresh, num("trim", 0))
				if err != nil {
					return "error: " + err.Error()
				}
				cur = nl
				return nl.String()
			case "trim":
				cur = Trim(cur, num("before", 0))
				return cur.String()
			case "fresh":
				seg, st, rep := num("segment", 0), num("stripe", 0), num("replica", 0)
				dev := args["device"]
				for _, g := range cur.Segments {
					if dev == "" && uint64(g.ID) == seg && st < uint64(len(g.Stripes)) && rep < uint64(len(g.Stripes[st])) {
						dev = g.Stripes[st][rep].Device // the replica's own device
					}
				}
				nl, err := MarkFresh(cur, uint32(seg), int(st), int(rep), dev)
				if err != nil {
					return "error: " + err.Error()
				}
				cur = nl
				return nl.String()
			case "stale":
				up := map[string]bool{}
				for _, n := range strings.Split(args["up"], ",") {
					up[n] = true
				}
				var b strings.Builder
				for _, s := range StaleReplicas(cur, func(n string) bool { return up[n] }) {
					fmt.Fprintf(&b, "segment %d stripe %d replica %d on %s\n", s.Segment, s.Stripe, s.Replica, s.Node)
				}
				if b.Len() == 0 {
					return "none\n"
				}
				return b.String()
			case "lost":
				gone := map[string]bool{}
				for _, n := range strings.Split(args["gone"], ",") {
					gone[n] = true
				}
				var b strings.Builder
				for _, s := range LostReplicas(cur, func(n string) bool { return gone[n] }) {
					fmt.Fprintf(&b, "segment %d stripe %d replica %d on %s\n", s.Segment, s.Stripe, s.Replica, s.Node)
				}
				if b.Len() == 0 {
					return "none\n"
				}
				return b.String()
			case "rehome":
				node, _, _ := strings.Cut(args["to"], "/")
				nl, err := Rehome(cur, uint32(num("segment", 0)), int(num("stripe", 0)), int(num("replica", 0)), Replica{Node: node, Device: args["to"]})
				if err != nil {
					return "error: " + err.Error()
				}
				cur = nl
				return nl.String()
			case "host":
				var nodes []NodeLoad
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) != 3 {
						d.Fatalf(t, "node line %q: want NAME up|down N", line)
					}
					n, _ := strconv.Atoi(f[2])
					nodes = append(nodes, NodeLoad{Node: f[0], Up: f[1] == "up", Sequencers: n})
				}
				h, ok := ChooseHost(args["log"], nodes, args["exclude"])
				if !ok {
					return "no host\n"
				}
				return h + "\n"
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// parseSealed reads "S: runs runs dead" lines: per replica its runs
// ("live=0-4,6", optionally ";fill=2" for the runs among them that hold
// fills), or "dead" when it did not answer the seal.
func parseSealed(text string) ([]SealedStripe, error) {
	var out []SealedStripe
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		idx, body, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(idx) != strconv.Itoa(len(out)) {
			return nil, fmt.Errorf("line %q: want \"%d: runs|dead ...\"", line, len(out))
		}
		var st SealedStripe
		for _, f := range strings.Fields(body) {
			if f == "dead" {
				st.Live = append(st.Live, false)
				st.Runs = append(st.Runs, nil)
				st.Fills = append(st.Fills, nil)
				continue
			}
			held, fills, _ := strings.Cut(strings.TrimPrefix(f, "live="), ";fill=")
			runs, err := ParseRuns(held)
			if err != nil {
				return nil, err
			}
			fr, err := ParseRuns(fills)
			if err != nil {
				return nil, err
			}
			st.Live = append(st.Live, true)
			st.Runs = append(st.Runs, runs)
			st.Fills = append(st.Fills, fr)
		}
		out = append(out, st)
	}
	return out, nil
}

func printPlan(plan []StripeSettle) string {
	var b strings.Builder
	for _, s := range plan {
		fmt.Fprintf(&b, "stripe %d: max %d fills %s", s.Stripe, s.MaxWritten, FormatRuns(s.Fills))
		sort.Slice(s.Copies, func(i, j int) bool { return s.Copies[i].Pos < s.Copies[j].Pos })
		for _, c := range s.Copies {
			fmt.Fprintf(&b, " copy %d from %d to %v", c.Pos, c.From, c.To)
		}
		if len(s.Stale) > 0 {
			fmt.Fprintf(&b, " stale %v", s.Stale)
		}
		b.WriteString("\n")
	}
	return b.String()
}
