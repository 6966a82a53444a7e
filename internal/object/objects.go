package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// PutOptions carry an object's attributes.
type PutOptions struct {
	// Size is the body length, or -1 if unknown (read to EOF).
	Size     int64
	Vector   model.Vector
	Class    string
	Headers  map[string]string
	UserMeta map[string]string
	Tags     map[string]string
	// ContentMD5, when set (hex), must match the body's MD5.
	ContentMD5 string
	// Precondition, when set, makes the write conditional on the
	// object's current state (S3 If-Match / If-None-Match); see
	// Precondition.
	Precondition Precondition
	// Trailer, when set, supplies the ETag and extra headers after the
	// body was read (see Trailer).
	Trailer TrailerFunc
	// Parts are the part sizes of a multipart object whose bytes a copy
	// rewrites (its ETag comes from Trailer): recorded with the object.
	Parts []int64
}

// Precondition is checked against the object's current state (its ETag,
// or exists false) before any data is written, and again atomically with
// the commit: the commit only succeeds if the object record is still the
// one that was checked. A non-nil error refuses the write and is returned
// as is. If the object changed in between and the new state still passes,
// the write fails with ErrConditionalConflict instead of committing over
// a state nobody checked.
type Precondition func(etag string, exists bool) error

// checkPrecondition evaluates p against the current object and returns
// the object record's revision (0: absent) the commit must still see.
func (l *Layer) checkPrecondition(ctx context.Context, bucket, key string, p Precondition) (int64, error) {
	info, rev, err := l.head(ctx, bucket, key)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNoSuchKey) {
		return 0, err
	}
	if err := p(info.ETag, exists); err != nil {
		return 0, err
	}
	return rev, nil
}

// preconditionLost explains a commit conflict on a conditional write: it
// returns the precondition's refusal or ErrConditionalConflict when the
// object record moved on from rev, and nil when it did not (the conflict
// came from elsewhere).
func (l *Layer) preconditionLost(ctx context.Context, bucket, key string, p Precondition, rev int64) error {
	info, cur, err := l.head(ctx, bucket, key)
	if err != nil && !errors.Is(err, ErrNoSuchKey) {
		return err
	}
	if cur == rev {
		return nil
	}
	if perr := p(info.ETag, err == nil); perr != nil {
		return perr
	}
	return fmt.Errorf("%w: %s/%s", ErrConditionalConflict, bucket, key)
}

// ObjectInfo is an object record with its name.
type ObjectInfo struct {
	Bucket string
	Key    string
	meta.Object
	// Rev identifies the record read: its metadata revision. HeadVersion
	// sets it, for a copy of exactly that record (CopyOptions.SourceRev,
	// PartCopyOptions.SourceRev); 0 elsewhere.
	Rev int64 `json:"-"`
}

