package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestElectorTermCountsWins: every election the node wins starts a new
// term, so a caller polling IsLeader can tell that mastership was lost and
// won back between two polls.
func TestElectorTermCountsWins(t *testing.T) {
	kv := newEtcdKV(t, EtcdOptions{})
	e := NewElector(kv.Client(), "test-role", "n1", slog.Default())
	if e.IsLeader() || e.Term() != 0 {
		t.Fatalf("before campaigning: leader %v, term %d", e.IsLeader(), e.Term())
	}
	for want := uint64(1); want <= 2; want++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.Run(ctx) }()
		deadline := time.Now().Add(20 * time.Second)
		for !e.IsLeader() {
			if time.Now().After(deadline) {
				t.Fatalf("term %d: the only candidate did not win within 20 s", want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := e.Term(); got != want {
			t.Fatalf("after win %d: term %d", want, got)
		}
		cancel() // resigns
		<-done
		if e.IsLeader() {
			t.Fatal("still leader after Run returned")
		}
	}
}
