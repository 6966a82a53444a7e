package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/transform"
)

// Maintenance calls of the Curator's data transformations
// (docs/design/0010-curator-transforms.md): compression and its undoing
// rewrite extents into fresh egroups (copy, verify, switch each extent
// record with compare-and-swap; the emptied sources are removed by data
// removal), and truncation gives back the dead tail of a sealed egroup.
// Object records never change.

// RewriteSource is one source egroup of a rewrite and the live extents to
// move out of it, as the decision saw them.
type RewriteSource struct {
	Egroup  uint64       `json:"egroup"`
	ModRev  int64        `json:"rev"`
	Extents []ExtentMove `json:"extents"`
}

// ErrInvalidTransform is a bucket transform setting that cannot apply.
var ErrInvalidTransform = errors.New("object: invalid transform setting")

// RewriteRequest describes a rewrite of extents into fresh egroups.
type RewriteRequest struct {
	// Vector is recorded on the new egroups; Place, when non-zero, is the
	// vector placement uses (the tiers the data occupies now).
	Vector, Place model.Vector
	// Codec is the form the extents take: "zstd" compresses each extent
	// (kept plain when it does not pay), "" stores them plain. KeepForm
	// instead keeps every extent as it is stored (compaction).
	Codec    string
	KeepForm bool
	// MaxRatio is the stored/logical ratio above which compression does
	// not pay: an extent above it is stored plain, and a source egroup
	// above it as a whole is not rewritten at all but marked
	// incompressible so that it is not tried again. Default 0.9.
	MaxRatio float64
	// EC, when set, writes the extents as erasure-coded egroups of that
	// shape instead of replicated ones (sources that do not compress are
	// still encoded, plain, and marked incompressible).
	EC transform.ECShape
	// Label names the transform in metrics ("compress", "decompress",
	// "compact", "ec-encode", "ec-decode").
	Label   string
	Sources []RewriteSource
}

// RewriteResult counts what a rewrite did.
type RewriteResult struct {
	Moved, Stale int
	// Logical and Stored are the payload bytes of the moved extents before
	// and after (stored includes slice headers).
	Logical, Stored int64
	// Incompressible lists source egroups left alone because compressing
	// them did not pay; they are marked so.
	Incompressible []uint64
}

