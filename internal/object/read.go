package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/replica"
	"github.com/terrace-storage/terrace/internal/transform"
)

// readChunk bounds one read from an extent so a large range streams
// instead of buffering whole extents.
const readChunk = 1 << 20

type objectReader struct {
	ctx  context.Context
	l    *Layer
	refs []meta.ExtentRef
	skip int64 // bytes still to skip from the current position
	left int64 // bytes still to return
	buf  []byte
	err  error
	loc  *extentLoc // the current extent, resolved once
	// scratch is a pooled buffer reused by every chunk of this reader.
	scratch *[]byte
}

// readBufPool recycles chunk buffers between readers.
var readBufPool sync.Pool

// extentSliceOverhead is the encoded overhead of one chunk plus the
// partial slices at its ends.
const extentSliceOverhead = 64<<10 + 32*extent.HeaderSize

func (r *objectReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.left == 0 {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// WriteTo streams the rest of the range to w straight from the verified
// chunk buffer, so io.Copy (an S3 response body) neither copies each chunk
// once more nor allocates a copy buffer per request.
func (r *objectReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.buf) == 0 {
			if r.err != nil {
				return total, r.err
			}
			if r.left == 0 {
				return total, nil
			}
			if err := r.fill(); err != nil {
				r.err = err
				return total, err
			}
			continue
		}
		n, err := w.Write(r.buf)
		total += int64(n)
		r.buf = r.buf[n:]
		if err != nil {
			return total, err
		}
	}
}

func (r *objectReader) fill() error {
	for len(r.refs) > 0 && r.skip >= r.refs[0].Len {
		r.skip -= r.refs[0].Len
		r.refs = r.refs[1:]
	}
	if len(r.refs) == 0 {
		return fmt.Errorf("object: extent list ends %d bytes early", r.left)
	}
	ref := r.refs[0]
	from := ref.Off + r.skip
	n := min(ref.Len-r.skip, r.left, readChunk)
	if r.loc == nil || r.loc.id != ref.ID {
		loc, err := r.l.locateExtent(r.ctx, ref.ID, true)
		if err != nil {
			if loc, err = r.l.locateExtent(r.ctx, ref.ID, false); err != nil {
				return err
			}
		}
		r.loc = loc
	}
	if r.scratch == nil {
		if bp, ok := readBufPool.Get().(*[]byte); ok {
			r.scratch = bp
		} else {
			b := make([]byte, 0, readChunk+2*(extentSliceOverhead))
			r.scratch = &b
		}
	}
	data, err := r.l.readLocatedInto(r.ctx, (*r.scratch)[:0], r.loc, from, from+n)
	if err != nil && r.loc.stale && r.ctx.Err() == nil {
		// The stale view may be behind a move or a removal: ask again.
		loc, lerr := r.l.locateExtent(r.ctx, ref.ID, false)
		if lerr != nil {
			return err
		}
		r.loc = loc
		data, err = r.l.readLocatedInto(r.ctx, (*r.scratch)[:0], r.loc, from, from+n)
	}
	if err != nil {
		return err
	}
	r.skip += n
	r.left -= n
	r.buf = data
	return nil
}

func (r *objectReader) Close() error {
	r.err = errors.New("object: reader closed")
	r.buf = nil
	if r.scratch != nil {
		readBufPool.Put(r.scratch)
		r.scratch = nil
	}
	return nil
}

// ReadExtent returns payload bytes [from, to) of an extent, trying
// replicas in read order (replicas already marked bad last). A replica
// whose slices fail their checksum is marked bad in metadata (the Curator
// repairs it) and the next is tried; wrong bytes are never returned.
func (l *Layer) ReadExtent(ctx context.Context, id uint64, from, to int64) ([]byte, error) {
	loc, err := l.locateExtent(ctx, id, true)
	if err == nil {
		var data []byte
		if data, err = l.readLocated(ctx, loc, from, to); err == nil {
			return data, nil
		}
	}
	if ctx.Err() != nil {
		return nil, err
	}
	// The stale view may be behind a move or a removal: ask again.
	if loc, err = l.locateExtent(ctx, id, false); err != nil {
		return nil, err
	}
	return l.readLocated(ctx, loc, from, to)
}

// extentLoc is an extent resolved to its egroup and ordered replicas; a
// reader streaming one extent in chunks resolves it once.
type extentLoc struct {
	id    uint64
	stale bool
	x     meta.Extent
	cands []meta.EgroupReplica
	// plain is a compressed extent's payload, decoded once for all the
	// chunks a streaming reader takes from it.
	plain []byte
	// ec is the egroup record when it is erasure coded (its strips are
	// read by position, not as interchangeable replicas).
	ec *meta.Egroup
}

