package actuate

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/terrace-storage/terrace/internal/model"
)

// Limits bound concurrent moves (Mirador §3.4: parallelise migrations
// without overloading any device or link).
type Limits struct {
	PerSource int // moves reading one device at once
	PerDest   int // moves writing one device at once
	PerLink   int // moves between one ordered pair of nodes at once
}

// EnsureDefaults fills zero fields: 2 per device (a move streams at device
// speed; a third would only queue behind the first two), 4 per link.
func (l *Limits) EnsureDefaults() {
	if l.PerSource == 0 {
		l.PerSource = 2
	}
	if l.PerDest == 0 {
		l.PerDest = 2
	}
	if l.PerLink == 0 {
		l.PerLink = 4
	}
}

// Signals are what the rate adapts to.
type Signals struct {
	// QueueLen returns a device's operations in flight (0 if unknown).
	QueueLen func(model.DeviceID) int
	// BusyQueueLen: a device with more operations in flight than this is
	// busy with client I/O.
	BusyQueueLen int
	// ClientLatency returns the recent foreground latency and its quiet
	// baseline (both 0 if unknown). Latency above twice the baseline
	// slows background work down.
	ClientLatency func() (recent, baseline time.Duration)
}

// Scheduler admits moves: a slot on every device and link a move uses,
// then bytes from one adaptive rate.
type Scheduler struct {
	limits  Limits
	signals Signals
	maxRate float64

	mu    sync.Mutex
	cond  *sync.Cond
	inUse map[string]int

	rate *rateLimiter
}

// NewScheduler returns a scheduler whose byte rate adapts between 1 % and
// 100 % of maxBytesPerSec.
func NewScheduler(limits Limits, maxBytesPerSec float64, sig Signals) *Scheduler {
	limits.EnsureDefaults()
	if sig.BusyQueueLen == 0 {
		sig.BusyQueueLen = 8
	}
	s := &Scheduler{limits: limits, signals: sig, maxRate: maxBytesPerSec, inUse: map[string]int{},
		rate: newRateLimiter(maxBytesPerSec)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// slotKeys are the resources a move from src to dst holds.
func (s *Scheduler) slotKeys(src, dst model.Replica) map[string]int {
	keys := map[string]int{}
	if src.Device != "" {
		keys["src/"+string(src.Device)] = s.limits.PerSource
	}
	if dst.Device != "" {
		keys["dst/"+string(dst.Device)] = s.limits.PerDest
	}
	if src.Node != "" && dst.Node != "" && src.Node != dst.Node {
		keys["link/"+string(src.Node)+">"+string(dst.Node)] = s.limits.PerLink
	}
	return keys
}

// Acquire blocks until the move src→dst may start, and returns the
// function that releases its slots. A zero Replica holds no slot for that
// side (a compaction's destination is chosen by placement later).
func (s *Scheduler) Acquire(ctx context.Context, src, dst model.Replica) (func(), error) {
	keys := s.slotKeys(src, dst)
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		free := true
		for k, limit := range keys {
			if s.inUse[k] >= limit {
				free = false
				break
			}
		}
		if free {
			break
		}
		s.cond.Wait()
	}
	for k := range keys {
		s.inUse[k]++
	}
	return func() {
		s.mu.Lock()
		for k := range keys {
			if s.inUse[k]--; s.inUse[k] <= 0 {
				delete(s.inUse, k)
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}, nil
}

// InUse returns the slots held now, by resource (for status and tests).
func (s *Scheduler) InUse() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.inUse))
	for k, v := range s.inUse {
		out[k] = v
	}
	return out
}

// Throttle waits until bytes may be moved touching devs: it backs off
// while a device is busy with client I/O or clients are slow (halving the
// rate once per wait), raises the rate by 5 % of the maximum when all is
// quiet, then takes the bytes from the rate limiter.
func (s *Scheduler) Throttle(ctx context.Context, bytes int64, devs ...model.DeviceID) (backoffs int, err error) {
	backedOff := false
	for i := 0; i < 50; i++ { // back off at most ~5 s per task
		if !s.congested(devs) {
			break
		}
		if !backedOff {
			backedOff = true
			s.rate.adapt(false, s.maxRate)
		}
		backoffs++
		select {
		case <-ctx.Done():
			return backoffs, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !backedOff {
		s.rate.adapt(true, s.maxRate)
	}
	return backoffs, s.rate.wait(ctx, bytes)
}

func (s *Scheduler) congested(devs []model.DeviceID) bool {
	if q := s.signals.QueueLen; q != nil {
		for _, d := range devs {
			if q(d) > s.signals.BusyQueueLen {
				return true
			}
		}
	}
	if l := s.signals.ClientLatency; l != nil {
		recent, base := l()
		if base > 0 && recent > 2*base {
			return true
		}
	}
	return false
}

// Rate returns the current byte-rate budget.
func (s *Scheduler) Rate() float64 { return s.rate.current() }

// rateLimiter is a byte rate (golang.org/x/time/rate) that adapts
// AIMD-style: additive increase, multiplicative decrease, as TCP and
// Mirador §3.4. Its burst is one second at the maximum rate.
type rateLimiter struct {
	mu sync.Mutex
	l  *rate.Limiter
}

func newRateLimiter(bytesPerSec float64) *rateLimiter {
	burst := int(min(max(bytesPerSec, 1<<20), 1<<30))
	return &rateLimiter{l: rate.NewLimiter(rate.Limit(bytesPerSec), burst)}
}

// adapt raises (idle) the rate by 5 % of max or halves it (busy), within
// [1 %, 100 %] of max.
func (b *rateLimiter) adapt(idle bool, maxRate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := float64(b.l.Limit())
	if idle {
		cur = min(maxRate, cur+0.05*maxRate)
	} else {
		cur = max(0.01*maxRate, cur/2)
	}
	b.l.SetLimit(rate.Limit(cur))
}

func (b *rateLimiter) current() float64 { return float64(b.l.Limit()) }

// wait takes n bytes from the budget, in burst-sized pieces.
func (b *rateLimiter) wait(ctx context.Context, n int64) error {
	for n > 0 {
		take := min(n, int64(b.l.Burst()))
		if err := b.l.WaitN(ctx, int(take)); err != nil {
			return err
		}
		n -= take
	}
	return nil
}
