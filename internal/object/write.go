package object

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// openEgroup is an egroup a writer holds exclusively while appending.
type openEgroup struct {
	id     uint64
	vector model.Vector
	// class is the writer's transform class (poolClass): only writes of
	// the same class share an open egroup.
	class    string
	replicas []meta.EgroupReplica
	// committed is the length committed in metadata (the record's Size,
	// or past it the extent records in the record's tail range); size
	// includes this writer's appends that are not yet committed.
	committed int64
	size      int64
	modRev    int64 // 0 until the record exists
	// recorded is the Size the record states and [tailFrom, tailTo) its
	// tail range: commits whose extents of this egroup all have IDs in
	// the range, and that leave committed within Options.EgroupRecordLag
	// of recorded, do not rewrite the record.
	recorded         int64
	tailFrom, tailTo uint64
	mtime            int64     // of its last commit (unix ns)
	idleSince        time.Time // when it went back to the pool
	// retireAt, when set, is when the pool stops handing the egroup out:
	// it was placed on a slower tier than its vector prefers because the
	// preferred tier was full (see fallbackTier), and once tiering has
	// made room, new writes should land on the fast tier again instead of
	// filling this egroup for as long as it stays busy.
	retireAt time.Time
	full     bool // sealed at the next commit
	broken   bool // a replica failed; never append again
	// pending counts the writers of batches (appender.go) between their
	// append and the end of their commit; sealing marks that someone
	// seals the egroup; uncertain, that a record rewrite may have landed.
	// The appender's lock guards them while it holds the egroup.
	pending   int
	sealing   bool
	uncertain bool
	// durable is the size through which every replica is known to be
	// fsynced (a writer's last append carries the sync: AppendSync).
	durable int64
	// codec is the codec of the compressed extents the egroup holds (set
	// by the first one; only the Curator's private writers store them) and
	// logical the payload bytes of all its extents before compression.
	codec   string
	logical int64
}

// retired reports whether a fallback egroup's lifetime has run out.
func (e *openEgroup) retired(now time.Time) bool {
	return !e.retireAt.IsZero() && !now.Before(e.retireAt)
}

func (e *openEgroup) modelReplicas() []model.Replica {
	out := make([]model.Replica, len(e.replicas))
	for i, r := range e.replicas {
		out[i] = r.Replica()
	}
	return out
}

// egroupPool hands open egroups to writers, one writer per egroup, so
// appends never interleave and each writer's commit updates only its own
// egroup records (no hot keys).
type egroupPool struct {
	l    *Layer
	sem  chan struct{}
	mu   sync.Mutex
	idle map[string][]*openEgroup // by poolKey
}

// poolKey is what writers sharing an open egroup have in common: the
// vector, and the transform class of their buckets, so that the Curator
// finds each egroup under one transform policy (an egroup whose buckets
// disagree is left as it is; docs/design/0010).
func poolKey(v model.Vector, class string) string { return v.String() + "|" + class }

// poolClass is a bucket's transform class: what the Curator's transform
// decisions read from it. Buckets without a transform policy share "".
func poolClass(b meta.Bucket) string {
	t := b.Transform
	if t == nil || t.Compress == "" && t.EC == "" && !t.Dedup {
		return ""
	}
	return fmt.Sprintf("%s/%s/%t", t.Compress, t.EC, t.Dedup)
}

func newEgroupPool(l *Layer, max int) *egroupPool {
	return &egroupPool{l: l, sem: make(chan struct{}, max), idle: map[string][]*openEgroup{}}
}

func (p *egroupPool) enter(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *egroupPool) leave() { <-p.sem }

func (p *egroupPool) take(k string) *openEgroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[k]
	now := p.l.opts.Now()
	// Newest first; retired ones stay for SealIdle to seal.
	for i := len(list) - 1; i >= 0; i-- {
		e := list[i]
		if e.retired(now) {
			continue
		}
		p.idle[k] = append(list[:i:i], list[i+1:]...)
		return e
	}
	return nil
}

