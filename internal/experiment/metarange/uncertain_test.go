package metarange

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// endsAfterHandOff is a context that ends right after raft took a
// proposal: its first Done (raft's select that hands the proposal over)
// is open, every later one closed.
type endsAfterHandOff struct {
	context.Context
	calls        atomic.Int32
	open, closed chan struct{}
}

func newEndsAfterHandOff() *endsAfterHandOff {
	c := &endsAfterHandOff{Context: context.Background(), open: make(chan struct{}), closed: make(chan struct{})}
	close(c.closed)
	return c
}

func (c *endsAfterHandOff) Done() <-chan struct{} {
	if c.calls.Add(1) == 1 {
		return c.open
	}
	return c.closed
}

func (c *endsAfterHandOff) Err() error {
	if c.calls.Load() > 1 {
		return context.Canceled
	}
	return nil
}

// TestCommitEndedAfterProposeIsUncertain: a context that ends while raft
// is taking the proposal makes Propose return the context's error although
// the entry is in the log; Commit must then say the outcome is unknown,
// not that nothing was committed.
func TestCommitEndedAfterProposeIsUncertain(t *testing.T) {
	tr := startRange(t, 1, testTick)
	r := tr.r[tr.waitLeader(t)]
	for i := 0; i < 64; i++ {
		key := fmt.Sprintf("late/%d", i)
		_, err := put(newEndsAfterHandOff(), r, key, "v")
		if err == nil || errors.Is(err, ErrUncertain) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, gerr := r.Get(ctx, []byte(key))
		cancel()
		if gerr == nil {
			t.Fatalf("commit of %s returned %v (not ErrUncertain), yet it was committed", key, err)
		}
	}
}
