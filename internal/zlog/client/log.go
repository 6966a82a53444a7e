package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Log is a handle on one log. It is safe for concurrent use.
type Log struct {
	c    *Client
	name string
	opts LogOptions

	mu    sync.Mutex
	st    *state
	lease *leaseBlock
	// leaseSize is the size of the next lease (adapted to use); expired
	// is the last lease that ran out of time (how much of it was used).
	leaseSize int
	expired   *leaseBlock
	// leasing is closed when the lease request in flight finishes.
	leasing chan struct{}

	seqB *seqBatcher
}

// Name returns the log's name.
func (l *Log) Name() string { return l.name }

// backoff sleeps d (doubling up to 200 ms) unless ctx ends.
func backoff(ctx context.Context, d *time.Duration) error {
	if *d == 0 {
		*d = 5 * time.Millisecond
	}
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	*d = min(*d*2, 200*time.Millisecond)
	return nil
}

// opCtx bounds an operation by the client's retry timeout.
func (l *Log) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, l.c.cfg.RetryTimeout)
}

// unavailable wraps the last failure when the retry time ran out.
func unavailable(ctx context.Context, last error) error {
	if last == nil {
		last = ctx.Err()
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// state returns the cached view, fetching it on first use.
func (l *Log) state(ctx context.Context) (*state, error) {
	l.mu.Lock()
	st := l.st
	l.mu.Unlock()
	if st != nil {
		return st, nil
	}
	return l.refresh(ctx, 0)
}

// refresh fetches the log's view from a node, waiting (briefly) for one
// whose layout epoch is at least minEpoch. It returns the newest view it
// has even if that is older.
func (l *Log) refresh(ctx context.Context, minEpoch uint64) (*state, error) {
	var info *zlogpb.LogInfo
	err := l.c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		var err error
		info, err = cl.GetLog(cctx, &zlogpb.GetLogRequest{Name: l.name, MinEpoch: minEpoch, WaitMs: 1000})
		return err
	})
	if err != nil {
		return nil, err
	}
	st := &state{rec: RecordFromProto(info.Record), lay: LayoutFromProto(info.Layout), host: info.Host, addrs: info.Addresses}
	l.c.log.Debug("log client: refreshed", "log", l.name, "min_epoch", minEpoch, "epoch", st.lay.Epoch, "host", st.host)
	l.c.learn(info.Addresses)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Within an epoch the trim point only grows: a view with a lower one
	// is stale (a node's watch not caught up) and must not undo a trim
	// this client has seen committed.
	if l.st == nil || st.lay.Epoch > l.st.lay.Epoch || (st.lay.Epoch == l.st.lay.Epoch && (st.rec.TrimBefore > l.st.rec.TrimBefore ||
		st.rec.TrimBefore == l.st.rec.TrimBefore && (st.host != l.st.host || len(st.lay.Segments) != len(l.st.lay.Segments)))) {
		l.st = st
		if l.lease != nil && l.lease.epoch < st.lay.Epoch {
			// Positions of an older epoch: recovery settled them.
			l.lease = nil
		}
	}
	return l.st, nil
}

// report tells a node (not the failing one) that node failed, so that it
// is checked and, if dead, recovered around. Best effort.
func (l *Log) report(ctx context.Context, st *state, node string, why string) {
	l.c.log.Debug("log client: reporting", "log", l.name, "node", node, "epoch", st.lay.Epoch, "why", why)
	addr, _ := st.addr(node)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_ = l.c.anyNode(rctx, addr, func(cl zlogpb.LogClient) error {
		_, err := cl.Report(rctx, &zlogpb.ReportRequest{Name: l.name, Epoch: st.lay.Epoch, Node: node, Reason: why})
		return err
	})
}

// outcome is the result of one storage operation attempt.
type outcome struct {
	status zlogpb.Status
	res    *zlogpb.OpResult
	node   string // the node that failed (UNAVAILABLE)
	err    error
}

// locate finds pos's segment and stripe in st.
func (st *state) locate(pos uint64) (layout.Segment, int, error) {
	i, err := st.lay.Find(pos)
	if err != nil {
		return layout.Segment{}, 0, err
	}
	return st.lay.Segments[i], layout.StripeOf(pos, st.rec.Stripes), nil
}

