package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Subscribe calls fn with every entry from position from on, in position
// order, until ctx ends or fn returns an error (which Subscribe returns).
// It waits at the tail for new appends; a position below the tail that
// stays unwritten for the hole timeout (an appender died between getting
// the position and writing it) is filled, and fn sees the fill (or the
// entry that the fill found and completed). Trimmed positions are passed
// as KindTrim entries.
func (l *Log) Subscribe(ctx context.Context, from uint64, fn func(Entry) error) error {
	st, err := l.state(ctx)
	if err != nil {
		return err
	}
	holeTimeout := l.opts.HoleTimeout
	if holeTimeout == 0 {
		holeTimeout = st.rec.MaxLeaseHold + 2*time.Second
	}
	var tail uint64
	var holeSince time.Time
	var idle, wait time.Duration
	pos := from
	for ctx.Err() == nil {
		if pos >= tail {
			t, err := l.Tail(ctx)
			if err != nil {
				return err
			}
			tail = t
			if pos >= tail {
				// At the end of the log: poll, backing off while idle.
				idle = min(max(idle*2, time.Millisecond), 50*time.Millisecond)
				if sleepCtx(ctx, idle) != nil {
					break
				}
				continue
			}
		}
		idle = 0
		// Read ahead: up to subscribeWindow positions at once (they share
		// RPCs), delivered in order up to the first not yet written. While
		// waiting on that one, only it is polled (with back-off).
		n := min(tail-pos, subscribeWindow)
		if !holeSince.IsZero() {
			n = 1
		}
		got := make([]Entry, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := uint64(0); i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = l.Read(ctx, pos+i)
			}()
		}
		wg.Wait()
		i := uint64(0)
		for ; i < n; i++ {
			e, err := got[i], errs[i]
			if errors.Is(err, ErrNotWritten) {
				break
			}
			if err != nil && !errors.Is(err, ErrTrimmed) {
				return err
			}
			if e.Kind == 0 {
				e.Kind = KindTrim
			}
			if err := fn(e); err != nil {
				return err
			}
			pos++
			holeSince, wait = time.Time{}, 0
		}
		if i == n {
			continue
		}
		// pos is below the tail and not written: an append is in flight,
		// or its writer died.
		if holeSince.IsZero() {
			holeSince = time.Now()
		}
		if time.Since(holeSince) < holeTimeout {
			wait = min(max(wait*2, 200*time.Microsecond), 10*time.Millisecond)
			if sleepCtx(ctx, wait) != nil {
				break
			}
			continue
		}
		e, err := l.Fill(ctx, pos)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
		pos++
		holeSince = time.Time{}
	}
	return ctx.Err()
}

// subscribeWindow is how many positions Subscribe reads ahead.
const subscribeWindow = 128

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