func (p *egroupPool) give(e *openEgroup) {
	if e.full || e.broken {
		return
	}
	e.idleSince = p.l.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	k := poolKey(e.vector, e.class)
	p.idle[k] = append(p.idle[k], e)
}

// takeIdle removes and returns egroups idle since before cutoff, and
// those whose retirement time has come.
func (p *egroupPool) takeIdle(cutoff time.Time) []*openEgroup {
	now := p.l.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*openEgroup
	for k, list := range p.idle {
		keep := list[:0]
		for _, e := range list {
			if !e.idleSince.After(cutoff) || e.retired(now) {
				out = append(out, e)
			} else {
				keep = append(keep, e)
			}
		}
		p.idle[k] = keep
	}
	return out
}

// writer streams one object's (or part's) bytes into egroups.
type writer struct {
	l      *Layer
	vector model.Vector
	// place, when set, is the vector placement uses instead of vector:
	// background relocation keeps data on the tiers it already occupies
	// while the egroups keep recording the object's own vector.
	place   model.Vector
	cur     *openEgroup
	touched []*openEgroup
	extents []pendingExtent
	size    int64
	md5     hash.Hash
	exclude []model.DeviceID
	// uncertain: a metadata commit failed in a way that does not say
	// whether it landed (a broken connection, a deadline). Its data may
	// be referenced now, so abort keeps every byte (see abort).
	uncertain bool
	// private keeps the writer off the pool of open egroups (background
	// rewrites create their own, sealed at commit).
	private bool
	// fingerprint records each extent's SHA-256 (buckets with dedup on).
	fingerprint bool
	// class is the bucket's transform class (poolClass).
	class string
	// batched sends the writer's one small extent through its pool key's
	// appender (appender.go) instead of an egroup of its own; slot is
	// where the batch put it and slotEnc its encoded bytes, kept in case
	// the egroup is fenced before the commit and they must go elsewhere.
	batched bool
	slot    *appendSlot
	slotEnc []byte
}

type pendingExtent struct {
	id  uint64
	rec meta.Extent
}

// maxReplaceAttempts bounds how many fresh egroups a write tries after
// replica failures before giving up.
const maxReplaceAttempts = 3

func (l *Layer) newWriter(v model.Vector) *writer {
	return &writer{l: l, vector: v, md5: md5.New()}
}

func (w *writer) placeVector() model.Vector {
	if !w.place.IsZero() {
		return w.place
	}
	return w.vector
}

// newEgroup places and creates a fresh egroup.
func (w *writer) newEgroup(ctx context.Context, bytes int64) (*openEgroup, error) {
	l := w.l
	snap := l.snaps.get()
	l.snaps.mu.Lock()
	reps, err := l.opts.Policy.Place(snap, placement.Request{
		Vector: w.placeVector(), Client: l.opts.Node, Exclude: w.exclude, Bytes: bytes,
	}, l.snaps.rng)
	l.snaps.mu.Unlock()
	if err != nil {
		if errors.Is(err, placement.ErrNoSuitableDevices) {
			return nil, fmt.Errorf("%w: %v", ErrInsufficientStorage, err)
		}
		return nil, err
	}
	id, err := l.egroupSeq.Next(ctx)
	if err != nil {
		return nil, err
	}
	e := &openEgroup{id: id, vector: w.vector, class: w.class, mtime: l.opts.Now().UnixNano()}
	// Before any file exists: the orphan sweep leaves the files of an
	// egroup this node may still commit alone (orphans.go).
	l.inflight.add(e)
	if fallbackTier(snap, w.placeVector(), reps) {
		e.retireAt = l.opts.Now().Add(l.opts.FallbackEgroupLifetime)
		l.m.fallbackEgroups.Inc()
	}
	for _, r := range reps {
		if err := l.rio.Create(ctx, r, id); err != nil {
			for _, done := range e.replicas {
				_ = l.rio.Remove(ctx, done.Replica(), id)
			}
			w.exclude = append(w.exclude, r.Device)
			return nil, err
		}
		e.replicas = append(e.replicas, meta.EgroupReplica{Device: r.Device, Node: r.Node, Tier: r.Tier})
	}
	// Count the reservation now and each append as it lands (below), so
	// placements between statistics refreshes see the bytes they cause
	// without assuming every new egroup fills at once.
	l.snaps.placed(reps, bytes)
	l.m.egroupsCreated.Inc()
	return e, nil
}

