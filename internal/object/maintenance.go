package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/replica"
)

// Maintenance operations for the Curator. They move bytes; deciding what
// to move is the Curator's. Every switch of metadata is compare-and-swap
// against the version the caller computed its task from.

// CopyReplica makes dst a verified copy of the first size bytes of egroup
// id from src. The copy runs on dst's node (replica.IO's Pull: the bytes
// go from the source node to the destination once, never through the
// caller). The caller switches metadata after a nil return and only then
// deletes anything (docs/design/0000 invariant 4). On error no partial
// copy is left behind; a copy that fails verification blames the source,
// which is marked bad so recovery repairs it from another replica.
func (l *Layer) CopyReplica(ctx context.Context, id uint64, size int64, src, dst model.Replica) error {
	if err := l.rio.Pull(ctx, dst, src, id, size); err != nil {
		if errors.Is(err, replica.ErrCorrupt) {
			l.MarkReplicaBad(context.WithoutCancel(ctx), id, src.Device)
		}
		return fmt.Errorf("object: copy egroup %s %s→%s: %w", meta.FormatID(id), src.Device, dst.Device, err)
	}
	l.snaps.placed([]model.Replica{dst}, size)
	return nil
}

// ExtentMove names a live extent to relocate and the version of its record
// the decision saw.
type ExtentMove struct {
	ID     uint64
	ModRev int64
	Len    int64
}

// RelocateResult counts a relocation's outcome.
type RelocateResult struct {
	Moved, Stale int
	Bytes        int64
}

// Relocate copies extents into fresh egroups of vector v (reading them
// verified, with replica fallback) and switches each extent record with
// compare-and-swap. An extent whose record changed meanwhile is stale: its
// copy becomes garbage and the record is left alone.
//
// place, when non-zero, is the vector used to place the new egroups (the
// tiers the data occupies now: compaction must not promote cold data onto
// the fast tier); the new egroups still record v.
func (l *Layer) Relocate(ctx context.Context, v, place model.Vector, moves []ExtentMove) (RelocateResult, error) {
	// Each extent keeps the form it is stored in (a compressed extent is
	// moved compressed); see Rewrite.
	r, err := l.Rewrite(ctx, RewriteRequest{Vector: v, Place: place, KeepForm: true, Label: "compact",
		Sources: []RewriteSource{{Extents: moves}}})
	return RelocateResult{Moved: r.Moved, Stale: r.Stale, Bytes: r.Logical}, err
}

// SealIdle seals open egroups that no writer has used for idle, so the
// Curator can reclaim their dead bytes and move them between tiers (it
// never touches open egroups: their writer owns them). It returns the
// number sealed.
func (l *Layer) SealIdle(ctx context.Context, idle time.Duration) (int, error) {
	l.sealUnsealed(ctx)
	n := 0
	idles := l.pool.takeIdle(l.opts.Now().Add(-idle))
	for i, e := range idles {
		if e.modRev == 0 {
			continue // never committed: nothing to seal
		}
		// The writers' own commits all succeeded (a failed one drops the
		// egroup from the pool), so its committed length is exact.
		sealed, err := l.sealOpen(ctx, e.id, e.modRev, e.committed, e.mtime)
		if err != nil {
			// They are out of the pool already: keep this one and the
			// rest for the next round (sealUnsealed). Returning without
			// them left them open with no writer, which the Curator does
			// not seal while this node is up.
			for _, e := range idles[i:] {
				if e.modRev != 0 {
					l.keepUnsealed(retiredEgroup{id: e.id, modRev: e.modRev, size: e.committed, mtime: e.mtime, replicas: e.modelReplicas()})
				}
			}
			return n, err
		}
		if sealed {
			n++
			continue
		}
		// Its record changed while it was idle (a reader marked a
		// replica bad): seal it from the record, as sealRetired does.
		// Left open it stayed its live writer's, and the Curator never
		// repaired the bad replica.
		l.sealDropped(ctx, e.id)
	}
	return n, nil
}

// sealOpen seals the open egroup id at length size if its record is still
// at modRev, the revision its only writer last wrote; it reports false if
// the record changed under the writer (e.g. a replica marked bad), and
// leaves it; an error if the record could not be read or written. mtime
// is the writer's last commit: tiering ages data by it.
func (l *Layer) sealOpen(ctx context.Context, id uint64, modRev, size, mtime int64) (bool, error) {
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(id), &eg)
	if err != nil && !errors.Is(err, meta.ErrNotFound) {
		// Not knowing the record is not learning that it changed: the
		// caller keeps the egroup to seal later (sealRetired's retry).
		// Reporting false here made it give the seal up instead, and the
		// egroup stayed open, out of the Curator's reach, until a restart
		// or an orphan sweep found it abandoned.
		return false, err
	}
	if err != nil || rev != modRev {
		return false, nil
	}
	eg.Size = max(eg.Size, size)
	eg.TailFrom, eg.TailTo = 0, 0
	eg.Mtime = max(eg.Mtime, mtime)
	eg.State = meta.EgroupSealed
	var t meta.Txn
	t.If(meta.EgroupKey(id), rev)
	t.Put(meta.EgroupKey(id), meta.Encode(eg))
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
