package client

import (
	"context"
	"errors"
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
	var idle time.Duration
	pos := from
	for ctx.Err() == nil {
		e, err := l.Read(ctx, pos)
		switch {
		case err == nil, errors.Is(err, ErrTrimmed):
			if e.Kind == 0 {
				e.Kind = KindTrim
			}
			if err := fn(e); err != nil {
				return err
			}
			pos++
			holeSince, idle = time.Time{}, 0
			continue
		case !errors.Is(err, ErrNotWritten):
			return err
		}
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
		// Below the tail: an append is in flight, or its writer died.
		if holeSince.IsZero() {
			holeSince = time.Now()
		}
		if time.Since(holeSince) < holeTimeout {
			if sleepCtx(ctx, time.Millisecond) != nil {
				break
			}
			continue
		}
		e, err = l.Fill(ctx, pos)
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