// Rewrite moves extents into fresh, sealed egroups in the requested form.
// Each source's extents are read verified (with replica fallback) and
// transformed in memory first, so an incompressible source costs no
// writes; the rest are appended, made durable with their egroup records
// (docs/design/0000 invariant 1), and only then is each extent record
// switched with compare-and-swap against the revision the decision saw.
// An extent that changed meanwhile is stale: its new copy is garbage and
// its record is left alone. Nothing is deleted here: the emptied source
// egroups are data removal's.
func (l *Layer) Rewrite(ctx context.Context, req RewriteRequest) (RewriteResult, error) {
	var res RewriteResult
	if !transform.ValidCodec(req.Codec) {
		return res, fmt.Errorf("%w %q", transform.ErrUnknownCodec, req.Codec)
	}
	if req.MaxRatio <= 0 {
		req.MaxRatio = 0.9
	}
	n := 0
	for _, s := range req.Sources {
		n += len(s.Extents)
	}
	if n == 0 {
		return res, nil
	}
	if err := l.pool.enter(ctx); err != nil {
		return res, err
	}
	defer l.pool.leave()
	if !req.EC.IsZero() {
		return l.rewriteEC(ctx, req)
	}
	w := l.newWriter(req.Vector)
	w.place = req.Place
	w.private = true
	var moves []ExtentMove
	var mixed []mixedSource
	written := map[srcLoc]meta.Extent{} // shared locations are written once
	for _, src := range req.Sources {
		staged, logical, stored, err := l.stage(ctx, req, src)
		if err != nil {
			w.abort(ctx)
			return res, err
		}
		extents := src.Extents
		if req.Codec != "" && !req.KeepForm && !transform.Pays(stored, logical, req.MaxRatio) {
			// The egroup as a whole does not pay (mostly incompressible
			// data). Writers of different buckets share egroups, so it may
			// still hold extents that compress well: move just those, and
			// remember that what stays does not pay.
			staged, extents = compressedOnly(staged, extents)
			if len(staged) == 0 {
				l.markIncompressible(ctx, src.Egroup, src.ModRev)
				res.Incompressible = append(res.Incompressible, src.Egroup)
				continue
			}
			// Marked only once the compressible extents have moved: a
			// crash (or a stale extent) in between must not leave them
			// plain in an egroup no scan looks at again.
			mixed = append(mixed, mixedSource{src: src, moves: extents})
		}
		for i, st := range staged {
			if rec, ok := written[st.src]; ok {
				rec.FP, rec.Shares = st.rec.FP, st.rec.Shares
				w.extents = append(w.extents, pendingExtent{id: extents[i].ID, rec: rec})
				moves = append(moves, extents[i])
				continue
			}
			if err := w.appendStored(ctx, st.bytes, false, st.rec); err != nil {
				w.abort(ctx)
				return res, err
			}
			w.extents[len(w.extents)-1].id = extents[i].ID
			written[st.src] = w.extents[len(w.extents)-1].rec
			moves = append(moves, extents[i])
		}
	}
	if len(moves) == 0 {
		w.abort(ctx)
		return res, nil
	}
	pending := w.extents
	w.extents = nil
	for _, e := range w.touched {
		e.full = true // rewritten data is cold: sealed, never pooled
	}
	if err := w.commit(ctx, func(*meta.Txn) {}); err != nil {
		w.abort(ctx)
		return res, err
	}
	w.release()
	// Verify every replica of the new egroups before any extent points at
	// them (docs/design/0000 invariant 4: copy, verify, switch). On a
	// failure nothing has switched: the new egroups are garbage that data
	// removal reclaims.
	for _, e := range w.touched {
		for _, r := range e.replicas {
			if err := l.rio.Verify(ctx, r.Replica(), e.id, e.size); err != nil {
				return res, fmt.Errorf("object: rewrite: verify new egroup %s on %s: %w", meta.FormatID(e.id), r.Device, err)
			}
		}
	}
	ids := make([]uint64, 0, len(w.touched))
	for _, e := range w.touched {
		ids = append(ids, e.id)
	}
	if err := l.refreshBeforeSwitch(ctx, ids); err != nil {
		return res, err
	}
	stale := map[uint64]bool{}
	for i, x := range pending {
		var t meta.Txn
		t.If(meta.ExtentKey(x.id), moves[i].ModRev)
		t.Put(meta.ExtentKey(x.id), meta.Encode(x.rec))
		_, err := l.kv.Commit(ctx, &t)
		switch {
		case errors.Is(err, meta.ErrConflict):
			res.Stale++
			stale[x.id] = true
		case err != nil:
			return res, err
		default:
			l.locs.forgetExtent(x.id)
			res.Moved++
			res.Logical += x.rec.Len
			res.Stored += extent.EncodedLen(x.rec.StoredLen())
		}
	}
	for _, m := range mixed {
		if !m.anyStale(stale) {
			l.markIncompressible(ctx, m.src.Egroup, m.src.ModRev)
			res.Incompressible = append(res.Incompressible, m.src.Egroup)
		}
	}
	if req.Label != "" {
		l.m.transformLogical.WithLabelValues(req.Label).Add(float64(res.Logical))
		l.m.transformStored.WithLabelValues(req.Label).Add(float64(res.Stored))
	}
	return res, nil
}

// mixedSource is a source egroup whose compressible extents move while the
// rest stays: it is marked incompressible once they all moved.
type mixedSource struct {
	src   RewriteSource
	moves []ExtentMove
}

func (m mixedSource) anyStale(stale map[uint64]bool) bool {
	for _, mv := range m.moves {
		if stale[mv.ID] {
			return true
		}
	}
	return false
}

