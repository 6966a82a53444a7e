package zlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/client"
)

// TestLostNodeRehomed: a node that holds replicas of a log dies and does
// not come back. Once it has been down for node_down_after, every replica
// it held is re-homed onto the live nodes and copied there, so the layout
// no longer names it, and a second node loss (etcd keeps its quorum) still
// leaves every acknowledged entry readable.
func TestLostNodeRehomed(t *testing.T) {
	c := startClusterWith(t, 4, 33000, "curator:\n  node_down_after: 3s\n")
	admin := c.newClient(t, 0, "test-admin")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := admin.Create(ctx, "lost", client.CreateOptions{Vector: "any=2", Stripes: 8}); err != nil {
		t.Fatal(err)
	}
	l := admin.Open("lost", client.LogOptions{})
	acked := map[uint64]string{}
	appendN := func(n int, tag string) {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%04d", tag, i)
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			p, err := l.Append(actx, []byte(v))
			cancel()
			if err != nil {
				t.Fatalf("append %s: %v", v, err)
			}
			acked[p] = v
		}
	}
	appendN(200, "before")
	// The victim: node 4 (not an etcd member) when it holds replicas
	// (8 stripes of two over four nodes: all but 0.4 % of layouts), else
	// node 3. The second loss is the other one: etcd keeps its quorum.
	info, err := admin.Info(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for _, seg := range info.Layout.Segments {
		for _, st := range seg.Stripes {
			for _, r := range st.Replicas {
				held[r.Node]++
			}
		}
	}
	victim, second := c.Nodes[3], c.Nodes[2]
	if held[victim.ID] == 0 {
		victim, second = second, victim
	}
	c.Kill(victim)
	t.Logf("killed %s, which held %d replicas", victim.ID, held[victim.ID])
	appendN(100, "after") // clients report it; recovery closes the segment around it
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err = admin.Info(ctx, "lost")
		if err != nil {
			t.Fatal(err)
		}
		names, stale := 0, 0
		for _, seg := range info.Layout.Segments {
			for _, st := range seg.Stripes {
				for _, r := range st.Replicas {
					if r.Node == victim.ID {
						names++
					}
					if r.Stale {
						stale++
					}
				}
			}
		}
		if names == 0 && stale == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes the layout still names the lost node %d times, %d replicas stale: %v", names, stale, info.Layout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// A second loss: every stripe still has a replica on nodes 1 or 2.
	c.Kill(second)
	t.Logf("killed %s too", second.ID)
	reader := c.newClient(t, 0, "reader").Open("lost", client.LogOptions{})
	for p, want := range acked {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		e, err := reader.Read(rctx, p)
		cancel()
		if err != nil || string(e.Data) != want {
			t.Fatalf("position %d after losing %s and %s: %q %v, want %q", p, victim.ID, second.ID, e.Data, err, want)
		}
	}
	t.Logf("all %d acknowledged entries read back", len(acked))
}