// fallbackTier reports whether placement put an unspecified ("any")
// replica on a slower tier than the fastest one that takes unspecified
// replicas, which happens when that tier is full: the egroup is a
// stop-gap until tiering makes room.
func fallbackTier(snap *model.Snapshot, v model.Vector, reps []model.Replica) bool {
	if v.Count(model.TierAny) == 0 {
		return false
	}
	var fastest model.Tier
	for _, t := range snap.OnlineTiers() {
		if t.ForAny(false) {
			fastest = t
			break
		}
	}
	for _, r := range reps {
		if v.Count(r.Tier) == 0 && fastest != "" && r.Tier != fastest {
			return true
		}
	}
	return false
}

// egroupFor returns an egroup with room for n encoded bytes.
func (w *writer) egroupFor(ctx context.Context, n int64) (*openEgroup, error) {
	if w.cur != nil && !w.cur.broken && w.cur.size+n <= w.l.opts.EgroupMaxBytes {
		return w.cur, nil
	}
	if w.cur != nil {
		w.cur.full = true
	}
	var e *openEgroup
	if w.place.IsZero() && !w.private {
		e = w.l.pool.take(poolKey(w.vector, w.class))
	}
	for e != nil && (e.size+n > w.l.opts.EgroupMaxBytes || w.l.unwritable(e, w.exclude)) {
		// A pooled egroup without room for this extent, or on a device that
		// failed this write or is past the placement limit: seal it with
		// this write's commit and take another.
		e.full = true
		w.touched = append(w.touched, e)
		e = w.l.pool.take(poolKey(w.vector, w.class))
	}
	if e == nil {
		var err error
		for attempt := 0; ; attempt++ {
			// Reserve room for the extent plus a little growth: a larger
			// reservation would refuse small devices long before they fill.
			e, err = w.newEgroup(ctx, max(n, w.l.opts.EgroupMaxBytes/16))
			if err == nil {
				break
			}
			if attempt >= maxReplaceAttempts || errors.Is(err, ErrInsufficientStorage) || ctx.Err() != nil {
				return nil, err
			}
		}
	}
	w.cur = e
	w.touched = append(w.touched, e)
	return e, nil
}

// unwritable reports whether a pooled egroup has a replica on a device a
// write already excluded, or on a device over placement's fullness limit:
// appending there would fail or fill the device, so the egroup is sealed
// and a new one is placed instead.
func (l *Layer) unwritable(e *openEgroup, exclude []model.DeviceID) bool {
	snap := l.snaps.get()
	for _, r := range e.replicas {
		for _, x := range exclude {
			if x == r.Device {
				return true
			}
		}
		if d, ok := snap.Device(r.Device); ok && d.Usage() > placement.MaxUsage {
			return true
		}
	}
	return false
}

// appendExtent writes one extent's payload to every replica of an egroup,
// moving to a fresh egroup (excluding the failed device) if a replica fails.
// last says no more bytes follow: the append then also makes the replicas
// durable (one round trip instead of an append and a sync).
func (w *writer) appendExtent(ctx context.Context, payload []byte, last bool) error {
	return w.appendStored(ctx, payload, last, meta.Extent{Len: int64(len(payload))})
}

