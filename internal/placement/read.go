package placement

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/terrace-storage/terrace/internal/model"
)

// OrderReads orders replicas for a read (OctopusFS §4.2, Eq. 12): by
// min(NetThru/NrConn(node), RThru/NrConn(device)) descending, ties broken by
// the device's media read throughput, then randomly. A replica on the
// reading node (s.Self) crosses no network, so only its device's share
// counts; a remote replica's data also crosses the reading node's network,
// so its share of that bounds it too. Only a remote replica on a faster
// tier than every local one can outrank a local replica (a local hdd loses
// to a remote ssd when the ssd's share is higher): between devices of one
// tier, probe noise and heartbeat-old load counts decide, not anything a
// network hop and a second node's CPU would buy back. Measured on a 3-node
// loopback cluster (docs/perf.md): 4 MiB GETs at 700–1,000 MB/s and 6–10
// ms of CPU each when same-tier remote replicas could win, 1,766 MB/s and
// 3.0 ms with local first within a tier. Replicas on failed devices or down nodes go last,
// in case the snapshot is stale. The input slice is not modified.
//
// load is the reading node's own reads in flight per device (nil: none).
// The snapshot's counts are a heartbeat old; what this node has in flight
// it knows now, so a device's NrConn is the larger of the two. Without
// it, every read started between two heartbeats ranks a busy fast device
// as idle, and a node's concurrent readers all pile onto it while slower
// replicas sit unused.
func OrderReads(s *model.Snapshot, replicas []model.Replica, load ReadLoad, rng *rand.Rand) []model.Replica {
	type scored struct {
		r      model.Replica
		ok     bool
		score  float64
		media  float64
		tiebrk float64
	}
	selfNet := math.Inf(1) // the reading node's share of its own network
	if n, ok := s.Node(s.Self); ok && s.Self != "" && n.NetBps > 0 {
		selfNet = n.NetBps / float64(n.Conns+1)
	}
	sc := make([]scored, len(replicas))
	for i, r := range replicas {
		x := scored{r: r, tiebrk: rng.Float64()}
		d, found := s.Device(r.Device)
		x.ok = found && d.State != model.DeviceFailed && s.NodeUp(r.Node)
		if found {
			x.media = d.ReadBps
			dev := d.ReadBps / float64(max(d.ActiveStreams, load[r.Device])+1)
			if s.Self != "" && r.Node == s.Self {
				x.score = dev
			} else {
				net := selfNet
				if n, ok := s.Node(r.Node); ok && n.NetBps > 0 {
					net = math.Min(net, n.NetBps/float64(n.Conns+1))
				}
				x.score = math.Min(net, dev)
			}
		}
		sc[i] = x
	}
	// A remote replica on a tier no faster than a readable local one's
	// goes after every local replica: same-tier devices differ by noise
	// in their probes and by heartbeat-old load counts, not by anything a
	// network hop and a second node's CPU would buy back.
	localRank, localMin := math.MaxInt, math.Inf(1)
	for k, x := range sc {
		if x.ok && s.Self != "" && x.r.Node == s.Self {
			localRank = min(localRank, x.r.Tier.Rank())
			localMin = math.Min(localMin, sc[k].score)
		}
	}
	for k := range sc {
		x := &sc[k]
		if x.ok && localRank != math.MaxInt && x.r.Node != s.Self && x.r.Tier.Rank() >= localRank {
			x.score = math.Min(x.score, math.Nextafter(localMin, 0))
		}
	}
	sort.SliceStable(sc, func(i, j int) bool {
		a, b := sc[i], sc[j]
		if a.ok != b.ok {
			return a.ok
		}
		if a.score != b.score {
			return a.score > b.score
		}
		if a.media != b.media {
			return a.media > b.media
		}
		return a.tiebrk < b.tiebrk
	})
	out := make([]model.Replica, len(sc))
	for i, x := range sc {
		out[i] = x.r
	}
	return out
}

// OrderReadsLocal is locality-only ordering, the baseline OctopusFS
// compares against: replicas on the reading node first, then the others
// in random order; failed devices and down nodes last.
// load is ignored: locality does not look at load.
func OrderReadsLocal(s *model.Snapshot, replicas []model.Replica, _ ReadLoad, rng *rand.Rand) []model.Replica {
	type scored struct {
		r      model.Replica
		rank   int
		tiebrk float64
	}
	sc := make([]scored, len(replicas))
	for i, r := range replicas {
		x := scored{r: r, rank: 1, tiebrk: rng.Float64()}
		d, found := s.Device(r.Device)
		switch {
		case !found || d.State == model.DeviceFailed || !s.NodeUp(r.Node):
			x.rank = 2
		case s.Self != "" && r.Node == s.Self:
			x.rank = 0
		}
		sc[i] = x
	}
	sort.SliceStable(sc, func(i, j int) bool {
		if sc[i].rank != sc[j].rank {
			return sc[i].rank < sc[j].rank
		}
		return sc[i].tiebrk < sc[j].tiebrk
	})
	out := make([]model.Replica, len(sc))
	for i, x := range sc {
		out[i] = x.r
	}
	return out
}

// ReadLoad is a reading node's reads in flight per device.
type ReadLoad map[model.DeviceID]int

// ReadOrder orders replicas for a read (OrderReads, OrderReadsLocal).
type ReadOrder func(*model.Snapshot, []model.Replica, ReadLoad, *rand.Rand) []model.Replica

// ReadOrders names the read-ordering policies.
var ReadOrders = map[string]ReadOrder{
	"octopus":  OrderReads,
	"locality": OrderReadsLocal,
}