// below reports whether pos is before the log's first segment (trimmed).
func (st *state) below(pos uint64) bool {
	return pos < st.rec.TrimBefore || (len(st.lay.Segments) > 0 && pos < st.lay.Segments[0].Start)
}

// writeOp sends one write-once operation (data, fill or trim) for pos to
// its stripe's primary.
func (l *Log) writeOp(ctx context.Context, st *state, pos uint64, kind zlogpb.Kind, tok, data []byte) outcome {
	if st.below(pos) {
		return outcome{status: zlogpb.Status_STATUS_TRIMMED}
	}
	seg, s, err := st.locate(pos)
	if err != nil {
		// Not in this view (a newer layout has it): refresh and retry.
		return outcome{status: zlogpb.Status_STATUS_STALE_EPOCH, err: err}
	}
	// The active segment is written at its primary, which decides
	// write-once. A sealed segment is settled: every fresh replica holds
	// the same entries and no holes, so a write there (an idempotent
	// retry, a fill that finds the entry, a trim) can go to any of them.
	var cands []layout.Replica
	for _, r := range seg.Stripes[s] {
		if !r.Stale {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return outcome{status: zlogpb.Status_STATUS_ERROR, err: fmt.Errorf("log: segment %d stripe %d has no fresh replica", seg.ID, s)}
	}
	if seg.Open() {
		cands = cands[:1]
	}
	var o outcome
	for _, prim := range cands {
		o = l.writeTo(ctx, st, seg, s, prim, pos, kind, tok, data)
		if o.status != zlogpb.Status_STATUS_UNAVAILABLE || o.node != prim.Node {
			return o
		}
	}
	return o
}

// writeTo sends the op to one replica of the stripe (the others are its
// backups).
func (l *Log) writeTo(ctx context.Context, st *state, seg layout.Segment, s int, prim layout.Replica, pos uint64, kind zlogpb.Kind, tok, data []byte) outcome {
	op := &zlogpb.Op{Ref: &zlogpb.StripeRef{Log: st.rec.ID, Segment: seg.ID, Stripe: uint32(s)},
		Pos: pos, Kind: kind, Token: tok, Data: data, Device: prim.Device, Epoch: st.lay.Epoch}
	if seg.Open() {
		for _, r := range seg.Stripes[s] {
			if r.Device != prim.Device && !r.Stale {
				op.Backups = append(op.Backups, &zlogpb.Replica{Node: r.Node, Device: r.Device})
			}
		}
	} else if kind == zlogpb.Kind_KIND_TRIM {
		for _, r := range seg.Stripes[s] {
			if r.Device != prim.Device {
				op.Backups = append(op.Backups, &zlogpb.Replica{Node: r.Node, Device: r.Device})
			}
		}
	}
	addr, ok := st.addr(prim.Node)
	if !ok {
		return outcome{status: zlogpb.Status_STATUS_UNAVAILABLE, node: prim.Node, err: fmt.Errorf("log: no address for node %s", prim.Node)}
	}
	b := l.c.pool.Batcher(addr, "write", l.c.cfg.MaxInFlight, func(ctx context.Context, c zlogpb.LogClient, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		r, err := c.Write(ctx, &zlogpb.WriteRequest{Ops: ops})
		if err != nil {
			return nil, err
		}
		return r.Results, nil
	})
	res, err := b.Do(ctx, op)
	if err != nil {
		return outcome{status: zlogpb.Status_STATUS_UNAVAILABLE, node: prim.Node, err: err}
	}
	o := outcome{status: res.Status, res: res}
	if res.Status == zlogpb.Status_STATUS_UNAVAILABLE {
		o.node = res.Node
		o.err = errors.New(res.Message)
	} else if res.Status == zlogpb.Status_STATUS_ERROR || res.Status == zlogpb.Status_STATUS_INVALID {
		o.err = fmt.Errorf("log: node %s: %s", prim.Node, res.Message)
	}
	return o
}

// Append appends data and returns its position. It returns only once the
// entry is durable on every replica of its stripe (or, after a failure,
// on every live replica), and an acknowledged entry is at exactly one
// position: a retry after an unknown outcome reuses the position it may
// have reached.
func (l *Log) Append(ctx context.Context, data []byte) (uint64, error) {
	if len(data) > layout.MaxEntryBytes {
		return 0, fmt.Errorf("%w: entry of %d bytes exceeds %d", ErrInvalid, len(data), layout.MaxEntryBytes)
	}
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	tok := l.c.newToken()
	var pos, epoch uint64
	have := false
	var wait time.Duration
	var last error
	for ctx.Err() == nil {
		if !have {
			p, e, err := l.nextPosition(ctx)
			if err != nil {
				return 0, err
			}
			pos, epoch, have = p, e, true
		}
		st, err := l.state(ctx)
		if err != nil {
			last = err
			if backoff(ctx, &wait) != nil {
				break
			}
			continue
		}
		if st.lay.Epoch < epoch {
			// The sequencer is ahead of our layout: fetch the new one.
			if _, err := l.refresh(ctx, epoch); err != nil {
				last = err
			}
			continue
		}
		o := l.writeOp(ctx, st, pos, zlogpb.Kind_KIND_DATA, tok, data)
		switch o.status {
		case zlogpb.Status_STATUS_OK:
			return pos, nil
		case zlogpb.Status_STATUS_TAKEN, zlogpb.Status_STATUS_TRIMMED:
			// Someone else's entry (or a fill) is there: a new position.
			have, wait = false, 0
		case zlogpb.Status_STATUS_STALE_EPOCH, zlogpb.Status_STATUS_SEALED:
			l.c.log.Debug("log client: append refused", "log", l.name, "pos", pos, "status", o.status, "epoch", st.lay.Epoch)
			// Recovery sealed the segment. Same position under the new
			// layout: our entry may be there already (settle kept it), or
			// the position now lies in the new segment.
			last = fmt.Errorf("log: %s at epoch %d", o.status, st.lay.Epoch)
			if _, err := l.refresh(ctx, st.lay.Epoch+1); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				return 0, unavailable(ctx, last)
			}
		case zlogpb.Status_STATUS_BUSY:
			// Our own earlier attempt is still being written.
			time.Sleep(time.Millisecond)
		case zlogpb.Status_STATUS_UNAVAILABLE:
			last = o.err
			l.report(ctx, st, o.node, "append: "+errString(o.err))
			if _, err := l.refresh(ctx, st.lay.Epoch); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				return 0, unavailable(ctx, last)
			}
		default:
			return 0, o.err
		}
	}
	return 0, unavailable(ctx, last)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Read returns the entry at pos: data, a fill or a trim, or ErrNotWritten
