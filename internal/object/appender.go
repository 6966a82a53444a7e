package object

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Batched small appends (docs/design/0012). Writers whose whole object is
// one small extent do not take an open egroup for themselves: they hand
// their encoded extent to the appender of their pool key, which lays the
// extents of every writer waiting at that moment back to back and writes
// them with one fsynced append per replica (one replica RPC per remote
// replica). Each writer then commits its own object and extent records
// with a compare on the egroup record's revision, as a writer of an
// exclusive egroup does while the record lags.
//
// The appender alone rewrites the egroup record while it holds the
// egroup (a new egroup, the record lag, a new tail range, the seal), and
// only after every writer of an earlier batch has committed or given up:
// its own rewrite must never fail a writer's compare. A rewrite from
// elsewhere (a seal, a bad mark) does fail them; they write their extent
// again into another egroup, and the bytes left behind are dead data.
//
// An egroup is the appender's only while batches are being written or
// committed; when both stop it goes back to the pool, where exclusive
// writers and SealIdle find it as they find any other.

// appender groups the small appends of one pool key.
type appender struct {
	l      *Layer
	key    string
	vector model.Vector
	class  string

	mu sync.Mutex
	// drained is signalled whenever an egroup's pending count falls to 0.
	drained *sync.Cond
	queue   []*appendReq
	leading bool // a writer is writing a batch; the others queue
	cur     *openEgroup
}

// appendReq is one writer's extent waiting for a batch.
type appendReq struct {
	enc     []byte
	exclude []model.DeviceID
	// id, when set, is the extent ID the write already has: its object
	// record names it, and its first egroup was fenced before the commit
	// (see commitBatched). The record rewrite covers it.
	id uint64
	// ready receives once: the extent is written (slot or err set), or
	// the writer is to lead the next batch (lead set).
	ready chan struct{}
	lead  bool
	slot  *appendSlot
	err   error
}

// appendSlot is where a batch put one writer's extent. The writer holds
// it until its commit succeeds or it gives up (done), and the egroup's
// record stays at rev until then.
type appendSlot struct {
	a   *appender
	e   *openEgroup
	off int64
	id  uint64
	rev int64
}

// batchWrites bounds the extents of one batch, and batchBytes its bytes
// in units of Options.BatchMaxBytes: a batch is what was waiting when
// the previous one returned, capped so one slow replica delays a bounded
// number of writers.
const (
	batchWrites = 64
	batchBytes  = 16
)

func (l *Layer) appenderFor(v model.Vector, class string) *appender {
	k := poolKey(v, class)
	if a, ok := l.appenders.Load(k); ok {
		return a.(*appender)
	}
	a := &appender{l: l, key: k, vector: v, class: class}
	a.drained = sync.NewCond(&a.mu)
	got, _ := l.appenders.LoadOrStore(k, a)
	return got.(*appender)
}

// append writes enc (an encoded extent) into the appender's egroup as
// part of a batch and returns where it landed: fsynced on every replica,
// with an extent ID the egroup record's tail range covers. The caller
// commits and then calls done.
func (a *appender) append(ctx context.Context, enc []byte, exclude []model.DeviceID, id uint64) (*appendSlot, error) {
	req := &appendReq{enc: enc, exclude: exclude, id: id, ready: make(chan struct{}, 1)}
	a.mu.Lock()
	a.queue = append(a.queue, req)
	if a.leading {
		a.mu.Unlock()
		select {
		case <-req.ready:
		case <-ctx.Done():
			a.mu.Lock()
			if a.dequeue(req) {
				// Not taken into a batch yet. If leadership was just
				// handed to it, pass it on.
				if req.lead {
					a.passLead()
				}
				a.mu.Unlock()
				return nil, ctx.Err()
			}
			a.mu.Unlock()
			// In a batch being written: its answer comes within the
			// leader's bound (batchTimeout), and a slot it gets must be
			// ended by the writer (its commit fails on its context).
			<-req.ready
		}
		if !req.lead {
			return req.slot, req.err
		}
		a.mu.Lock()
	}
	a.leading = true
	// The leader's own request is first in the queue: the queue is empty
	// whenever no one leads, and leadership passes to the head.
	batch := a.takeBatch()
	a.mu.Unlock()
	// The batch is everyone's: it does not stop when the leader's client
	// goes away, but it is bounded, since the writers queued behind it
	// wait for it whatever their own deadlines.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	a.write(bctx, batch)
	cancel()
	a.mu.Lock()
	a.passLead()
	a.mu.Unlock()
	return req.slot, req.err
}

