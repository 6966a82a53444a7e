package object

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// changeBucket applies fn to the bucket record and rewrites the guard in
// the same transaction, so that every object commit that raced the change
// fails its compare and retries seeing it (versioning state, snapshots,
// pins: what writes depend on). It returns the commit's revision.
func (l *Layer) changeBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) (int64, error) {
	for attempt := 0; attempt < 16; attempt++ {
		bv, err := l.liveBucket(ctx, name)
		if err != nil {
			return 0, err
		}
		b := bv.Bucket
		if err := fn(&b); err != nil {
			return 0, err
		}
		var t meta.Txn
		t.If(meta.BucketKey(name), bv.rev)
		t.If(meta.BucketGuardKey(name), bv.guardRev)
		t.Put(meta.BucketKey(name), meta.Encode(b))
		t.Put(meta.BucketGuardKey(name), meta.Encode(meta.BucketGuard{Created: b.Created}))
		rev, err := l.kv.Commit(ctx, &t)
		l.buckets.drop(name)
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		return rev, err
	}
	return 0, fmt.Errorf("%w: bucket %s", ErrBucketBusy, name)
}

// SetVersioning sets a bucket's S3 versioning state: Enabled or
// Suspended (once enabled, a bucket cannot return to unversioned, as on
// AWS).
func (l *Layer) SetVersioning(ctx context.Context, bucket, state string) error {
	if state != VersioningEnabled && state != VersioningSuspended {
		return fmt.Errorf("%w: %q (Enabled or Suspended)", ErrInvalidVersioning, state)
	}
	if err := writable(bucket); err != nil {
		return err
	}
	_, err := l.changeBucket(ctx, bucket, func(b *meta.Bucket) error {
		if b.Versioning == VersioningOff && state == VersioningSuspended {
			return nil // suspending a never-versioned bucket changes nothing
		}
		b.Versioning = state
		return nil
	})
	return err
}

// snapshotNameRE: snapshot names become part of a bucket name
// ("b--snap-NAME"), so they follow bucket-name characters.
var snapshotNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	Bucket  string `json:"bucket"`
	Name    string `json:"name"`
	Rev     int64  `json:"revision"`
	Created int64  `json:"created"`
	// Served is the read-only bucket name S3 clients use.
	Served string `json:"s3_bucket"`
	// Clone names the clone a pin serves ("" for named snapshots).
	Clone string `json:"clone,omitempty"`
}

// CreateSnapshot records a read-only, point-in-time view of a bucket. It
// is metadata only and takes the same time whatever the bucket holds: two
// commits to the bucket record. Until the second, the snapshot pins every
// current record (revision pending); then it pins its revision.
func (l *Layer) CreateSnapshot(ctx context.Context, bucket, name string) (SnapshotInfo, error) {
	if !snapshotNameRE.MatchString(name) || strings.Contains(name, "--") {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot name %q: lowercase letters, digits and single hyphens, at most 40", ErrInvalidBucketName, name)
	}
	if len(bucket)+len(snapSep)+len(name) > 63 {
		return SnapshotInfo{}, fmt.Errorf("%w: %s%s%s is longer than a bucket name may be (63)", ErrInvalidBucketName, bucket, snapSep, name)
	}
	return l.addPin(ctx, bucket, name, "")
}