// compressedOnly keeps the staged extents (and their moves) that the
// requested codec compressed, each because it paid on its own.
func compressedOnly(staged []stagedExtent, moves []ExtentMove) ([]stagedExtent, []ExtentMove) {
	var ss []stagedExtent
	var ms []ExtentMove
	for i, st := range staged {
		if st.rec.Codec != "" {
			ss, ms = append(ss, st), append(ms, moves[i])
		}
	}
	return ss, ms
}

type stagedExtent struct {
	rec   meta.Extent // Len, Codec, Stored, Sum, FP; location filled at append
	bytes []byte      // what the slices will hold
	// src is where the bytes are now: extents that share a location
	// (dedup) are moved once and keep sharing.
	src srcLoc
}

type srcLoc struct {
	egroup uint64
	off    int64
}

// stage reads one source's extents and puts them in the requested form.
func (l *Layer) stage(ctx context.Context, req RewriteRequest, src RewriteSource) (out []stagedExtent, logical, stored int64, err error) {
	for _, mv := range src.Extents {
		loc, err := l.locateExtent(ctx, mv.ID, false)
		if err != nil {
			return nil, 0, 0, err
		}
		x := loc.x
		var st stagedExtent
		if x.Codec != "" && (req.KeepForm || x.Codec == req.Codec) {
			// Already in the wanted form: move the stored bytes as they
			// are (verified slice by slice) instead of re-encoding them.
			raw := *loc
			raw.x.Codec, raw.x.Len = "", x.Stored
			b, err := l.readLocated(ctx, &raw, 0, x.Stored)
			if err != nil {
				return nil, 0, 0, err
			}
			st = stagedExtent{rec: meta.Extent{Len: x.Len, Codec: x.Codec, Stored: x.Stored, Sum: x.Sum}, bytes: b}
		} else {
			plain, err := l.readLocated(ctx, loc, 0, x.Len)
			if err != nil {
				return nil, 0, 0, err
			}
			st = stagedExtent{rec: meta.Extent{Len: x.Len}, bytes: plain}
			if req.Codec != "" && !req.KeepForm {
				c, err := transform.Compress(req.Codec, nil, plain)
				if err != nil {
					return nil, 0, 0, err
				}
				if transform.Pays(int64(len(c)), x.Len, req.MaxRatio) {
					st = stagedExtent{rec: meta.Extent{Len: x.Len, Codec: req.Codec, Stored: int64(len(c)), Sum: transform.Sum(plain)}, bytes: c}
				}
			}
		}
		st.rec.FP, st.rec.Shares = x.FP, x.Shares
		st.src = srcLoc{x.Egroup, x.Off}
		logical += x.Len
		stored += int64(len(st.bytes))
		out = append(out, st)
	}
	return out, logical, stored, nil
}

// markIncompressible remembers on the egroup's record that compressing it
// did not pay. Best effort: a record that changed since is left alone (a
// later scan decides again from the new state).
func (l *Layer) markIncompressible(ctx context.Context, id uint64, modRev int64) {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil || rev != modRev || eg.Incompressible {
		return
	}
	eg.Incompressible = true
	if err := l.SwitchEgroup(ctx, id, modRev, eg); err != nil {
		l.opts.Logger.Debug("mark incompressible", "egroup", meta.FormatID(id), "err", err)
	}
}