// undoTimeout bounds cutting a failed batch back on its replicas. A
// variable for tests.
var undoTimeout = 30 * time.Second

// batchTimeout bounds one batch's work: placement, the wait for earlier
// batches' commits and the record rewrite, and the replica appends (a
// remote append has its own RPC timeout). A variable for tests.
var batchTimeout = time.Minute

// passLead hands leadership to the head of the queue, or ends it. a.mu
// is held.
func (a *appender) passLead() {
	if len(a.queue) > 0 {
		next := a.queue[0]
		next.lead = true
		next.ready <- struct{}{}
		return
	}
	a.leading = false
	a.releaseIdle()
}

// dequeue removes req from the queue if it is still there. a.mu is held.
func (a *appender) dequeue(req *appendReq) bool {
	for i, r := range a.queue {
		if r == req {
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
			return true
		}
	}
	return false
}

// takeBatch removes the head of the queue and as many followers as fit.
// a.mu is held.
func (a *appender) takeBatch() []*appendReq {
	// A batch never makes an egroup outgrow its size by more than one
	// write (a fresh egroup takes the head of the queue whatever it is).
	limit := min(batchBytes*a.l.opts.BatchMaxBytes, a.l.opts.EgroupMaxBytes)
	n, bytes := 0, int64(0)
	for n < len(a.queue) && n < batchWrites {
		b := int64(len(a.queue[n].enc))
		if n > 0 && bytes+b > limit {
			break
		}
		bytes += b
		n++
	}
	batch := a.queue[:n:n]
	a.queue = append([]*appendReq(nil), a.queue[n:]...)
	return batch
}

// releaseIdle returns the current egroup to the pool when no batch is
// being written and no writer is committing into it. a.mu is held.
func (a *appender) releaseIdle() {
	e := a.cur
	if e == nil || a.leading || e.pending > 0 {
		return
	}
	a.cur = nil
	e.committed = e.size
	a.l.pool.give(e)
}

// done ends a writer's hold on its slot, after its commit succeeded or
// failed. The last writer out of an egroup the appender has retired
// seals it.
func (s *appendSlot) done(ctx context.Context) {
	a, e := s.a, s.e
	a.mu.Lock()
	e.pending--
	if e.pending > 0 {
		a.mu.Unlock()
		return
	}
	a.drained.Broadcast()
	if e == a.cur {
		a.releaseIdle()
		a.mu.Unlock()
		return
	}
	seal, ok := a.sealState(e)
	a.mu.Unlock()
	if ok {
		a.l.sealRetired(context.WithoutCancel(ctx), seal)
	}
}

// sealState returns what sealing e needs if e is retired, no writer is
// in it and no one seals it yet; ok is false otherwise. a.mu is held.
func (a *appender) sealState(e *openEgroup) (s retiredEgroup, ok bool) {
	if !e.full || e.pending > 0 || e.sealing {
		return s, false
	}
	e.sealing = true
	return retiredEgroup{id: e.id, modRev: e.modRev, size: e.size, mtime: e.mtime, replicas: e.modelReplicas(), uncertain: e.uncertain}, true
}

// fenced tells the appender that a writer's compare on e's record failed:
// someone else rewrote it (a seal, a bad mark), so e takes no more batches.
func (s *appendSlot) fenced() {
	a := s.a
	a.mu.Lock()
	s.e.full = true
	if a.cur == s.e {
		a.cur = nil
	}
	a.mu.Unlock()
}

// errTailRange: an extent ID a write already has lies too far below the
// node's current ID block for one tail range to reach both.
var errTailRange = errors.New("object: extent ID too old for a tail range")

