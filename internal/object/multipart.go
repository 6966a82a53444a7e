package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Multipart limits (S3's).
const (
	MinPartBytes = 5 << 20
	MaxPartNum   = 10000
)

// Upload describes an in-progress multipart upload.
type Upload struct {
	Bucket string
	ID     string
	meta.Upload
}

// PartInfo describes an uploaded part.
type PartInfo struct {
	Num int
	meta.Part
}

// CreateUpload starts a multipart upload.
func (l *Layer) CreateUpload(ctx context.Context, bucket, key string, opts PutOptions) (string, error) {
	if err := writable(bucket); err != nil {
		return "", err
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return "", err
	}
	v, err := l.resolveVector(bv.Bucket, opts.Vector, opts.Class)
	if err != nil {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	up := meta.Upload{Key: key, Created: l.opts.Now().UnixNano(), Vector: v, Class: opts.Class,
		Headers: opts.Headers, UserMeta: opts.UserMeta, Tags: opts.Tags}
	err = l.guardedCommit(ctx, bucket, bv, nil, func(bv bucketView) error {
		var t meta.Txn
		t.If(meta.BucketGuardKey(bucket), bv.guardRev)
		t.Put(meta.UploadKey(bucket, id), meta.Encode(up))
		_, err := l.kv.Commit(ctx, &t)
		return err
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// GetUpload returns an upload record.
func (l *Layer) GetUpload(ctx context.Context, bucket, uploadID string) (Upload, int64, error) {
	var up meta.Upload
	if strings.ContainsRune(uploadID, 0) || uploadID == "" {
		return Upload{}, 0, fmt.Errorf("%w: %q", ErrNoSuchUpload, uploadID)
	}
	rev, err := meta.GetRecord(ctx, l.kv, meta.UploadKey(bucket, uploadID), &up)
	if errors.Is(err, meta.ErrNotFound) {
		if _, _, berr := l.GetBucket(ctx, bucket); berr != nil {
			return Upload{}, 0, berr
		}
		return Upload{}, 0, fmt.Errorf("%w: %s", ErrNoSuchUpload, uploadID)
	}
	return Upload{Bucket: bucket, ID: uploadID, Upload: up}, rev, err
}

func checkPartNum(n int) error {
	if n < 1 || n > MaxPartNum {
		return fmt.Errorf("%w: part number %d not in [1, %d]", ErrInvalidPart, n, MaxPartNum)
	}
	return nil
}

// UploadPart stores one part. Re-uploading a part number replaces it.
func (l *Layer) UploadPart(ctx context.Context, bucket, uploadID string, num int, body io.Reader, size int64, contentMD5 string) (PartInfo, error) {
	return l.uploadPart(ctx, bucket, uploadID, num, body, PartOptions{Size: size, ContentMD5: contentMD5})
}

func (l *Layer) uploadPart(ctx context.Context, bucket, uploadID string, num int, body io.Reader, opts PartOptions) (PartInfo, error) {
	size, contentMD5 := opts.Size, opts.ContentMD5
	if err := checkPartNum(num); err != nil {
		return PartInfo{}, err
	}
	up, urev, err := l.GetUpload(ctx, bucket, uploadID)
	if err != nil {
		return PartInfo{}, err
	}
	if err := l.acceptsParts(up); err != nil {
		return PartInfo{}, err
	}
	if err := l.pool.enter(ctx); err != nil {
		return PartInfo{}, err
	}
	defer l.pool.leave()
	w := l.newWriter(up.Vector)
	if b, _, err := l.GetBucket(ctx, bucket); err == nil {
		w.class = poolClass(b) // parts share egroups with their bucket's objects
	}
	if err := w.write(ctx, body, size); err != nil {
		w.abort(ctx)
		return PartInfo{}, err
	}
	if contentMD5 != "" && !strings.EqualFold(contentMD5, w.etag()) {
		w.abort(ctx)
		return PartInfo{}, ErrBadDigest
	}
	etag, attrs, err := applyTrailer(opts.Trailer, w.etag(), nil)
	if err != nil {
		w.abort(ctx)
		return PartInfo{}, err
	}
	p := meta.Part{Size: w.size, ETag: etag, Mtime: l.opts.Now().UnixNano(), Extents: w.refs(), Attrs: attrs}
	err = w.commit(ctx, func(t *meta.Txn) {
		t.If(meta.UploadKey(bucket, uploadID), urev)
		t.Put(meta.PartKey(bucket, uploadID, num), meta.Encode(p))
	})
	if err != nil {
		w.abort(ctx)
		if errors.Is(err, meta.ErrConflict) {
			return PartInfo{}, fmt.Errorf("%w: %s (aborted or completed)", ErrNoSuchUpload, uploadID)
		}
		return PartInfo{}, err
	}
	w.release()
	return PartInfo{Num: num, Part: p}, nil
}

// UploadPartCopy makes a part from bytes [off, off+n) of an existing
// object. When the vectors match, the part shares the source's extents.
func (l *Layer) UploadPartCopy(ctx context.Context, bucket, uploadID string, num int, srcBucket, srcKey string, off, n int64) (PartInfo, error) {
	return l.UploadPartCopyWith(ctx, bucket, uploadID, num, srcBucket, srcKey, off, n, PartCopyOptions{})
}

// PartCopyOptions are UploadPartCopyWith's options.
type PartCopyOptions struct {
	// SourceRev, when not 0, is the Rev of the source record the caller
	// read (HeadVersion): the part is made of that record or the call
	// fails with ErrSourceChanged (see CopyOptions.SourceRev).
	SourceRev int64
}

// UploadPartCopyWith is UploadPartCopy with options.
func (l *Layer) UploadPartCopyWith(ctx context.Context, bucket, uploadID string, num int, srcBucket, srcKey string, off, n int64, opts PartCopyOptions) (PartInfo, error) {
	if err := checkPartNum(num); err != nil {
		return PartInfo{}, err
	}
	up, urev, err := l.GetUpload(ctx, bucket, uploadID)
	if err != nil {
		return PartInfo{}, err
	}
	if err := l.acceptsParts(up); err != nil {
		return PartInfo{}, err
	}
	// The record a read of the source sees, wherever it lives (a
	// snapshot's is in the version map of its bucket): the commit compares
	// it, and the bytes are read from it, not from a second lookup.
	rec, err := l.lookup(ctx, srcBucket, srcKey, "")
	if err != nil {
		return PartInfo{}, err
	}
	if opts.SourceRev != 0 && rec.rev != opts.SourceRev {
		return PartInfo{}, fmt.Errorf("%w: %s/%s", ErrSourceChanged, srcBucket, srcKey)
	}
	src := ObjectInfo{Bucket: srcBucket, Key: srcKey, Object: rec.Object}
	if n < 0 {
		n = src.Size - off
	}
	if off < 0 || n < 0 || off+n > src.Size || (off >= src.Size && src.Size > 0) {
		return PartInfo{}, fmt.Errorf("%w: [%d, %d) of %d bytes", ErrInvalidRange, off, off+n, src.Size)
	}
	if !up.Vector.Equal(src.Vector) {
		_, rc, err := l.open(ctx, src, off, n)
		if err != nil {
			return PartInfo{}, err
		}
		defer rc.Close()
		return l.UploadPart(ctx, bucket, uploadID, num, rc, n, "")
	}
	// Share extents: slice the source's refs to the range, hashing the
	// bytes for the part ETag as S3 requires.
	refs := sliceRefs(src.Extents, off, n)
	h := md5.New()
	_, rc, err := l.open(ctx, src, off, n)
	if err != nil {
		return PartInfo{}, err
	}
	if _, err := io.Copy(h, rc); err != nil {
		rc.Close()
		return PartInfo{}, err
	}
	rc.Close()
	p := meta.Part{Size: n, ETag: hex.EncodeToString(h.Sum(nil)), Mtime: l.opts.Now().UnixNano(), Extents: refs}
	var t meta.Txn
	t.If(meta.UploadKey(bucket, uploadID), urev)
	if rec.key != nil {
		t.If(rec.key, rec.rev) // see Copy
	} else {
		// Read through a clone's parent: the clone must still have no
		// record of its own (see Copy).
		t.If(meta.ObjectKey(srcBucket, srcKey), 0)
	}
	t.Put(meta.PartKey(bucket, uploadID, num), meta.Encode(p))
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			if _, now, gerr := l.GetUpload(ctx, bucket, uploadID); gerr != nil || now != urev {
				return PartInfo{}, fmt.Errorf("%w: %s (aborted or completed)", ErrNoSuchUpload, uploadID)
			}
			if opts.SourceRev != 0 {
				return PartInfo{}, fmt.Errorf("%w: %s/%s changed during copy", ErrSourceChanged, srcBucket, srcKey)
			}
			return PartInfo{}, fmt.Errorf("%w: %s/%s changed during copy", ErrNoSuchKey, srcBucket, srcKey)
		}
		return PartInfo{}, err
	}
	return PartInfo{Num: num, Part: p}, nil
}

// sliceRefs returns the refs covering [off, off+n) of an extent list.
func sliceRefs(refs []meta.ExtentRef, off, n int64) []meta.ExtentRef {
	var out []meta.ExtentRef
	for _, r := range refs {
		if n <= 0 {
			break
		}
		if off >= r.Len {
			off -= r.Len
			continue
		}
		take := min(r.Len-off, n)
		out = append(out, meta.ExtentRef{ID: r.ID, Off: r.Off + off, Len: take})
		n -= take
		off = 0
	}
	return out
}

// ListParts lists parts after partMarker, up to max.
func (l *Layer) ListParts(ctx context.Context, bucket, uploadID string, after, max int) ([]PartInfo, bool, error) {
	if _, _, err := l.GetUpload(ctx, bucket, uploadID); err != nil {
		return nil, false, err
	}
	if max <= 0 || max > 1000 {
		max = 1000
	}
	start := meta.PartKey(bucket, uploadID, after+1)
	end := meta.PrefixEnd(append(meta.UploadKey(bucket, uploadID), 0))
	items, err := l.kv.Scan(ctx, start, end, max+1)
	if err != nil {
		return nil, false, err
	}
	var out []PartInfo
	for i, it := range items {
		if i == max {
			return out, true, nil
		}
		var p meta.Part
		if err := meta.Decode(it.Value, &p); err != nil {
			return nil, false, err
		}
		var num int
		k := string(it.Key)
		fmt.Sscanf(k[strings.LastIndexByte(k, 0)+1:], "%d", &num)
		out = append(out, PartInfo{Num: num, Part: p})
	}
	return out, false, nil
}

// ListUploads lists in-progress uploads of a bucket whose keys have prefix.
func (l *Layer) ListUploads(ctx context.Context, bucket, prefix string, max int) ([]Upload, bool, error) {
	if _, _, err := l.GetBucket(ctx, bucket); err != nil {
		return nil, false, err
	}
	if max <= 0 || max > 1000 {
		max = 1000
	}
	p := []byte(meta.PrefixUpload + bucket + "\x00")
	var out []Upload
	start := p
	for {
		items, err := l.kv.Scan(ctx, start, meta.PrefixEnd(p), 512)
		if err != nil {
			return nil, false, err
		}
		for _, it := range items {
			rest := string(it.Key[len(p):])
			if strings.ContainsRune(rest, 0) {
				continue // a part record
			}
			var up meta.Upload
			if err := meta.Decode(it.Value, &up); err != nil {
				return nil, false, err
			}
			if !strings.HasPrefix(up.Key, prefix) {
				continue
			}
			if len(out) == max {
				return out, true, nil
			}
			out = append(out, Upload{Bucket: bucket, ID: rest, Upload: up})
		}
		if len(items) < 512 {
			return out, false, nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// CompletePart names a part in a CompleteMultipartUpload request.
type CompletePart struct {
	Num  int
	ETag string
}

// CompleteUpload assembles the object from its parts without moving data:
// the object's extent list is the parts' lists concatenated. The ETag is
// S3's: MD5 of the parts' binary MD5s, "-N".
func (l *Layer) CompleteUpload(ctx context.Context, bucket, uploadID string, parts []CompletePart, pre Precondition) (ObjectInfo, error) {
	return l.completeUpload(ctx, bucket, uploadID, parts, CompleteOptions{Precondition: pre})
}

func (l *Layer) completeUpload(ctx context.Context, bucket, uploadID string, parts []CompletePart, opts CompleteOptions) (ObjectInfo, error) {
	pre := opts.Precondition
	up, urev, err := l.GetUpload(ctx, bucket, uploadID)
	if err != nil {
		return ObjectInfo{}, err
	}
	var orev int64
	if pre != nil {
		if orev, err = l.checkPrecondition(ctx, bucket, up.Key, pre); err != nil {
			return ObjectInfo{}, err
		}
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return ObjectInfo{}, fmt.Errorf("%w: no parts given", ErrInvalidPart)
	}
	// Fence the upload before reading its parts: a part uploaded again
	// meanwhile would leave the part read here unreferenced, for the
	// Curator to remove under the object about to name it. Every part
	// commit compares the upload record, so marking it (Completing) makes
	// the ones still in flight fail, and later ones are refused: the parts
	// read after it stay as read.
	if urev, err = l.fenceUpload(ctx, bucket, uploadID, up.Upload, urev); err != nil {
		return ObjectInfo{}, err
	}
	info, err := l.completeFenced(ctx, bucket, uploadID, up, urev, parts, opts, orev, bv)
	if err != nil {
		l.unfenceUpload(ctx, bucket, uploadID, urev)
	}
	return info, err
}

// completeFenced is the rest of a complete, once parts are refused.
func (l *Layer) completeFenced(ctx context.Context, bucket, uploadID string, up Upload, urev int64, parts []CompletePart, opts CompleteOptions, orev int64, bv bucketView) (ObjectInfo, error) {
	pre := opts.Precondition
	stored, _, err := l.ListParts(ctx, bucket, uploadID, 0, 1000)
	if err != nil {
		return ObjectInfo{}, err
	}
	byNum := map[int]meta.Part{}
	for _, p := range stored {
		byNum[p.Num] = p.Part
	}
	// ListParts pages at 1000; fetch the rest when needed.
	for last := 1000; len(stored) == 1000; last += 1000 {
		stored, _, err = l.ListParts(ctx, bucket, uploadID, last, 1000)
		if err != nil {
			return ObjectInfo{}, err
		}
		for _, p := range stored {
			byNum[p.Num] = p.Part
		}
	}
	prev := 0
	for _, cp := range parts {
		if cp.Num <= prev {
			return ObjectInfo{}, fmt.Errorf("%w: part %d after part %d", ErrInvalidPartOrder, cp.Num, prev)
		}
		prev = cp.Num
	}
	var o meta.Object
	h := md5.New()
	for _, cp := range parts {
		p, ok := byNum[cp.Num]
		// An empty ETag matches no part (AWS: InvalidPart).
		etag := strings.Trim(cp.ETag, `"`)
		if !ok || etag == "" || !strings.EqualFold(etag, p.ETag) {
			return ObjectInfo{}, fmt.Errorf("%w: part %d (etag %s) not uploaded", ErrInvalidPart, cp.Num, etag)
		}
		raw, err := hex.DecodeString(p.ETag)
		if err != nil {
			return ObjectInfo{}, fmt.Errorf("object: corrupt part etag %q", p.ETag)
		}
		h.Write(raw)
		o.Size += p.Size
		o.Parts = append(o.Parts, p.Size)
		o.Extents = append(o.Extents, p.Extents...)
	}
	for i, sz := range o.Parts[:len(o.Parts)-1] {
		if sz < MinPartBytes {
			return ObjectInfo{}, fmt.Errorf("%w: part %d is %d bytes", ErrEntityTooSmall, parts[i].Num, sz)
		}
	}
	if o.Size > l.opts.MaxObjectBytes {
		return ObjectInfo{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, o.Size)
	}
	o.ETag = fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(parts))
	o.Mtime = l.opts.Now().UnixNano()
	o.Vector, o.Class = up.Vector, up.Class
	o.Headers, o.UserMeta, o.Tags = up.Headers, up.UserMeta, up.Tags
	if len(opts.Headers) > 0 {
		_, o.Headers, _ = applyTrailer(func() (Trailer, error) { return Trailer{Headers: opts.Headers}, nil }, "", up.Headers)
	}
	lost := func() error {
		if pre != nil {
			if perr := l.preconditionLost(ctx, bucket, up.Key, pre, orev); perr != nil {
				return perr
			}
		}
		if _, cur, err := l.GetUpload(ctx, bucket, uploadID); err != nil || cur != urev {
			return fmt.Errorf("%w: %s (completed or aborted concurrently)", ErrNoSuchUpload, uploadID)
		}
		return nil
	}
	err = l.guardedCommit(ctx, bucket, bv, lost, func(bv bucketView) error {
		return l.commitObject(ctx, bv, bucket, up.Key, &o, pre != nil, orev, func(final func(*meta.Txn)) error {
			var t meta.Txn
			t.If(meta.UploadKey(bucket, uploadID), urev)
			t.If(meta.BucketGuardKey(bucket), bv.guardRev)
			t.Del(meta.UploadKey(bucket, uploadID))
			final(&t)
			_, err := l.kv.Commit(ctx, &t)
			return err
		})
	})
	if err != nil {
		return ObjectInfo{}, err
	}
	l.deletePartRecords(ctx, bucket, uploadID)
	return ObjectInfo{Bucket: bucket, Key: up.Key, Object: o}, nil
}

// completingHold is how long a complete that began refuses parts; past
// it (a complete cut off by a crash) parts are taken again, and the next
// complete fences anew.
const completingHold = 10 * time.Minute

// acceptsParts refuses parts while a complete is under way.
func (l *Layer) acceptsParts(up Upload) error {
	if up.Completing != 0 && l.opts.Now().Sub(time.Unix(0, up.Completing)) < completingHold {
		return fmt.Errorf("%w: %s (being completed)", ErrNoSuchUpload, up.ID)
	}
	return nil
}

// fenceUpload marks the upload (read at urev) as being completed, so that
// part commits begun before fail their compare on its record and later
// ones are refused, and returns the record's new revision.
func (l *Layer) fenceUpload(ctx context.Context, bucket, uploadID string, up meta.Upload, urev int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		up.Completing = l.opts.Now().UnixNano()
		var t meta.Txn
		t.If(meta.UploadKey(bucket, uploadID), urev)
		t.Put(meta.UploadKey(bucket, uploadID), meta.Encode(up))
		rev, err := l.kv.Commit(ctx, &t)
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, meta.ErrConflict) || attempt >= 8 {
			return 0, err
		}
		// Another complete fenced it first, or it is gone.
		cur, r, gerr := l.GetUpload(ctx, bucket, uploadID)
		if gerr != nil {
			return 0, gerr
		}
		up, urev = cur.Upload, r
	}
}

// unfenceUpload takes parts again after a complete failed (best effort:
// completingHold bounds a mark left behind).
func (l *Layer) unfenceUpload(ctx context.Context, bucket, uploadID string, urev int64) {
	up, rev, err := l.GetUpload(ctx, bucket, uploadID)
	if err != nil || rev != urev {
		return
	}
	up.Completing = 0
	var t meta.Txn
	t.If(meta.UploadKey(bucket, uploadID), urev)
	t.Put(meta.UploadKey(bucket, uploadID), meta.Encode(up.Upload))
	_, _ = l.kv.Commit(context.WithoutCancel(ctx), &t)
}

// deletePartRecords removes part records after complete/abort. It runs
// past the caller's cancellation (a client that hangs up right after the
// upload record went must not leave the parts behind); a crash or a
// metadata error still can, and then the parts reference extents nobody
// reads: the Curator's full scan removes part records whose upload is
// gone (CollectOrphanParts).
func (l *Layer) deletePartRecords(ctx context.Context, bucket, uploadID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	p := append(meta.UploadKey(bucket, uploadID), 0)
	for {
		items, err := l.kv.Scan(ctx, p, meta.PrefixEnd(p), meta.MaxTxnOps)
		if err == nil && len(items) == 0 {
			return
		}
		if err == nil {
			var t meta.Txn
			for _, it := range items {
				t.Del(it.Key)
			}
			_, err = l.kv.Commit(ctx, &t)
		}
		if err != nil {
			l.opts.Logger.Warn("multipart: part records left for the Curator", "bucket", bucket, "upload", uploadID, "err", err)
			return
		}
	}
}

// CollectOrphanParts removes part records whose upload record is gone (a
// complete or abort cut off between its two commits): they hold
// references to extents nobody can read, list or abort, so the space
// would never come back. A part commit compares its upload record, so no
// part can appear for a gone upload; each removal compares the part's
// revision and the upload's absence. It returns how many it removed.
func (l *Layer) CollectOrphanParts(ctx context.Context) (int, error) {
	const page = 1000
	start, end := []byte(meta.PrefixUpload), meta.PrefixEnd([]byte(meta.PrefixUpload))
	var lastUpload []byte // the last upload record seen (its parts follow it)
	removed := 0
	var pending []meta.Item
	var pendingUpload []byte
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		for len(pending) > 0 {
			n := min(len(pending), (meta.MaxTxnOps-1)/2)
			var t meta.Txn
			t.If(pendingUpload, 0) // still gone
			for _, it := range pending[:n] {
				t.If(it.Key, it.ModRev)
				t.Del(it.Key)
			}
			_, err := l.kv.Commit(ctx, &t)
			if err != nil && !errors.Is(err, meta.ErrConflict) {
				return err
			}
			if err == nil {
				removed += n
			}
			pending = pending[n:]
		}
		return nil
	}
	for {
		items, err := l.kv.Scan(ctx, start, end, page)
		if err != nil {
			return removed, err
		}
		for _, it := range items {
			upload, ok := partUpload(it.Key)
			if !ok {
				lastUpload = append(lastUpload[:0], it.Key...)
				continue // an upload record
			}
			if bytes.Equal(upload, lastUpload) {
				continue
			}
			if !bytes.Equal(upload, pendingUpload) {
				if err := flush(); err != nil {
					return removed, err
				}
				pendingUpload = upload
			}
			pending = append(pending, it)
		}
		if len(items) < page {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	if err := flush(); err != nil {
		return removed, err
	}
	if removed > 0 {
		l.opts.Logger.Warn("multipart: removed part records whose upload was gone", "parts", removed)
	}
	return removed, nil
}

// partUpload returns the upload key of a part key (u/bucket\0upload\0NNNNN);
// ok is false for an upload key.
func partUpload(k []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(k, 0)
	if i < 0 || bytes.IndexByte(k[len(meta.PrefixUpload):i], 0) < 0 {
		return nil, false
	}
	return append([]byte(nil), k[:i]...), true
}

// AbortUpload discards an upload; its parts' bytes become garbage.
func (l *Layer) AbortUpload(ctx context.Context, bucket, uploadID string) error {
	_, urev, err := l.GetUpload(ctx, bucket, uploadID)
	if err != nil {
		return err
	}
	var t meta.Txn
	t.If(meta.UploadKey(bucket, uploadID), urev)
	t.Del(meta.UploadKey(bucket, uploadID))
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("%w: %s", ErrNoSuchUpload, uploadID)
		}
		return err
	}
	l.deletePartRecords(ctx, bucket, uploadID)
	return nil
}