// Put stores an object. It returns only after every replica of its data is
// durable and the metadata commit succeeded.
func (l *Layer) Put(ctx context.Context, bucket, key string, body io.Reader, opts PutOptions) (ObjectInfo, error) {
	start := time.Now()
	defer func() { l.lat.observe(start, time.Since(start)) }()
	if err := writable(bucket); err != nil {
		return ObjectInfo{}, err
	}
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	v, err := l.resolveVector(bv.Bucket, opts.Vector, opts.Class)
	if err != nil {
		return ObjectInfo{}, err
	}
	if opts.Size > l.opts.MaxObjectBytes {
		return ObjectInfo{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, opts.Size, l.opts.MaxObjectBytes)
	}
	var orev int64
	if opts.Precondition != nil {
		// Check before writing any data, so a refused write costs nothing.
		if orev, err = l.checkPrecondition(ctx, bucket, key, opts.Precondition); err != nil {
			return ObjectInfo{}, err
		}
	}
	if err := l.pool.enter(ctx); err != nil {
		return ObjectInfo{}, err
	}
	defer l.pool.leave()
	w := l.newWriter(v)
	w.fingerprint = bv.Bucket.Transform != nil && bv.Bucket.Transform.Dedup
	w.class = poolClass(bv.Bucket)
	w.batched = w.batchable(opts.Size)
	dataStart := time.Now()
	if err := w.write(ctx, body, opts.Size); err != nil {
		w.abort(ctx)
		return ObjectInfo{}, err
	}
	written := time.Now()
	l.m.putData.Observe(written.Sub(dataStart).Seconds())
	if opts.ContentMD5 != "" && !strings.EqualFold(opts.ContentMD5, w.etag()) {
		w.abort(ctx)
		return ObjectInfo{}, ErrBadDigest
	}
	etag, headers, err := applyTrailer(opts.Trailer, w.etag(), opts.Headers)
	if err != nil {
		w.abort(ctx)
		return ObjectInfo{}, err
	}
	obj := meta.Object{
		Size: w.size, ETag: etag, Mtime: l.opts.Now().UnixNano(), Vector: v, Class: opts.Class,
		Headers: headers, UserMeta: opts.UserMeta, Tags: opts.Tags, Extents: w.refs(), Parts: opts.Parts,
	}
	var explain func() error
	if opts.Precondition != nil {
		explain = func() error { return l.preconditionLost(ctx, bucket, key, opts.Precondition, orev) }
	}
	err = l.guardedCommit(ctx, bucket, bv, explain, func(bv bucketView) error {
		return l.commitObject(ctx, bv, bucket, key, &obj, opts.Precondition != nil, orev, func(final func(*meta.Txn)) error {
			return w.commit(ctx, func(t *meta.Txn) {
				t.If(meta.BucketGuardKey(bucket), bv.guardRev)
				final(t)
			})
		})
	})
	if err != nil {
		w.abort(ctx)
		return ObjectInfo{}, err
	}
	l.m.putCommit.Observe(time.Since(written).Seconds())
	w.release()
	l.m.putBytes.Add(float64(w.size))
	l.m.puts.Inc()
	return ObjectInfo{Bucket: bucket, Key: key, Object: obj}, nil
}

// Head returns an object's record.
func (l *Layer) Head(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	info, _, err := l.head(ctx, bucket, key)
	return info, err
}

// head returns the object a read of bucket/key sees and the revision of
// the key's own current record (0 when it has none: absent, or read
// through a clone's parent), which conditional writes compare. A delete
// marker is ErrDeleteMarker with its revision.
func (l *Layer) head(ctx context.Context, bucket, key string) (ObjectInfo, int64, error) {
	rec, err := l.lookup(ctx, bucket, key, "")
	rev := int64(0)
	if rec.key != nil && string(rec.key) == string(meta.ObjectKey(bucket, key)) {
		rev = rec.rev
	}
	if err != nil {
		return ObjectInfo{}, rev, err
	}
	return ObjectInfo{Bucket: bucket, Key: key, Object: rec.Object}, rev, nil
}

// HeadVersion returns one version of an object ("" : the current one).
func (l *Layer) HeadVersion(ctx context.Context, bucket, key, versionID string) (ObjectInfo, error) {
	rec, err := l.lookup(ctx, bucket, key, versionID)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Bucket: bucket, Key: key, Object: rec.Object, Rev: rec.rev}, nil
}

// GetVersion is Get of one version ("": the current one).
func (l *Layer) GetVersion(ctx context.Context, bucket, key, versionID string, off, n int64) (ObjectInfo, io.ReadCloser, error) {
	if versionID == "" {
		return l.Get(ctx, bucket, key, off, n)
	}
	info, err := l.HeadVersion(ctx, bucket, key, versionID)
	if err != nil {
		return info, nil, err
	}
	return l.open(ctx, info, off, n)
}

// Get opens an object for reading bytes [off, off+n); n < 0 means to the
// end. The returned reader verifies every slice and falls back across
// replicas; it holds no locks, so a concurrent overwrite does not block it.
func (l *Layer) Get(ctx context.Context, bucket, key string, off, n int64) (ObjectInfo, io.ReadCloser, error) {
	start := time.Now()
	defer func() { l.lat.observe(start, time.Since(start)) }()
	info, err := l.Head(ctx, bucket, key)
	if err != nil {
		return info, nil, err
	}
	return l.open(ctx, info, off, n)
}

// Open reads bytes [off, off+n) of a record the caller already looked up
// (Head, HeadVersion; n < 0: to the end), without reading the key again:
// the body is the bytes of exactly that record, so headers served from it
// and the body never describe two versions of an overwritten key, and a
// GET costs one metadata read instead of two. The record's extents stay
// readable after an overwrite until the Curator collects them as garbage
// (after its grace period), the same window a Get has between its lookup
// and its last byte.
func (l *Layer) Open(ctx context.Context, info ObjectInfo, off, n int64) (ObjectInfo, io.ReadCloser, error) {
	start := time.Now()
	defer func() { l.lat.observe(start, time.Since(start)) }()
	return l.open(ctx, info, off, n)
}