// reachable answers, with errTailRange, the requests whose extent ID no
// tail range that also covers the node's current ID block could reach
// (a write that waited while the cluster drew a million IDs), and returns
// the others: one such write must not fail the batch.
func (a *appender) reachable(ctx context.Context, batch []*appendReq) []*appendReq {
	_, to, err := a.l.extentSeq.Block(ctx)
	if err != nil || to == 0 {
		return batch
	}
	keep := batch[:0]
	for _, r := range batch {
		if r.id != 0 && to-r.id > maxTailRange-extentIDBlock {
			r.err = fmt.Errorf("%w: extent %s, the node's IDs now run to %d", errTailRange, meta.FormatID(r.id), to)
			r.ready <- struct{}{}
			continue
		}
		keep = append(keep, r)
	}
	return keep
}

// write writes one batch and answers each of its requests.
func (a *appender) write(ctx context.Context, batch []*appendReq) {
	l := a.l
	if batch = a.reachable(ctx, batch); len(batch) == 0 {
		return
	}
	var total int64
	var exclude []model.DeviceID
	for _, r := range batch {
		total += int64(len(r.enc))
		exclude = append(exclude, r.exclude...)
	}
	answer := func(err error) {
		for _, r := range batch {
			r.err = err
			r.ready <- struct{}{}
		}
	}
	l.m.appendBatch.Observe(float64(len(batch)))
	var lastFailed error
	for attempt := 0; ; attempt++ {
		fixed := make([]uint64, len(batch))
		for i, r := range batch {
			fixed[i] = r.id
		}
		e, ids, err := a.prepare(ctx, total, fixed, &exclude)
		if err != nil {
			if lastFailed != nil {
				err = fmt.Errorf("%w; after %v", err, lastFailed)
			}
			answer(err)
			return
		}
		off := e.size
		buf := batch[0].enc
		if len(batch) > 1 {
			buf = make([]byte, 0, total)
			for _, r := range batch {
				buf = append(buf, r.enc...)
			}
		}
		errs := l.parallel(e.replicas, func(r meta.EgroupReplica) error {
			return l.rio.AppendSync(ctx, r.Replica(), e.id, off, buf)
		})
		var failed error
		for i, err := range errs {
			if err != nil {
				failed = err
				exclude = append(exclude, e.replicas[i].Device)
				if errors.Is(err, device.ErrFull) {
					l.snaps.invalidate()
				}
			}
		}
		if failed == nil {
			now := l.opts.Now().UnixNano()
			a.mu.Lock()
			e.size += total
			e.durable = e.size
			e.mtime = now
			e.pending += len(batch)
			a.mu.Unlock()
			l.snaps.placed(e.modelReplicas(), total)
			for i, r := range batch {
				r.slot = &appendSlot{a: a, e: e, off: off, id: ids[i], rev: e.modRev}
				off += int64(len(r.enc))
				r.ready <- struct{}{}
			}
			return
		}
		// Undo the partial append where it landed; earlier batches'
		// bytes stay, and the egroup is sealed once their writers are out.
		// On a context of its own: a replica that hung until the batch's
		// ran out is exactly when the others must be cut back.
		// In parallel, so a replica whose truncate hangs as its append
		// did does not use up the others' time.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		l.parallel(e.replicas, func(r meta.EgroupReplica) error {
			return l.rio.Truncate(uctx, r.Replica(), e.id, off)
		})
		cancel()
		a.mu.Lock()
		e.broken = true
		a.mu.Unlock()
		a.retire(ctx, e)
		lastFailed = failed
		l.m.replicaWriteFailures.Inc()
		l.opts.Logger.Warn("replica append failed; re-placing a batch", "egroup", meta.FormatID(e.id), "writes", len(batch), "err", failed)
		if attempt >= maxReplaceAttempts {
			if errors.Is(failed, device.ErrFull) {
				failed = fmt.Errorf("%w: %v", ErrInsufficientStorage, failed)
			}
			answer(failed)
			return
		}
	}
}

