package cluster

import (
	"encoding/json"
	"log/slog"
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
		"n1": {Seen: now, LatRecent: int64(90 * time.Millisecond), LatBase: int64(time.Millisecond)}, // superseded by the live figure
		"n2": {Seen: now, LatRecent: int64(30 * time.Millisecond), LatBase: int64(10 * time.Millisecond)},
		"n3": {Seen: now, LatRecent: int64(8 * time.Millisecond), LatBase: int64(2 * time.Millisecond)},
		"n4": {Seen: now - int64(10*time.Second), LatRecent: int64(time.Second), LatBase: int64(time.Millisecond)}, // stale
		"n5": {Seen: now, LatRecent: int64(time.Second)},                                                           // no baseline yet
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

// Freshness is judged by when this node received a heartbeat, never by the
// sender's clock: a node whose clock is an hour behind still counts, one
// whose clock is an hour ahead stops counting once its heartbeats stop.
func TestClusterLatencyIgnoresSenderClocks(t *testing.T) {
	m := &Membership{self: NodeInfo{ID: "n1"}, interval: time.Second, log: slog.New(slog.DiscardHandler),
		nodes: map[model.NodeID]NodeInfo{}, beats: map[model.NodeID]Heartbeat{}, states: map[model.NodeID]NodeState{}}
	beat := func(id string, clock time.Duration, recent time.Duration) {
		b, _ := json.Marshal(Heartbeat{Time: time.Now().Add(clock).UnixNano(), LatRecent: int64(recent), LatBase: int64(time.Millisecond)})
		m.apply(prefixHeartbeat+id, b, false)
	}
	beat("behind", -time.Hour, 40*time.Millisecond)
	if r, _ := m.ClusterLatency(); r != 40*time.Millisecond {
		t.Fatalf("a node whose clock is an hour behind: cluster latency %s, want its 40ms", r)
	}
	beat("ahead", time.Hour, 80*time.Millisecond)
	if r, _ := m.ClusterLatency(); r != 80*time.Millisecond {
		t.Fatalf("a node whose clock is an hour ahead: cluster latency %s, want its 80ms", r)
	}
	// Its heartbeat ages by this node's clock: three intervals later it
	// no longer counts, whatever time it claims.
	m.mu.Lock()
	hb := m.beats["ahead"]
	hb.Seen -= int64(10 * time.Second)
	m.beats["ahead"] = hb
	m.mu.Unlock()
	if r, _ := m.ClusterLatency(); r != 40*time.Millisecond {
		t.Fatalf("a heartbeat received 10s ago: cluster latency %s, want the fresh 40ms", r)
	}
}
