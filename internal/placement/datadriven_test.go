package placement

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestDataDriven runs the scenario files in testdata/. Commands:
//
//	cluster                      body: node/device lines (helpers_test.go); echoes the cluster
//	set <device> key=val...      changes one device (used, queue, streams, state, ...)
//	policy NAME key=val...       selects the policy; prints the normalised config or the error
//	place vector=V [client=N] [bytes=B] [seed=S] [existing=d1,d2] [exclude=d1,d2]
//	explain (same args)          prints the Explain table
//	many n=N vector=V [client=N] [bytes=B] [seed=S]
//	                             places N times and prints per-device counts plus
//	                             an invariant check
//	reconcile vector=V current=d1,d2 [seed=S] [client=N] [bytes=B]
//	order replicas=d1,d2 [seed=S] [from=N] [policy=P] [load=D:N,...]  read order (OrderReads; load: the reader's reads in flight)
//	pending record=d1,d2 bytes=B at=MS | adjust at=MS | reset
//
// Rewrite expectations with: go test ./internal/placement -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *model.Snapshot
		cfg := Config{}
		var pend Pending
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			var bare []string
			for _, a := range d.CmdArgs {
				if len(a.Vals) == 0 {
					bare = append(bare, a.Key)
				} else {
					args[a.Key] = strings.Join(a.Vals, ",")
				}
			}
			switch d.Cmd {
			case "cluster":
				var err error
				if s, err = parseCluster(d.Input); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return printCluster(s)
			case "set":
				if len(bare) != 1 {
					d.Fatalf(t, "set needs one device")
				}
				text := printCluster(s)
				var out []string
				for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
					f := strings.Fields(line)
					if f[0] == "device" && f[1] == bare[0] {
						kv := map[string]string{}
						for _, x := range f[2:] {
							k, v, _ := strings.Cut(x, "=")
							kv[k] = v
						}
						for k, v := range args {
							kv[k] = v
						}
						line = "device " + f[1]
						for _, k := range sortedKeys(kv) {
							line += " " + k + "=" + kv[k]
						}
					}
					out = append(out, line)
				}
				var err error
				if s, err = parseCluster(strings.Join(out, "\n")); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return "ok"
			case "policy":
				parts := append([]string(nil), bare...)
				for _, k := range sortedKeys(args) {
					parts = append(parts, k+"="+args[k])
				}
				c, err := ParseConfig(strings.Join(parts, " "))
				if err != nil {
					return "error: " + err.Error()
				}
				c.EnsureDefaults()
				if err := c.Validate(); err != nil {
					return "error: " + err.Error()
				}
				cfg = c
				return "policy: " + c.String()
			case "place", "explain", "many":
				req, rng := requestFromArgs(t, d, s, args)
				p, err := New(cfg)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				switch d.Cmd {
				case "place":
					rs, err := p.Place(s, req, rng)
					if err != nil {
						return "error: " + err.Error()
					}
					if err := checkPlacement(s, req, rs, cfg); err != nil {
						d.Fatalf(t, "invariant: %v", err)
					}
					return fmtReplicas(rs)
				case "explain":
					e, err := Explain(s, req, cfg, rng)
					if err != nil {
						return "error: " + err.Error()
					}
					return e.String()
				default:
					n, _ := strconv.Atoi(args["n"])
					counts := map[string]int{}
					tiers := map[string]int{}
					for range n {
						rs, err := p.Place(s, req, rng)
						if err != nil {
							return "error: " + err.Error()
						}
						if err := checkPlacement(s, req, rs, cfg); err != nil {
							d.Fatalf(t, "invariant: %v", err)
						}
						for _, r := range rs {
							counts[string(r.Device)]++
							tiers[string(r.Tier)]++
						}
					}
					var b strings.Builder
					for _, k := range sortedKeys(counts) {
						fmt.Fprintf(&b, "%s: %d\n", k, counts[k])
					}
					b.WriteString("tiers:")
					for _, k := range sortedKeys(tiers) {
						fmt.Fprintf(&b, " %s=%d", k, tiers[k])
					}
					b.WriteString("\ninvariants: ok\n")
					return b.String()
				}
			case "order":
				_, rng := requestFromArgs(t, d, s, args)
				snap := s
				if self, ok := args["from"]; ok {
					snap = s.WithSelf(model.NodeID(self))
				}
				policy := "octopus"
				if p, ok := args["policy"]; ok {
					policy = p
				}
				order, ok := ReadOrders[policy]
				if !ok {
					d.Fatalf(t, "unknown read order %q", policy)
				}
				var load ReadLoad
				if l, ok := args["load"]; ok {
					// load=DEV:N,... : this node's reads in flight.
					load = ReadLoad{}
					for _, kv := range strings.Split(l, ",") {
						dev, n, ok := strings.Cut(kv, ":")
						v, err := strconv.Atoi(n)
						if !ok || err != nil {
							d.Fatalf(t, "load %q: want DEV:N,...", l)
						}
						load[model.DeviceID(dev)] = v
					}
				}
				return fmtReplicas(order(snap, replicasFromIDs(s, args["replicas"]), load, rng))
			case "reconcile":
				req, rng := requestFromArgs(t, d, s, args)
				cur := replicasFromIDs(s, args["current"])
				p, err := New(cfg)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				add, remove, err := ReconcileRequest(s, cur, req, p, rng)
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("add: %s\nremove: %s", orDash(fmtReplicas(add)), orDash(fmtReplicas(remove)))
			case "pending":
				at := func() time.Time {
					ms, _ := strconv.Atoi(args["at"])
					return epoch.Add(time.Duration(ms) * time.Millisecond)
				}
				switch {
				case len(bare) == 1 && bare[0] == "reset":
					pend.Reset()
					return "ok"
				case len(bare) == 1 && bare[0] == "adjust":
					adj := pend.Adjust(s, at())
					return printCluster(adj)
				case args["record"] != "":
					b, err := parseSize(args["bytes"])
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					pend.Record(s, at(), replicasFromIDs(s, args["record"]), int64(b))
					return "ok"
				}
				d.Fatalf(t, "bad pending command")
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func replicasFromIDs(s *model.Snapshot, list string) []model.Replica {
	var out []model.Replica
	for _, id := range strings.Split(list, ",") {
		if id == "" {
			continue
		}
		r := model.Replica{Device: model.DeviceID(id)}
		if d, ok := s.Device(r.Device); ok {
			r.Node, r.Tier = d.Node, d.Tier
		} else {
			node, _, _ := strings.Cut(id, "/")
			r.Node = model.NodeID(node)
		}
		out = append(out, r)
	}
	return out
}

