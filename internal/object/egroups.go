package object

import (
	"context"
	"errors"
	"fmt"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Typed maintenance of egroup and extent records for the actuator (the
// only code that moves data). Every mutation is compare-and-swap against
// the revision the caller's decision was computed from, and answers
// ErrStale when the record moved on: a stale task is dropped, never forced
// (docs/design/0000 invariant 3). The object layer owns these records; it
// hands out neither its metadata store nor its replica I/O.

// ErrStale means the metadata changed since the decision was made.
var ErrStale = errors.New("object: metadata changed since the decision")

// Egroup reads an egroup record and its revision.
func (l *Layer) Egroup(ctx context.Context, id uint64) (meta.Egroup, int64, error) {
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(id), &eg)
	if errors.Is(err, meta.ErrNotFound) {
		return eg, 0, fmt.Errorf("%w: egroup %s is gone", ErrStale, meta.FormatID(id))
	}
	return eg, rev, err
}

// SwitchEgroup replaces egroup id's record with next if its revision is
// still modRev. Moves call it after their copies are durable and verified
// and before they delete anything.
func (l *Layer) SwitchEgroup(ctx context.Context, id uint64, modRev int64, next meta.Egroup) error {
	if len(next.Replicas) == 0 {
		return fmt.Errorf("object: refusing to leave egroup %s with no replicas", meta.FormatID(id))
	}
	var t meta.Txn
	t.If(meta.EgroupKey(id), modRev)
	t.Put(meta.EgroupKey(id), meta.Encode(next))
	_, err := l.kv.Commit(ctx, &t)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	if err == nil {
		l.locs.forgetEgroup(id)
	}
	return err
}

// FenceEgroup rewrites the egroup's record unchanged if it is still at
// modRev, so that no change decided from modRev (a move's switch) can
// land after it. A failed move fences before deleting the copies it
// made: another executor of the same move (a master that took over, a
// node's queue) may have found them verified and be about to list them.
// ErrStale: the record moved on already.
func (l *Layer) FenceEgroup(ctx context.Context, id uint64, modRev int64) error {
	_, err := l.fenceEgroup(ctx, id, modRev)
	return err
}

// fenceEgroup is FenceEgroup returning the record's new revision.
func (l *Layer) fenceEgroup(ctx context.Context, id uint64, modRev int64) (int64, error) {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil {
		return 0, err
	}
	if rev != modRev {
		return 0, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	var t meta.Txn
	t.If(meta.EgroupKey(id), modRev)
	t.Put(meta.EgroupKey(id), meta.Encode(eg))
	next, err := l.kv.Commit(ctx, &t)
	if errors.Is(err, meta.ErrConflict) {
		return 0, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	return next, err
}

// SealEgroup marks an egroup sealed if its record is still at modRev,
// at its committed length (settleTail): the Curator seals the open
// egroups of writers that are down.
func (l *Layer) SealEgroup(ctx context.Context, id uint64, modRev int64) error {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil {
		return err
	}
	if rev != modRev {
		return fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	eg, rev, err = l.settleTail(ctx, id, eg, rev)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	if err != nil {
		return err
	}
	eg.State = meta.EgroupSealed
	return l.SwitchEgroup(ctx, id, rev, eg)
}

// settleTail returns an open egroup's record with Size raised to its
// committed length, Mtime to its last extent's write and the tail range
// cleared, and the record's new
// revision; a record without a tail range comes back as it is. The
// writer may have committed extents past Size without rewriting the
// record (Options.EgroupRecordLag), all numbered within the range. The
// record is first rewritten unchanged at rev: a writer still committing
// carries a compare on the revision it last wrote, so from here on its
// commits fail instead of adding extents the reads below would miss.
// The caller seals the result with a compare on the returned revision.
// It answers meta.ErrConflict when the record is no longer at rev.
func (l *Layer) settleTail(ctx context.Context, id uint64, eg meta.Egroup, rev int64) (meta.Egroup, int64, error) {
	if eg.State != meta.EgroupOpen || eg.TailTo == 0 {
		return eg, rev, nil
	}
	// An empty range (TailFrom == TailTo) names no extents: nothing to
	// read, not a damaged record.
	if eg.TailTo < eg.TailFrom || eg.TailTo-eg.TailFrom > maxTailRange {
		return eg, rev, fmt.Errorf("object: egroup %s: tail range [%d, %d) is not a plausible ID block", meta.FormatID(id), eg.TailFrom, eg.TailTo)
	}
	var fence meta.Txn
	fence.If(meta.EgroupKey(id), rev)
	fence.Put(meta.EgroupKey(id), meta.Encode(eg))
	rev, err := l.kv.Commit(ctx, &fence)
	if err != nil {
		return eg, 0, err
	}
	start, end := meta.ExtentKey(eg.TailFrom), meta.ExtentKey(eg.TailTo)
	for {
		items, err := l.kv.Scan(ctx, start, end, 1024)
		if err != nil {
			return eg, 0, err
		}
		for _, it := range items {
			var x meta.Extent
			if err := meta.Decode(it.Value, &x); err != nil {
				return eg, 0, fmt.Errorf("object: egroup %s: tail extent %s: %w", meta.FormatID(id), it.Key, err)
			}
			if x.Egroup == id {
				eg.Size = max(eg.Size, x.Off+extent.EncodedLen(x.StoredLen()))
				// The record's Mtime is its last rewrite; tiering and
				// the garbage grace age the data by its last write.
				eg.Mtime = max(eg.Mtime, x.Ctime)
			}
		}
		if len(items) < 1024 {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	eg.TailFrom, eg.TailTo = 0, 0
	return eg, rev, nil
}

// maxTailRange bounds the tail range settleTail reads: a writer states
// its extent-ID block (object.Layer numbers extents in blocks of 4,096),
// so a wider range is a damaged record, not a reason to read the map.
const maxTailRange = 1 << 20

// RemoveReplicaFile deletes a replica file that metadata no longer lists
// (the source of a finished move, a stale copy). The caller guarantees
// the record does not point at it.
func (l *Layer) RemoveReplicaFile(ctx context.Context, r model.Replica, id uint64) error {
	return l.rio.Remove(ctx, r, id)
}

// VerifyReplica reads every slice of a replica's first size bytes.
func (l *Layer) VerifyReplica(ctx context.Context, r model.Replica, id uint64, size int64) error {
	return l.rio.Verify(ctx, r, id, size)
}

// RemoveEgroup is data removal's second stage: it deletes the egroup
// record (and its access record) if still at modRev, then its replica
// files. It returns the removed record.
func (l *Layer) RemoveEgroup(ctx context.Context, id uint64, modRev int64) (meta.Egroup, error) {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil {
		return eg, err
	}
	if rev != modRev {
		return eg, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	var t meta.Txn
	t.If(meta.EgroupKey(id), modRev)
	t.Del(meta.EgroupKey(id))
	t.Del(meta.AccessKey(id))
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return eg, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
		}
		return eg, err
	}
	l.locs.forgetEgroup(id)
	for _, r := range eg.Replicas {
		if err := l.rio.Remove(ctx, r.Replica(), id); err != nil {
			l.opts.Logger.Debug("remove egroup file", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
		}
	}
	return eg, nil
}

// ExtentRev names an extent record and the revision a decision saw.
type ExtentRev struct {
	ID     uint64
	ModRev int64
}

// RemoveExtents is data removal's first stage: it deletes unreferenced
// extent records, each only if still at its revision. It returns how many
// were removed and how many had changed (stale).
func (l *Layer) RemoveExtents(ctx context.Context, xs []ExtentRev) (removed, stale int, err error) {
	const batch = meta.MaxTxnOps / 2
	for len(xs) > 0 {
		n := min(batch, len(xs))
		var t meta.Txn
		for _, x := range xs[:n] {
			t.If(meta.ExtentKey(x.ID), x.ModRev)
			t.Del(meta.ExtentKey(x.ID))
		}
		_, err := l.kv.Commit(ctx, &t)
		switch {
		case errors.Is(err, meta.ErrConflict):
			// Some record changed; retry one by one to drop only those.
			for _, x := range xs[:n] {
				var one meta.Txn
				one.If(meta.ExtentKey(x.ID), x.ModRev)
				one.Del(meta.ExtentKey(x.ID))
				if _, err := l.kv.Commit(ctx, &one); err == nil {
					removed++
				} else if errors.Is(err, meta.ErrConflict) {
					stale++
				} else {
					return removed, stale, err
				}
			}
		case err != nil:
			return removed, stale, err
		default:
			removed += n
		}
		xs = xs[n:]
	}
	return removed, stale, nil
}

// ReplicaListed reports whether egroup id's current record lists a good
// replica on dev (when in doubt, true: a real bad replica must not be
// missed).
func (l *Layer) ReplicaListed(ctx context.Context, id uint64, dev model.DeviceID) bool {
	eg, _, err := l.Egroup(ctx, id)
	if errors.Is(err, ErrStale) {
		return false
	}
	if err != nil {
		return true
	}
	for _, r := range eg.Replicas {
		if r.Device == dev {
			return !r.Bad
		}
	}
	return false
}