// prepare returns the egroup the next batch of total bytes goes into and
// n extent IDs for its writers, with the egroup record rewritten first if
// it does not cover them (a new egroup, the lag, IDs outside the tail
// range). exclude collects devices that failed this batch.
func (a *appender) prepare(ctx context.Context, total int64, fixed []uint64, exclude *[]model.DeviceID) (*openEgroup, []uint64, error) {
	l := a.l
	for attempt := 0; ; attempt++ {
		e, err := a.egroup(ctx, total, *exclude)
		if err != nil {
			return nil, nil, err
		}
		ids, err := a.record(ctx, e, total, fixed)
		if err == nil {
			return e, ids, nil
		}
		if errors.Is(err, errTailRange) {
			return nil, nil, err // the IDs' fault, not the egroup's
		}
		a.retire(ctx, e)
		if !errors.Is(err, meta.ErrConflict) || attempt >= maxReplaceAttempts {
			return nil, nil, err
		}
		l.opts.Logger.Debug("egroup record changed under the appender; taking another", "egroup", meta.FormatID(e.id))
	}
}

// egroup returns the appender's current egroup if the batch fits and may
// go there, and otherwise retires it and takes one from the pool or
// places a new one.
func (a *appender) egroup(ctx context.Context, total int64, exclude []model.DeviceID) (*openEgroup, error) {
	l := a.l
	now := l.opts.Now()
	usable := func(e *openEgroup) bool {
		return !e.full && !e.broken && !e.retired(now) &&
			(e.size == 0 || e.size+total <= l.opts.EgroupMaxBytes) && !l.unwritable(e, exclude)
	}
	a.mu.Lock()
	e := a.cur
	ok := e != nil && usable(e)
	a.mu.Unlock()
	if ok {
		return e, nil
	}
	if e != nil {
		a.retire(ctx, e)
	}
	for {
		e = l.pool.take(a.key)
		if e == nil {
			break
		}
		if usable(e) {
			a.mu.Lock()
			a.cur = e
			a.mu.Unlock()
			return e, nil
		}
		a.retire(ctx, e)
	}
	w := &writer{l: l, vector: a.vector, class: a.class, exclude: exclude}
	var err error
	for attempt := 0; ; attempt++ {
		e, err = w.newEgroup(ctx, max(total, l.opts.EgroupMaxBytes/16))
		if err == nil {
			break
		}
		if attempt >= maxReplaceAttempts || errors.Is(err, ErrInsufficientStorage) || ctx.Err() != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	a.cur = e
	a.mu.Unlock()
	return e, nil
}

// record returns the batch's extent IDs — fixed[i] where set, fresh
// ones elsewhere — and makes sure e's record covers them and the batch's
// bytes; if it does not, it waits for the writers of earlier batches to
// finish and rewrites the record. meta.ErrConflict means someone else
// rewrote the record: the egroup is lost to the appender.
func (a *appender) record(ctx context.Context, e *openEgroup, total int64, fixed []uint64) ([]uint64, error) {
	l := a.l
	ids := append([]uint64(nil), fixed...)
	rewritten := false
	for {
		for i := range ids {
			if fixed[i] != 0 {
				continue
			}
			id, err := l.extentSeq.Next(ctx)
			if err != nil {
				return nil, err
			}
			ids[i] = id
		}
		covered := e.modRev != 0 && e.tailTo != 0 &&
			(rewritten || e.size+total-e.recorded <= l.opts.EgroupRecordLag)
		for _, id := range ids {
			covered = covered && id >= e.tailFrom && id < e.tailTo
		}
		if covered {
			return ids, nil
		}
		if err := a.drain(ctx, e); err != nil {
			return nil, err
		}
		from, to, err := l.extentSeq.Block(ctx)
		if err == nil && to <= from {
			// The block is used up: a record must never state an empty
			// range (a sealer would reject it). Take the next block.
			if _, err = l.extentSeq.Next(ctx); err == nil {
				from, to, err = l.extentSeq.Block(ctx)
			}
		}
		if err != nil {
			return nil, err
		}
		// The range reaches down to the IDs writers already hold (a
		// range is only what a sealer reads; it need not be one block).
		for _, id := range fixed {
			if id != 0 {
				from = min(from, id)
			}
		}
		if to-from > maxTailRange {
			return nil, fmt.Errorf("%w: egroup %s: extent IDs [%d, %d)", errTailRange, meta.FormatID(e.id), from, to)
		}
		now := l.opts.Now().UnixNano()
		rec := meta.Egroup{
			Replicas: e.replicas, State: meta.EgroupOpen, Size: e.size, Vector: e.vector, Mtime: now,
			Writer: l.opts.Node, TailFrom: from, TailTo: to,
		}
		var t meta.Txn
		t.If(meta.EgroupKey(e.id), e.modRev)
		t.Put(meta.EgroupKey(e.id), meta.Encode(rec))
		rev, err := l.kv.Commit(ctx, &t)
		if err != nil {
			if !errors.Is(err, meta.ErrConflict) {
				// It may have landed: the record, if it exists, is true
				// (it states no byte that is not written), so sealing it
				// later is safe; removing the files is not.
				a.mu.Lock()
				e.uncertain = true
				a.mu.Unlock()
			}
			return nil, err
		}
		a.mu.Lock()
		e.modRev, e.recorded, e.committed = rev, e.size, e.size
		e.tailFrom, e.tailTo = from, to
		e.mtime = now
		a.mu.Unlock()
		// The block's range starts at the next ID the sequence hands
		// out, past the fresh ones drawn above: draw those again (IDs
		// are plentiful; unused ones are simply never used).
		rewritten = true
	}
}

// drain waits until no writer of an earlier batch is committing into e,
// or ctx ends (a commit that hangs must not hold every queued writer for
// longer than the batch's bound).
func (a *appender) drain(ctx context.Context, e *openEgroup) error {
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.drained.Broadcast()
		a.mu.Unlock()
	})
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for e.pending > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("object: egroup %s: waiting for %d commits before a record rewrite: %w", meta.FormatID(e.id), e.pending, err)
		}
		a.drained.Wait()
	}
	return nil
}