func requestFromArgs(t *testing.T, d *datadriven.TestData, s *model.Snapshot, args map[string]string) (Request, *rand.Rand) {
	req := Request{Client: model.NodeID(args["client"])}
	if v := args["vector"]; v != "" {
		// Parse without validation so the policy reports bad vectors.
		req.Vector = model.Vector{Counts: map[model.Tier]int{}}
		for _, part := range strings.Split(v, ",") {
			k, n, _ := strings.Cut(part, "=")
			c, err := strconv.Atoi(n)
			if err != nil {
				d.Fatalf(t, "bad vector %q", v)
			}
			req.Vector.Counts[model.Tier(k)] = c
		}
	}
	if b := args["bytes"]; b != "" {
		x, err := parseSize(b)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		req.Bytes = int64(x)
	}
	req.Existing = replicasFromIDs(s, args["existing"])
	for _, id := range strings.Split(args["exclude"], ",") {
		if id != "" {
			req.Exclude = append(req.Exclude, model.DeviceID(id))
		}
	}
	seed, _ := strconv.ParseUint(args["seed"], 10, 64)
	return req, rand.New(rand.NewPCG(seed, 0x7e77ace))
}

// checkPlacement verifies the invariants every policy guarantees for a
// successful placement: the vector's tier counts, distinct devices,
// distinct nodes when the cluster has enough, online devices, the 95 %
// rule, exclusions, and at most a third of the set in memory for
// unspecified replicas.
func checkPlacement(s *model.Snapshot, req Request, rs []model.Replica, cfg Config) error {
	if len(rs) != req.Vector.Total() {
		return fmt.Errorf("placed %d replicas, vector %s wants %d", len(rs), req.Vector, req.Vector.Total())
	}
	tiers := map[model.Tier]int{}
	devs := map[model.DeviceID]bool{}
	nodes := map[model.NodeID]bool{}
	for _, r := range req.Existing {
		devs[r.Device] = true
		nodes[r.Node] = true
	}
	strict := s.OnlineNodes() >= req.Vector.Total()+len(req.Existing)
	// With fewer nodes than replicas, no node takes more than its even
	// share, ceil(replicas/nodes), counting the existing ones there.
	perNode := map[model.NodeID]int{}
	for _, r := range req.Existing {
		perNode[r.Node]++
	}
	share := 0
	if n := s.OnlineNodes(); !strict && n > 0 {
		share = (req.Vector.Total() + len(req.Existing) + n - 1) / n
	}
	mem := 0
	for _, r := range append(append([]model.Replica(nil), req.Existing...), rs...) {
		if r.Tier == model.TierMem {
			mem++
		}
	}
	for _, r := range rs {
		d, ok := s.Device(r.Device)
		if !ok {
			return fmt.Errorf("unknown device %s", r.Device)
		}
		if d.Node != r.Node || d.Tier != r.Tier {
			return fmt.Errorf("replica %v does not match device %v", r, d)
		}
		if devs[r.Device] {
			return fmt.Errorf("device %s used twice", r.Device)
		}
		devs[r.Device] = true
		if strict && nodes[r.Node] {
			return fmt.Errorf("node %s used twice with %d online nodes", r.Node, s.OnlineNodes())
		}
		nodes[r.Node] = true
		if perNode[r.Node]++; share > 0 && perNode[r.Node] > share {
			return fmt.Errorf("node %s holds %d of %d replicas with %d online nodes (even share %d)", r.Node, perNode[r.Node], req.Vector.Total()+len(req.Existing), s.OnlineNodes(), share)
		}
		if d.State != model.DeviceUp || !s.NodeUp(d.Node) {
			return fmt.Errorf("device %s is not online", d.ID)
		}
		if float64(d.UsedBytes+req.Bytes) > MaxUsage*float64(d.CapacityBytes) {
			return fmt.Errorf("device %s would be over %.0f%% full", d.ID, MaxUsage*100)
		}
		for _, x := range req.Exclude {
			if x == d.ID {
				return fmt.Errorf("excluded device %s chosen", d.ID)
			}
		}
		tiers[r.Tier]++
	}
	// Explicit tiers are met exactly; the remaining replicas are the
	// unspecified ones, on any tier.
	extra := 0
	for t, n := range tiers {
		want := req.Vector.Count(t)
		if n < want {
			return fmt.Errorf("tier %s has %d replicas, vector wants %d", t, n, want)
		}
		extra += n - want
	}
	if extra != req.Vector.Count(model.TierAny) {
		return fmt.Errorf("%d replicas beyond explicit tiers, vector has any=%d", extra, req.Vector.Count(model.TierAny))
	}
	explicitMem := req.Vector.Count(model.TierMem)
	for _, r := range req.Existing {
		if r.Tier == model.TierMem {
			explicitMem++
		}
	}
	if limit := (req.Vector.Total() + len(req.Existing)) / 3; mem > explicitMem && mem > limit {
		return fmt.Errorf("%d memory replicas exceed a third of %d", mem, req.Vector.Total()+len(req.Existing))
	}
	if !cfg.AllowMem && tiers[model.TierMem] > req.Vector.Count(model.TierMem) {
		return fmt.Errorf("unspecified replica in memory with memory disabled")
	}
	return nil
}