// locateExtent resolves an extent. With stale set it may use the store's
// stale reads (no consensus round in a cluster): callers retry with stale
// false when the answer does not work out. Extent and egroup records only
// change by background moves, which keep the old location readable until
// they switch, so a stale answer is almost always still right.
func (l *Layer) locateExtent(ctx context.Context, id uint64, stale bool) (*extentLoc, error) {
	get := meta.GetRecord
	if stale {
		get = meta.GetRecordStale
	}
	loc := &extentLoc{id: id, stale: stale}
	var cached bool
	if stale {
		loc.x, cached = l.locs.extent(id)
	}
	if !cached {
		if _, err := get(ctx, l.kv, meta.ExtentKey(id), &loc.x); err != nil {
			return nil, fmt.Errorf("object: extent %s: %w", meta.FormatID(id), err)
		}
		l.locs.putExtent(id, loc.x)
	}
	var eg meta.Egroup
	cached = false
	if stale {
		eg, cached = l.locs.egroup(loc.x.Egroup)
	}
	if !cached {
		if _, err := get(ctx, l.kv, meta.EgroupKey(loc.x.Egroup), &eg); err != nil {
			return nil, fmt.Errorf("object: egroup %s of extent %s: %w", meta.FormatID(loc.x.Egroup), meta.FormatID(id), err)
		}
		l.locs.putEgroup(loc.x.Egroup, eg)
	}
	if eg.EC != nil {
		ec := eg
		loc.ec = &ec
		return loc, nil
	}
	var good, bad []meta.EgroupReplica
	for _, rep := range eg.Replicas {
		if !rep.Bad {
			good = append(good, rep)
		} else {
			bad = append(bad, rep)
		}
	}
	byDev := make(map[model.DeviceID]meta.EgroupReplica, len(good))
	for _, rep := range good {
		byDev[rep.Device] = rep
	}
	loc.cands = make([]meta.EgroupReplica, 0, len(eg.Replicas))
	for _, m := range l.snaps.orderReads(replicasOf(good)) {
		loc.cands = append(loc.cands, byDev[m.Device])
	}
	// Replicas marked bad come last, as a last resort: one failed slice or
	// a lost tail marks a whole replica bad, yet the rest of it may hold
	// the only good copy of these bytes, and every slice read is verified.
	loc.cands = append(loc.cands, bad...)
	return loc, nil
}

func (l *Layer) readLocated(ctx context.Context, loc *extentLoc, from, to int64) ([]byte, error) {
	return l.readLocatedInto(ctx, nil, loc, from, to)
}

// readLocatedInto reads into buf's storage when the data plane allows it.
func (l *Layer) readLocatedInto(ctx context.Context, buf []byte, loc *extentLoc, from, to int64) ([]byte, error) {
	x := loc.x
	if x.Codec != "" {
		return l.readCompressed(ctx, loc, from, to)
	}
	if loc.ec != nil {
		return l.readEC(ctx, loc, from, to)
	}
	br, canBuffer := l.rio.(replica.BufferedReader)
	return l.tryReplicas(ctx, loc, func(rep meta.EgroupReplica) ([]byte, error) {
		if canBuffer && buf != nil {
			return br.ReadInto(ctx, buf, rep.Replica(), x.Egroup, x.Off, x.Len, from, to)
		}
		return l.rio.Read(ctx, rep.Replica(), x.Egroup, x.Off, x.Len, from, to)
	})
}

