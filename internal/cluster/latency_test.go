package cluster

import (
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// TestClusterLatencyIsTheWorstNode: the Curator master backs its moves off
// on the node whose clients suffer most, wherever that is: its own live
// figures and the others' fresh heartbeats count; stale heartbeats, its
// own (older) heartbeat and nodes without a baseline do not.
func TestClusterLatencyIsTheWorstNode(t *testing.T) {
	now := time.Now().UnixNano()
	m := &Membership{self: NodeInfo{ID: "n1"}, interval: time.Second, beats: map[model.NodeID]Heartbeat{
		"n1": {Time: now, LatRecent: int64(90 * time.Millisecond), LatBase: int64(time.Millisecond)}, // superseded by the live figure
		"n2": {Time: now, LatRecent: int64(30 * time.Millisecond), LatBase: int64(10 * time.Millisecond)},
		"n3": {Time: now, LatRecent: int64(8 * time.Millisecond), LatBase: int64(2 * time.Millisecond)},
		"n4": {Time: now - int64(10*time.Second), LatRecent: int64(time.Second), LatBase: int64(time.Millisecond)}, // stale
		"n5": {Time: now, LatRecent: int64(time.Second)},                                                           // no baseline yet
	}}
	m.SetLatency(func() (time.Duration, time.Duration) { return 5 * time.Millisecond, 5 * time.Millisecond })
	r, b := m.ClusterLatency()
	if r != 8*time.Millisecond || b != 2*time.Millisecond {
		t.Fatalf("cluster latency %s over %s, want n3's 8ms over 2ms (4x, the worst fresh ratio)", r, b)
	}
	// The local node suffering most wins with its live figures.
	m.SetLatency(func() (time.Duration, time.Duration) { return 50 * time.Millisecond, 5 * time.Millisecond })
	if r, b := m.ClusterLatency(); r != 50*time.Millisecond || b != 5*time.Millisecond {
		t.Fatalf("cluster latency %s over %s, want the local 50ms over 5ms", r, b)
	}
	// Nothing known: zero, which the scheduler reads as "no signal".
	empty := &Membership{self: NodeInfo{ID: "n1"}, interval: time.Second, beats: map[model.NodeID]Heartbeat{}}
	if r, b := empty.ClusterLatency(); r != 0 || b != 0 {
		t.Fatalf("empty membership: %s over %s, want zero", r, b)
	}
}