// appendStored is appendExtent for bytes stored in a transformed form:
// stored is what the slices hold and x carries the extent's logical
// length, codec and checksum (its location is filled in here).
func (w *writer) appendStored(ctx context.Context, stored []byte, last bool, x meta.Extent) error {
	payload := stored
	encLen := extent.EncodedLen(int64(len(payload)))
	var enc []byte
	if encLen >= pooledEncodeMin {
		// Every replica append has returned (and a remote one has
		// marshalled its request) when this function does, so a large
		// encode buffer can serve the next extent instead of being
		// garbage: 4 MiB per extent of a large PUT.
		bp := encodePool.Get().(*[]byte)
		defer encodePool.Put(bp)
		if int64(cap(*bp)) < encLen {
			*bp = make([]byte, 0, encLen)
		}
		enc = extent.Encode((*bp)[:0], payload)
	} else {
		enc = extent.Encode(make([]byte, 0, encLen), payload)
	}
	if w.batchedExtent(len(payload), last) {
		return w.appendBatched(ctx, enc, payload, x)
	}
	var lastFailed error
	for attempt := 0; ; attempt++ {
		e, err := w.egroupFor(ctx, int64(len(enc)))
		if err != nil {
			if lastFailed != nil {
				// Placement now excludes the device that failed; say why
				// (e.g. "device: full"), not just "excluded".
				return fmt.Errorf("%w; after %v", err, lastFailed)
			}
			return err
		}
		off := e.size
		// The fingerprint is computed while the replicas take the bytes,
		// so it adds no latency when the appends take longer.
		var fp chan []byte
		if w.fingerprint && x.FP == nil && x.Codec == "" {
			fp = make(chan []byte, 1)
			go func() {
				s := sha256.Sum256(payload)
				fp <- s[:]
			}()
		}
		errs := w.l.parallel(e.replicas, func(r meta.EgroupReplica) error {
			if last {
				return w.l.rio.AppendSync(ctx, r.Replica(), e.id, off, enc)
			}
			return w.l.rio.Append(ctx, r.Replica(), e.id, off, enc)
		})
		if fp != nil {
			x.FP = <-fp
		}
		var failed error
		for i, err := range errs {
			if err != nil {
				failed = err
				w.exclude = append(w.exclude, e.replicas[i].Device)
				if errors.Is(err, device.ErrFull) {
					w.l.snaps.invalidate()
				}
			}
		}
		if failed == nil {
			id, err := w.l.extentSeq.Next(ctx)
			if err != nil {
				return err
			}
			e.size += int64(len(enc))
			if last {
				e.durable = e.size // the fsync covered the whole file
			}
			w.l.snaps.placed(e.modelReplicas(), int64(len(enc)))
			x.Egroup, x.Off, x.Ctime = e.id, off, w.l.opts.Now().UnixNano()
			e.logical += x.Len
			if x.Codec != "" && e.codec == "" {
				e.codec = x.Codec
			}
			w.extents = append(w.extents, pendingExtent{id: id, rec: x})
			return nil
		}
		// Undo the partial append on the replicas that took it; the
		// egroup keeps its earlier extents and is sealed at commit.
		for _, r := range e.replicas {
			_ = w.l.rio.Truncate(ctx, r.Replica(), e.id, off)
		}
		e.broken = true
		e.full = true
		lastFailed = failed
		w.l.m.replicaWriteFailures.Inc()
		w.l.opts.Logger.Warn("replica append failed; re-placing", "egroup", meta.FormatID(e.id), "err", failed)
		if attempt >= maxReplaceAttempts || ctx.Err() != nil {
			if errors.Is(failed, device.ErrFull) {
				return fmt.Errorf("%w: %v", ErrInsufficientStorage, failed)
			}
			return failed
		}
	}
}

// parallel runs fn for every replica concurrently and returns the errors.
func (l *Layer) parallel(rs []meta.EgroupReplica, fn func(meta.EgroupReplica) error) []error {
	errs := make([]error, len(rs))
	if len(rs) == 1 {
		errs[0] = fn(rs[0])
		return errs
	}
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(r)
		}()
	}
	wg.Wait()
	return errs
}

