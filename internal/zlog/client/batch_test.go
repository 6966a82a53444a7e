package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// echo answers each op with its position in Message, so a test can check
// that every caller got its own op's result.
func echo(calls *[]int, mu *sync.Mutex, gate chan struct{}) func(context.Context, []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
	return func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		if gate != nil {
			<-gate
		}
		mu.Lock()
		*calls = append(*calls, len(ops))
		mu.Unlock()
		res := make([]*zlogpb.OpResult, len(ops))
		for i, op := range ops {
			res[i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_OK, Message: string(op.Data)}
		}
		return res, nil
	}
}

func TestDoManyKeepsOrderAndSharesRPCs(t *testing.T) {
	var mu sync.Mutex
	var calls []int
	gate := make(chan struct{})
	b := newBatcher(1, echo(&calls, &mu, gate))

	// The first op holds the only in-flight RPC; everything queued while
	// it is blocked must leave together.
	first := make(chan error)
	go func() {
		_, err := b.Do(context.Background(), &zlogpb.Op{Data: []byte("first")})
		first <- err
	}()
	waitQueued := func(n int) {
		for {
			b.mu.Lock()
			q, busy := len(b.queue), b.inFlight
			b.mu.Unlock()
			if q == n && busy == 1 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitQueued(0) // the first op was taken by the flusher

	ops := make([]*zlogpb.Op, 100)
	for i := range ops {
		ops[i] = &zlogpb.Op{Data: []byte{byte(i)}}
	}
	done := make(chan struct{})
	var res []*zlogpb.OpResult
	var errs []error
	go func() {
		res, errs = b.DoMany(context.Background(), ops)
		close(done)
	}()
	waitQueued(len(ops))
	close(gate)
	<-done
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		if errs[i] != nil || res[i] == nil || res[i].Message != string([]byte{byte(i)}) {
			t.Fatalf("op %d: result %v, err %v", i, res[i], errs[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != 1 || calls[1] != len(ops) {
		t.Fatalf("RPC sizes %v, want [1 %d]", calls, len(ops))
	}
}

func TestDoManyFailsTheOpsOfAFailedRPC(t *testing.T) {
	boom := errors.New("connection reset")
	b := newBatcher(1, func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		return nil, boom
	})
	_, errs := b.DoMany(context.Background(), []*zlogpb.Op{{}, {}, {}})
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("op %d: err %v, want %v", i, err, boom)
		}
	}
}

func TestDoManyShortResultIsAnError(t *testing.T) {
	b := newBatcher(1, func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		return []*zlogpb.OpResult{{}}, nil // one result for several ops
	})
	_, errs := b.DoMany(context.Background(), []*zlogpb.Op{{}, {}})
	for i, err := range errs {
		if err == nil {
			t.Fatalf("op %d: no error for a short result list", i)
		}
	}
}

func TestDoManyHonoursCancellation(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	b := newBatcher(1, func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		<-gate
		return make([]*zlogpb.OpResult, len(ops)), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, errs := b.DoMany(ctx, []*zlogpb.Op{{}, {}})
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("op %d: err %v, want deadline exceeded", i, err)
		}
	}
}
