package policy

import (
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// The views policies see: plain tables built fresh from a model snapshot
// for each session (the sandbox makes them read-only). Field names are
// the ones docs/policies.md documents; sizes are bytes, rates bytes per
// second, times Unix seconds, fractions in [0, 1].

// deviceView is a device as policies see it: a read-only record whose
// fields are converted only when read, because fitness reads a few
// fields of every device on every placement, on the write path.
func deviceView(d model.Device) sandbox.Record { return deviceRecord{d} }

// deviceRecord's fields are listed in docs/policies.md (fitness).
type deviceRecord struct{ d model.Device }

func (r deviceRecord) Get(f string) (any, bool) {
	d := &r.d
	switch f {
	case "id":
		return string(d.ID), true
	case "node":
		return string(d.Node), true
	case "rack":
		return d.Rack, true
	case "tier":
		return string(d.Tier), true
	case "state":
		return d.State.String(), true
	case "capacity":
		return d.CapacityBytes, true
	case "used":
		return d.UsedBytes, true
	case "free":
		return d.FreeBytes(), true
	case "usage":
		return d.Usage(), true
	case "queue":
		return d.QueueLen, true
	case "streams":
		return d.ActiveStreams, true
	case "read_bps":
		return d.ReadBps, true
	case "write_bps":
		return d.WriteBps, true
	}
	return nil, false
}

// tierStats sums capacity and use per tier over online devices.
type tierStat struct {
	capacity, used int64
	devices, queue int
}

func tierStats(s *model.Snapshot) map[model.Tier]*tierStat {
	out := map[model.Tier]*tierStat{}
	for _, d := range s.Devices {
		if d.State != model.DeviceUp || !s.NodeUp(d.Node) {
			continue
		}
		ts := out[d.Tier]
		if ts == nil {
			ts = &tierStat{}
			out[d.Tier] = ts
		}
		ts.capacity += d.CapacityBytes
		ts.used += d.UsedBytes
		ts.devices++
		ts.queue += d.QueueLen
	}
	return out
}

// tiersView is {tier = {capacity, used, free, usage, devices, queue}}.
func tiersView(s *model.Snapshot) map[string]any {
	out := map[string]any{}
	for t, ts := range tierStats(s) {
		usage := 1.0
		if ts.capacity > 0 {
			usage = float64(ts.used) / float64(ts.capacity)
		}
		out[string(t)] = map[string]any{"capacity": ts.capacity, "used": ts.used, "free": max(ts.capacity-ts.used, 0),
			"usage": usage, "devices": ts.devices, "queue": ts.queue}
	}
	return out
}

// nodeView aggregates a node's devices.
func nodeView(s *model.Snapshot, n model.Node) map[string]any {
	var used, capacity int64
	queue, devs := 0, 0
	for _, i := range s.NodeDevices(n.ID) {
		d := s.Devices[i]
		used += d.UsedBytes
		capacity += d.CapacityBytes
		queue += d.QueueLen
		devs++
	}
	usage := 0.0
	if capacity > 0 {
		usage = float64(used) / float64(capacity)
	}
	return map[string]any{"id": string(n.ID), "rack": n.Rack, "up": n.Up, "net_bps": n.NetBps, "conns": n.Conns,
		"devices": devs, "used": used, "capacity": capacity, "usage": usage, "queue": queue}
}

// clusterView is {now, nodes = [...], devices = [...], tiers = {...}}.
func clusterView(s *model.Snapshot) map[string]any {
	nodes := make([]any, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes = append(nodes, nodeView(s, n))
	}
	devs := make([]any, 0, len(s.Devices))
	for _, d := range s.Devices {
		devs = append(devs, deviceView(d))
	}
	return map[string]any{"now": unixSeconds(s.Now), "nodes": nodes, "devices": devs, "tiers": tiersView(s)}
}

// clusterSummary is clusterView without the per-device list (rules run
// per evaluation; the full list would dominate their cost).
func clusterSummary(s *model.Snapshot) map[string]any {
	return map[string]any{"now": unixSeconds(s.Now), "nodes": len(s.Nodes), "racks": s.Racks(), "tiers": tiersView(s)}
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// egroupView is one extent group as a tiering or rule policy sees it.
func egroupView(eg decide.Egroup) map[string]any {
	reps := make([]any, 0, len(eg.Replicas))
	tiers := make([]any, 0, len(eg.Replicas))
	for _, r := range eg.Replicas {
		reps = append(reps, map[string]any{"device": string(r.Device), "node": string(r.Node), "tier": string(r.Tier), "bad": r.Bad})
		tiers = append(tiers, string(r.Tier))
	}
	return map[string]any{
		"id": meta.FormatID(eg.ID), "size": eg.Size, "live_bytes": eg.LiveBytes, "open": eg.Open,
		"vector": eg.Vector.String(), "reads": eg.Reads, "atime": unixSeconds(eg.Atime), "mtime": unixSeconds(eg.Mtime),
		"replicas": reps, "tiers": tiers,
	}
}

// replicaView describes a candidate replica with its device's state.
func replicaView(s *model.Snapshot, r model.Replica) map[string]any {
	if d, ok := s.Device(r.Device); ok {
		return deviceReplicaView(d)
	}
	return map[string]any{"device": string(r.Device), "node": string(r.Node), "tier": string(r.Tier)}
}

// deviceReplicaView describes a replica on device d.
func deviceReplicaView(d model.Device) map[string]any {
	return map[string]any{"device": string(d.ID), "node": string(d.Node), "tier": string(d.Tier),
		"rack": d.Rack, "usage": d.Usage(), "queue": d.QueueLen, "state": d.State.String()}
}
