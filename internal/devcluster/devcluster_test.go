package devcluster

import (
	"context"
	"strings"
	"testing"
)

// Options.Launch is checked before any process starts: held-back nodes
// cannot include etcd members, whose quorum needs them all at once.
func TestLaunchValidation(t *testing.T) {
	for _, tc := range []struct {
		nodes, members, launch int
		want                   string
	}{
		{nodes: 4, launch: 2, want: "launch 2 of 4 nodes: want 3..4"},
		{nodes: 4, launch: 5, want: "launch 5 of 4 nodes"},
		{nodes: 5, members: 3, launch: 2, want: "want 3..5"},
		{nodes: 5, launch: 4, want: "want 5..5"}, // five nodes run five members by default
	} {
		_, err := Start(context.Background(), Options{Binary: "/nonexistent/terrace", Dir: t.TempDir(),
			Nodes: tc.nodes, Members: tc.members, Launch: tc.launch})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("nodes %d members %d launch %d: err %v, want %q", tc.nodes, tc.members, tc.launch, err, tc.want)
		}
	}
}

// Join refuses a node that was launched, and an etcd member.
func TestJoinRefusesRunningAndMembers(t *testing.T) {
	c := &Cluster{Nodes: []*Node{{ID: "n1", Member: true}, {ID: "n2"}}}
	c.Nodes[0].held.Store(true)
	if err := c.Join(context.Background(), c.Nodes[0]); err == nil || !strings.Contains(err.Error(), "etcd member") {
		t.Errorf("join of a held member: %v", err)
	}
	if err := c.Join(context.Background(), c.Nodes[1]); err == nil || !strings.Contains(err.Error(), "not held back") {
		t.Errorf("join of a launched node: %v", err)
	}
	held := &Node{ID: "n3"}
	held.held.Store(true)
	if err := c.Restart(context.Background(), held); err == nil || !strings.Contains(err.Error(), "held back") {
		t.Errorf("restart of a held node: %v", err)
	}
}
