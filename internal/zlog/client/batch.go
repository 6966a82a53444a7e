package client

import (
	"context"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Batching limits: one RPC carries at most MaxBatchOps operations and
// MaxBatchBytes of entry data (well under the 80 MiB message limit).
const (
	MaxBatchOps   = 256
	MaxBatchBytes = 4 << 20
	// batchCallTimeout bounds one batched RPC.
	batchCallTimeout = 10 * time.Second
)

// Batcher coalesces operations bound for one node into shared RPCs: an
// operation arriving while maxInFlight RPCs are outstanding waits and goes
// out with the others queued meanwhile (like a group commit), so many
// concurrent appenders cost few RPCs without delaying a lone one.
type Batcher struct {
	send        func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error)
	maxInFlight int

	mu       sync.Mutex
	queue    []*pendingOp
	inFlight int
}

type pendingOp struct {
	op   *zlogpb.Op
	res  *zlogpb.OpResult
	err  error
	done chan struct{}
}

func newBatcher(maxInFlight int, send func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error)) *Batcher {
	return &Batcher{send: send, maxInFlight: max(1, maxInFlight)}
}

// Do sends op (in some batch) and returns its result, or the RPC's error.
func (b *Batcher) Do(ctx context.Context, op *zlogpb.Op) (*zlogpb.OpResult, error) {
	p := &pendingOp{op: op, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if b.inFlight < b.maxInFlight {
		b.inFlight++
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		// The op may still be sent; its outcome is unknown to the caller,
		// who retries idempotently (same token).
		return nil, ctx.Err()
	}
}

// DoMany sends ops (in one or more batches, queued together so that they
// usually share one RPC) and returns their results in order; a failed RPC
// fails the ops it carried. It costs one wait for the whole set instead of
// one goroutine and one wait per op.
func (b *Batcher) DoMany(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, []error) {
	ps := make([]*pendingOp, len(ops))
	b.mu.Lock()
	for i, op := range ops {
		ps[i] = &pendingOp{op: op, done: make(chan struct{})}
	}
	b.queue = append(b.queue, ps...)
	if b.inFlight < b.maxInFlight {
		b.inFlight++
		go b.flush()
	}
	b.mu.Unlock()
	res := make([]*zlogpb.OpResult, len(ops))
	errs := make([]error, len(ops))
	for i, p := range ps {
		select {
		case <-p.done:
			res[i], errs[i] = p.res, p.err
		case <-ctx.Done():
			// As in Do: the op may still be sent; its outcome is unknown.
			for j := i; j < len(ps); j++ {
				errs[j] = ctx.Err()
			}
			return res, errs
		}
	}
	return res, errs
}

// flush sends batches until the queue is empty.
func (b *Batcher) flush() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		n, bytes := 0, 0
		for n < len(b.queue) && n < MaxBatchOps && (n == 0 || bytes+len(b.queue[n].op.Data) <= MaxBatchBytes) {
			bytes += len(b.queue[n].op.Data)
			n++
		}
		batch := append([]*pendingOp(nil), b.queue[:n]...)
		b.queue = b.queue[n:]
		b.mu.Unlock()

		ops := make([]*zlogpb.Op, len(batch))
		for i, p := range batch {
			ops[i] = p.op
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchCallTimeout)
		res, err := b.send(ctx, ops)
		cancel()
		if err == nil && len(res) != len(ops) {
			err = errf("log: %d results for %d operations", len(res), len(ops))
		}
		for i, p := range batch {
			if err != nil {
				p.err = err
			} else {
				p.res = res[i]
			}
			close(p.done)
		}
	}
}
