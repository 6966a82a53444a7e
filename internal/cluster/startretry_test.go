package cluster

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStartRetry: a node's start-up registration outlives a dropped etcd
// connection (chaos: a node that restarted during a network fault exited
// on the first heartbeat's "connection reset"), but a real error ends it
// at once.
func TestStartRetry(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := startRetry(ctx, func(context.Context) error {
		calls++
		if calls < 3 {
			return status.Error(codes.Unavailable, "error reading from server: connection reset by peer")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("transient errors: %v after %d calls, want success on the third", err, calls)
	}
	calls = 0
	bad := errors.New("permission denied")
	if err := startRetry(ctx, func(context.Context) error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("a real error: %v after %d calls, want it at once", err, calls)
	}
}