// addPin adds a snapshot (clone "") or a clone's pin and fixes its
// revision.
func (l *Layer) addPin(ctx context.Context, bucket, name, clone string) (SnapshotInfo, error) {
	if err := writable(bucket); err != nil {
		return SnapshotInfo{}, err
	}
	created := l.opts.Now().UnixNano()
	rev, err := l.changeBucket(ctx, bucket, func(b *meta.Bucket) error {
		for _, s := range b.Snapshots {
			if s.Name == name {
				return fmt.Errorf("%w: %s of bucket %s", ErrSnapshotExists, name, bucket)
			}
		}
		b.Snapshots = append(b.Snapshots, meta.BucketSnapshot{Name: name, Created: created, Clone: clone})
		return nil
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	// Every record current at rev was written at or before it; every
	// later write saw the pending pin and kept what it replaced. A
	// creator that stalled here longer than the Curator's pin repair age
	// finds its pin finished already, at a later revision, and version
	// collection may have dropped since what only the pending pin kept:
	// that revision stays. A pin removed meanwhile (deleted, or a clone
	// pin dropped by the repair) is not brought back.
	stored := rev
	err = l.UpdateBucket(ctx, bucket, func(b *meta.Bucket) error {
		for i := range b.Snapshots {
			s := &b.Snapshots[i]
			if s.Name != name || s.Created != created || s.Clone != clone {
				continue
			}
			if s.Rev != 0 {
				stored = s.Rev
				return errPinSettled
			}
			s.Rev = rev
			return nil
		}
		return fmt.Errorf("%w: %s of bucket %s (%w)", ErrNoSuchSnapshot, name, bucket, errPinRemoved)
	})
	if err != nil && !errors.Is(err, errPinSettled) {
		return SnapshotInfo{}, err
	}
	return SnapshotInfo{Bucket: bucket, Name: name, Rev: stored, Created: created, Served: bucket + snapSep + name, Clone: clone}, nil
}

var (
	// errPinSettled: a pin's revision was fixed already (by pin repair);
	// nothing to write.
	errPinSettled = errors.New("object: pin finished already")
	// errPinRemoved: a pin was removed while its creator still needed it
	// (a snapshot deleted while being created; a clone pin dropped by pin
	// repair before its clone existed).
	errPinRemoved = errors.New("removed while it was being created")
)

// Snapshots lists a bucket's snapshots and clone pins.
func (l *Layer) Snapshots(ctx context.Context, bucket string) ([]SnapshotInfo, error) {
	b, _, err := l.GetBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	out := make([]SnapshotInfo, 0, len(b.Snapshots))
	for _, s := range b.Snapshots {
		si := SnapshotInfo{Bucket: bucket, Name: s.Name, Rev: s.Rev, Created: s.Created, Clone: s.Clone}
		if s.Clone == "" {
			si.Served = bucket + snapSep + s.Name
		}
		out = append(out, si)
	}
	return out, nil
}

// DeleteSnapshot removes a named snapshot. The versions only it kept are
// reclaimed by the Curator's next full scan. A snapshot a clone was made
// from stays pinned by the clone's own pin until the clone is reduced or
// deleted.
func (l *Layer) DeleteSnapshot(ctx context.Context, bucket, name string) error {
	return l.removePin(ctx, bucket, name, false)
}

func (l *Layer) removePin(ctx context.Context, bucket, name string, clonePin bool) error {
	return l.UpdateBucket(ctx, bucket, func(b *meta.Bucket) error {
		for i, s := range b.Snapshots {
			if s.Name == name && (s.Clone != "") == clonePin {
				b.Snapshots = append(b.Snapshots[:i:i], b.Snapshots[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("%w: %s of bucket %s", ErrNoSuchSnapshot, name, bucket)
	})
}

// RepairPins finishes what a crash cut short in snapshot and clone
// creation, for pins created more than olderThan ago (younger ones may
// still be in their creator's hands). A snapshot whose second commit never
// happened (revision pending) pins everything and would keep every
// replaced record forever: it gets the bucket record's current revision,
// which is at or after its first commit — every record replaced since
// that commit was kept, so the view at that revision is complete. A clone
// pin whose clone bucket was never created is dropped. It returns how many
// pins it finished and dropped. The Curator runs it on full scans.
func (l *Layer) RepairPins(ctx context.Context, bucket string, olderThan time.Duration) (finished, dropped int, err error) {
	for attempt := 0; attempt < 16; attempt++ {
		b, rev, err := l.getBucketFresh(ctx, bucket)
		if err != nil {
			return 0, 0, err
		}
		cutoff := l.opts.Now().Add(-olderThan).UnixNano()
		finished, dropped = 0, 0
		kept := b.Snapshots[:0:0]
		for _, s := range b.Snapshots {
			if s.Created > cutoff {
				kept = append(kept, s)
				continue
			}
			if s.Clone != "" {
				cb, _, err := l.getBucketFresh(ctx, s.Clone)
				if errors.Is(err, ErrNoSuchBucket) || err == nil && (cb.Parent == nil || cb.Parent.Bucket != bucket || cb.Parent.Snapshot != s.Name) {
					dropped++
					continue
				}
				if err != nil {
					return 0, 0, err
				}
			}
			if s.Rev == 0 {
				s.Rev = rev
				finished++
			}
			kept = append(kept, s)
		}
		if finished == 0 && dropped == 0 {
			return 0, 0, nil
		}
		b.Snapshots = kept
		var t meta.Txn
		t.If(meta.BucketKey(bucket), rev)
		t.Put(meta.BucketKey(bucket), meta.Encode(b))
		_, err = l.kv.Commit(ctx, &t)
		l.buckets.drop(bucket)
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		return finished, dropped, err
	}
	return 0, 0, fmt.Errorf("%w: bucket %s", ErrBucketBusy, bucket)
}

// Clone creates bucket dst that shares every object of src — as of
// src's snapshot snap, or of now when snap is "" — without copying data or
// object records: dst reads through to src at that revision for every key
// it has no record of. Writes to either side never change the other.
func (l *Layer) Clone(ctx context.Context, src, snap, dst string) (SnapshotInfo, error) {
	if err := checkBucketName(dst); err != nil {
		return SnapshotInfo{}, err
	}
	if strings.Contains(dst, snapSep) {
		return SnapshotInfo{}, fmt.Errorf("%w: %q: names containing %q are reserved for snapshots", ErrInvalidBucketName, dst, snapSep)
	}
	if _, _, err := l.GetBucket(ctx, dst); err == nil {
		return SnapshotInfo{}, fmt.Errorf("%w: %s", ErrBucketExists, dst)
	}
	if _, _, err := l.GetBucket(ctx, src); err != nil {
		return SnapshotInfo{}, err
	}
	// Reads and listings follow at most maxCloneDepth parents: a clone
	// deeper than that would be created and then fail every read-through.
	if depth, err := l.cloneDepth(ctx, src); err != nil {
		return SnapshotInfo{}, err
	} else if depth+1 > maxCloneDepth {
		return SnapshotInfo{}, fmt.Errorf("%w: clone %s of %s would have %d ancestors, limit %d (reduce a clone in the chain first)", ErrCloneTooDeep, dst, src, depth+1, maxCloneDepth)
	}
	for attempt := 0; attempt < 4; attempt++ {
		pin, err := l.addClonePin(ctx, src, snap, dst)
		if err == nil {
			err = l.createClone(ctx, src, dst, pin)
		}
		if errors.Is(err, errPinRemoved) {
			// The creator stalled longer than the pin repair age and the
			// Curator dropped the pin of a clone that did not exist yet:
			// pin again (a point in time within this call), or fail if
			// the named snapshot is gone meanwhile.
			continue
		}
		if err != nil {
			return SnapshotInfo{}, err
		}
		return pin, nil
	}
	return SnapshotInfo{}, fmt.Errorf("%w: clone %s of %s: its pin was dropped again and again", ErrBucketBusy, dst, src)
}

// cloneDepth is how many parents bucket has (0: a plain bucket).
func (l *Layer) cloneDepth(ctx context.Context, bucket string) (int, error) {
	depth := 0
	for b := bucket; ; depth++ {
		rec, _, err := l.GetBucket(ctx, b)
		if err != nil {
			return 0, err
		}
		if rec.Parent == nil || depth > maxCloneDepth {
			return depth, nil
		}
		b = rec.Parent.Bucket
	}
}

// addClonePin adds the pin clone dst holds on src: at src's snapshot
// snap, or (snap "") at a new point in time. The clone holds a pin of its
// own, so deleting the named snapshot later does not pull the ground from
// under it.
func (l *Layer) addClonePin(ctx context.Context, src, snap, dst string) (SnapshotInfo, error) {
	pinName := "clone-" + dst
	if snap == "" {
		return l.addPin(ctx, src, pinName, dst)
	}
	sb, _, err := l.GetBucket(ctx, src)
	if err != nil {
		return SnapshotInfo{}, err
	}
	var at int64
	for _, s := range sb.Snapshots {
		if s.Name == snap && s.Clone == "" {
			at = s.Rev
		}
	}
	if at == 0 {
		return SnapshotInfo{}, fmt.Errorf("%w: %s of bucket %s", ErrNoSuchSnapshot, snap, src)
	}
	created := l.opts.Now().UnixNano()
	if _, err := l.changeBucket(ctx, src, func(b *meta.Bucket) error {
		// The named snapshot must still hold its revision when the
		// clone's pin takes over, or the Curator may already have
		// collected what it kept.
		still := false
		for _, s := range b.Snapshots {
			still = still || s.Name == snap && s.Clone == "" && s.Rev == at
		}
		if !still {
			return fmt.Errorf("%w: %s of bucket %s (deleted meanwhile)", ErrNoSuchSnapshot, snap, src)
		}
		b.Snapshots = append(b.Snapshots, meta.BucketSnapshot{Name: pinName, Rev: at, Created: created, Clone: dst})
		return nil
	}); err != nil {
		return SnapshotInfo{}, err
	}
	return SnapshotInfo{Bucket: src, Name: pinName, Rev: at, Created: created, Clone: dst}, nil
}

// createClone creates bucket dst reading through to src at pin's
// revision. Its commit compares src's bucket record as read, with the pin
// in it: the Curator's pin repair drops a clone pin whose clone does not
// exist yet (a creator that stalled here longer than the repair age), and
// a clone created after that would read through a revision nothing pins,
// losing what version collection removes. errPinRemoved: the pin is gone.
func (l *Layer) createClone(ctx context.Context, src, dst string, pin SnapshotInfo) error {
	for attempt := 0; attempt < 16; attempt++ {
		sb, srev, err := l.getBucketFresh(ctx, src)
		if err != nil {
			return err
		}
		held := false
		for _, s := range sb.Snapshots {
			held = held || s.Name == pin.Name && s.Clone == dst && s.Rev == pin.Rev && s.Created == pin.Created
		}
		if !held {
			return fmt.Errorf("object: clone %s of %s: pin %w", dst, src, errPinRemoved)
		}
		created := l.opts.Now().UnixNano()
		var t meta.Txn
		t.If(meta.BucketKey(src), srev)
		t.If(meta.BucketKey(dst), 0)
		t.Put(meta.BucketKey(dst), meta.Encode(meta.Bucket{Name: dst, Owner: sb.Owner, Created: created, Vector: sb.Vector,
			Attrs: sb.Attrs, Versioning: sb.Versioning,
			Parent: &meta.BucketParent{Bucket: src, Snapshot: pin.Name, Rev: pin.Rev}}))
		t.Put(meta.BucketGuardKey(dst), meta.Encode(meta.BucketGuard{Created: created}))
		_, err = l.kv.Commit(ctx, &t)
		if err == nil {
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			// The clone may have been created (a connection lost after the
			// commit was sent): its pin stays, or the Curator could collect
			// what the clone reads. The Curator's pin repair drops it if the
			// clone does not exist.
			return err
		}
		// Certainly not created: dst exists, or src's record changed (a
		// setting, another snapshot, pin repair): look again.
		if _, _, gerr := l.getBucketFresh(ctx, dst); gerr == nil {
			_ = l.removePin(context.WithoutCancel(ctx), src, pin.Name, true)
			return fmt.Errorf("%w: %s", ErrBucketExists, dst)
		}
	}
	_ = l.removePin(context.WithoutCancel(ctx), src, pin.Name, true)
	return fmt.Errorf("%w: bucket %s", ErrBucketBusy, src)
}

// ReduceClone is snapshot tree reduction (Curator §3.2.4) for one clone:
// it copies up to budget of the records the clone reads through to its
// parent into the clone itself (metadata only: the copies share the
// parent's extents), so reads stop walking up the chain. When nothing is
// left to copy it unlinks the clone from its parent and releases the pin
// it held there. It returns how many records it copied and whether the
// clone is now independent. Safe to interrupt at any point: a copied key
// is the clone's own, an uncopied one still reads through.
func (l *Layer) ReduceClone(ctx context.Context, bucket string, budget int) (copied int, done bool, err error) {
	for pass := 0; pass < 4; pass++ {
		n, done, again, err := l.reducePass(ctx, bucket, budget-copied)
		copied += n
		if err != nil || !again {
			return copied, done, err
		}
	}
	return copied, false, nil // the next reduction decides again
}

// reducePass is one pass of ReduceClone; again reports that the clone
// changed under it before it could unlink it, and a new pass may finish.
func (l *Layer) reducePass(ctx context.Context, bucket string, budget int) (copied int, done, again bool, err error) {
	// The bucket record and guard as read before any decision: the
	// unlink compares both.
	bv, err := l.readBucket(ctx, bucket)
	if err != nil {
		return 0, false, false, err
	}
	b, brev := bv.Bucket, bv.rev
	if b.Parent == nil {
		return 0, true, false, nil
	}
	if bv.deletingSince != 0 {
		return 0, false, false, nil // being deleted
	}
	parent := view{bucket: b.Parent.Bucket, rev: b.Parent.Rev}
	after := ""
	for {
		page, err := l.listView(ctx, b.Parent.Bucket, parent, ListOptions{After: after, MaxKeys: 256})
		if err != nil {
			return copied, false, false, err
		}
		for _, o := range page.Objects {
			after = o.Key
			cur, curRev, err := l.current(ctx, bucket, o.Key)
			if err != nil {
				return copied, false, false, err
			}
			var t meta.Txn
			// Every copy compares the clone's record as read: once
			// another reduction has unlinked the clone, a key deleted
			// in it must not come back from the parent, and a snapshot
			// of the clone taken meanwhile must be seen below.
			t.If(meta.BucketKey(bucket), brev)
			t.If(meta.ObjectKey(bucket, o.Key), curRev)
			rec := o.Object
			if curRev == 0 {
				// Visible in the clone since it was made: From 1 keeps
				// the clone's own snapshots seeing it once the parent is
				// gone.
				rec.From, rec.Seq = 1, 0
				if rec.VersionID != "" {
					// A version of a versioned parent: its S3 record
					// (every current version has one) keeps it a version
					// of the clone, read by ID and listed, and kept when
					// the clone writes over it, as historyOps keeps the
					// version a clone inherited.
					rec.Seq = parentHistorySeq
					putNew(&t, meta.VersionKey(bucket, o.Key, parentHistorySeq), meta.Version{Object: rec, S3: true})
				}
				t.Put(meta.ObjectKey(bucket, o.Key), meta.Encode(rec))
			} else {
				// The clone's own record (or tombstone) wins, but its
				// snapshots taken before it was written saw the parent's
				// record: keep that as history, visible from 1 until the
				// clone's first own record.
				need, err := l.parentRecordNeeded(ctx, &t, b, bucket, o.Key, cur, curRev)
				if err != nil {
					return copied, false, false, err
				}
				if !need {
					continue
				}
				rec.From, rec.Seq = 1, parentHistorySeq
				t.Put(meta.VersionKey(bucket, o.Key, parentHistorySeq), meta.Encode(meta.Version{Object: rec}))
			}
			if copied >= budget {
				return copied, false, false, nil
			}
			if _, err := l.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
				if _, now, gerr := l.getBucketFresh(ctx, bucket); gerr != nil || now != brev {
					return copied, false, false, gerr // the clone changed: the next reduction decides again
				}
				continue // the key changed: its own record wins
			} else if err != nil {
				return copied, false, false, err
			}
			copied++
		}
		if !page.Truncated {
			break
		}
	}
	// Everything the parent showed is the clone's own now — as decided
	// key by key above. The unlink compares the clone's bucket record and
	// guard as read before those decisions: a delete by version ID that
	// removed the clone's last record of a key it had decided on makes
	// the key read through to the parent again and rewrites the guard
	// (dropCurrent); unlinking after it would make that object vanish from
	// the clone. Like changeBucket, the unlink rewrites the guard, so
	// writes that raced it redo with the parent out of view.
	parentName, pin := b.Parent.Bucket, b.Parent.Snapshot
	nb := b
	nb.Parent = nil
	var t meta.Txn
	t.If(meta.BucketKey(bucket), brev)
	t.If(meta.BucketGuardKey(bucket), bv.guardRev)
	t.Put(meta.BucketKey(bucket), meta.Encode(nb))
	t.Put(meta.BucketGuardKey(bucket), meta.Encode(meta.BucketGuard{Created: nb.Created}))
	_, err = l.kv.Commit(ctx, &t)
	l.buckets.drop(bucket)
	if errors.Is(err, meta.ErrConflict) {
		return copied, false, true, nil
	}
	if err != nil {
		return copied, false, false, err
	}
	if err := l.removePin(context.WithoutCancel(ctx), parentName, pin, true); err != nil && !errors.Is(err, ErrNoSuchSnapshot) && !errors.Is(err, ErrNoSuchBucket) {
		return copied, true, false, err
	}
	return copied, true, false, nil
}

// parentHistorySeq numbers the history record of a parent's key that a
// clone's snapshots see (wall-clock sequence numbers are far above it).
const parentHistorySeq = 1

// parentRecordNeeded reports whether a snapshot of clone b (bucket) sees
// the parent's record of key: taken before the clone's first own record
// of it (cur at curRev, the current one, or an older one kept as
// history), and not copied yet. It adds compares on what it read to t.
func (l *Layer) parentRecordNeeded(ctx context.Context, t *meta.Txn, b meta.Bucket, bucket, key string, cur meta.Object, curRev int64) (bool, error) {
	if len(b.Snapshots) == 0 {
		return false, nil
	}
	first := effectiveFrom(cur, curRev)
	vs, err := l.keyVersions(ctx, bucket, key)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if v.seq == parentHistorySeq {
			return false, nil // copied by an earlier reduction
		}
		first = min(first, v.from)
	}
	t.If(meta.VersionKey(bucket, key, parentHistorySeq), 0)
	return pinnedBetween(b.Snapshots, 1, first), nil
}

// Usage is a bucket's space as operators ask about it.
type Usage struct {
	Bucket  string `json:"bucket"`
	Objects int64  `json:"objects"`
	// LogicalBytes is what a listing adds up to (for a clone, including
	// what it reads through to its parent).
	LogicalBytes int64 `json:"logical_bytes"`
	// ExclusiveBytes are referenced by this bucket's records only: what
	// deleting it (and its snapshots) frees after the Curator's scans.
	ExclusiveBytes int64 `json:"exclusive_bytes"`
	// SharedBytes are also referenced by other buckets, clones or
	// snapshots, or read through a clone's parent.
	SharedBytes int64 `json:"shared_bytes"`
	// HistoryBytes are kept for versions and snapshots (not listed).
	HistoryBytes int64 `json:"history_bytes"`
}

// BucketUsage walks every object and version record (an operator's
// question: it reads the whole object and version maps).
func (l *Layer) BucketUsage(ctx context.Context, bucket string) (Usage, error) {
	u := Usage{Bucket: bucket}
	if _, _, err := l.GetBucket(ctx, bucket); err != nil {
		return u, err
	}
	const (
		mine = 1 << iota
		other
	)
	owners := map[uint64]uint8{}
	size := map[uint64]int64{}
	mineHistory := map[uint64]bool{}
	walk := func(prefix string, decode func(v []byte) (meta.Object, string, error)) error {
		start := []byte(prefix)
		for {
			items, err := l.kv.Scan(ctx, start, meta.PrefixEnd([]byte(prefix)), 1024)
			if err != nil {
				return err
			}
			for _, it := range items {
				o, b, err := decode(it.Value)
				if err != nil {
					return err
				}
				if b == "" {
					b, _, _ = meta.SplitObjectKey(it.Key)
					if prefix == meta.PrefixVersion {
						b, _, _, _ = meta.SplitVersionKey(it.Key)
					}
				}
				for _, x := range o.Extents {
					size[x.ID] = max(size[x.ID], x.Off+x.Len)
					if b == bucket {
						owners[x.ID] |= mine
						if prefix == meta.PrefixVersion {
							mineHistory[x.ID] = true
						}
					} else {
						owners[x.ID] |= other
					}
				}
			}
			if len(items) < 1024 {
				return nil
			}
			start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
		}
	}
	if err := walk(meta.PrefixObject, func(v []byte) (meta.Object, string, error) {
		var o meta.Object
		return o, "", meta.Decode(v, &o)
	}); err != nil {
		return u, err
	}
	if err := walk(meta.PrefixVersion, func(v []byte) (meta.Object, string, error) {
		var o meta.Version
		return o.Object, "", meta.Decode(v, &o)
	}); err != nil {
		return u, err
	}
	for id, ow := range owners {
		if ow&mine == 0 {
			continue
		}
		switch {
		case ow&other != 0:
			u.SharedBytes += size[id]
		default:
			u.ExclusiveBytes += size[id]
		}
		if mineHistory[id] {
			u.HistoryBytes += size[id]
		}
	}
	after := ""
	for {
		page, err := l.List(ctx, bucket, ListOptions{After: after})
		if err != nil {
			return u, err
		}
		for _, o := range page.Objects {
			u.Objects++
			u.LogicalBytes += o.Size
			after = o.Key
		}
		if !page.Truncated {
			break
		}
	}
	// Bytes read through a parent are shared with it.
	if b, _, _ := l.GetBucket(ctx, bucket); b.Parent != nil {
		u.SharedBytes = max(u.SharedBytes, u.LogicalBytes-u.ExclusiveBytes)
	}
	return u, nil
}