// retire takes e out of the appender's use; once no writer is
// committing into it, it is sealed (or, never recorded, removed).
func (a *appender) retire(ctx context.Context, e *openEgroup) {
	a.mu.Lock()
	e.full = true
	if a.cur == e {
		a.cur = nil
	}
	seal, ok := a.sealState(e)
	a.mu.Unlock()
	if ok {
		a.l.sealRetired(ctx, seal)
	}
}

// retiredEgroup is what sealing a retired egroup reads, copied under the
// appender's lock.
type retiredEgroup struct {
	id        uint64
	modRev    int64
	size      int64
	mtime     int64
	replicas  []model.Replica
	uncertain bool
}

// sealRetired seals an open egroup no writer uses any more. Its size is
// exact (every batch written into it is counted, committed or not). If
// its record changed under it (a bad mark, a seal from elsewhere), the
// tail's extent records decide, as for a writer that failed uncertainly.
// It runs on a context of its own: the caller's may be the batch's, which
// has run out exactly when a batch fails. A seal that fails (metadata
// unreachable) is retried by SealIdle; until then the egroup stays open,
// out of the pool and of the Curator's reach.
func (l *Layer) sealRetired(ctx context.Context, e retiredEgroup) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sealTimeout)
	defer cancel()
	if e.modRev == 0 {
		if e.uncertain {
			l.sealDropped(ctx, e.id)
			return
		}
		for _, r := range e.replicas {
			_ = l.rio.Remove(ctx, r, e.id)
		}
		return
	}
	sealed, err := l.sealOpen(ctx, e.id, e.modRev, e.size, e.mtime)
	switch {
	case err != nil:
		l.opts.Logger.Warn("sealing a retired egroup failed; retrying with the idle seals", "egroup", meta.FormatID(e.id), "err", err)
		l.keepUnsealed(e)
	case !sealed:
		l.sealDropped(ctx, e.id)
	}
}

// sealTimeout bounds sealing one retired egroup.
const sealTimeout = 30 * time.Second

// keepUnsealed queues egroups whose seal failed for the next idle-seal
// round (sealUnsealed).
func (l *Layer) keepUnsealed(es ...retiredEgroup) {
	l.unsealedMu.Lock()
	l.unsealed = append(l.unsealed, es...)
	l.unsealedMu.Unlock()
}