// readCompressed returns payload bytes [from, to) of a compressed extent:
// the stored frame is read with every slice verified (replica fallback as
// for plain data), decompressed once per located extent, and checked
// against the extent's checksum of the uncompressed bytes, so both what is
// stored and what is returned are verified (docs/design/0010).
func (l *Layer) readCompressed(ctx context.Context, loc *extentLoc, from, to int64) ([]byte, error) {
	x := loc.x
	if from < 0 || to > x.Len || from > to {
		return nil, fmt.Errorf("object: read [%d,%d) outside extent %s of %d bytes", from, to, meta.FormatID(loc.id), x.Len)
	}
	if loc.plain == nil && loc.ec != nil {
		stored, err := l.readStoredEC(ctx, loc)
		if err != nil {
			return nil, err
		}
		plain, err := transform.Decompress(x.Codec, nil, stored, x.Len, x.Sum)
		if err != nil {
			l.opts.Logger.Error("CONSISTENCY: compressed extent does not decode", "extent", meta.FormatID(loc.id), "egroup", meta.FormatID(x.Egroup), "err", err)
			return nil, fmt.Errorf("%w: egroup %s: %v", ErrNoGoodReplica, meta.FormatID(x.Egroup), err)
		}
		loc.plain = plain
	}
	if loc.plain == nil {
		plain, err := l.tryReplicas(ctx, loc, func(rep meta.EgroupReplica) ([]byte, error) {
			stored, err := l.rio.Read(ctx, rep.Replica(), x.Egroup, x.Off, x.Stored, 0, x.Stored)
			if err != nil {
				return nil, err
			}
			plain, err := transform.Decompress(x.Codec, nil, stored, x.Len, x.Sum)
			if err != nil {
				// The slices verified, so every replica holds these bytes:
				// not a bad replica to repair but a broken transform.
				l.opts.Logger.Error("CONSISTENCY: compressed extent does not decode", "extent", meta.FormatID(loc.id),
					"egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
			}
			return plain, err
		})
		if err != nil {
			return nil, err
		}
		loc.plain = plain
		l.m.decompressed.Add(float64(len(plain)))
		return plain[from:to], nil
	}
	l.access.record(x.Egroup)
	l.m.readBytes.Add(float64(to - from))
	return loc.plain[from:to], nil
}

// tryReplicas runs read on the located replicas in order until one
// succeeds; a replica whose slices fail their checksum is marked bad.
func (l *Layer) tryReplicas(ctx context.Context, loc *extentLoc, read func(meta.EgroupReplica) ([]byte, error)) ([]byte, error) {
	x := loc.x
	var errs []error
	for i, rep := range loc.cands {
		inFlight := l.snaps.readStarted(rep.Device)
		data, err := read(rep)
		inFlight.Add(-1)
		if err == nil {
			if i > 0 {
				// Prefer the replica that worked for the rest of the extent.
				loc.cands[0], loc.cands[i] = loc.cands[i], loc.cands[0]
			}
			l.access.record(x.Egroup)
			l.m.readBytes.Add(float64(len(data)))
			return data, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", rep.Device, err))
		if errors.Is(err, extent.ErrCorrupt) && !l.locationCurrent(ctx, loc) {
			// The extent moved since it was located (a cached location,
			// or a long stream): the old egroup's tail may have been
			// truncated, and reading past a file's end reads as
			// corrupt. Not the replica's fault; the caller locates
			// again.
			l.opts.Logger.Debug("replica read failed at a moved location", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
		} else if errors.Is(err, extent.ErrCorrupt) {
			l.m.corruptReads.Inc()
			l.opts.Logger.Error("corrupt replica detected", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
			l.MarkReplicaBad(context.WithoutCancel(ctx), x.Egroup, rep.Device)
		} else if loc.stale {
			// A cached or stale location: the caller asks the metadata
			// store again, so this is routine after a move, not a fault.
			l.opts.Logger.Debug("replica read failed at a stale location", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
		} else {
			l.opts.Logger.Warn("replica read failed", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
		}
	}
	return nil, fmt.Errorf("%w: egroup %s: %v", ErrNoGoodReplica, meta.FormatID(x.Egroup), errors.Join(errs...))
}

// locationCurrent reports whether the extent still lives where loc says
// (its current record, read linearizably, names the same egroup, offset
// and stored length). A replica is marked bad only for a read at a
// current location: marking every replica of an egroup bad for reading
// past a tail that was truncated after its extents moved away would leave
// the egroup with no source recovery accepts.
func (l *Layer) locationCurrent(ctx context.Context, loc *extentLoc) bool {
	var x meta.Extent
	if _, err := meta.GetRecord(context.WithoutCancel(ctx), l.kv, meta.ExtentKey(loc.id), &x); err != nil {
		// Gone (the object was deleted) or unknown: not a reason to
		// mark; a real fault shows again on the next read or scrub.
		return false
	}
	return x.Egroup == loc.x.Egroup && x.Off == loc.x.Off && x.Stored == loc.x.Stored
}

func replicasOf(rs []meta.EgroupReplica) []model.Replica {
	out := make([]model.Replica, len(rs))
	for i, r := range rs {
		out[i] = r.Replica()
	}
	return out
}

// MarkReplicaBad records that a replica failed verification.
func (l *Layer) MarkReplicaBad(ctx context.Context, egroup uint64, dev model.DeviceID) {
	defer l.locs.forgetEgroup(egroup)
	for attempt := 0; attempt < 8; attempt++ {
		var eg meta.Egroup
		rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(egroup), &eg)
		if err != nil {
			return
		}
		changed := false
		for i := range eg.Replicas {
			if eg.Replicas[i].Device == dev && !eg.Replicas[i].Bad {
				eg.Replicas[i].Bad = true
				changed = true
			}
		}
		if !changed {
			return
		}
		var t meta.Txn
		t.If(meta.EgroupKey(egroup), rev)
		t.Put(meta.EgroupKey(egroup), meta.Encode(eg))
		if _, err := l.kv.Commit(ctx, &t); !errors.Is(err, meta.ErrConflict) {
			return
		}
	}
}