// TruncateEgroup gives back the tail of a sealed egroup past size, where
// no extent record points (GC's truncation, Curator §3.2.3). It checks the
// kept prefix is whole, valid slices on a good replica (so size is a slice
// boundary and what stays is intact), switches the committed size with
// compare-and-swap, and only then cuts the replica files: metadata never
// points past a file's end (docs/design/0000 invariant 2), and a crash in
// between leaves files longer than committed, which start-up recovery
// truncates. It returns the bytes freed over all replicas.
func (l *Layer) TruncateEgroup(ctx context.Context, id uint64, modRev int64, size int64) (int64, error) {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil {
		return 0, err
	}
	if rev != modRev {
		return 0, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	if eg.State != meta.EgroupSealed {
		return 0, fmt.Errorf("object: truncate egroup %s: not sealed", meta.FormatID(id))
	}
	if eg.EC != nil {
		return 0, fmt.Errorf("object: truncate egroup %s: erasure coded", meta.FormatID(id))
	}
	if size <= 0 || size >= eg.Size {
		return 0, fmt.Errorf("object: truncate egroup %s to %d: must be within (0, %d)", meta.FormatID(id), size, eg.Size)
	}
	var verr error
	verified := false
	for _, r := range eg.Replicas {
		if r.Bad {
			continue
		}
		if verr = l.rio.Verify(ctx, r.Replica(), id, size); verr == nil {
			verified = true
			break
		}
	}
	if !verified {
		return 0, fmt.Errorf("object: truncate egroup %s to %d: no replica holds whole slices up to it: %v", meta.FormatID(id), size, verr)
	}
	old := eg.Size
	eg.Size = size
	if eg.Codec != "" && eg.Logical > 0 {
		// The cut tail held no live extent; the logical count shrinks by
		// at most what was cut, kept as an upper bound for reports.
		eg.Logical = max(eg.Logical-(old-size), size)
	}
	if err := l.SwitchEgroup(ctx, id, modRev, eg); err != nil {
		return 0, err
	}
	var freed int64
	for _, r := range eg.Replicas {
		if err := l.rio.Truncate(ctx, r.Replica(), id, size); err != nil {
			// Recovery on that node's next start cuts it; until then the
			// bytes past the committed size are unreachable slack.
			l.opts.Logger.Warn("truncate replica file", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
			continue
		}
		freed += old - size
	}
	return freed, nil
}

// SetBucketTransform sets what the Curator may do to a bucket's cold data.
// Codec must be "" or "zstd", coldAfter non-negative, and EC "" or "K+M"
// with K >= M >= 1, K+M <= 8 and at least K+M usable devices; a zero
// BucketTransform clears the setting.
func (l *Layer) SetBucketTransform(ctx context.Context, name string, tf meta.BucketTransform) error {
	if !transform.ValidCodec(tf.Compress) {
		return fmt.Errorf("%w: compression %q (zstd or none)", ErrInvalidTransform, tf.Compress)
	}
	if tf.ColdAfter < 0 {
		return fmt.Errorf("%w: cold-after %s is negative", ErrInvalidTransform, time.Duration(tf.ColdAfter))
	}
	ec, err := transform.ParseEC(tf.EC)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidTransform, err)
	}
	if !ec.IsZero() {
		// Every strip needs its own device (and its own node where the
		// cluster has enough): a code that cannot be placed is refused now,
		// not at the first encode.
		snap := l.snaps.topoSnapshot()
		usable, nodes := 0, map[model.NodeID]bool{}
		for _, d := range snap.Devices {
			if d.State == model.DeviceUp && snap.NodeUp(d.Node) {
				usable++
				nodes[d.Node] = true
			}
		}
		if usable < ec.K+ec.M {
			return fmt.Errorf("%w: erasure code %s needs %d distinct devices for its strips; %d are usable (on %d nodes)",
				ErrInvalidTransform, ec, ec.K+ec.M, usable, len(nodes))
		}
		tf.EC = ec.String()
	} else {
		tf.EC = ""
	}
	return l.UpdateBucket(ctx, name, func(b *meta.Bucket) error {
		if tf == (meta.BucketTransform{}) {
			b.Transform = nil
			return nil
		}
		b.Transform = &tf
		return nil
	})
}

