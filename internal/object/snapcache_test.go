package object

import (
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
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