// open returns a reader of bytes [off, off+n) of an object record.
func (l *Layer) open(ctx context.Context, info ObjectInfo, off, n int64) (ObjectInfo, io.ReadCloser, error) {
	if off < 0 || (off > 0 && off >= info.Size) || (off == 0 && info.Size == 0 && n > 0) {
		return info, nil, fmt.Errorf("%w: offset %d, object size %d", ErrInvalidRange, off, info.Size)
	}
	if n < 0 || off+n > info.Size {
		n = info.Size - off
	}
	l.m.gets.Inc()
	return info, &objectReader{ctx: ctx, l: l, refs: info.Extents, skip: off, left: n}, nil
}

// Delete removes an object. Only metadata is deleted; its bytes become
// garbage that the Curator's data-removal scan reclaims (Curator §3.2.3).
// Deleting a missing key is not an error (S3 semantics).
func (l *Layer) Delete(ctx context.Context, bucket, key string) error {
	_, err := l.DeleteObject(ctx, bucket, key, "")
	return err
}

// UpdateObject applies fn to an object record with compare-and-swap (tags,
// metadata). fn must not change Extents.
func (l *Layer) UpdateObject(ctx context.Context, bucket, key string, fn func(*meta.Object) error) error {
	if err := writable(bucket); err != nil {
		return err
	}
	for attempt := 0; attempt < 16; attempt++ {
		info, rev, err := l.head(ctx, bucket, key)
		if err != nil {
			return err
		}
		o := info.Object
		if err := fn(&o); err != nil {
			return err
		}
		var t meta.Txn
		if err := l.inPlaceOps(ctx, &t, bucket, key, info, rev, &o); err != nil {
			return err
		}
		if _, err := l.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else {
			return err
		}
	}
	return fmt.Errorf("object: update %s/%s: too much contention", bucket, key)
}

// inPlaceOps fills t with o replacing bucket/key's current record info,
// read at revision rev, as the same version changed in place (tags,
// metadata, class, replicas): a compare on the record, and o keeping the
// record's place in time, so snapshots taken since it became current see
// o (the bytes are the same) instead of losing the key, and a versioned
// bucket's copy of it changes too. rev 0 is a clone's first own record of
// a key it read from its parent.
func (l *Layer) inPlaceOps(ctx context.Context, t *meta.Txn, bucket, key string, info ObjectInfo, rev int64, o *meta.Object) error {
	t.If(meta.ObjectKey(bucket, key), rev)
	if rev == 0 {
		o.From = 0
		if o.VersionID != "" {
			// The version the clone inherited, a version of the clone:
			// it becomes its own S3 record as a write or reduction keeps
			// it (visible from 1, sequence number parentHistorySeq), or
			// it would be missing from the clone's history (by ID,
			// listed, kept when written over).
			o.From, o.Seq = 1, parentHistorySeq
			putNew(t, meta.VersionKey(bucket, key, parentHistorySeq), meta.Version{Object: *o, S3: true})
		}
	} else {
		o.From = effectiveFrom(info.Object, rev)
		if info.VersionID != "" {
			// The version's S3 record changes too, keeping its own start:
			// a version current again started earlier there.
			var rc meta.Version
			k := meta.VersionKey(bucket, key, o.Seq)
			rrev, err := meta.GetRecord(ctx, l.kv, k, &rc)
			switch {
			case errors.Is(err, meta.ErrNotFound):
				t.If(k, 0)
			case err != nil:
				return err
			case rc.S3:
				c := *o
				c.From = effectiveFrom(rc.Object, rrev)
				t.If(k, rrev)
				t.Put(k, meta.Encode(meta.Version{Object: c, S3: true}))
			}
		}
	}
	t.Put(meta.ObjectKey(bucket, key), meta.Encode(*o))
	return nil
}