// (a hole, or a position not yet appended).
func (l *Log) Read(ctx context.Context, pos uint64) (Entry, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	var wait time.Duration
	var last error
	for ctx.Err() == nil {
		st, err := l.state(ctx)
		if err != nil {
			return Entry{}, err
		}
		if st.below(pos) {
			return Entry{Pos: pos, Kind: KindTrim}, ErrTrimmed
		}
		seg, s, err := st.locate(pos)
		if err != nil {
			last = err
			if _, err := l.refresh(ctx, st.lay.Epoch+1); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				break
			}
			continue
		}
		// The active segment is read at its primary only (the one that
		// knows which entries are fully replicated); a sealed segment's
		// replicas all agree, so any fresh one answers.
		var cands []layout.Replica
		for _, r := range seg.Stripes[s] {
			if !r.Stale {
				cands = append(cands, r)
			}
		}
		if seg.Open() {
			cands = cands[:1]
		}
		failed, newer := "", false
	replicas:
		for _, r := range cands {
			addr, ok := st.addr(r.Node)
			if !ok {
				failed = r.Node
				continue
			}
			op := &zlogpb.Op{Ref: &zlogpb.StripeRef{Log: st.rec.ID, Segment: seg.ID, Stripe: uint32(s)}, Pos: pos, Device: r.Device, Epoch: st.lay.Epoch}
			b := l.c.pool.Batcher(addr, "read", l.c.cfg.MaxInFlight, func(ctx context.Context, c zlogpb.LogClient, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
				resp, err := c.Read(ctx, &zlogpb.ReadRequest{Ops: ops})
				if err != nil {
					return nil, err
				}
				return resp.Results, nil
			})
			res, err := b.Do(ctx, op)
			if err != nil {
				failed, last = r.Node, err
				continue
			}
			switch res.Status {
			case zlogpb.Status_STATUS_OK:
				return Entry{Pos: pos, Kind: Kind(res.Kind), Data: res.Data}, nil
			case zlogpb.Status_STATUS_NOT_WRITTEN:
				return Entry{Pos: pos}, ErrNotWritten
			case zlogpb.Status_STATUS_TRIMMED:
				return Entry{Pos: pos, Kind: KindTrim}, ErrTrimmed
			case zlogpb.Status_STATUS_STALE_EPOCH:
				// Recovery sealed the segment at a newer epoch: what
				// the replica holds is final only once that layout
				// commits. Wait for it (not a node failure).
				last = fmt.Errorf("log: read %d at %s: sealed at a newer epoch than %d", pos, r.Node, st.lay.Epoch)
				failed, newer = "", true
				break replicas
			case zlogpb.Status_STATUS_BUSY:
				// The primary restarted and does not know whether this
				// entry was acknowledged: a fill completes it (or fills
				// nothing there) and returns what the position holds.
				return l.Fill(ctx, pos)
			default:
				failed, last = r.Node, fmt.Errorf("log: read %d at %s: %s %s", pos, r.Node, res.Status, res.Message)
			}
		}
		if failed != "" {
			l.report(ctx, st, failed, "read: "+errString(last))
		}
		minEpoch := st.lay.Epoch
		if newer {
			minEpoch++
		}
		if _, err := l.refresh(ctx, minEpoch); err != nil {
			last = err
		}
		if backoff(ctx, &wait) != nil {
			break
		}
	}
	return Entry{}, unavailable(ctx, last)
}

