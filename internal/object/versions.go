package object

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Versions, snapshots and clones share one mechanism: a key's history.
//
// The object map (o/) holds each key's current record. The version map
// (r/) holds superseded records that someone still needs, and — in a
// versioned bucket — every S3 version including the current one (written
// once, when it becomes current, so no record ever moves from the version
// map back to the object map: the Curator's reference scan reads o/ then
// r/, and a record moving only o/ → r/ is seen by one of the two).
//
// Every record knows the metadata revision at which it became current
// (From). A snapshot is a revision R: it sees, for each key, the record
// with the largest From ≤ R (none, or a delete marker: no object). A write
// to a bucket with snapshots keeps the record it replaces when a snapshot
// revision is at or after its From. Snapshot creation changes the bucket's
// guard, so a write that raced it retries with the snapshot in view.
//
// A clone is a bucket with a parent (bucket, revision): a key the clone
// has no record of is read from the parent as of that revision; deleting
// such a key writes a tombstone in the clone. Of each key the clone
// inherits one version, the parent's record at that revision; a versioned
// clone writing the key keeps it as its own S3 record. Snapshot tree
// reduction copies the parent's records into the clone so reads stop
// walking up.

// Versioning states of a bucket.
const (
	VersioningOff       = ""
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// NullVersion is S3's version ID of objects written while versioning was
// off or suspended.
const NullVersion = "null"

// snapSep separates a bucket name from a snapshot name in the read-only
// bucket a snapshot is served as: "photos--snap-monday". Bucket names
// containing it are reserved (AWS reserves "--x-s3" the same way).
const snapSep = "--snap-"

// Errors of versioned access.
var (
	// ErrDeleteMarker: the object's current version (or the version asked
	// for) is a delete marker. It wraps ErrNoSuchKey; DeleteMarkerOf
	// returns the marker's version ID.
	ErrDeleteMarker = fmt.Errorf("%w (delete marker)", ErrNoSuchKey)
	// ErrNoSuchVersion: no version with that ID.
	ErrNoSuchVersion = errors.New("object: no such version")
	// ErrReadOnly: a write to a snapshot.
	ErrReadOnly = errors.New("object: snapshots are read-only")
	// ErrInvalidVersioning: a versioning state other than Enabled or
	// Suspended, or a change that is not allowed.
	ErrInvalidVersioning = errors.New("object: invalid versioning state")
	// ErrNoSuchSnapshot: no snapshot of that name.
	ErrNoSuchSnapshot = errors.New("object: no such snapshot")
	// ErrSnapshotExists: a snapshot of that name exists.
	ErrSnapshotExists = errors.New("object: snapshot already exists")
	// ErrCloneTooDeep: a clone would have more ancestors than reads
	// follow (maxCloneDepth); reducing a clone in the chain shortens it.
	ErrCloneTooDeep = errors.New("object: clone chain too deep")
)

// markerError is an ErrDeleteMarker that carries the marker's version.
type markerError struct {
	bucket, key, version string
}

func (e *markerError) Error() string {
	return fmt.Sprintf("object: %s/%s: current version %s is a delete marker", e.bucket, e.key, e.version)
}
func (e *markerError) Unwrap() error { return ErrDeleteMarker }

// DeleteMarkerOf returns the version ID of the delete marker err reports.
func DeleteMarkerOf(err error) (string, bool) {
	var me *markerError
	if errors.As(err, &me) {
		return me.version, true
	}
	return "", false
}

// special reports whether writes to the bucket must look at a key's
// history: it is versioned, has snapshots or pins, or is a clone.
func (v bucketView) special() bool {
	return v.Versioning != VersioningOff || len(v.Snapshots) > 0 || v.Parent != nil
}

// maxPin is the latest revision a snapshot or pin needs (MaxInt64 while
// one is being created: everything current is needed).
func maxPin(snaps []meta.BucketSnapshot) int64 {
	m := int64(0)
	for _, s := range snaps {
		if s.Rev == 0 {
			return math.MaxInt64
		}
		m = max(m, s.Rev)
	}
	return m
}

// pinnedBetween reports whether a snapshot revision falls in [from, until).
func pinnedBetween(snaps []meta.BucketSnapshot, from, until int64) bool {
	for _, s := range snaps {
		if s.Rev == 0 || (s.Rev >= from && s.Rev < until) {
			return true
		}
	}
	return false
}

// effectiveFrom is when a record became current.
func effectiveFrom(o meta.Object, modRev int64) int64 {
	if o.From != 0 {
		return o.From
	}
	return modRev
}

// versionRec is a version map record with its place.
type versionRec struct {
	meta.Version
	seq    uint64
	modRev int64
	from   int64
}

// keyVersions reads every version record of bucket/key, newest first.
func (l *Layer) keyVersions(ctx context.Context, bucket, key string) ([]versionRec, error) {
	p := meta.VersionPrefix(bucket, key)
	items, err := l.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	out := make([]versionRec, 0, len(items))
	for _, it := range items {
		_, _, seq, ok := meta.SplitVersionKey(it.Key)
		if !ok {
			return nil, fmt.Errorf("object: bad version key %q", it.Key)
		}
		var v meta.Version
		if err := meta.Decode(it.Value, &v); err != nil {
			return nil, err
		}
		out = append(out, versionRec{Version: v, seq: seq, modRev: it.ModRev, from: effectiveFrom(v.Object, it.ModRev)})
	}
	return out, nil
}

// current reads bucket/key's current record; rev 0 when there is none.
func (l *Layer) current(ctx context.Context, bucket, key string) (meta.Object, int64, error) {
	var o meta.Object
	rev, err := meta.GetRecord(ctx, l.kv, meta.ObjectKey(bucket, key), &o)
	if errors.Is(err, meta.ErrNotFound) {
		return meta.Object{}, 0, nil
	}
	return o, rev, err
}

// nextSeq numbers a new record of bucket/key after every record the key
// has: its current one (cur) and the newest in its version map. The
// current record alone is not enough: a version made current again (a
// newer one deleted by ID) is older than records kept in the version map,
// and a node whose clock is behind would reuse one of their numbers.
// Writes to one key are serialised by the compare on its current record,
// and every commit that adds to the version map changes that record, so
// the sequence is monotonic per key whatever the nodes' clocks.
func (l *Layer) nextSeq(ctx context.Context, bucket, key string, cur meta.Object) (uint64, error) {
	p := meta.VersionPrefix(bucket, key)
	newest, err := l.kv.Scan(ctx, p, meta.PrefixEnd(p), 1) // sequence numbers are stored inverted: newest first
	if err != nil {
		return 0, err
	}
	return l.seqAfter(cur, newest)
}

// seqAfter is nextSeq from the key's version map as already read (any
// prefix of it in key order: only its first record counts).
func (l *Layer) seqAfter(cur meta.Object, versions []meta.Item) (uint64, error) {
	seq := max(uint64(l.opts.Now().UnixNano()), cur.Seq+1)
	if len(versions) > 0 {
		_, _, newest, ok := meta.SplitVersionKey(versions[0].Key)
		if !ok {
			return 0, fmt.Errorf("object: bad version key %q", versions[0].Key)
		}
		seq = max(seq, newest+1)
	}
	return seq, nil
}

// seqAfterVersions is seqAfter for versions read by keyVersions.
func (l *Layer) seqAfterVersions(cur meta.Object, vs []versionRec) uint64 {
	seq := max(uint64(l.opts.Now().UnixNano()), cur.Seq+1)
	if len(vs) > 0 {
		seq = max(seq, vs[0].seq+1)
	}
	return seq
}

// putNew adds a new version map record to t, with a compare that it does
// not exist yet: a record is never overwritten by one meant to be new.
func putNew(t *meta.Txn, k []byte, v meta.Version) {
	t.If(k, 0)
	t.Put(k, meta.Encode(v))
}

// versionID names a sequence number for S3.
func versionID(seq uint64) string { return fmt.Sprintf("%016x", seq) }

// historyOps fills t with what replacing bucket/key's current record
// (cur at revision curRev; curRev 0: none) by next needs in a special
// bucket: the compare on the current record, next's version fields, the
// version map records that versioning and snapshots require, and next
// itself. A nil next deletes the key (only when nothing needs its
// history). It reads the key's versions only when a suspended bucket
// replaces its null version.
func (l *Layer) historyOps(ctx context.Context, t *meta.Txn, bv bucketView, bucket, key string, cur meta.Object, curRev int64, next *meta.Object) error {
	okey := meta.ObjectKey(bucket, key)
	t.If(okey, curRev)
	curFrom := effectiveFrom(cur, curRev)
	pins := bv.Snapshots
	seq, err := l.nextSeq(ctx, bucket, key, cur)
	if err != nil {
		return err
	}
	switch bv.Versioning {
	case VersioningEnabled, VersioningSuspended:
		if curRev == 0 && bv.Parent != nil {
			// A key the clone reads through to: the version it inherited
			// is a version of the clone (read by ID, listed), and this
			// write makes it noncurrent, as in any versioned bucket. Keep
			// it as the clone's own S3 record, as reduction copies it:
			// once written over, reads no longer reach the parent's, and
			// a reduced clone has no parent. A suspended bucket's new
			// null version replaces an inherited null one instead.
			inh, found, err := l.inherited(ctx, *bv.Parent, key)
			if err != nil {
				return err
			}
			if found && !(bv.Versioning == VersioningSuspended && inh.VersionID == NullVersion) {
				putNew(t, meta.VersionKey(bucket, key, parentHistorySeq), meta.Version{Object: inh, S3: true})
			}
		}
		// curS3From is where cur's own S3 record starts.
		curS3From := curFrom
		switch {
		case curRev != 0 && cur.VersionID == "" && cur.DeleteMarker:
			// A tombstone of an unversioned delete: no S3 version, but
			// a snapshot may see the key absent then.
			if curFrom <= maxPin(pins) {
				keepHidden(t, bucket, key, cur, curFrom, seq)
				seq++
			}
			cur, curRev = meta.Object{}, 0
		case curRev != 0 && cur.VersionID == "":
			// Written before versioning: it becomes the "null" version
			// (under its own sequence number when it has one: a bucket
			// with snapshots numbers even unversioned records).
			legacy := cur
			legacy.VersionID, legacy.From = NullVersion, curFrom
			if legacy.Seq == 0 {
				legacy.Seq = seq
				seq++
			}
			putNew(t, meta.VersionKey(bucket, key, legacy.Seq), meta.Version{Object: legacy, S3: true})
			cur = legacy
		case curRev != 0 && len(pins) > 0:
			// The current version's S3 record carries the time it first
			// became current. A version made current again (a newer one
			// deleted by ID) has its later stretch only in the object
			// map: keep that stretch for the snapshots that see it, and
			// judge the S3 record by its own.
			storedFrom, err := l.storedFrom(ctx, t, bucket, key, cur)
			if err != nil {
				return err
			}
			if storedFrom != curFrom && curFrom <= maxPin(pins) {
				keepHidden(t, bucket, key, cur, curFrom, seq)
				seq++
			}
			if storedFrom >= 0 {
				curS3From = storedFrom
			}
		}
		if bv.Versioning == VersioningSuspended && next != nil {
			// The new null version replaces the existing one, wherever it
			// is in the key's history.
			vs, err := l.keyVersions(ctx, bucket, key)
			if err != nil {
				return err
			}
			for i, v := range vs {
				if v.S3 && v.VersionID == NullVersion && v.seq != cur.Seq {
					until := curFrom
					if i > 0 {
						until = vs[i-1].from
					}
					dropVersionOps(t, bucket, key, v, until, pins)
				}
			}
			if curRev != 0 && cur.VersionID == NullVersion {
				dropVersionOps(t, bucket, key, versionRec{Version: meta.Version{Object: cur, S3: true}, seq: cur.Seq, from: curS3From}, math.MaxInt64, pins)
			}
		}
		if next == nil {
			return nil
		}
		next.Seq = seq
		next.VersionID = versionID(seq)
		if bv.Versioning == VersioningSuspended {
			next.VersionID = NullVersion
		}
		putNew(t, meta.VersionKey(bucket, key, seq), meta.Version{Object: *next, S3: true})
	default:
		// Unversioned: keep the replaced record if a snapshot sees it.
		if curRev != 0 && curFrom <= maxPin(pins) {
			kept := cur
			kept.From = curFrom
			if kept.Seq == 0 {
				kept.Seq = seq
				seq++
			}
			putNew(t, meta.VersionKey(bucket, key, kept.Seq), meta.Version{Object: kept})
		}
		if next == nil {
			t.Del(okey)
			return nil
		}
		next.Seq = seq
	}
	t.Put(okey, meta.Encode(*next))
	return nil
}

// keepHidden keeps cur, current since curFrom, in the version map as
// history only snapshots see (no S3 version), under sequence number seq.
func keepHidden(t *meta.Txn, bucket, key string, cur meta.Object, curFrom int64, seq uint64) {
	kept := cur
	kept.From, kept.Seq = curFrom, seq
	putNew(t, meta.VersionKey(bucket, key, seq), meta.Version{Object: kept})
}

// storedFrom returns when the S3 record of cur, a versioned current
// record, says it became current (-1: it has none), and adds a compare on
// that record to t. It differs from cur's own start when the version
// became current again (a newer one deleted by ID).
func (l *Layer) storedFrom(ctx context.Context, t *meta.Txn, bucket, key string, cur meta.Object) (int64, error) {
	var rc meta.Version
	k := meta.VersionKey(bucket, key, cur.Seq)
	rrev, err := meta.GetRecord(ctx, l.kv, k, &rc)
	if errors.Is(err, meta.ErrNotFound) {
		t.If(k, 0)
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	t.If(k, rrev)
	return effectiveFrom(rc.Object, rrev), nil
}

// dropVersionOps removes a version record valid during [v.from, until):
// deleted when no snapshot sees it, else kept out of S3's sight.
func dropVersionOps(t *meta.Txn, bucket, key string, v versionRec, until int64, pins []meta.BucketSnapshot) {
	k := meta.VersionKey(bucket, key, v.seq)
	if pinnedBetween(pins, v.from, until) {
		h := v.Version
		h.S3 = false
		h.From = v.from
		t.Put(k, meta.Encode(h))
		return
	}
	t.Del(k)
}

// record is an object record and where it is stored.
type record struct {
	meta.Object
	key []byte // its key in the object or version map
	rev int64  // that key's revision
}

// visibleAt returns the record of bucket/key a reader at revision rev
// sees (rev math.MaxInt64: now), following a clone's parent for keys the
// clone has no record of. found is false when there is no object (never
// written, or a delete marker; the marker is returned).
func (l *Layer) visibleAt(ctx context.Context, bucket, key string, rev int64, depth int) (rec record, found bool, err error) {
	if depth > maxCloneDepth {
		return record{}, false, fmt.Errorf("object: %s: clone chain deeper than %d", bucket, maxCloneDepth)
	}
	cur, curRev, err := l.current(ctx, bucket, key)
	if err != nil {
		return record{}, false, err
	}
	bestFrom := int64(-1)
	if curRev != 0 {
		if f := effectiveFrom(cur, curRev); f <= rev {
			rec, bestFrom = record{Object: cur, key: meta.ObjectKey(bucket, key), rev: curRev}, f
		}
	}
	if rev != math.MaxInt64 && bestFrom < 0 {
		vs, err := l.keyVersions(ctx, bucket, key)
		if err != nil {
			return record{}, false, err
		}
		for _, v := range vs {
			if v.from <= rev && v.from > bestFrom {
				rec, bestFrom = record{Object: v.Object, key: meta.VersionKey(bucket, key, v.seq), rev: v.modRev}, v.from
			}
		}
	}
	if bestFrom >= 0 {
		return rec, !rec.DeleteMarker, nil
	}
	b, _, err := l.GetBucket(ctx, bucket)
	if err != nil {
		return record{}, false, err
	}
	if b.Parent != nil {
		// The clone has no record of the key as of rev: it is whatever
		// the parent had when the clone was made.
		return l.visibleAt(ctx, b.Parent.Bucket, key, b.Parent.Rev, depth+1)
	}
	return record{}, false, nil
}

// lookup returns the record a read of bucket/key (a live bucket, a clone
// or a snapshot) sees, or of one version when versionID is set. Errors:
// ErrNoSuchBucket, ErrNoSuchKey, ErrDeleteMarker (with the record, for
// callers that compare its revision), ErrNoSuchVersion.
func (l *Layer) lookup(ctx context.Context, bucket, key, versionID string) (record, error) {
	if err := checkKey(key); err != nil {
		return record{}, err
	}
	v, b, err := l.resolve(ctx, bucket)
	if err != nil {
		return record{}, err
	}
	if versionID != "" && v.live() {
		rec, err := l.lookupVersion(ctx, v.bucket, key, versionID)
		if b.Parent == nil || !errors.Is(err, ErrNoSuchVersion) {
			return rec, err
		}
		// A clone with no record of the key reads through to its parent
		// as of the clone point: the version seen there is the clone's
		// (current) one, and none other of the parent's — not those it
		// wrote later, nor older ones, which it may remove at any time (a
		// snapshot's point in time). Once the clone writes the key, the
		// inherited version is its own record (historyOps).
		if _, curRev, cerr := l.current(ctx, v.bucket, key); cerr != nil || curRev != 0 {
			return record{}, errors.Join(err, cerr)
		}
		rec, _, perr := l.visibleAt(ctx, b.Parent.Bucket, key, b.Parent.Rev, 1)
		return pointVersion(rec, perr, bucket, key, versionID, "not in the clone's history")
	}
	rec, found, err := l.visibleAt(ctx, v.bucket, key, v.rev, 0)
	if versionID != "" {
		// A snapshot is one point in time: of each key it has the version
		// current at its revision, and no other (not the versions written
		// after it, nor older ones, which S3 lifecycle or a delete by ID
		// may remove from the bucket at any time).
		return pointVersion(rec, err, bucket, key, versionID, "not the version at the snapshot's point in time")
	}
	switch {
	case err != nil:
		return record{}, err
	case found:
		return rec, nil
	case rec.DeleteMarker && rec.VersionID != "":
		return rec, &markerError{bucket: bucket, key: key, version: rec.VersionID}
	}
	return rec, fmt.Errorf("%w: %s/%s", ErrNoSuchKey, bucket, key)
}

// pointVersion serves versionID of a key whose only version in view is
// rec, as visibleAt returned it (with err): a snapshot's, or what a clone
// reads through to. why says, in an ErrNoSuchVersion, why another ID is
// not there.
func pointVersion(rec record, err error, bucket, key, versionID, why string) (record, error) {
	id := rec.VersionID
	if id == "" && rec.key != nil && !rec.DeleteMarker {
		id = NullVersion // written while the bucket was unversioned
	}
	switch {
	case err != nil:
		return record{}, err
	case id != versionID:
		return record{}, fmt.Errorf("%w: %s/%s version %s (%s)", ErrNoSuchVersion, bucket, key, versionID, why)
	case rec.DeleteMarker:
		return rec, &markerError{bucket: bucket, key: key, version: versionID}
	}
	return rec, nil
}

// inherited returns the version of key a clone with parent p inherited:
// the object p showed at the clone point, as a record of the clone's
// history (S3 version ID "null" for one written unversioned; visible from
// 1 and numbered parentHistorySeq, as reduction copies it). found is
// false when the parent showed no object (a delete marker is no version
// the clone keeps: reduction does not copy it either).
func (l *Layer) inherited(ctx context.Context, p meta.BucketParent, key string) (meta.Object, bool, error) {
	rec, found, err := l.visibleAt(ctx, p.Bucket, key, p.Rev, 1)
	if err != nil || !found {
		return meta.Object{}, false, err
	}
	inh := rec.Object
	if inh.VersionID == "" {
		inh.VersionID = NullVersion
	}
	inh.From, inh.Seq = 1, parentHistorySeq
	return inh, true, nil
}

// lookupVersion finds one S3 version of bucket/key.
func (l *Layer) lookupVersion(ctx context.Context, bucket, key, versionID string) (record, error) {
	cur, curRev, err := l.current(ctx, bucket, key)
	if err != nil {
		return record{}, err
	}
	if curRev != 0 && cur.VersionID == "" && versionID == NullVersion {
		// Written before the bucket was versioned: the "null" version.
		if cur.DeleteMarker {
			return record{}, fmt.Errorf("%w: %s/%s version %s", ErrNoSuchVersion, bucket, key, versionID)
		}
		return record{Object: cur, key: meta.ObjectKey(bucket, key), rev: curRev}, nil
	}
	vs, err := l.keyVersions(ctx, bucket, key)
	if err != nil {
		return record{}, err
	}
	for _, v := range vs {
		if v.S3 && v.VersionID == versionID {
			r := record{Object: v.Object, key: meta.VersionKey(bucket, key, v.seq), rev: v.modRev}
			if v.DeleteMarker {
				return r, &markerError{bucket: bucket, key: key, version: versionID}
			}
			return r, nil
		}
	}
	return record{}, fmt.Errorf("%w: %s/%s version %s", ErrNoSuchVersion, bucket, key, versionID)
}

// maxCloneDepth bounds clone chains (reduction shortens them).
const maxCloneDepth = 64

// view is what a bucket name resolves to for reads: a live bucket, or a
// snapshot of one.
type view struct {
	bucket string
	rev    int64 // math.MaxInt64: live
	snap   string
}

func (v view) live() bool { return v.rev == math.MaxInt64 }

// splitSnapshotName splits "b--snap-name".
func splitSnapshotName(name string) (bucket, snap string, ok bool) {
	i := strings.Index(name, snapSep)
	if i <= 0 || i+len(snapSep) >= len(name) {
		return "", "", false
	}
	return name[:i], name[i+len(snapSep):], true
}

// resolve maps a bucket name to what reads of it see.
func (l *Layer) resolve(ctx context.Context, name string) (view, meta.Bucket, error) {
	if base, snap, ok := splitSnapshotName(name); ok {
		b, _, err := l.GetBucket(ctx, base)
		if err != nil {
			return view{}, b, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
		}
		for _, s := range b.Snapshots {
			if s.Name == snap && s.Clone == "" {
				if s.Rev == 0 {
					return view{}, b, fmt.Errorf("%w: %s is still being created", ErrNoSuchBucket, name)
				}
				return view{bucket: base, rev: s.Rev, snap: snap}, b, nil
			}
		}
		return view{}, b, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
	}
	b, _, err := l.GetBucket(ctx, name)
	return view{bucket: name, rev: math.MaxInt64}, b, err
}

// writable refuses writes to snapshots with ErrReadOnly.
func writable(bucket string) error {
	if _, _, ok := splitSnapshotName(bucket); ok {
		return fmt.Errorf("%w: %s", ErrReadOnly, bucket)
	}
	return nil
}

// commitObject makes obj bucket/key's current record. commit sends one
// transaction with the compares and ops that final adds (and its own).
// In a plain bucket that is a put (with, for a conditional write, a
// compare on the revision orev the precondition saw). In a special bucket
// the current record is read first and history is written as versioning
// and snapshots require; a conflict with another writer of the key is
// retried with the new current record (last writer wins), unless the
// write is conditional: then the caller decides (precondition lost).
// On success obj holds the version fields it was written with.
func (l *Layer) commitObject(ctx context.Context, bv bucketView, bucket, key string, obj *meta.Object, conditional bool, orev int64, commit func(final func(*meta.Txn)) error) error {
	okey := meta.ObjectKey(bucket, key)
	if !bv.special() {
		return commit(func(t *meta.Txn) {
			if conditional {
				t.If(okey, orev)
			}
			t.Put(okey, meta.Encode(*obj))
		})
	}
	for attempt := 0; ; attempt++ {
		cur, curRev, err := l.current(ctx, bucket, key)
		if err != nil {
			return err
		}
		if conditional && curRev != orev {
			return meta.ErrConflict
		}
		next := *obj
		var h meta.Txn
		if err := l.historyOps(ctx, &h, bv, bucket, key, cur, curRev, &next); err != nil {
			return err
		}
		err = commit(func(t *meta.Txn) {
			t.Cmps = append(t.Cmps, h.Cmps...)
			t.Ops = append(t.Ops, h.Ops...)
		})
		if err == nil {
			*obj = next
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) || conditional || attempt >= 16 {
			return err
		}
		if _, now, cerr := l.current(ctx, bucket, key); cerr != nil || now == curRev {
			return err // the conflict came from elsewhere (the guard, an egroup)
		}
	}
}

// DeleteResult says what a delete did.
type DeleteResult struct {
	// VersionID is the version deleted, or of the delete marker created.
	VersionID string
	// DeleteMarker is set when a marker was created (versioned bucket) or
	// the version deleted was a marker.
	DeleteMarker bool
}

// DeleteObject deletes bucket/key. Without versionID: in an unversioned
// bucket the object goes (its bytes become garbage for the Curator, or
// stay while a snapshot or clone sees them); in a versioned bucket a
// delete marker becomes the current version. With versionID that version
// is removed for good (S3's permanent delete); when it was the current
// one, the newest remaining version becomes current. Deleting a missing
// key or version is not an error (S3 semantics).
func (l *Layer) DeleteObject(ctx context.Context, bucket, key, versionID string) (DeleteResult, error) {
	if err := writable(bucket); err != nil {
		return DeleteResult{}, err
	}
	if err := checkKey(key); err != nil {
		return DeleteResult{}, err
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return DeleteResult{}, err
	}
	var res DeleteResult
	err = l.guardedCommit(ctx, bucket, bv, nil, func(bv bucketView) error {
		for attempt := 0; attempt < 16; attempt++ {
			var t meta.Txn
			t.If(meta.BucketGuardKey(bucket), bv.guardRev)
			r, skip, err := l.deleteOps(ctx, &t, bv, bucket, key, versionID)
			if err != nil || skip {
				res = r
				return err
			}
			if _, err = l.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
				if l.guardMoved(ctx, bucket, bv) {
					return err // a snapshot or setting changed: guardedCommit refreshes the view
				}
				continue // the key changed: decide again
			}
			if versionID != "" && bv.Parent != nil {
				l.buckets.drop(bucket) // dropCurrent may have rewritten the guard
			}
			res = r
			return err
		}
		return fmt.Errorf("object: delete %s/%s: too much contention", bucket, key)
	})
	if err == nil {
		l.m.deletes.Inc()
	}
	return res, err
}

// DeleteNoncurrent deletes version versionID of bucket/key for good if it
// is not the current version (S3 lifecycle NoncurrentVersionExpiration).
// The commit compares the current record it saw, so a version made
// current meanwhile (a newer one deleted by ID, a rollback) is left
// alone. It reports whether it deleted.
func (l *Layer) DeleteNoncurrent(ctx context.Context, bucket, key, versionID string) (bool, error) {
	if err := writable(bucket); err != nil {
		return false, err
	}
	if err := checkKey(key); err != nil {
		return false, err
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return false, err
	}
	deleted := false
	err = l.guardedCommit(ctx, bucket, bv, nil, func(bv bucketView) error {
		cur, curRev, err := l.current(ctx, bucket, key)
		if err != nil {
			return err
		}
		if curRev != 0 && (cur.VersionID == versionID || cur.VersionID == "" && versionID == NullVersion) {
			return nil // current: not this rule's to delete
		}
		if curRev == 0 && bv.Parent != nil {
			// The clone reads the key through to its parent: the only
			// version it has is the inherited one, and it is current.
			return nil
		}
		var t meta.Txn
		t.If(meta.BucketGuardKey(bucket), bv.guardRev)
		_, skip, err := l.deleteVersionOps(ctx, &t, bv, bucket, key, versionID, cur, curRev)
		if err != nil || skip {
			return err
		}
		_, err = l.kv.Commit(ctx, &t)
		if errors.Is(err, meta.ErrConflict) && !l.guardMoved(ctx, bucket, bv) {
			return nil // the key changed: the next run decides again
		}
		deleted = err == nil
		return err
	})
	if deleted {
		l.m.deletes.Inc()
	}
	return deleted, err
}

// deleteOps fills t with one delete; skip reports that nothing needs
// committing.
func (l *Layer) deleteOps(ctx context.Context, t *meta.Txn, bv bucketView, bucket, key, versionID string) (res DeleteResult, skip bool, err error) {
	cur, curRev, err := l.current(ctx, bucket, key)
	if err != nil {
		return res, false, err
	}
	okey := meta.ObjectKey(bucket, key)
	if versionID != "" {
		return l.deleteVersionOps(ctx, t, bv, bucket, key, versionID, cur, curRev)
	}
	if !bv.special() {
		if curRev == 0 || cur.DeleteMarker {
			return res, true, nil // absent, or a tombstone: already deleted
		}
		t.If(okey, curRev)
		// History kept for a snapshot deleted since stays until the
		// Curator collects it; until then a later snapshot would see it
		// as the key's newest record: the delete ends it with a
		// tombstone.
		p := meta.VersionPrefix(bucket, key)
		old, err := l.kv.Scan(ctx, p, meta.PrefixEnd(p), 1)
		if err != nil {
			return res, false, err
		}
		if len(old) > 0 {
			seq, err := l.seqAfter(cur, old)
			if err != nil {
				return res, false, err
			}
			t.Put(okey, meta.Encode(meta.Object{DeleteMarker: true, Seq: seq, Mtime: l.opts.Now().UnixNano()}))
		} else {
			t.Del(okey)
		}
		return res, false, nil
	}
	switch bv.Versioning {
	case VersioningEnabled, VersioningSuspended:
		marker := &meta.Object{DeleteMarker: true, Mtime: l.opts.Now().UnixNano()}
		if err := l.historyOps(ctx, t, bv, bucket, key, cur, curRev, marker); err != nil {
			return res, false, err
		}
		return DeleteResult{VersionID: marker.VersionID, DeleteMarker: true}, false, nil
	}
	// Unversioned with snapshots, pins or a parent: a tombstone when
	// something may still see the key, else the key simply goes.
	if curRev != 0 && cur.DeleteMarker {
		return res, true, nil // already deleted
	}
	needTomb := bv.Parent != nil || (curRev != 0 && effectiveFrom(cur, curRev) <= maxPin(bv.Snapshots))
	if !needTomb {
		if curRev == 0 {
			return res, true, nil
		}
		vs, err := l.keyVersions(ctx, bucket, key)
		if err != nil {
			return res, false, err
		}
		needTomb = len(vs) > 0 // older versions kept for snapshots need an end
	}
	if !needTomb {
		t.If(okey, curRev)
		t.Del(okey)
		return res, false, nil
	}
	if curRev == 0 && bv.Parent != nil {
		if _, found, err := l.visibleAt(ctx, bv.Parent.Bucket, key, bv.Parent.Rev, 1); err != nil || !found {
			return res, true, err // nothing to hide in the parent either
		}
	}
	tomb := &meta.Object{DeleteMarker: true, Mtime: l.opts.Now().UnixNano()}
	return res, false, l.historyOps(ctx, t, bv, bucket, key, cur, curRev, tomb)
}

// deleteVersionOps removes one S3 version for good.
func (l *Layer) deleteVersionOps(ctx context.Context, t *meta.Txn, bv bucketView, bucket, key, versionID string, cur meta.Object, curRev int64) (DeleteResult, bool, error) {
	okey := meta.ObjectKey(bucket, key)
	res := DeleteResult{VersionID: versionID}
	t.If(okey, curRev)
	if curRev != 0 && cur.VersionID == "" && !cur.DeleteMarker && versionID == NullVersion {
		// The pre-versioning object is the null version. It is the
		// newest record; older ones, if any, are history snapshots see
		// (never S3 versions: versioning was never on before it), and
		// need an end: a tombstone.
		curFrom := effectiveFrom(cur, curRev)
		pinned := curFrom <= maxPin(bv.Snapshots)
		vs, err := l.keyVersions(ctx, bucket, key)
		if err != nil {
			return res, false, err
		}
		seq := l.seqAfterVersions(cur, vs)
		if pinned {
			keepHidden(t, bucket, key, cur, curFrom, seq)
			seq++
		}
		end := pinned || len(vs) > 0
		if !end {
			if end, err = l.parentShows(ctx, bv, key); err != nil {
				return res, false, err
			}
		}
		if end {
			t.Put(okey, meta.Encode(meta.Object{DeleteMarker: true, Seq: seq, Mtime: l.opts.Now().UnixNano()}))
		} else {
			dropCurrent(t, bv, bucket, key)
		}
		return res, false, nil
	}
	vs, err := l.keyVersions(ctx, bucket, key)
	if err != nil {
		return res, false, err
	}
	at := -1
	for i, v := range vs {
		if v.S3 && v.VersionID == versionID {
			at = i
			break
		}
	}
	if at < 0 {
		if curRev == 0 && bv.Parent != nil {
			// The version a clone reads through to is its current one:
			// deleting it leaves the clone without the key (a tombstone:
			// no version, as after any delete by ID of the last one); the
			// parent keeps it.
			inh, found, err := l.inherited(ctx, *bv.Parent, key)
			if err != nil {
				return res, false, err
			}
			if found && inh.VersionID == versionID {
				t.Put(okey, meta.Encode(meta.Object{DeleteMarker: true, Seq: l.seqAfterVersions(cur, vs), Mtime: l.opts.Now().UnixNano()}))
				return res, false, nil
			}
		}
		return res, true, nil // no such version: nothing to do
	}
	v := vs[at]
	res.DeleteMarker = v.DeleteMarker
	t.If(meta.VersionKey(bucket, key, v.seq), v.modRev)
	until := int64(math.MaxInt64)
	if at > 0 {
		until = vs[at-1].from
	}
	isCurrent := curRev != 0 && cur.VersionID != "" && cur.Seq == v.seq
	seq := l.seqAfterVersions(cur, vs) // of a record this adds
	if isCurrent {
		until = math.MaxInt64
		if curFrom := effectiveFrom(cur, curRev); curFrom != v.from && pinnedBetween(bv.Snapshots, curFrom, until) {
			// A version current again: its later stretch is only in
			// the object map, and a snapshot sees it.
			keepHidden(t, bucket, key, cur, curFrom, seq)
			seq++ // a tombstone below numbers after it
		}
	}
	dropVersionOps(t, bucket, key, v, until, bv.Snapshots)
	if !isCurrent {
		return res, false, nil
	}
	// The newest remaining S3 version becomes current (it stays in the
	// version map too: records never move from there to the object map).
	// The compare on it stops a concurrent delete of that version by ID
	// from being undone.
	for _, w := range vs[at+1:] {
		if w.S3 {
			next := w.Object
			next.From = 0 // current from now on
			t.If(meta.VersionKey(bucket, key, w.seq), w.modRev)
			t.Put(okey, meta.Encode(next))
			return res, false, nil
		}
	}
	end := pinnedBetween(bv.Snapshots, v.from, math.MaxInt64) || len(vs) > 1 // hidden history remains
	if !end {
		if end, err = l.parentShows(ctx, bv, key); err != nil {
			return res, false, err
		}
	}
	if end {
		t.Put(okey, meta.Encode(meta.Object{DeleteMarker: true, Seq: seq, Mtime: l.opts.Now().UnixNano()}))
	} else {
		dropCurrent(t, bv, bucket, key)
	}
	return res, false, nil
}

// parentShows reports whether bv is a clone whose parent shows an object
// at key as of the clone point. A delete by version ID of the clone's last
// version of such a key ends it with a tombstone: without a record the
// clone would read through to the parent again and show the version it
// inherited, which is no longer in the clone's history (deleted by ID or
// replaced; a clone writing the key keeps the inherited version as its
// own record while it is one of its versions, see historyOps).
func (l *Layer) parentShows(ctx context.Context, bv bucketView, key string) (bool, error) {
	if bv.Parent == nil {
		return false, nil
	}
	_, found, err := l.visibleAt(ctx, bv.Parent.Bucket, key, bv.Parent.Rev, 1)
	return found, err
}

// dropCurrent removes bucket/key's current record for a delete by version
// ID. In a clone that makes the key read through to its parent again, so
// it rewrites the clone's guard as well (the caller's commit compares
// it): a reduction compares the guard as it read it before deciding
// which keys the clone has its own record of, and unlinking the clone
// after such a delete would make the object vanish from it.
func dropCurrent(t *meta.Txn, bv bucketView, bucket, key string) {
	t.Del(meta.ObjectKey(bucket, key))
	if bv.Parent != nil {
		t.Put(meta.BucketGuardKey(bucket), meta.Encode(meta.BucketGuard{Created: bv.Created}))
	}
}

// VersionInfo is one entry of a version listing.
type VersionInfo struct {
	ObjectInfo
	IsLatest bool
}

// VersionListOptions select a page of ListVersions.
type VersionListOptions struct {
	Prefix    string
	Delimiter string
	// KeyMarker and VersionMarker continue after that version (S3's
	// key-marker and version-id-marker; VersionMarker "" starts after
	// every version of KeyMarker).
	KeyMarker     string
	VersionMarker string
	MaxKeys       int
}

// VersionListResult is one page.
type VersionListResult struct {
	Versions       []VersionInfo
	CommonPrefixes []string
	Truncated      bool
	// NextKeyMarker and NextVersionMarker continue a truncated listing.
	NextKeyMarker, NextVersionMarker string
}

// ListVersions lists the S3 versions of a bucket's objects (including
// delete markers) in key order, newest first within a key; objects
// written before versioning was enabled are their "null" version.
func (l *Layer) ListVersions(ctx context.Context, bucket string, o VersionListOptions) (VersionListResult, error) {
	var res VersionListResult
	b, _, err := l.GetBucket(ctx, bucket)
	if err != nil {
		return res, err
	}
	if o.MaxKeys <= 0 || o.MaxKeys > maxListKeys {
		o.MaxKeys = maxListKeys
	}
	if _, _, ok := splitSnapshotName(bucket); ok {
		return l.listSnapshotVersions(ctx, bucket, o)
	}
	if b.Parent != nil {
		return l.listCloneVersions(ctx, bucket, *b.Parent, o)
	}
	count := 0
	full := func() bool { return count >= o.MaxKeys }
	skipVersionsUntil := o.VersionMarker // within KeyMarker
	start := l.listStart(bucket, o.Prefix, o.KeyMarker, skipVersionsUntil != "")
	end := meta.PrefixEnd(meta.ObjectPrefix(bucket, o.Prefix))
	// A key marker inside a common prefix (a page that ended on the
	// prefix, whose NextKeyMarker it is): resume after every key under
	// it, as List does, or the prefix would be listed again.
	if cp := commonPrefixOf(o.KeyMarker, o.Prefix, o.Delimiter); cp != "" {
		if e := meta.PrefixEnd(meta.ObjectPrefix(bucket, cp)); string(e) > string(start) {
			start = e
		}
	}
	for {
		page, err := l.kv.Scan(ctx, start, end, 128)
		if err != nil {
			return res, err
		}
		jumped := false
		for _, it := range page {
			_, key, _ := meta.SplitObjectKey(it.Key)
			if cp := commonPrefixOf(key, o.Prefix, o.Delimiter); cp != "" {
				// Jump over every key under the common prefix; it is
				// listed only if some key under it has a version (not
				// only the hidden tombstone a snapshot keeps).
				cpEnd := meta.PrefixEnd(meta.ObjectPrefix(bucket, cp))
				has, err := l.anyVersion(ctx, bucket, it.Key, cpEnd)
				if err != nil {
					return res, err
				}
				start, skipVersionsUntil, jumped = cpEnd, "", true
				if !has {
					break
				}
				if full() {
					res.Truncated = true
					return res, nil
				}
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				res.NextKeyMarker, res.NextVersionMarker = cp, ""
				count++
				break
			}
			var cur meta.Object
			if err := meta.Decode(it.Value, &cur); err != nil {
				return res, err
			}
			entries, err := l.keyVersionEntries(ctx, bucket, key, cur)
			if err != nil {
				return res, err
			}
			for _, e := range entries {
				if skipVersionsUntil != "" && key == o.KeyMarker {
					if e.VersionID == skipVersionsUntil {
						skipVersionsUntil = ""
					}
					continue
				}
				if full() {
					res.Truncated = true
					return res, nil
				}
				res.Versions = append(res.Versions, e)
				res.NextKeyMarker, res.NextVersionMarker = key, e.VersionID
				count++
			}
			start = append(append([]byte(nil), it.Key...), 0)
			skipVersionsUntil = ""
		}
		if !jumped && len(page) < 128 {
			return res, nil
		}
		if start == nil || (end != nil && string(start) >= string(end)) {
			return res, nil
		}
	}
}

// anyVersion reports whether some key of bucket's object map in
// [from, end) has an S3 version. A current record that is an object or a
// versioned delete marker is one; only a hidden tombstone (an unversioned
// delete a snapshot needs) makes it look at the key's kept versions.
func (l *Layer) anyVersion(ctx context.Context, bucket string, from, end []byte) (bool, error) {
	return l.anyObject(ctx, from, end, func(k []byte, cur meta.Object) (bool, error) {
		if cur.VersionID != "" || !cur.DeleteMarker {
			return true, nil
		}
		_, key, _ := meta.SplitObjectKey(k)
		entries, err := l.keyVersionEntries(ctx, bucket, key, cur)
		return len(entries) > 0, err
	})
}

// keyVersionEntries lists the S3 versions bucket has of key, whose
// current record is cur: newest first, the pre-versioning object as its
// "null" version.
func (l *Layer) keyVersionEntries(ctx context.Context, bucket, key string, cur meta.Object) ([]VersionInfo, error) {
	var entries []VersionInfo
	if cur.VersionID == "" && !cur.DeleteMarker {
		legacy := cur
		legacy.VersionID = NullVersion
		entries = append(entries, VersionInfo{ObjectInfo: ObjectInfo{Bucket: bucket, Key: key, Object: legacy}, IsLatest: true})
	}
	vs, err := l.keyVersions(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if !v.S3 {
			continue
		}
		latest := cur.VersionID != "" && v.seq == cur.Seq
		entries = append(entries, VersionInfo{ObjectInfo: ObjectInfo{Bucket: bucket, Key: key, Object: v.Object}, IsLatest: latest})
	}
	return entries, nil
}

// listCloneVersions is ListVersions of a clone: its own versions of the
// keys it has records of, and for a key it reads through to, the version
// it inherited (as lookup serves it by ID), the latest. Keys come from
// the clone and its ancestors, as in listView.
func (l *Layer) listCloneVersions(ctx context.Context, bucket string, parent meta.BucketParent, o VersionListOptions) (VersionListResult, error) {
	var res VersionListResult
	chain, err := l.viewChain(ctx, bucket)
	if err != nil {
		return res, err
	}
	count := 0
	skipVersionsUntil := o.VersionMarker // within KeyMarker
	skip := commonPrefixOf(o.KeyMarker, o.Prefix, o.Delimiter)
	cursor, inclusive := o.KeyMarker, o.VersionMarker != ""
	for {
		keys, bound, err := l.viewKeys(ctx, chain, o.Prefix, cursor, inclusive)
		if err != nil {
			return res, err
		}
		inclusive = false
		for _, key := range keys {
			if bound != "" && key > bound {
				break
			}
			cursor = key
			cp := commonPrefixOf(key, o.Prefix, o.Delimiter)
			if cp != "" && (cp == skip || len(res.CommonPrefixes) > 0 && res.CommonPrefixes[len(res.CommonPrefixes)-1] == cp) {
				continue
			}
			cur, curRev, err := l.current(ctx, bucket, key)
			if err != nil {
				return res, err
			}
			var entries []VersionInfo
			if curRev != 0 {
				entries, err = l.keyVersionEntries(ctx, bucket, key, cur)
			} else {
				var inh meta.Object
				var found bool
				inh, found, err = l.inherited(ctx, parent, key)
				if found {
					entries = []VersionInfo{{ObjectInfo: ObjectInfo{Bucket: bucket, Key: key, Object: inh}, IsLatest: true}}
				}
			}
			if err != nil {
				return res, err
			}
			if len(entries) == 0 {
				continue
			}
			if cp != "" {
				if count >= o.MaxKeys {
					res.Truncated = true
					return res, nil
				}
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				res.NextKeyMarker, res.NextVersionMarker = cp, ""
				count++
				continue
			}
			for _, e := range entries {
				if skipVersionsUntil != "" && key == o.KeyMarker {
					if e.VersionID == skipVersionsUntil {
						skipVersionsUntil = ""
					}
					continue
				}
				if count >= o.MaxKeys {
					res.Truncated = true
					return res, nil
				}
				res.Versions = append(res.Versions, e)
				res.NextKeyMarker, res.NextVersionMarker = key, e.VersionID
				count++
			}
			skipVersionsUntil = ""
		}
		if bound == "" {
			return res, nil
		}
		cursor = bound
	}
}

// listSnapshotVersions lists a snapshot's versions: of each object it
// shows, the one version current at its revision (as lookup serves by
// version ID), the latest; keys deleted at that point are not listed, as
// in its object listing.
func (l *Layer) listSnapshotVersions(ctx context.Context, bucket string, o VersionListOptions) (VersionListResult, error) {
	var res VersionListResult
	// Each key has one version: a listing continues after the key marker
	// whether or not a version marker names that version.
	page, err := l.List(ctx, bucket, ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, After: o.KeyMarker, MaxKeys: o.MaxKeys})
	if err != nil {
		return res, err
	}
	for _, obj := range page.Objects {
		if obj.VersionID == "" {
			obj.VersionID = NullVersion
		}
		res.Versions = append(res.Versions, VersionInfo{ObjectInfo: obj, IsLatest: true})
	}
	res.CommonPrefixes = page.CommonPrefixes
	res.Truncated = page.Truncated
	if page.Truncated {
		res.NextKeyMarker = page.NextAfter
		if n := len(res.Versions); n > 0 && res.Versions[n-1].Key == page.NextAfter {
			res.NextVersionMarker = res.Versions[n-1].VersionID
		}
	}
	return res, nil
}

