package metarange

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// TestReadBarrierEndsOnClose: a linearizable read waiting for this member
// to apply up to the read index returns when the member closes, instead
// of waiting out its context.
func TestReadBarrierEndsOnClose(t *testing.T) {
	tr := startRange(t, 1, testTick)
	id := tr.waitLeader(t)
	r := tr.r[id]
	ctx := context.Background()
	if _, err := put(ctx, r, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// A member behind the read index (a follower still applying): the
	// barrier must wait for apply.
	r.mu.Lock()
	r.applied = 0
	r.mu.Unlock()
	gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := r.Get(gctx, []byte("k"))
		res <- err
	}()
	time.Sleep(300 * time.Millisecond)
	tr.stopMember(id)
	select {
	case err := <-res:
		if !errors.Is(err, meta.ErrClosed) {
			t.Fatalf("read after close: %v, want meta.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting for apply did not return when the member closed")
	}
}