// Fill makes pos a hole that readers skip, unless an entry is already
// there (or is completed by the fill: a partly replicated entry is
// finished instead of being filled). It returns what pos holds afterwards.
func (l *Log) Fill(ctx context.Context, pos uint64) (Entry, error) {
	return l.fillOrTrim(ctx, pos, zlogpb.Kind_KIND_FILL)
}

// Trim marks pos trimmed: its space may be reclaimed. (TrimPrefix is the
// cheap way to trim many positions.)
func (l *Log) Trim(ctx context.Context, pos uint64) error {
	_, err := l.fillOrTrim(ctx, pos, zlogpb.Kind_KIND_TRIM)
	return err
}

func (l *Log) fillOrTrim(ctx context.Context, pos uint64, kind zlogpb.Kind) (Entry, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	tok := l.c.newToken()
	var wait time.Duration
	var last error
	for ctx.Err() == nil {
		st, err := l.state(ctx)
		if err != nil {
			return Entry{}, err
		}
		o := l.writeOp(ctx, st, pos, kind, tok, nil)
		switch o.status {
		case zlogpb.Status_STATUS_OK:
			return Entry{Pos: pos, Kind: Kind(kind)}, nil
		case zlogpb.Status_STATUS_TAKEN:
			return Entry{Pos: pos, Kind: Kind(o.res.Kind), Data: o.res.Data}, nil
		case zlogpb.Status_STATUS_TRIMMED:
			return Entry{Pos: pos, Kind: KindTrim}, nil
		case zlogpb.Status_STATUS_STALE_EPOCH, zlogpb.Status_STATUS_SEALED:
			last = fmt.Errorf("log: %s", o.status)
			if _, err := l.refresh(ctx, st.lay.Epoch+1); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				return Entry{}, unavailable(ctx, last)
			}
		case zlogpb.Status_STATUS_BUSY:
			time.Sleep(time.Millisecond)
		case zlogpb.Status_STATUS_UNAVAILABLE:
			last = o.err
			l.report(ctx, st, o.node, "fill: "+errString(o.err))
			if _, err := l.refresh(ctx, st.lay.Epoch); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				return Entry{}, unavailable(ctx, last)
			}
		default:
			return Entry{}, o.err
		}
	}
	return Entry{}, unavailable(ctx, last)
}

