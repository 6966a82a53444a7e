package node

import (
	"context"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Sequencer limits.
const (
	// maxNextPositions bounds a Next without a lease (a batch of waiting
	// appenders in one client).
	maxNextPositions = client.MaxNextBatch
	// maxOpenLeases bounds the leases one sequencer tracks: beyond it Next
	// refuses new leases until some are returned or expire.
	maxOpenLeases = 1 << 16
	// sweepEvery is how often expired leases are looked for.
	sweepEvery = 100 * time.Millisecond
)

// sequencer is the in-memory state of a log this node hosts: the next
// position to hand out, the epoch, and the leases outstanding. Nothing
// here is persistent: a new host rebuilds it by recovery.
type sequencer struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	// recover asks the host goroutine to run recovery again (a reported
	// failure at the given epoch).
	recover chan uint64

	mu        sync.Mutex
	ready     bool
	epoch     uint64
	tail      uint64
	rec       layout.Record
	leases    map[uint64]*seqLease
	nextLease uint64
	hostRev   int64 // ModRev of our host key (compare-and-swap fence)
}

type seqLease struct {
	first, count uint64
	epoch        uint64
	deadline     time.Time
}

func newSequencer(parent context.Context, name string, hostRev int64) *sequencer {
	ctx, cancel := context.WithCancel(parent)
	return &sequencer{name: name, ctx: ctx, cancel: cancel, recover: make(chan uint64, 1), leases: map[uint64]*seqLease{}, hostRev: hostRev}
}

func (q *sequencer) stop() { q.cancel() }

func (q *sequencer) isReady() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}

// hostedReady returns the sequencer for name if this node hosts it and
// recovery has finished.
func (s *Service) hostedReady(name string) (*sequencer, error) {
	s.hostMu.Lock()
	q := s.hosted[name]
	s.hostMu.Unlock()
	if q == nil {
		if _, ok := s.cache.get(name); !ok && !s.existsInStore(context.Background(), name) {
			return nil, status.Errorf(codes.NotFound, "log: no log %s", name)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "log: %s is not the sequencer host of %s", s.cfg.Self, name)
	}
	if !q.isReady() {
		return nil, status.Errorf(codes.FailedPrecondition, "log: sequencer of %s is recovering", name)
	}
	return q, nil
}

// Next hands out positions: count (1 without a lease) from the in-memory
// counter, and with a hold time and a log policy allowing it, a lease the
// client must return (or whose unused positions the host fills after the
// hold time and a grace).
func (s *Service) Next(ctx context.Context, req *zlogpb.NextRequest) (*zlogpb.NextResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	q, err := s.hostedReady(req.Name)
	if err != nil {
		return nil, err
	}
	if req.Count == 0 {
		return nil, status.Error(codes.InvalidArgument, "log: next of 0 positions")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.ready {
		return nil, status.Errorf(codes.FailedPrecondition, "log: sequencer of %s is recovering", req.Name)
	}
	out := &zlogpb.NextResponse{First: q.tail, Epoch: q.epoch}
	lease := req.HoldMs > 0 && q.rec.MaxLeasePositions > 1 && q.rec.MaxLeaseHold > 0
	n := uint64(req.Count)
	if lease {
		if len(q.leases) >= maxOpenLeases {
			return nil, status.Errorf(codes.ResourceExhausted, "log: %d leases open on %s (limit %d)", len(q.leases), req.Name, maxOpenLeases)
		}
		n = min(n, uint64(q.rec.MaxLeasePositions))
		hold := min(time.Duration(req.HoldMs)*time.Millisecond, q.rec.MaxLeaseHold)
		q.nextLease++
		q.leases[q.nextLease] = &seqLease{first: q.tail, count: n, epoch: q.epoch, deadline: time.Now().Add(hold)}
		out.LeaseId, out.HoldMs = q.nextLease, hold.Milliseconds()
		s.metrics.leases.Inc()
	} else {
		n = min(n, maxNextPositions)
	}
	q.tail += n
	out.Count = uint32(n)
	s.metrics.nextCalls.Inc()
	s.metrics.positions.Add(float64(n))
	return out, nil
}

// Tail returns the next position the sequencer will hand out.
func (s *Service) Tail(ctx context.Context, req *zlogpb.TailRequest) (*zlogpb.TailResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	q, err := s.hostedReady(req.Name)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return &zlogpb.TailResponse{Tail: q.tail, Epoch: q.epoch}, nil
}

// ReturnLease ends a lease whose client filled its unused positions.
func (s *Service) ReturnLease(ctx context.Context, req *zlogpb.ReturnLeaseRequest) (*zlogpb.Empty, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	q, err := s.hostedReady(req.Name)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	delete(q.leases, req.LeaseId)
	q.mu.Unlock()
	return &zlogpb.Empty{}, nil
}

// sweep fills the unused positions of leases not returned within their
// hold time plus LeaseGrace (their client died), so readers never wait on
// them forever. Positions the client did write answer TAKEN: harmless.
func (s *Service) sweep(q *sequencer) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-q.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		q.mu.Lock()
		var due []*seqLease
		for id, l := range q.leases {
			if now.After(l.deadline.Add(s.cfg.Options.LeaseGrace)) {
				due = append(due, l)
				delete(q.leases, id)
			}
		}
		epoch := q.epoch
		q.mu.Unlock()
		sort.Slice(due, func(a, b int) bool { return due[a].first < due[b].first })
		for _, l := range due {
			if l.epoch != epoch {
				continue // recovery settled that epoch's positions
			}
			s.metrics.leasesExpired.Inc()
			s.fillRange(q.ctx, q.name, l.first, l.first+l.count)
		}
	}
}

// fillRange fills [from, to) through the node's client, 64 at a time.
func (s *Service) fillRange(ctx context.Context, name string, from, to uint64) {
	l := s.client.Open(name, client.LogOptions{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for p := from; p < to && ctx.Err() == nil; p++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(p uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			if e, err := l.Fill(ctx, p); err == nil && e.Kind == client.KindFill {
				s.metrics.leaseFills.Inc()
			}
		}(p)
	}
	wg.Wait()
}
