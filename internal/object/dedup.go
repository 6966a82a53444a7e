package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Deduplication (docs/design/0010): extents of buckets with dedup on carry
// the SHA-256 of their payload; the Curator groups live extents by it and
// asks ShareExtents to point duplicates at one copy. The reference count of
// a location is the number of extent records pointing at it: data removal
// deletes records, never shared bytes, and an egroup goes only when no
// record points into it, so GC, removal, snapshots and clones (which hold
// extent IDs) respect sharing without a separate counter.

// DedupResult counts what ShareExtents did.
type DedupResult struct {
	Shared, Stale int
	// Differ counts duplicates whose bytes were not those of the canonical
	// extent despite equal fingerprints: left alone (never shared).
	Differ int
	// Bytes is the payload no longer stored twice (reclaimed by GC once the
	// duplicates' old egroups are compacted or removed).
	Bytes int64
}

// ShareExtents makes each duplicate extent share the canonical extent's
// stored bytes. Both are read back verified and compared byte for byte: a
// fingerprint collision never makes a read return the wrong bytes. Each
// switch is one transaction that requires the canonical extent record, the
// duplicate's record and the canonical egroup record to be unchanged since
// they were read, and rewrites the canonical egroup's record so that a
// removal, truncation or move of that egroup decided before the switch is
// stale (a new pointer into it appeared).
func (l *Layer) ShareExtents(ctx context.Context, canon ExtentRev, dups []ExtentRev) (DedupResult, error) {
	var res DedupResult
	var cx meta.Extent
	rev, err := meta.GetRecord(ctx, l.kv, meta.ExtentKey(canon.ID), &cx)
	if errors.Is(err, meta.ErrNotFound) || (err == nil && rev != canon.ModRev) {
		res.Stale = len(dups)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	egKey := meta.EgroupKey(cx.Egroup)
	egItem, err := l.kv.Get(ctx, egKey)
	if errors.Is(err, meta.ErrNotFound) {
		res.Stale = len(dups)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	var ceg meta.Egroup
	if err := meta.Decode(egItem.Value, &ceg); err != nil {
		return res, err
	}
	if ceg.State != meta.EgroupSealed {
		return res, fmt.Errorf("%w: canonical egroup %s is open", ErrStale, meta.FormatID(cx.Egroup))
	}
	want, err := l.ReadExtent(ctx, canon.ID, 0, cx.Len)
	if err != nil {
		return res, err
	}
	egRev := egItem.ModRev
	for _, d := range dups {
		var dx meta.Extent
		drev, err := meta.GetRecord(ctx, l.kv, meta.ExtentKey(d.ID), &dx)
		if errors.Is(err, meta.ErrNotFound) || (err == nil && drev != d.ModRev) {
			res.Stale++
			continue
		}
		if err != nil {
			return res, err
		}
		if dx.Egroup == cx.Egroup && dx.Off == cx.Off {
			continue // already shares it
		}
		got, err := l.ReadExtent(ctx, d.ID, 0, dx.Len)
		if err != nil {
			return res, err
		}
		if !bytes.Equal(got, want) {
			res.Differ++
			l.opts.Logger.Warn("dedup: equal fingerprints, different bytes: not shared", "extent", meta.FormatID(d.ID), "canonical", meta.FormatID(canon.ID))
			continue
		}
		next := cx
		next.Ctime, next.FP, next.Shares = dx.Ctime, dx.FP, canon.ID
		var t meta.Txn
		t.If(meta.ExtentKey(canon.ID), canon.ModRev)
		t.If(meta.ExtentKey(d.ID), d.ModRev)
		t.If(egKey, egRev)
		t.Put(meta.ExtentKey(d.ID), meta.Encode(next))
		t.Put(egKey, egItem.Value)
		nrev, err := l.kv.Commit(ctx, &t)
		if errors.Is(err, meta.ErrConflict) {
			res.Stale++
			// The canonical egroup may have moved on: re-read its revision
			// for the next duplicate (the other compares still hold).
			it, gerr := l.kv.Get(ctx, egKey)
			if gerr != nil {
				res.Stale += len(dups) - res.Shared - res.Stale - res.Differ
				return res, nil
			}
			egItem, egRev = it, it.ModRev
			continue
		}
		if err != nil {
			return res, err
		}
		egRev = nrev
		l.locs.forgetExtent(d.ID)
		l.locs.forgetEgroup(cx.Egroup)
		res.Shared++
		res.Bytes += dx.Len
	}
	l.m.transformLogical.WithLabelValues("dedup").Add(float64(res.Bytes))
	return res, nil
}