// TrimPrefix trims every position below before (recorded in the
// metadata; nodes reclaim the space).
func (l *Log) TrimPrefix(ctx context.Context, before uint64) error {
	var info *zlogpb.LogInfo
	err := l.c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		var err error
		info, err = cl.TrimLog(ctx, &zlogpb.TrimLogRequest{Name: l.name, Before: before})
		return err
	})
	if err != nil {
		return err
	}
	// Adopt the committed record at once: a refresh may be answered from
	// a node's watch-fed view that has not seen the trim yet, and a read
	// right after TrimPrefix must already report the prefix trimmed.
	rec, lay := RecordFromProto(info.Record), LayoutFromProto(info.Layout)
	l.mu.Lock()
	if l.st != nil && lay.Epoch == l.st.lay.Epoch && rec.TrimBefore > l.st.rec.TrimBefore {
		st := *l.st
		st.rec, st.lay = rec, lay
		l.st = &st
	}
	l.mu.Unlock()
	_, _ = l.refresh(ctx, 0)
	return nil
}

// seqCall runs f against the sequencer host, following host changes.
func (l *Log) seqCall(ctx context.Context, f func(context.Context, zlogpb.LogClient) error) error {
	var wait time.Duration
	var last error
	for ctx.Err() == nil {
		st, err := l.state(ctx)
		if err != nil {
			return err
		}
		addr, ok := st.addr(st.host)
		if st.host == "" || !ok {
			last = fmt.Errorf("log %s: no sequencer host yet", l.name)
			if _, err := l.refresh(ctx, st.lay.Epoch+1); err != nil {
				last = err
			}
			if backoff(ctx, &wait) != nil {
				break
			}
			continue
		}
		cl, err := l.c.pool.Get(addr)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = f(cctx, cl)
			cancel()
		}
		if err == nil {
			return nil
		}
		last = err
		l.c.log.Debug("log client: sequencer call failed", "log", l.name, "host", st.host, "epoch", st.lay.Epoch, "err", err)
		if transient(err) {
			l.c.pool.Reset(addr)
		}
		switch status.Code(err) {
		case codes.NotFound:
			return mapErr(err)
		case codes.InvalidArgument:
			return mapErr(err)
		case codes.FailedPrecondition:
			// Not (or no longer) the host, or still recovering.
			if _, err := l.refresh(ctx, st.lay.Epoch); err != nil {
				last = err
			}
		default:
			// The host did not answer: have it checked, then wait for the
			// next epoch (a new host's recovery ends by installing it).
			l.report(ctx, st, st.host, "sequencer: "+err.Error())
			if _, err := l.refresh(ctx, st.lay.Epoch+1); err != nil {
				last = err
			}
		}
		if backoff(ctx, &wait) != nil {
			break
		}
	}
	return unavailable(ctx, last)
}

// tailOnce asks the sequencer for the tail with the caller's deadline.
func (l *Log) tailOnce(ctx context.Context) (uint64, error) {
	tail, _, err := l.tailEpoch(ctx)
	return tail, err
}

func (l *Log) tailEpoch(ctx context.Context) (tail, epoch uint64, err error) {
	err = l.seqCall(ctx, func(ctx context.Context, cl zlogpb.LogClient) error {
		r, err := cl.Tail(ctx, &zlogpb.TailRequest{Name: l.name})
		if err == nil {
			tail, epoch = r.Tail, r.Epoch
		}
		return err
	})
	return tail, epoch, err
}

// TailAt is Tail with the epoch of the sequencer that answered: a tail is
// only comparable with the layout of that epoch (recovery may start the
// next epoch below positions the old sequencer handed out but nobody
// wrote).
func (l *Log) TailAt(ctx context.Context) (tail, epoch uint64, err error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	return l.tailEpoch(ctx)
}

// Tail returns the next position the sequencer will hand out: every
// position below it has been given to an appender (and is, or will be,
// written or filled).
func (l *Log) Tail(ctx context.Context) (uint64, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	return l.tailOnce(ctx)
}

// Close returns the handle's lease (filling its unused positions).
func (l *Log) Close() {
	l.mu.Lock()
	lb := l.lease
	l.lease = nil
	l.mu.Unlock()
	if lb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.release(ctx, lb)
		cancel()
	}
}