// refreshBeforeSwitch rewrites the records of a rewrite's new egroups,
// younger, just before extents switch to them. Nothing references a new
// egroup until its first switch, and writing and verifying the rest (more
// egroups, more stripes) can outlast the garbage grace, so a scan in
// between sees it old and unreferenced and plans its removal, which
// compares only the egroup's record. A rewritten record makes such a
// removal stale; one that already happened fails this, and nothing
// switches (docs/design/0000 invariant 4: copy, verify, switch).
func (l *Layer) refreshBeforeSwitch(ctx context.Context, ids []uint64) error {
	for _, id := range ids {
		var rec meta.Egroup
		k := meta.EgroupKey(id)
		rev, err := meta.GetRecord(ctx, l.kv, k, &rec)
		if err != nil {
			return fmt.Errorf("object: rewrite: new egroup %s: %w", meta.FormatID(id), err)
		}
		rec.Mtime = l.opts.Now().UnixNano()
		var t meta.Txn
		t.If(k, rev)
		t.Put(k, meta.Encode(rec))
		if _, err := l.kv.Commit(ctx, &t); err != nil {
			return fmt.Errorf("object: rewrite: new egroup %s changed before the switch: %w", meta.FormatID(id), err)
		}
	}
	return nil
}

// rewriteEC is Rewrite into erasure-coded egroups: every source's
// extents are staged (compressed where asked and paying), written as
// stripes (each strip durable and verified, the record committed), and
// then each extent record is switched with compare-and-swap.
func (l *Layer) rewriteEC(ctx context.Context, req RewriteRequest) (RewriteResult, error) {
	var res RewriteResult
	if err := req.EC.Validate(); err != nil {
		return res, err
	}
	var staged []stagedExtent
	var moves []ExtentMove
	for _, src := range req.Sources {
		st, logical, stored, err := l.stage(ctx, req, src)
		if err != nil {
			return res, err
		}
		if req.Codec != "" && !req.KeepForm && !transform.Pays(stored, logical, req.MaxRatio) && src.Egroup != 0 {
			l.markIncompressible(ctx, src.Egroup, src.ModRev)
			res.Incompressible = append(res.Incompressible, src.Egroup)
		}
		staged = append(staged, st...)
		moves = append(moves, src.Extents...)
	}
	if len(staged) == 0 {
		return res, nil
	}
	// Shared locations (dedup) are laid out once and keep sharing.
	var unique []stagedExtent
	which := make([]int, len(staged))
	first := map[srcLoc]int{}
	for i, st := range staged {
		if j, ok := first[st.src]; ok {
			which[i] = j
			continue
		}
		first[st.src] = len(unique)
		which[i] = len(unique)
		unique = append(unique, st)
	}
	urecs, err := l.writeStripes(ctx, req.EC, req.Vector, req.Place, unique)
	if err != nil {
		return res, err
	}
	recs := make([]meta.Extent, len(staged))
	for i, st := range staged {
		recs[i] = urecs[which[i]]
		recs[i].FP, recs[i].Shares = st.rec.FP, st.rec.Shares
	}
	var stripes []uint64
	for _, x := range urecs {
		if !slices.Contains(stripes, x.Egroup) {
			stripes = append(stripes, x.Egroup)
		}
	}
	if err := l.refreshBeforeSwitch(ctx, stripes); err != nil {
		return res, err
	}
	for i, x := range recs {
		var t meta.Txn
		t.If(meta.ExtentKey(moves[i].ID), moves[i].ModRev)
		t.Put(meta.ExtentKey(moves[i].ID), meta.Encode(x))
		_, err := l.kv.Commit(ctx, &t)
		switch {
		case errors.Is(err, meta.ErrConflict):
			res.Stale++
		case err != nil:
			return res, err
		default:
			l.locs.forgetExtent(moves[i].ID)
			res.Moved++
			res.Logical += x.Len
			res.Stored += extent.EncodedLen(x.StoredLen())
		}
	}
	if req.Label != "" {
		l.m.transformLogical.WithLabelValues(req.Label).Add(float64(res.Logical))
		l.m.transformStored.WithLabelValues(req.Label).Add(float64(res.Stored * int64(req.EC.K+req.EC.M) / int64(req.EC.K)))
	}
	return res, nil
}