// CopyOptions control Copy.
type CopyOptions struct {
	// Replace the destination's attributes with these (S3 REPLACE
	// directive); otherwise they are copied from the source.
	ReplaceMeta bool
	Headers     map[string]string
	UserMeta    map[string]string
	Tags        map[string]string
	ReplaceTags bool
	Vector      model.Vector
	Class       string
	// SrcVersion copies one version of the source ("": the current one).
	SrcVersion string
	// SourceRev, when not 0, is the Rev of the source record the caller
	// read (HeadVersion) and judged — its preconditions, its encryption
	// record: the copy is of that record or fails with ErrSourceChanged,
	// never of a record that replaced it in between.
	SourceRev int64
}

// Copy copies an object. When the destination's vector equals the
// source's, the copy shares the source's extents and moves no data;
// otherwise the bytes are rewritten under the new vector.
func (l *Layer) Copy(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, opts CopyOptions) (ObjectInfo, error) {
	src, err := l.lookup(ctx, srcBucket, srcKey, opts.SrcVersion)
	if err != nil {
		return ObjectInfo{}, err
	}
	if opts.SourceRev != 0 && src.rev != opts.SourceRev {
		return ObjectInfo{}, fmt.Errorf("%w: %s/%s", ErrSourceChanged, srcBucket, srcKey)
	}
	if err := writable(dstBucket); err != nil {
		return ObjectInfo{}, err
	}
	if err := checkKey(dstKey); err != nil {
		return ObjectInfo{}, err
	}
	db, err := l.liveBucket(ctx, dstBucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	class := src.Class
	if opts.Class != "" {
		class = opts.Class
	}
	explicit := opts.Vector
	if explicit.IsZero() && opts.Class == "" {
		explicit = src.Vector
	}
	v, err := l.resolveVector(db.Bucket, explicit, class)
	if err != nil {
		return ObjectInfo{}, err
	}
	o := src.Object
	o.VersionID, o.Seq, o.From = "", 0, 0 // the copy is a new version of its own
	o.Mtime = l.opts.Now().UnixNano()
	o.Class = class
	if opts.ReplaceMeta {
		o.Headers, o.UserMeta = opts.Headers, opts.UserMeta
	}
	if opts.ReplaceTags {
		o.Tags = opts.Tags
	}
	if v.Equal(src.Vector) {
		// The source must still be the object we read: if it was deleted
		// or overwritten, its extents may already be garbage to the
		// Curator, and sharing them would leave a dangling reference.
		// That holds for a copy onto its own key too (a version restored,
		// metadata replaced): its commit compares the record it copies.
		srcGone := func() error {
			if now, err := l.lookup(ctx, srcBucket, srcKey, opts.SrcVersion); err != nil || string(now.key) != string(src.key) || now.rev != src.rev {
				if opts.SourceRev != 0 {
					return fmt.Errorf("%w: %s/%s changed during copy", ErrSourceChanged, srcBucket, srcKey)
				}
				return fmt.Errorf("%w: %s/%s changed during copy", ErrNoSuchKey, srcBucket, srcKey)
			}
			return nil
		}
		err := l.guardedCommit(ctx, dstBucket, db, srcGone, func(bv bucketView) error {
			return l.commitObject(ctx, bv, dstBucket, dstKey, &o, false, 0, func(final func(*meta.Txn)) error {
				var t meta.Txn
				t.If(meta.BucketGuardKey(dstBucket), bv.guardRev)
				if src.key != nil {
					t.If(src.key, src.rev)
				}
				final(&t)
				_, err := l.kv.Commit(ctx, &t)
				return err
			})
		})
		if err != nil {
			return ObjectInfo{}, err
		}
		return ObjectInfo{Bucket: dstBucket, Key: dstKey, Object: o}, nil
	}
	// The bytes of the record looked up above (not of a second lookup,
	// which could be another version), rewritten under v.
	_, rc, err := l.open(ctx, ObjectInfo{Bucket: srcBucket, Key: srcKey, Object: src.Object}, 0, -1)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer rc.Close()
	po := PutOptions{Size: src.Size, Vector: v, Class: class, Headers: o.Headers, UserMeta: o.UserMeta, Tags: o.Tags}
	if len(src.Parts) > 0 {
		// Keep the multipart ETag and part layout, in the same commit:
		// S3 clients compare the ETag across copies, and an encrypted
		// object's ciphertext is laid out by part.
		po.Parts = src.Parts
		po.Trailer = func() (Trailer, error) { return Trailer{ETag: src.ETag}, nil }
	}
	return l.Put(ctx, dstBucket, dstKey, rc, po)
}