// bufPool recycles extent-sized read buffers.
var bufPool sync.Pool

// encodePool recycles the encode buffers of large extents; smaller ones
// are allocated (a pooled 4 MiB buffer per 4 KiB PUT would hold memory
// for nothing).
var encodePool = sync.Pool{New: func() any { return new([]byte) }}

// pooledEncodeMin is the encoded size from which an extent's encode
// buffer comes from encodePool.
const pooledEncodeMin = 256 << 10

// write streams r into egroups. size < 0 means unknown (read to EOF).
func (w *writer) write(ctx context.Context, r io.Reader, size int64) error {
	l := w.l
	bp, _ := bufPool.Get().(*[]byte)
	if bp == nil || int64(cap(*bp)) < l.opts.ExtentMaxBytes {
		b := make([]byte, l.opts.ExtentMaxBytes)
		bp = &b
	}
	defer bufPool.Put(bp)
	buf := (*bp)[:l.opts.ExtentMaxBytes]
	for {
		want := int64(len(buf))
		if size >= 0 {
			want = min(want, size-w.size)
			if want == 0 {
				break
			}
		}
		n, err := io.ReadFull(r, buf[:want])
		if n > 0 {
			if w.size+int64(n) > l.opts.MaxObjectBytes {
				return fmt.Errorf("%w: over %d bytes", ErrTooLarge, l.opts.MaxObjectBytes)
			}
			w.md5.Write(buf[:n])
			// The last chunk: the declared size is reached, or the body
			// ended short of a full buffer.
			last := (size >= 0 && w.size+int64(n) == size) || errors.Is(err, io.ErrUnexpectedEOF)
			if err := w.appendExtent(ctx, buf[:n], last); err != nil {
				return err
			}
			w.size += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if size >= 0 && w.size < size {
				return fmt.Errorf("%w: got %d of %d bytes", ErrIncompleteBody, w.size, size)
			}
			break
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// syncAll makes every touched egroup replica durable.
func (w *writer) syncAll(ctx context.Context) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, e := range w.touched {
		if e.size == e.committed || e.durable == e.size {
			continue
		}
		for _, r := range e.replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.l.rio.Sync(ctx, r.Replica(), e.id); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return first
}

// refs returns the extent refs of everything written.
func (w *writer) refs() []meta.ExtentRef {
	out := make([]meta.ExtentRef, len(w.extents))
	for i, x := range w.extents {
		out[i] = meta.ExtentRef{ID: x.id, Len: x.rec.Len}
	}
	return out
}

func (w *writer) etag() string { return hex.EncodeToString(w.md5.Sum(nil)) }

// finishOps is the number of txn ops reserved for the caller's final
// records (object + compares need few; keep headroom).
const finishOps = 8

// commit makes the written data durable and visible: sync replicas, then
// commit extent and egroup records, and finally the caller's ops (the
// object or part record) in the same transaction when they fit. Large
// writes commit extent records in earlier transactions; until the final
// one lands those extents are unreferenced garbage, never visible data.
func (w *writer) commit(ctx context.Context, final func(t *meta.Txn)) error {
	if w.slot != nil {
		return w.commitBatched(ctx, final)
	}
	if err := w.syncAll(ctx); err != nil {
		return err
	}
	l := w.l
	now := l.opts.Now().UnixNano()
	var pending []*openEgroup
	for _, e := range w.touched {
		if e.size != e.committed || e.full || e.modRev == 0 {
			pending = append(pending, e)
		}
	}
	// The range an egroup record written now states: extents this node
	// numbers from here on until its next ID block.
	tailFrom, tailTo, err := l.extentSeq.Block(ctx)
	if err != nil {
		return err
	}
	// An extent record's Ctime is what keeps it safe from data removal
	// while nothing references it yet (garbage_grace): a large object's
	// records go in several transactions before the one naming the
	// object, and a write slower than the grace would otherwise commit
	// extents that look old and unreferenced to a scan in between.
	for i := range w.extents {
		w.extents[i].rec.Ctime = now
	}
	xs := w.extents
	for {
		var batch []*openEgroup
		for len(pending) > 0 && len(batch) < (meta.MaxTxnOps-finishOps)/2 {
			batch = append(batch, pending[0])
			pending = pending[1:]
		}
		n := min(len(xs), meta.MaxTxnOps-finishOps-len(batch))
		bx := xs[:n]
		xs = xs[n:]
		last := len(pending) == 0 && len(xs) == 0
		for attempt := 0; ; attempt++ {
			var t meta.Txn
			rewrite := make([]bool, len(batch))
			for i, e := range batch {
				// The compare stays when the record is not rewritten: a
				// reader's bad mark or a seal fences this writer off.
				t.If(meta.EgroupKey(e.id), e.modRev)
				if rewrite[i] = w.mustRecord(e); !rewrite[i] {
					continue
				}
				rec := meta.Egroup{
					Replicas: e.replicas, State: meta.EgroupOpen, Size: e.size, Vector: e.vector, Mtime: now, Writer: l.opts.Node,
					Codec: e.codec, Logical: logicalIf(e.codec, e.logical),
				}
				if e.full {
					rec.State = meta.EgroupSealed
				} else if l.opts.EgroupRecordLag > 0 && tailTo > tailFrom {
					rec.TailFrom, rec.TailTo = tailFrom, tailTo
				}
				t.Put(meta.EgroupKey(e.id), meta.Encode(rec))
			}
			for _, x := range bx {
				t.Put(meta.ExtentKey(x.id), meta.Encode(x.rec))
			}
			if last {
				final(&t)
			}
			rev, err := l.kv.Commit(ctx, &t)
			if errors.Is(err, meta.ErrConflict) && attempt < 3 && w.refresh(ctx, batch) {
				continue
			}
			if err != nil {
				// A failed compare changed nothing; any other error may
				// hide a transaction that landed.
				w.uncertain = w.uncertain || !errors.Is(err, meta.ErrConflict)
				return err
			}
			for i, e := range batch {
				e.committed = e.size
				e.mtime = now
				if rewrite[i] {
					e.modRev = rev
					e.recorded = e.size
					e.tailFrom, e.tailTo = 0, 0
					if !e.full && l.opts.EgroupRecordLag > 0 {
						e.tailFrom, e.tailTo = tailFrom, tailTo
					}
				}
			}
			break
		}
		if last {
			return nil
		}
	}
}

// mustRecord reports whether this commit has to rewrite e's record: it
// is new or being sealed, compressed (its logical bytes live only in the
// record), the commit would leave the recorded length more than
// EgroupRecordLag behind, or one of the writer's extents in e has an ID
// outside the record's tail range (a sealer would not look for it).
func (w *writer) mustRecord(e *openEgroup) bool {
	lag := w.l.opts.EgroupRecordLag
	if e.modRev == 0 || e.full || e.codec != "" || lag <= 0 || e.tailTo == 0 || e.size-e.recorded > lag {
		return true
	}
	for _, x := range w.extents {
		if x.rec.Egroup == e.id && (x.id < e.tailFrom || x.id >= e.tailTo) {
			return true
		}
	}
	return false
}

// refresh re-reads egroup records that changed under the writer (a reader
// marked a replica bad, or recovery sealed the egroup) and merges those
// changes into the writer's view, which is then sealed at this commit.
// It reports whether any egroup had changed, i.e. whether a retry can
// succeed.
func (w *writer) refresh(ctx context.Context, egs []*openEgroup) bool {
	changed := false
	for _, e := range egs {
		var cur meta.Egroup
		rev, err := meta.GetRecord(ctx, w.l.kv, meta.EgroupKey(e.id), &cur)
		if errors.Is(err, meta.ErrNotFound) {
			rev = 0
		} else if err != nil {
			continue
		}
		if rev == e.modRev {
			continue
		}
		bad := map[model.DeviceID]bool{}
		for _, r := range cur.Replicas {
			if r.Bad {
				bad[r.Device] = true
			}
		}
		for i := range e.replicas {
			if bad[e.replicas[i].Device] {
				e.replicas[i].Bad = true
			}
		}
		e.modRev = rev
		e.full = true
		changed = true
	}
	return changed
}

// abort undoes uncommitted appends and returns healthy egroups to the pool.
//
// After an uncertain commit it undoes nothing: the transaction may have
// landed, and then its extent records point at the appended bytes —
// truncating them, or removing a new egroup's files, would leave
// metadata pointing at missing data, and a later writer appending at the
// old size would put other bytes where those extents point. Every touched
// egroup is sealed instead (its record, whichever commit it reflects,
// stays true; bytes past its size are garbage that start-up recovery
// truncates, and files of an egroup that was never recorded are orphans
// it removes).
func (w *writer) abort(ctx context.Context) {
	if w.slot != nil {
		// A batch's bytes are never cut: later writers' extents follow
		// them. Uncommitted, they are dead data in the egroup.
		w.slot.done(ctx)
		w.slot = nil
	}
	if w.uncertain {
		for _, e := range w.touched {
			e.full = true
			w.l.sealDropped(context.WithoutCancel(ctx), e.id)
		}
		return
	}
	for _, e := range w.touched {
		if e.size != e.committed {
			for _, r := range e.replicas {
				if err := w.l.rio.Truncate(context.WithoutCancel(ctx), r.Replica(), e.id, e.committed); err != nil {
					e.broken = true
				}
			}
			e.size = e.committed
		}
		if e.modRev == 0 && e.committed == 0 {
			// Never recorded in metadata: the files are pure garbage.
			for _, r := range e.replicas {
				_ = w.l.rio.Remove(context.WithoutCancel(ctx), r.Replica(), e.id)
			}
			continue
		}
		e.full = e.full || e.broken
		if e.full {
			// It never returns to the pool, so no writer will seal it:
			// seal it now, or it stays open (and out of the Curator's
			// reach) until this node restarts.
			w.l.sealDropped(context.WithoutCancel(ctx), e.id)
			continue
		}
		w.l.pool.give(e)
	}
}

// sealDropped marks a recorded egroup that a failed write leaves full or
// broken as sealed, keeping whatever else changed in its record (a bad
// mark). Best effort: if metadata is unreachable the node's start-up
// recovery seals it.
func (l *Layer) sealDropped(ctx context.Context, id uint64) {
	// The write's last commit may still land (an uncertain failure): the
	// orphan sweep leaves the egroup's files alone meanwhile.
	l.inflight.pin(id, time.Now().Add(MinOrphanSweepGrace))
	for attempt := 0; attempt < 3; attempt++ {
		var eg meta.Egroup
		rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(id), &eg)
		if err != nil || eg.State == meta.EgroupSealed {
			return
		}
		// After an uncertain commit only the extent records tell whether
		// it landed.
		eg, rev, err = l.settleTail(ctx, id, eg, rev)
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		if err != nil {
			return
		}
		eg.State = meta.EgroupSealed
		var t meta.Txn
		t.If(meta.EgroupKey(id), rev)
		t.Put(meta.EgroupKey(id), meta.Encode(eg))
		if _, err := l.kv.Commit(ctx, &t); !errors.Is(err, meta.ErrConflict) {
			return
		}
	}
}

// release returns egroups to the pool after a successful commit.
func (w *writer) release() {
	if w.slot != nil {
		w.slot.done(context.Background())
		w.slot = nil
	}
	for _, e := range w.touched {
		w.l.pool.give(e)
	}
}

// logicalIf records an egroup's logical bytes only when they differ from
// its stored ones (a compressed egroup).
func logicalIf(codec string, logical int64) int64 {
	if codec == "" {
		return 0
	}
	return logical
}