// sealUnsealed retries the seals of retired egroups that failed.
func (l *Layer) sealUnsealed(ctx context.Context) {
	l.unsealedMu.Lock()
	list := l.unsealed
	l.unsealed = nil
	l.unsealedMu.Unlock()
	for _, e := range list {
		l.sealRetired(ctx, e)
	}
}

// batchable reports whether a write of size bytes (negative: unknown
// until the body ends) may go through its pool key's appender: writes to
// the pool (not a private Curator writer, not an explicit placement),
// while egroup records may lag, of a size that can be small. Whether it
// does is decided at its first extent (batchedExtent).
func (w *writer) batchable(size int64) bool {
	o := w.l.opts
	return o.BatchMaxBytes > 0 && o.EgroupRecordLag > 0 && size != 0 && size <= o.BatchMaxBytes &&
		w.place.IsZero() && !w.private
}

// batchedExtent reports whether an extent of n payload bytes goes
// through the appender: the writer's first and last, at most
// BatchMaxBytes (the whole object is that one small extent).
func (w *writer) batchedExtent(n int, last bool) bool {
	return w.batched && last && len(w.extents) == 0 && int64(n) <= w.l.opts.BatchMaxBytes
}

// appendBatched writes the writer's only extent through the appender.
func (w *writer) appendBatched(ctx context.Context, enc, payload []byte, x meta.Extent) error {
	if w.fingerprint && x.FP == nil && x.Codec == "" {
		s := sha256.Sum256(payload)
		x.FP = s[:]
	}
	slot, err := w.l.appenderFor(w.vector, w.class).append(ctx, enc, w.exclude, 0)
	if err != nil {
		return err
	}
	w.slot, w.slotEnc = slot, enc
	x.Egroup, x.Off, x.Ctime = slot.e.id, slot.off, w.l.opts.Now().UnixNano()
	w.extents = append(w.extents, pendingExtent{id: slot.id, rec: x})
	return nil
}

// commitBatched commits a batched writer's extent and the caller's
// records with a compare on the egroup record's revision at the batch.
// If that compare fails because someone else rewrote the record (a seal,
// a bad mark), the appender stops using the egroup and the writer hands
// its extent to the appender again, with the extent ID its object record
// already names: it lands in another egroup, whose record's tail range is
// widened to cover the ID, and the commit is repeated. The bytes left in
// the first egroup are dead data. The writer never raises the length of
// a record someone else sealed: a peer's start-up recovery may already
// have cut its replica to that length.
func (w *writer) commitBatched(ctx context.Context, final func(t *meta.Txn)) error {
	l := w.l
	x := &w.extents[0]
	for attempt := 0; ; attempt++ {
		s := w.slot
		var t meta.Txn
		t.If(meta.EgroupKey(s.e.id), s.rev)
		t.Put(meta.ExtentKey(x.id), meta.Encode(x.rec))
		final(&t)
		_, err := l.kv.Commit(ctx, &t)
		if err == nil {
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			// A failed compare changed nothing; any other error may hide
			// a transaction that landed.
			w.uncertain = true
			return err
		}
		it, gerr := l.kv.Get(ctx, meta.EgroupKey(s.e.id))
		switch {
		case gerr != nil && !errors.Is(gerr, meta.ErrNotFound):
			return err
		case gerr == nil && it.ModRev == s.rev:
			return err // one of the caller's compares failed
		case attempt >= maxReplaceAttempts || ctx.Err() != nil:
			return err
		}
		l.opts.Logger.Debug("egroup record changed under a batched write; writing the extent again",
			"egroup", meta.FormatID(s.e.id), "extent", meta.FormatID(x.id))
		s.fenced()
		s.done(ctx)
		w.slot = nil
		next, aerr := l.appenderFor(w.vector, w.class).append(ctx, w.slotEnc, w.exclude, x.id)
		if aerr != nil {
			return aerr
		}
		w.slot = next
		x.rec.Egroup, x.rec.Off = next.e.id, next.off
	}
}
