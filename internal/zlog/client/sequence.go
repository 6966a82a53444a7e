package client

import (
	"context"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// MaxNextBatch bounds how many waiting appends one Next RPC serves when
// leases are off.
const MaxNextBatch = 1024

// leaseBlock is a block of positions leased from the sequencer.
type leaseBlock struct {
	first, count, used uint64
	epoch              uint64
	id                 uint64
	expires            time.Time // client clock, measured from before the request
}

// leaseMargin: positions are not taken from a lease this close to its end,
// so a write sent just before expiry is not raced by the fill.
const leaseMargin = 2 * time.Millisecond

// Next reserves a position without writing it: the sequencer's next() as
// CORFU exposes it. The caller owns the position and must write it (or
// Fill it); a position left unwritten is a hole readers wait on until it
// is filled. Append is Next plus the write.
func (l *Log) Next(ctx context.Context) (uint64, error) {
	p, _, err := l.nextPosition(ctx)
	return p, err
}

// nextPosition returns a position to write and the epoch it was handed
// out in: from the lease when leased batching is on, otherwise from the
// sequencer (concurrent callers share one Next RPC).
func (l *Log) nextPosition(ctx context.Context) (uint64, uint64, error) {
	if l.opts.LeasePositions <= 1 {
		return l.seqB.next(ctx)
	}
	for {
		l.mu.Lock()
		lb := l.lease
		if lb != nil && lb.used < lb.count && time.Now().Add(leaseMargin).Before(lb.expires) {
			p := lb.first + lb.used
			lb.used++
			l.mu.Unlock()
			return p, lb.epoch, nil
		}
		if l.leasing != nil {
			ch := l.leasing
			l.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
		}
		ch := make(chan struct{})
		l.leasing = ch
		old := l.lease
		l.lease = nil
		// Size leases to what the client uses in a hold time: double after
		// a lease ran out, shrink to what was used after one expired. An
		// oversized lease costs a fill per unused position.
		last := old
		if last == nil {
			last, l.expired = l.expired, nil
		}
		switch {
		case l.leaseSize == 0:
			l.leaseSize = min(16, l.opts.LeasePositions)
		case last != nil && last.used >= last.count:
			l.leaseSize = min(l.leaseSize*2, l.opts.LeasePositions)
		case last != nil:
			l.leaseSize = max(2, min(int(last.used+last.used/4+1), l.opts.LeasePositions))
		}
		size := l.leaseSize
		l.mu.Unlock()
		if old != nil {
			go func() {
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				l.release(rctx, old)
			}()
		}
		nb, err := l.acquire(ctx, size)
		l.mu.Lock()
		if err == nil {
			l.lease = nb
			// At expiry, fill what is unused at once rather than when the
			// next append comes: holes below the tail delay in-order
			// readers until they are filled.
			time.AfterFunc(time.Until(nb.expires), func() { l.expire(nb) })
		}
		l.leasing = nil
		close(ch)
		l.mu.Unlock()
		if err != nil {
			return 0, 0, err
		}
	}
}

// expire ends lease lb if it is still current.
func (l *Log) expire(lb *leaseBlock) {
	l.mu.Lock()
	if l.lease != lb {
		l.mu.Unlock()
		return
	}
	l.lease = nil
	l.expired = lb // sizes the next lease
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.release(ctx, lb)
}

// acquire leases a new block.
func (l *Log) acquire(ctx context.Context, size int) (*leaseBlock, error) {
	var lb *leaseBlock
	err := l.seqCall(ctx, func(ctx context.Context, cl zlogpb.LogClient) error {
		start := time.Now()
		r, err := cl.Next(ctx, &zlogpb.NextRequest{Name: l.name, Count: uint32(size), HoldMs: l.opts.LeaseHold.Milliseconds()})
		if err != nil {
			return err
		}
		lb = &leaseBlock{first: r.First, count: uint64(r.Count), epoch: r.Epoch, id: r.LeaseId,
			expires: start.Add(time.Duration(r.HoldMs) * time.Millisecond)}
		if r.LeaseId == 0 {
			// The log's policy has leases off: use the block at once.
			lb.expires = start.Add(time.Second)
		}
		return nil
	})
	return lb, err
}

// release fills a lease's unused positions and returns it, unless its
// epoch has ended (recovery settled those positions already).
func (l *Log) release(ctx context.Context, lb *leaseBlock) {
	st, err := l.state(ctx)
	if err != nil || st.lay.Epoch != lb.epoch {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for p := lb.first + lb.used; p < lb.first+lb.count; p++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(p uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			_, _ = l.Fill(ctx, p)
		}(p)
	}
	wg.Wait()
	if lb.id != 0 {
		_ = l.seqCall(ctx, func(ctx context.Context, cl zlogpb.LogClient) error {
			_, err := cl.ReturnLease(ctx, &zlogpb.ReturnLeaseRequest{Name: l.name, LeaseId: lb.id})
			return err
		})
	}
}

// seqBatcher shares Next RPCs among concurrent appenders without leases:
// the appenders waiting while one Next is in flight are served by the next
// one, which asks for as many positions as there are waiters.
type seqBatcher struct {
	l        *Log
	mu       sync.Mutex
	waiters  []chan posResult
	inFlight bool
}

type posResult struct {
	pos, epoch uint64
	err        error
}

func newSeqBatcher(l *Log) *seqBatcher { return &seqBatcher{l: l} }

func (b *seqBatcher) next(ctx context.Context) (uint64, uint64, error) {
	ch := make(chan posResult, 1)
	b.mu.Lock()
	b.waiters = append(b.waiters, ch)
	if !b.inFlight {
		b.inFlight = true
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.pos, r.epoch, r.err
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

func (b *seqBatcher) flush() {
	for {
		b.mu.Lock()
		if len(b.waiters) == 0 {
			b.inFlight = false
			b.mu.Unlock()
			return
		}
		n := min(len(b.waiters), MaxNextBatch)
		ws := append([]chan posResult(nil), b.waiters[:n]...)
		b.waiters = b.waiters[n:]
		b.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), b.l.c.cfg.RetryTimeout)
		var r *zlogpb.NextResponse
		err := b.l.seqCall(ctx, func(ctx context.Context, cl zlogpb.LogClient) error {
			var err error
			r, err = cl.Next(ctx, &zlogpb.NextRequest{Name: b.l.name, Count: uint32(n)})
			return err
		})
		cancel()
		for i, w := range ws {
			switch {
			case err != nil:
				w <- posResult{err: err}
			case uint32(i) < r.Count:
				w <- posResult{pos: r.First + uint64(i), epoch: r.Epoch}
			default:
				// Granted fewer than asked: the waiter asks again.
				b.mu.Lock()
				b.waiters = append(b.waiters, w)
				b.mu.Unlock()
			}
		}
	}
}