// commonPrefixOf returns the common prefix key rolls up into under prefix
// and delimiter ("" if none: no delimiter, or none after the prefix).
func commonPrefixOf(key, prefix, delimiter string) string {
	if delimiter == "" || !strings.HasPrefix(key, prefix) {
		return ""
	}
	rest := key[len(prefix):]
	i := strings.Index(rest, delimiter)
	if i < 0 {
		return ""
	}
	return prefix + rest[:i+len(delimiter)]
}

// listStart is where a listing resumes: at key itself when some of its
// versions remain, else after it.
func (l *Layer) listStart(bucket, prefix, key string, includeKey bool) []byte {
	start := meta.ObjectPrefix(bucket, prefix)
	if key == "" {
		return start
	}
	k := meta.ObjectPrefix(bucket, key)
	if !includeKey {
		k = append(k, 0)
	}
	if string(k) > string(start) {
		return k
	}
	return start
}

// CollectVersions removes the history of bucket/key that no reader can see
// any more: versions kept only for snapshots no longer pinned over the
// time they were current, and, once nothing older remains, a tombstone
// (in a bucket that is not a clone: a clone's tombstone hides its parent's
// object). Each removal is compare-and-swap on the record the decision
// saw. It returns how many records went.
func (l *Layer) CollectVersions(ctx context.Context, bucket, key string) (int, error) {
	b, brev, err := l.getBucketFresh(ctx, bucket)
	if errors.Is(err, ErrNoSuchBucket) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cur, curRev, err := l.current(ctx, bucket, key)
	if err != nil {
		return 0, err
	}
	vs, err := l.keyVersions(ctx, bucket, key)
	if err != nil {
		return 0, err
	}
	// Order by the time each record became current; until = the next's.
	type span struct {
		v     *versionRec
		from  int64
		until int64
	}
	spans := make([]span, 0, len(vs))
	for i := range vs {
		spans = append(spans, span{v: &vs[i], from: vs[i].from})
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].from < spans[b].from })
	for i := range spans {
		switch {
		case i+1 < len(spans):
			spans[i].until = spans[i+1].from
		case curRev != 0:
			spans[i].until = max(effectiveFrom(cur, curRev), spans[i].from+1)
		default:
			spans[i].until = math.MaxInt64
		}
	}
	var t meta.Txn
	// The pins decided what goes: a pin added meanwhile (a clone of an
	// existing snapshot) must make this fail, not lose its records.
	t.If(meta.BucketKey(bucket), brev)
	// So did the current record, read before the history: an overwrite
	// landing between the two reads moves it into the history, where the
	// stale current record's start, taken as its end, makes it look
	// needed by no snapshot. The overwrite must make this fail too.
	t.If(meta.ObjectKey(bucket, key), curRev)
	removed := 0
	kept := 0
	for _, s := range spans {
		if s.v.S3 || pinnedBetween(b.Snapshots, s.from, s.until) {
			kept++
			continue
		}
		t.If(meta.VersionKey(bucket, key, s.v.seq), s.v.modRev)
		t.Del(meta.VersionKey(bucket, key, s.v.seq))
		removed++
	}
	if kept == 0 && curRev != 0 && cur.DeleteMarker && cur.VersionID == "" && b.Parent == nil {
		t.Del(meta.ObjectKey(bucket, key))
		removed++
	}
	if removed == 0 {
		return 0, nil
	}
	if len(t.Ops) > meta.MaxTxnOps {
		return 0, fmt.Errorf("object: %s/%s: %d versions to collect in one go", bucket, key, len(t.Ops))
	}
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return 0, nil // changed meanwhile: the next scan decides again
		}
		return 0, err
	}
	return removed, nil
}

