package placement

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// The cluster text syntax, shared by the datadriven tests and the printed
// state (printCluster writes what parseCluster reads):
//
//	node n1 rack=r1 [down] [net=10G] [conns=0]
//	device n1/ssd0 tier=ssd cap=100G [used=40G] [queue=3] [streams=1] [wbps=400M] [rbps=500M] [state=up]
//
// Device lines may omit their node line; the node is then up, on the
// device line's rack= (default "").

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parseSize(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "T"):
		mult, s = 1e12, strings.TrimSuffix(s, "T")
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		mult, s = 1e3, strings.TrimSuffix(s, "K")
	}
	x, err := strconv.ParseFloat(s, 64)
	return x * mult, err
}

func fmtSize(x float64) string {
	for _, u := range []struct {
		v float64
		s string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if x >= u.v && x/u.v == float64(int64(x/u.v)) {
			return fmt.Sprintf("%d%s", int64(x/u.v), u.s)
		}
	}
	if x == float64(int64(x)) {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func parseCluster(text string) (*model.Snapshot, error) {
	var nodes []model.Node
	var devs []model.Device
	seen := map[model.NodeID]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
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
		num := func(k string) (float64, error) {
			if v, ok := kv[k]; ok {
				return parseSize(v)
			}
			return 0, nil
		}
		switch f[0] {
		case "node":
			n := model.Node{ID: model.NodeID(f[1]), Rack: kv["rack"], Up: !flags["down"]}
			var err error
			if n.NetBps, err = num("net"); err != nil {
				return nil, err
			}
			c, err := num("conns")
			if err != nil {
				return nil, err
			}
			n.Conns = int(c)
			nodes = append(nodes, n)
			seen[n.ID] = true
		case "device":
			id := f[1]
			node, _, ok := strings.Cut(id, "/")
			if !ok {
				return nil, fmt.Errorf("device %q is not node/name", id)
			}
			d := model.Device{ID: model.DeviceID(id), Node: model.NodeID(node), Rack: kv["rack"], Tier: model.Tier(kv["tier"])}
			for _, n := range nodes {
				if n.ID == d.Node && d.Rack == "" {
					d.Rack = n.Rack
				}
			}
			vals := map[string]*float64{}
			var capb, used, q, st, w, r float64
			vals["cap"], vals["used"], vals["queue"], vals["streams"], vals["wbps"], vals["rbps"] = &capb, &used, &q, &st, &w, &r
			for k, p := range vals {
				x, err := num(k)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %v", id, k, err)
				}
				*p = x
			}
			d.CapacityBytes, d.UsedBytes, d.QueueLen, d.ActiveStreams, d.WriteBps, d.ReadBps = int64(capb), int64(used), int(q), int(st), w, r
			switch kv["state"] {
			case "", "up":
			case "draining":
				d.State = model.DeviceDraining
			case "failed":
				d.State = model.DeviceFailed
			default:
				return nil, fmt.Errorf("%s: bad state %q", id, kv["state"])
			}
			devs = append(devs, d)
		default:
			return nil, fmt.Errorf("unknown line kind %q", f[0])
		}
	}
	// Nodes only named by devices are up.
	for _, d := range devs {
		if !seen[d.Node] && len(nodes) > 0 {
			nodes = append(nodes, model.Node{ID: d.Node, Rack: d.Rack, Up: true})
			seen[d.Node] = true
		}
	}
	return model.NewSnapshot(epoch, nodes, devs), nil
}

func printCluster(s *model.Snapshot) string {
	var b strings.Builder
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "node %s rack=%s", n.ID, n.Rack)
		if !n.Up {
			b.WriteString(" down")
		}
		if n.NetBps > 0 {
			fmt.Fprintf(&b, " net=%s", fmtSize(n.NetBps))
		}
		if n.Conns > 0 {
			fmt.Fprintf(&b, " conns=%d", n.Conns)
		}
		b.WriteByte('\n')
	}
	for _, d := range s.Devices {
		fmt.Fprintf(&b, "device %s tier=%s cap=%s used=%s", d.ID, d.Tier, fmtSize(float64(d.CapacityBytes)), fmtSize(float64(d.UsedBytes)))
		if d.QueueLen > 0 {
			fmt.Fprintf(&b, " queue=%d", d.QueueLen)
		}
		if d.ActiveStreams > 0 {
			fmt.Fprintf(&b, " streams=%d", d.ActiveStreams)
		}
		if d.WriteBps > 0 {
			fmt.Fprintf(&b, " wbps=%s", fmtSize(d.WriteBps))
		}
		if d.ReadBps > 0 {
			fmt.Fprintf(&b, " rbps=%s", fmtSize(d.ReadBps))
		}
		if d.State != model.DeviceUp {
			fmt.Fprintf(&b, " state=%s", d.State)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// genCluster builds nodes x racks with the given devices per node, used
// by benchmarks and randomized tests. Usage and load are randomized from
// rng when it is non-nil.
func genCluster(nodes, racks int, perNode []model.Device, rng *rand.Rand) *model.Snapshot {
	var ns []model.Node
	var ds []model.Device
	for n := range nodes {
		id := model.NodeID(fmt.Sprintf("n%03d", n))
		rack := fmt.Sprintf("r%d", n%racks)
		ns = append(ns, model.Node{ID: id, Rack: rack, Up: true, NetBps: 1.25e9})
		for k, tmpl := range perNode {
			d := tmpl
			d.ID = model.DeviceID(fmt.Sprintf("%s/%s%d", id, tmpl.Tier, k))
			d.Node, d.Rack = id, rack
			if rng != nil {
				d.UsedBytes = int64(rng.Float64() * 0.9 * float64(d.CapacityBytes))
				d.QueueLen = rng.IntN(64)
				d.ActiveStreams = rng.IntN(8)
			}
			ds = append(ds, d)
		}
	}
	return model.NewSnapshot(epoch, ns, ds)
}

// stdNode is an OctopusFS-like worker: memory, one SSD, three HDDs
// (capacities and throughputs from OctopusFS §7, Table 2).
func stdNode() []model.Device {
	return []model.Device{
		{Tier: model.TierMem, CapacityBytes: 4e9, WriteBps: 1897.4e6, ReadBps: 3224.8e6},
		{Tier: model.TierSSD, CapacityBytes: 64e9, WriteBps: 340.6e6, ReadBps: 419.5e6},
		{Tier: model.TierHDD, CapacityBytes: 400e9, WriteBps: 126.3e6, ReadBps: 177.1e6},
		{Tier: model.TierHDD, CapacityBytes: 400e9, WriteBps: 126.3e6, ReadBps: 177.1e6},
		{Tier: model.TierHDD, CapacityBytes: 400e9, WriteBps: 126.3e6, ReadBps: 177.1e6},
	}
}

func fmtReplicas(rs []model.Replica) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = string(r.Device)
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
