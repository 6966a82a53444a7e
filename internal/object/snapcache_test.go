package object

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// growingTopology is a cluster view that gains nodes: each call to add
// makes Snapshot report one more node and bumps the generation.
type growingTopology struct {
	nodes []model.Node
	gen   uint64
	calls int
}

func (g *growingTopology) add(id model.NodeID) {
	g.nodes = append(g.nodes, model.Node{ID: id, Up: true})
	g.gen++
}

func (g *growingTopology) Snapshot() *model.Snapshot {
	g.calls++
	return model.NewSnapshot(time.Time{}, append([]model.Node(nil), g.nodes...), nil)
}

func (g *growingTopology) Generation() uint64 { return g.gen }

// TestSnapshotCacheFollowsMembership: a node that joins is in the next
// placement snapshot at once, not after the refresh interval (writes
// placed on the older view put two replicas of an egroup on one node);
// without a membership change the cache holds for its interval.
func TestSnapshotCacheFollowsMembership(t *testing.T) {
	topo := &growingTopology{}
	topo.add("n1")
	now := time.Unix(1000, 0)
	c := &snapshotCache{topo: topo, interval: time.Hour, now: func() time.Time { return now }}
	if got := len(c.get().Nodes); got != 1 {
		t.Fatalf("%d nodes", got)
	}
	for range 5 {
		c.get()
	}
	if topo.calls != 1 {
		t.Fatalf("%d topology reads without a change: the cache does not cache", topo.calls)
	}
	topo.add("n2")
	topo.add("n3")
	if got := len(c.get().Nodes); got != 3 {
		t.Fatalf("after two joins the snapshot has %d nodes, want 3", got)
	}
}

// deviceTopology reports one device with fixed usage.
type deviceTopology struct{ used int64 }

func (d *deviceTopology) Snapshot() *model.Snapshot {
	return model.NewSnapshot(time.Time{}, []model.Node{{ID: "n1", Up: true}},
		[]model.Device{{ID: "n1/ssd0", Node: "n1", Tier: "ssd", CapacityBytes: 1 << 30, UsedBytes: d.used}})
}

// TestSnapshotCacheCountsPlacedBytesOnce: bytes placed since the last
// refresh are added to the devices' usage (so writers do not herd onto a
// device whose stats are a heartbeat old), and the adjusted snapshot is
// built once per placement, not once per lookup: a PUT looks it up
// several times.
func TestSnapshotCacheCountsPlacedBytesOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &snapshotCache{topo: &deviceTopology{used: 100}, interval: time.Hour, now: func() time.Time { return now }}
	used := func(s *model.Snapshot) int64 { return s.Devices[0].UsedBytes }
	if got := used(c.get()); got != 100 {
		t.Fatalf("used %d, want 100", got)
	}
	rep := []model.Replica{{Device: "n1/ssd0", Node: "n1", Tier: "ssd"}}
	c.placed(rep, 50)
	a := c.get()
	if got := used(a); got != 150 {
		t.Fatalf("after placing 50 bytes used %d, want 150", got)
	}
	if b := c.get(); b != a {
		t.Fatal("a second lookup without a placement rebuilt the snapshot")
	}
	c.placed(rep, 25)
	if got := used(c.get()); got != 175 {
		t.Fatalf("after placing 25 more bytes used %d, want 175", got)
	}
	now = now.Add(2 * time.Hour) // refresh: the topology's own numbers again
	if got := used(c.get()); got != 100 {
		t.Fatalf("after a refresh used %d, want the topology's 100", got)
	}
}

// staticTopology is a fixed cluster view.
type staticTopology struct{ s *model.Snapshot }

func (t staticTopology) Snapshot() *model.Snapshot { return t.s }

// The read order sees this node's own reads in flight at once: with three
// reads of the remote ssd already running, the idle local hdd comes
// first, although the (heartbeat-old) snapshot shows the ssd idle; when
// they end, the ssd is first again.
func TestReadOrderSeesOwnReadsInFlight(t *testing.T) {
	nodes := []model.Node{{ID: "n1", Up: true, NetBps: 1250e6}, {ID: "n2", Up: true, NetBps: 1250e6}}
	devs := []model.Device{
		{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD, State: model.DeviceUp, CapacityBytes: 1 << 30, ReadBps: 419e6},
		{ID: "n2/hdd0", Node: "n2", Tier: model.TierHDD, State: model.DeviceUp, CapacityBytes: 1 << 30, ReadBps: 177e6},
	}
	snap := model.NewSnapshot(time.Unix(1000, 0), nodes, devs).WithSelf("n2")
	c := &snapshotCache{topo: staticTopology{snap}, interval: time.Hour, now: func() time.Time { return time.Unix(1000, 0) },
		order: placement.ReadOrders["octopus"], rng: rand.New(rand.NewPCG(1, 1))}
	rs := []model.Replica{{Device: "n2/hdd0", Node: "n2", Tier: model.TierHDD}, {Device: "n1/ssd0", Node: "n1", Tier: model.TierSSD}}
	first := func() model.DeviceID { return c.orderReads(rs)[0].Device }
	if got := first(); got != "n1/ssd0" {
		t.Fatalf("idle: first %s, want the remote ssd (419 > 177 MB/s)", got)
	}
	var inFlight []*atomic.Int32
	for range 3 {
		inFlight = append(inFlight, c.readStarted("n1/ssd0"))
	}
	if got := first(); got != "n2/hdd0" {
		t.Fatalf("three reads in flight on the ssd (419/4 < 177): first %s, want the local hdd", got)
	}
	for _, n := range inFlight {
		n.Add(-1)
	}
	if got := first(); got != "n1/ssd0" {
		t.Fatalf("after the reads ended: first %s, want the ssd again", got)
	}
}