// RewriteHistoryHeaders applies fn to the headers of every history record
// of bucket — noncurrent S3 versions, and the records kept because a
// snapshot or clone still sees them — and stores each record whose headers
// fn changed, with compare-and-swap on the record. Only headers change:
// the bytes, the version's identity and its place in time stay (From is
// pinned before the rewrite, since an unpinned record's point in time is
// its revision). A record removed meanwhile is skipped; one changed
// meanwhile is read again. It returns how many records it looked at and
// how many it changed. Current records are UpdateObject's (in a versioned
// bucket that also changes the current version's history copy).
//
// Master-key rotation uses it: every record that can still be read must
// be re-sealed before the old key is dropped.
func (l *Layer) RewriteHistoryHeaders(ctx context.Context, bucket string, fn func(h map[string]string) (map[string]string, bool, error)) (scanned, changed int, err error) {
	const page = 1000
	p := meta.VersionPrefix(bucket, "")
	start, end := p, meta.PrefixEnd(p)
	for {
		items, err := l.kv.Scan(ctx, start, end, page)
		if err != nil {
			return scanned, changed, err
		}
		for _, it := range items {
			scanned++
			ok, err := l.rewriteHistoryRecord(ctx, it, fn)
			if err != nil {
				return scanned, changed, err
			}
			if ok {
				changed++
			}
		}
		if len(items) < page {
			return scanned, changed, nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// rewriteHistoryRecord rewrites one history record's headers (see
// RewriteHistoryHeaders).
func (l *Layer) rewriteHistoryRecord(ctx context.Context, it meta.Item, fn func(map[string]string) (map[string]string, bool, error)) (bool, error) {
	for attempt := 0; attempt < 16; attempt++ {
		var v meta.Version
		if err := meta.Decode(it.Value, &v); err != nil {
			return false, fmt.Errorf("object: history record %q: %w", it.Key, err)
		}
		h, ok, err := fn(maps.Clone(v.Headers))
		if err != nil || !ok {
			return false, err
		}
		v.From = effectiveFrom(v.Object, it.ModRev)
		v.Headers = h
		var t meta.Txn
		t.If(it.Key, it.ModRev)
		t.Put(it.Key, meta.Encode(v))
		_, err = l.kv.Commit(ctx, &t)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			return false, err
		}
		cur, err := l.kv.Get(ctx, it.Key)
		if errors.Is(err, meta.ErrNotFound) {
			return false, nil // collected meanwhile
		}
		if err != nil {
			return false, err
		}
		it = cur
	}
	return false, fmt.Errorf("object: history record %q: too much contention", it.Key)
}

// SnapshotOf tells whether name is the read-only bucket a snapshot is
// served as ("photos--snap-monday"), and if so of which bucket and
// snapshot. It does not check that the snapshot exists.
func SnapshotOf(name string) (bucket, snapshot string, ok bool) {
	return splitSnapshotName(name)
}
