package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TestDataDriven runs the hook scenarios in testdata/. Commands:
//
//	cluster                   body: "node ID [rack=R] [down] [conns=N]" and
//	                          "device ID tier=T cap=SIZE [used=SIZE] [queue=N]" lines
//	policy hook=H             body: Lua source; validates and puts it (prints the error)
//	weights                   fitness of every device
//	place vector=V [n=N] [seed=S]  N placements through the fitness hook; counts per device
//	assign self=ID [records=N] [owner=ID]  balancer assignment of the 32 scan partitions
//	tune                      tiering thresholds and run from the tiering hook
//	cost replicas=d1,d2       rule costs of a replica set, per rule
//
// Rewrite expectations with: go test ./internal/policy -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		m := newManager(t, newKV(t), "n1")
		s := model.NewSnapshot(testNow, nil, nil)
		env := func() Env { return Env{Snapshot: func() *model.Snapshot { return s }, Self: "n1"} }
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(k, def string) string {
				for _, a := range d.CmdArgs {
					if a.Key == k && len(a.Vals) > 0 {
						return strings.Join(a.Vals, ",")
					}
				}
				return def
			}
			switch d.Cmd {
			case "cluster":
				var err error
				if s, err = parseTestCluster(d.Input); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return fmt.Sprintf("%d nodes, %d devices", len(s.Nodes), len(s.Devices))
			case "policy":
				hook := Hook(arg("hook", ""))
				res, err := m.Put(context.Background(), PutRequest{Name: "p-" + string(hook), Hook: hook, Source: d.Input, IfVersion: -1}, env())
				if err != nil {
					return "rejected: " + err.Error()
				}
				out := fmt.Sprintf("%s version %d", res.Record.Hook, res.Record.Version)
				for _, w := range res.Warnings {
					out += "\nwarning: " + w
				}
				return out
			case "weights":
				v := m.single(HookFitness).cur.Load()
				ws, err := fitnessWeights(context.Background(), v, s, 1)
				if err != nil {
					return "error: " + err.Error()
				}
				var b strings.Builder
				for i, dev := range s.Devices {
					fmt.Fprintf(&b, "%s %.4g\n", dev.ID, ws[i])
				}
				return b.String()
			case "place":
				n, _ := strconv.Atoi(arg("n", "100"))
				seed, _ := strconv.ParseUint(arg("seed", "1"), 10, 64)
				def, _ := placement.New(placement.Config{Name: "uniform"})
				pol := m.Placement(def)
				rng := rand.New(rand.NewPCG(seed, 0))
				counts := map[model.DeviceID]int{}
				failed := 0
				for i := 0; i < n; i++ {
					rs, err := pol.Place(s, placement.Request{Vector: model.MustParseVector(arg("vector", "any=1")), Bytes: 1 << 20}, rng)
					if err != nil {
						failed++
						continue
					}
					for _, r := range rs {
						counts[r.Device]++
					}
				}
				var b strings.Builder
				fmt.Fprintf(&b, "policy %s\n", pol.Name())
				for _, dev := range s.Devices {
					fmt.Fprintf(&b, "%s %d\n", dev.ID, counts[dev.ID])
				}
				if failed > 0 {
					fmt.Fprintf(&b, "failed %d\n", failed)
				}
				return b.String()
			case "assign":
				records, _ := strconv.Atoi(arg("records", "0"))
				parts := samplePartitions()
				for i := range parts {
					parts[i].Records = records + i
					parts[i].Node = model.NodeID(arg("owner", ""))
				}
				a := m.Balancer().AssignPartitions(s, model.NodeID(arg("self", "n1")), parts)
				if a == nil {
					return "no assignment: the master scans everything"
				}
				return describeAssignment(a, parts)
			case "tune":
				var base decide.TierOptions
				base.EnsureDefaults()
				o, run := m.Tiering().TuneTiering(s, nil, base)
				return fmt.Sprintf("run=%v down_above=%g dest_below=%g reduce=%g promote_reads=%d", run, o.DownAbove, o.DestBelow, o.Reduce, o.PromoteReads)
			case "cost":
				var reps []model.Replica
				for _, id := range strings.Split(arg("replicas", ""), ",") {
					dev, ok := s.Device(model.DeviceID(id))
					if !ok {
						d.Fatalf(t, "no device %s", id)
					}
					reps = append(reps, model.Replica{Device: dev.ID, Node: dev.Node, Tier: dev.Tier})
				}
				var b strings.Builder
				for _, r := range m.Rules() {
					c, err := r.Cost(RuleView{Snapshot: s, Replicas: reps})
					if err != nil {
						fmt.Fprintf(&b, "%s error: %v\n", r.Name(), err)
						continue
					}
					fmt.Fprintf(&b, "%s %s\n", r.Name(), costText(c))
				}
				return b.String()
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// describeAssignment prints partitions per node and the egroup partitions.
func describeAssignment(a map[string]model.NodeID, parts []curator.PartitionLoad) string {
	per := map[model.NodeID][]string{}
	load := map[model.NodeID]int{}
	for _, p := range parts {
		n := a[p.Name]
		per[n] = append(per[n], p.Name)
		load[n] += max(p.Records, 1)
	}
	var ids []string
	for n := range per {
		ids = append(ids, string(n))
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s: %d partitions, %d records\n", id, len(per[model.NodeID(id)]), load[model.NodeID(id)])
	}
	return b.String()
}

// parseTestCluster reads the testdata cluster syntax.
func parseTestCluster(text string) (*model.Snapshot, error) {
	var nodes []model.Node
	var devs []model.Device
	racks := map[model.NodeID]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		kv := map[string]string{}
		flags := map[string]bool{}
		for _, x := range f[2:] {
			if k, v, ok := strings.Cut(x, "="); ok {
				kv[k] = v
			} else {
				flags[x] = true
			}
		}
		switch f[0] {
		case "node":
			conns, _ := strconv.Atoi(kv["conns"])
			nodes = append(nodes, model.Node{ID: model.NodeID(f[1]), Rack: kv["rack"], Up: !flags["down"], Conns: conns})
			racks[model.NodeID(f[1])] = kv["rack"]
		case "device":
			id := model.DeviceID(f[1])
			node := model.NodeID(strings.SplitN(f[1], "/", 2)[0])
			capacity, err := parseBytes(kv["cap"])
			if err != nil {
				return nil, err
			}
			used := int64(0)
			if kv["used"] != "" {
				if used, err = parseBytes(kv["used"]); err != nil {
					return nil, err
				}
			}
			q, _ := strconv.Atoi(kv["queue"])
			devs = append(devs, model.Device{ID: id, Node: node, Rack: racks[node], Tier: model.Tier(kv["tier"]),
				CapacityBytes: capacity, UsedBytes: used, QueueLen: q})
		default:
			return nil, fmt.Errorf("bad line %q", line)
		}
	}
	return model.NewSnapshot(testNow, nodes, devs), nil
}
