package s3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/object"
)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// head returns an object's record, checking the key and version first.
func (b *Backend) head(ctx context.Context, op, bucket, key string, version *string) (object.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return object.ObjectInfo{}, err
	}
	if err := checkVersion(version); err != nil {
		return object.ObjectInfo{}, err
	}
	info, err := b.layer.HeadVersion(ctx, bucket, key, deref(version))
	if vid, ok := object.DeleteMarkerOf(err); ok {
		// S3 answers a delete marker with its version and
		// x-amz-delete-marker; for a GET or HEAD of the marker's own
		// version ID the status is 405, else 404.
		setVersionResponse(ctx, vid)
		if deref(version) != "" {
			return info, errDeleteMarkerTarget{s3err.GetAPIError(s3err.ErrMethodNotAllowed)}
		}
		return info, errDeleteMarkerTarget{s3err.GetAPIError(s3err.ErrNoSuchKey)}
	}
	if err == nil {
		setVersionResponse(ctx, info.VersionID)
	}
	return info, b.mapErr(op, err, bucket)
}

// errDeleteMarkerTarget is the answer to a read of a delete marker; the
// GET and HEAD handlers return a non-nil output with it so that
// versitygw adds x-amz-delete-marker.
type errDeleteMarkerTarget struct{ s3err.APIError }

// setVersionResponse adds x-amz-version-id to the response (versioned
// objects only: unversioned buckets have no version IDs to show).
func setVersionResponse(ctx context.Context, vid string) {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil || vid == "" {
		return
	}
	rc.Response.Header.Set("x-amz-version-id", vid)
}

// PutObject stores an object under the vector its storage class (or the
// bucket, or the cluster) names.
func (b *Backend) PutObject(ctx context.Context, in s3response.PutObjectInput) (s3response.PutObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	if err := checkKey(key); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if in.ObjectLockMode != "" || in.ObjectLockLegalHoldStatus == types.ObjectLockLegalHoldStatusOn {
		return s3response.PutObjectOutput{}, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
	}
	if err := checkPOSTUpload(ctx); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	tags, err := parseTagging(deref(in.Tagging))
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	declared := int64(-1)
	if in.ContentLength != nil {
		declared = *in.ContentLength
		if limit := b.layer.Options().MaxObjectBytes; declared > limit {
			return s3response.PutObjectOutput{}, s3err.GetEntityTooLargeErr(declared, limit)
		}
	}
	enc, err := b.writeSSE(ctx, bucket)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	body, bc, err := verifyBody(in.Body, declared, checksumHeaders{
		CRC32: in.ChecksumCRC32, CRC32C: in.ChecksumCRC32C, CRC64NVME: in.ChecksumCRC64NVME,
		SHA1: in.ChecksumSHA1, SHA256: in.ChecksumSHA256, SHA512: in.ChecksumSHA512, MD5: in.ChecksumMD5,
		XXHASH64: in.ChecksumXXHASH64, XXHASH3: in.ChecksumXXHASH3, XXHASH128: in.ChecksumXXHASH128,
	}, in.ChecksumAlgorithm)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	ch := contentHeaders{
		ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
		ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
		WebsiteRedirectLocation: in.WebsiteRedirectLocation,
	}
	aclh, err := b.uploadACLHeaders(ctx, bucket)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	headers := mergeHeaders(ch.toMap(), aclh)
	var trailer object.TrailerFunc
	var rec *objectSSE
	if enc.mode != "" {
		var dk []byte
		if dk, rec, err = b.newObjectKey(enc); err != nil {
			return s3response.PutObjectOutput{}, b.mapErr("PutObject", err, bucket)
		}
		if body, trailer, err = encryptBody(body, dk, enc.mode == modeS3); err != nil {
			return s3response.PutObjectOutput{}, b.mapErr("PutObject", err, bucket)
		}
		headers = withSSE(headers, rec)
	}
	info, err := b.layer.Put(ctx, bucket, key, body, object.PutOptions{
		Size:     -1, // read to EOF so that body checksums are verified before commit
		Class:    requestClass(ctx, ""),
		Headers:  headers,
		UserMeta: userMeta(in.Metadata),
		Tags:     tags,
		Trailer:  withChecksum(trailer, bc.headers),

		Precondition: putPrecondition(in.IfMatch, in.IfNoneMatch),
	})
	if err != nil {
		return s3response.PutObjectOutput{}, b.mapErr("PutObject", err, bucket)
	}
	setSSEResponse(ctx, rec)
	size := listSize(info.Object)
	cs := checksumOut(info.Headers)
	return s3response.PutObjectOutput{ETag: quoteETag(info.ETag), Size: &size, VersionID: info.VersionID,
		ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME, ChecksumSHA1: cs.SHA1,
		ChecksumSHA256: cs.SHA256, ChecksumSHA512: cs.SHA512, ChecksumMD5: cs.MD5, ChecksumXXHASH64: cs.XXHASH64,
		ChecksumXXHASH3: cs.XXHASH3, ChecksumXXHASH128: cs.XXHASH128, ChecksumType: cs.Type}, nil
}

// postSettingHeaders are the headers that carry an upload's settings on a
// PUT. A browser-form POST upload takes them from form fields
// (requestHeader); sent as headers they would be ignored, so they are
// refused.
var postSettingHeaders = []string{
	hSSE, hSSEKMSKeyID, hSSECPrefix + hSSECAlgorithm, hSSECPrefix + hSSECKey, hSSECPrefix + hSSECKeyMD5,
	"X-Amz-Storage-Class", "X-Amz-Acl", "X-Amz-Grant-Full-Control", "X-Amz-Grant-Read", "X-Amz-Grant-Read-Acp",
	"X-Amz-Grant-Write", "X-Amz-Grant-Write-Acp",
}

// checkPOSTUpload refuses, for a browser-form POST upload, what PutObject
// would otherwise silently drop: object-lock form fields (refused on a PUT
// too: no bucket has object lock) and upload settings sent as headers
// rather than form fields. Other requests pass.
func checkPOSTUpload(ctx context.Context) error {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil {
		return nil
	}
	fields, ok := postFormFields(rc)
	if !ok {
		return nil
	}
	if fields["x-amz-object-lock-mode"] != "" || fields["x-amz-object-lock-retain-until-date"] != "" ||
		strings.EqualFold(fields["x-amz-object-lock-legal-hold"], "ON") {
		return s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
	}
	for _, h := range postSettingHeaders {
		if len(rc.Request.Header.Peek(h)) > 0 {
			return s3err.APIError{
				Code:           "InvalidArgument",
				Description:    "A POST upload takes " + strings.ToLower(h) + " as a form field, not as a header.",
				HTTPStatusCode: http.StatusBadRequest,
			}
		}
	}
	return nil
}

// readable resolves what a GET or HEAD of an object answers: the record
// as clients see it (plaintext sizes) and, for an encrypted object, its
// data key, opened with what the request presents (SSE-C objects need
// their key).
func (b *Backend) readable(ctx context.Context, op, bucket string, info object.ObjectInfo) (object.Record, *objectSSE, []byte, error) {
	o, rec, err := plainView(info.Object)
	if err != nil {
		return o, nil, nil, b.mapErr(op, err, bucket)
	}
	dk, err := b.dataKey(ctx, rec, hSSECPrefix)
	if err != nil {
		return o, nil, nil, b.mapErr(op, err, bucket)
	}
	return o, rec, dk, nil
}

// readSpec is the byte range a GET or HEAD answers.
type readSpec struct {
	off, n       int64
	contentRange *string
	partsCount   *int32
}

// resolveRead applies partNumber or Range (versitygw rejects both at once).
func resolveRead(o object.Record, rng *string, part *int32) (readSpec, error) {
	if part != nil {
		off, n, count, err := partRange(o.Size, o.Parts, *part)
		if err != nil {
			return readSpec{}, err
		}
		rs := readSpec{off: off, n: n}
		if len(o.Parts) > 0 {
			rs.partsCount = &count
		}
		if o.Size > 0 {
			cr := contentRange(off, n, o.Size)
			rs.contentRange = &cr
		}
		return rs, nil
	}
	off, n, partial, err := objectRange(o.Size, deref(rng))
	if err != nil {
		return readSpec{}, err
	}
	rs := readSpec{off: off, n: n}
	if partial {
		cr := contentRange(off, n, o.Size)
		rs.contentRange = &cr
	}
	return rs, nil
}

func tagCount(o object.Record) *int32 {
	if len(o.Tags) == 0 {
		return nil
	}
	n := int32(len(o.Tags))
	return &n
}

// HeadObject returns an object's attributes.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	info, err := b.head(ctx, "HeadObject", bucket, key, in.VersionId)
	var dm errDeleteMarkerTarget
	if errors.As(err, &dm) {
		mtime := lastModified(info.Object)
		return &s3.HeadObjectOutput{DeleteMarker: aws.Bool(true), LastModified: &mtime}, dm.APIError
	}
	if err != nil {
		return nil, err
	}
	o, rec, _, err := b.readable(ctx, "HeadObject", bucket, info)
	if err != nil {
		return nil, err
	}
	mtime := lastModified(o)
	if err := evalPreconditions(o.ETag, mtime, preconditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodifiedSince: in.IfUnmodifiedSince,
	}); err != nil {
		setNotModifiedHeaders(ctx, err, quoteETag(o.ETag), mtime)
		return nil, err
	}
	rs, err := resolveRead(o, in.Range, in.PartNumber)
	if err != nil {
		return nil, err
	}
	ch := contentHeadersOf(o.Headers)
	etag := quoteETag(o.ETag)
	setSSEResponse(ctx, rec)
	var cs checksumFields
	if checksumModeEnabled(in.ChecksumMode) && rs.contentRange == nil {
		cs = checksumOut(o.Headers)
	}
	return &s3.HeadObjectOutput{
		ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME, ChecksumSHA1: cs.SHA1,
		ChecksumSHA256: cs.SHA256, ChecksumType: cs.Type,
		AcceptRanges:            backend.GetPtrFromString("bytes"),
		ContentLength:           &rs.n,
		ContentRange:            rs.contentRange,
		ContentType:             ch.ContentType,
		ContentEncoding:         ch.ContentEncoding,
		ContentDisposition:      ch.ContentDisposition,
		ContentLanguage:         ch.ContentLanguage,
		CacheControl:            ch.CacheControl,
		ExpiresString:           ch.Expires,
		WebsiteRedirectLocation: ch.WebsiteRedirectLocation,
		ETag:                    &etag,
		LastModified:            &mtime,
		Metadata:                responseMeta(o.UserMeta),
		StorageClass:            storageClass(o),
		TagCount:                tagCount(o),
		PartsCount:              rs.partsCount,
	}, nil
}

// GetObject streams an object or a range of it. The body verifies every
// slice it reads (the object layer's reader).
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	info, err := b.head(ctx, "GetObject", bucket, key, in.VersionId)
	var dm errDeleteMarkerTarget
	if errors.As(err, &dm) {
		mtime := lastModified(info.Object)
		return &s3.GetObjectOutput{DeleteMarker: aws.Bool(true), LastModified: &mtime}, dm.APIError
	}
	if err != nil {
		return nil, err
	}
	o, rec, dk, err := b.readable(ctx, "GetObject", bucket, info)
	if err != nil {
		return nil, err
	}
	mtime := lastModified(o)
	if err := evalPreconditions(o.ETag, mtime, preconditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodifiedSince: in.IfUnmodifiedSince,
	}); err != nil {
		setNotModifiedHeaders(ctx, err, quoteETag(o.ETag), mtime)
		return nil, err
	}
	rs, err := resolveRead(o, in.Range, in.PartNumber)
	if err != nil {
		return nil, err
	}
	var body io.ReadCloser = io.NopCloser(&emptyReader{})
	if rs.n > 0 {
		// The body is read from the record the headers come from: a
		// concurrent overwrite cannot mix two versions.
		rc, err := b.openPlain(ctx, bucket, key, info.Object, dk, rs.off, rs.n)
		if err != nil {
			return nil, b.mapErr("GetObject", err, bucket)
		}
		// Read the first bytes before the status goes out: an object
		// whose replicas all fail then gets its 5xx answer, not 200 and a
		// connection cut mid-body (found by the chaos suite).
		pb, err := primeBody(rc)
		if err != nil {
			rc.Close()
			return nil, b.mapErr("GetObject", err, bucket)
		}
		body = pb
	}
	ch := contentHeadersOf(o.Headers)
	etag := quoteETag(o.ETag)
	setSSEResponse(ctx, rec)
	var cs checksumFields
	if checksumModeEnabled(in.ChecksumMode) && rs.contentRange == nil {
		cs = checksumOut(o.Headers)
	}
	return &s3.GetObjectOutput{
		ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME, ChecksumSHA1: cs.SHA1,
		ChecksumSHA256: cs.SHA256, ChecksumType: cs.Type,
		AcceptRanges:            backend.GetPtrFromString("bytes"),
		Body:                    body,
		ContentLength:           &rs.n,
		ContentRange:            rs.contentRange,
		ContentType:             ch.ContentType,
		ContentEncoding:         ch.ContentEncoding,
		ContentDisposition:      ch.ContentDisposition,
		ContentLanguage:         ch.ContentLanguage,
		CacheControl:            ch.CacheControl,
		ExpiresString:           ch.Expires,
		WebsiteRedirectLocation: ch.WebsiteRedirectLocation,
		ETag:                    &etag,
		LastModified:            &mtime,
		Metadata:                responseMeta(o.UserMeta),
		StorageClass:            storageClass(o),
		TagCount:                tagCount(o),
		PartsCount:              rs.partsCount,
	}, nil
}

// primedBody is a response body whose first byte was read before the
// status went out (the read that fails when every replica does). It
// streams the rest through the reader's own WriteTo when it has one (the
// object layer's reader writes from its verified chunk buffer), else
// through a pooled buffer: no per-request buffers, which were 96 KiB of
// garbage per 4 KiB GET.
type primedBody struct {
	rc     io.ReadCloser
	first  [1]byte
	primed bool // first holds the body's first byte, not yet returned
}

// primeBody reads rc's first byte; an empty body is not an error.
func primeBody(rc io.ReadCloser) (*primedBody, error) {
	b := &primedBody{rc: rc}
	n, err := io.ReadFull(rc, b.first[:])
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b.primed = n == 1
	return b, nil
}

func (b *primedBody) Read(p []byte) (int, error) {
	if b.primed {
		if len(p) == 0 {
			return 0, nil
		}
		p[0] = b.first[0]
		b.primed = false
		return 1, nil
	}
	return b.rc.Read(p)
}

// copyBufPool holds buffers for bodies whose reader has no WriteTo.
var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (b *primedBody) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if b.primed {
		b.primed = false
		n, err := w.Write(b.first[:])
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if wt, ok := b.rc.(io.WriterTo); ok {
		n, err := wt.WriteTo(w)
		return total + n, err
	}
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	// Hide w's ReadFrom (a connection's falls back to io.Copy, which
	// allocates its own buffer) and rc's nothing: copy through bp.
	n, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{b.rc}, *bp)
	return total + n, err
}

func (b *primedBody) Close() error { return b.rc.Close() }

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }

// GetObjectAttributes returns ETag, size, storage class and, for multipart
// objects, the part sizes. versitygw filters them to the requested set.
func (b *Backend) GetObjectAttributes(ctx context.Context, in *s3.GetObjectAttributesInput) (s3response.GetObjectAttributesResponse, error) {
	info, err := b.head(ctx, "GetObjectAttributes", deref(in.Bucket), deref(in.Key), in.VersionId)
	if err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	o, _, _, err := b.readable(ctx, "GetObjectAttributes", deref(in.Bucket), info)
	if err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	etag, size, mtime := o.ETag, o.Size, lastModified(o)
	res := s3response.GetObjectAttributesResponse{
		ETag: &etag, ObjectSize: &size, StorageClass: storageClass(o), LastModified: &mtime,
	}
	if cs := checksumOut(o.Headers); cs.Type != "" {
		res.Checksum = &types.Checksum{ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME,
			ChecksumSHA1: cs.SHA1, ChecksumSHA256: cs.SHA256, ChecksumType: cs.Type}
	}
	if len(o.Parts) > 0 {
		marker := 0
		if s := deref(in.PartNumberMarker); s != "" {
			if marker, err = strconv.Atoi(s); err != nil || marker < 0 {
				return s3response.GetObjectAttributesResponse{}, s3err.GetInvalidArgMaxLimiter("part-number-marker", s)
			}
		}
		limit := 1000
		if in.MaxParts != nil && *in.MaxParts > 0 {
			limit = int(*in.MaxParts)
		}
		parts := &s3response.ObjectParts{PartNumberMarker: marker, MaxParts: limit}
		for i, sz := range o.Parts {
			num := i + 1
			if num <= marker {
				continue
			}
			if len(parts.Parts) == limit {
				parts.IsTruncated = true
				break
			}
			parts.Parts = append(parts.Parts, types.ObjectPart{PartNumber: int32Ptr(int32(num)), Size: int64Ptr(sz)})
			parts.NextPartNumberMarker = num
		}
		res.ObjectParts = parts
	}
	return res, nil
}

func int32Ptr(v int32) *int32 { return &v }
func int64Ptr(v int64) *int64 { return &v }

// DeleteObject deletes an object; deleting a missing key succeeds (S3).
func (b *Backend) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkVersion(in.VersionId); err != nil {
		return nil, err
	}
	if in.IfMatch != nil || in.IfMatchLastModifiedTime != nil || in.IfMatchSize != nil {
		pre := backend.ObjectDeletePreconditions{
			IfMatch: in.IfMatch, IfMatchLastModTime: in.IfMatchLastModifiedTime, IfMatchSize: in.IfMatchSize,
		}
		// Judged on what clients see (the plaintext size of an
		// encrypted object).
		check := func(o object.Record) error {
			plain, _, err := plainView(o)
			if err != nil {
				return err
			}
			return backend.EvaluateObjectDeletePreconditions(plain.ETag, lastModified(plain), plain.Size, pre)
		}
		if v := deref(in.VersionId); v != "" {
			// A version's content never changes: check it, then delete it.
			info, err := b.layer.HeadVersion(ctx, bucket, key, v)
			switch {
			case errors.Is(err, object.ErrNoSuchKey) || errors.Is(err, object.ErrNoSuchVersion):
				return &s3.DeleteObjectOutput{}, nil
			case err != nil:
				return nil, b.mapErr("DeleteObject", err, bucket)
			}
			if err := check(info.Object); err != nil {
				return nil, err
			}
		} else {
			// The current object: deleted only if it is still the one
			// the preconditions held for (the delete compares it).
			return b.deleteIfCurrent(ctx, bucket, key, check)
		}
	}
	res, err := b.layer.DeleteObject(ctx, bucket, key, deref(in.VersionId))
	if err != nil {
		return nil, b.mapErr("DeleteObject", err, bucket)
	}
	out := &s3.DeleteObjectOutput{}
	if res.VersionID != "" {
		out.VersionId = &res.VersionID
	}
	if res.DeleteMarker {
		out.DeleteMarker = aws.Bool(true)
	}
	return out, nil
}

// deleteIfCurrent deletes bucket/key if check passes on its current
// record, committed only if that record is still current; a record
// replaced in between is checked again.
func (b *Backend) deleteIfCurrent(ctx context.Context, bucket, key string, check func(object.Record) error) (*s3.DeleteObjectOutput, error) {
	for attempt := 0; attempt < 8; attempt++ {
		var checkErr error
		deleted, err := b.layer.DeleteIf(ctx, bucket, key, func(info object.ObjectInfo) bool {
			checkErr = check(info.Object)
			return checkErr == nil
		})
		switch {
		case err != nil:
			return nil, b.mapErr("DeleteObject", err, bucket)
		case checkErr != nil:
			return nil, checkErr
		case deleted:
			out := &s3.DeleteObjectOutput{}
			if info, err := b.layer.ListVersions(ctx, bucket, object.VersionListOptions{Prefix: key, MaxKeys: 1}); err == nil &&
				len(info.Versions) > 0 && info.Versions[0].Key == key && info.Versions[0].DeleteMarker {
				out.DeleteMarker = aws.Bool(true)
				if id := info.Versions[0].VersionID; id != "" {
					out.VersionId = &id
				}
			}
			return out, nil
		}
		// Not deleted with the check passing: absent (S3: success), or
		// replaced since the check.
		if _, err := b.layer.Head(ctx, bucket, key); errors.Is(err, object.ErrNoSuchKey) {
			return &s3.DeleteObjectOutput{}, nil
		}
	}
	return nil, s3err.GetAPIError(s3err.ErrPreconditionFailed)
}

// DeleteObjects deletes up to MaxDeleteObjects keys, reporting each.
func (b *Backend) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput) (s3response.DeleteResult, error) {
	bucket := deref(in.Bucket)
	if in.Delete == nil {
		return s3response.DeleteResult{}, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	if len(in.Delete.Objects) > b.opts.MaxDeleteObjects {
		return s3response.DeleteResult{}, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	// A missing bucket fails the whole request, as in S3.
	if _, _, err := b.layer.GetBucket(ctx, bucket); err != nil {
		return s3response.DeleteResult{}, b.mapErr("DeleteObjects", err, bucket)
	}
	res := s3response.DeleteResult{Deleted: []types.DeletedObject{}, Error: []types.Error{}}
	for _, obj := range in.Delete.Objects {
		out, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: in.Bucket, Key: obj.Key, VersionId: obj.VersionId, IfMatch: obj.ETag,
			IfMatchLastModifiedTime: obj.LastModifiedTime, IfMatchSize: obj.Size,
		})
		if err != nil {
			res.Error = append(res.Error, s3err.ObjectDeleteError(obj.Key, obj.VersionId, err))
			continue
		}
		d := types.DeletedObject{Key: obj.Key, VersionId: obj.VersionId}
		if out.DeleteMarker != nil && *out.DeleteMarker {
			d.DeleteMarker = out.DeleteMarker
			if obj.VersionId == nil || *obj.VersionId == "" {
				d.DeleteMarkerVersionId = out.VersionId
			}
		}
		res.Deleted = append(res.Deleted, d)
	}
	return res, nil
}

// CopyObject copies an object. When neither side changes the bytes (both
// unencrypted, or both SSE-S3 under the same vector) the layer's copy
// shares the source's extents and no data moves; otherwise the gateway
// reads the source's plaintext (with the copy-source SSE-C key if it has
// one) and writes it again under the destination's encryption (the
// request's, else the destination bucket's default) and class. COPY
// (default) keeps the source's content headers and user metadata, REPLACE
// takes the request's; tags likewise with the tagging directive.
//
// The source is read once: the record whose preconditions were evaluated
// and whose encryption record the copy takes is the one copied. If it is
// replaced before the copy commits, the copy starts over (preconditions
// judged again on the new record), up to copyAttempts times.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	for attempt := 1; ; attempt++ {
		out, err := b.copyObject(ctx, in)
		if !errors.Is(err, object.ErrSourceChanged) {
			return out, err
		}
		if attempt == copyAttempts {
			return out, b.mapErr("CopyObject", err, deref(in.Bucket))
		}
	}
}

// copyObject is one attempt of CopyObject. It returns
// object.ErrSourceChanged unmapped, for CopyObject to retry.
func (b *Backend) copyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	dstBucket, dstKey := deref(in.Bucket), deref(in.Key)
	if err := checkKey(dstKey); err != nil {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	if in.ObjectLockMode != "" || in.ObjectLockLegalHoldStatus == types.ObjectLockLegalHoldStatusOn {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
	}
	srcBucket, srcKey, srcVersion, err := parseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	src, err := b.layer.HeadVersion(ctx, srcBucket, srcKey, srcVersion)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, srcBucket)
	}
	b.copySourceRead(srcBucket, srcKey)
	plainSrc, srcRec, err := plainView(src.Object)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, srcBucket)
	}
	srcDK, err := b.dataKey(ctx, srcRec, hCopySSECPrefix)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, srcBucket)
	}
	dstEnc, err := b.writeSSE(ctx, dstBucket)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if o := deref(in.ExpectedSourceBucketOwner); o != "" {
		sb, _, err := b.layer.GetBucket(ctx, srcBucket)
		if err != nil {
			return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, srcBucket)
		}
		if bucketOwner(sb) != o {
			return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrAccessDenied)
		}
	}
	if err := evalPreconditions(src.ETag, lastModified(src.Object), preconditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodifiedSince: in.CopySourceIfUnmodifiedSince,
	}); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	replaceMeta := in.MetadataDirective == types.MetadataDirectiveReplace
	replaceTags := in.TaggingDirective == types.TaggingDirectiveReplace
	class := requestClass(ctx, string(in.StorageClass))
	srcMode := ""
	if srcRec != nil {
		srcMode = srcRec.Mode
	}
	encChanges := dstEnc.mode != srcMode || (srcMode == modeC && dstEnc.keyMD5 != srcRec.KeyMD5)
	if srcBucket == dstBucket && srcKey == dstKey && srcVersion == "" && !replaceMeta && !replaceTags && !encChanges && (class == "" || class == src.Class) {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	var headers, umeta, tags map[string]string
	if replaceMeta {
		headers = contentHeaders{
			ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
			ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
			WebsiteRedirectLocation: in.WebsiteRedirectLocation,
		}.toMap()
		umeta = userMeta(in.Metadata)
	}
	if replaceTags {
		if tags, err = parseTagging(deref(in.Tagging)); err != nil {
			return s3response.CopyObjectOutput{}, err
		}
	}
	var info object.ObjectInfo
	var dstRec *objectSSE
	sameBytes := dstEnc.mode == srcMode && (srcMode == "" || (srcMode == modeS3 && (class == "" || class == src.Class)))
	aclh, err := b.uploadACLHeaders(ctx, dstBucket)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if sameBytes {
		// Shares the source's extents (or, unencrypted under a new
		// vector, rewrites identical bytes). An encrypted source keeps
		// its vector and class: the layer would recompute the ETag from
		// ciphertext if it rewrote. The copy's attributes are always
		// given: the copy gets its own owner and ACL, not the source's.
		if !replaceMeta {
			headers, umeta = contentHeadersOf(src.Headers).toMap(), src.UserMeta
		}
		opts := object.CopyOptions{ReplaceMeta: true, ReplaceTags: replaceTags, Class: class, UserMeta: umeta, Tags: tags, SrcVersion: srcVersion,
			Headers: mergeHeaders(mergeHeaders(headers, systemHeaders(src.Headers)), aclh), SourceRev: src.Rev}
		if srcMode != "" {
			opts.Class = ""
		}
		dstRec = srcRec
		info, err = b.layer.Copy(ctx, srcBucket, srcKey, dstBucket, dstKey, opts)
	} else {
		info, dstRec, err = b.rewriteCopy(ctx, srcBucket, srcKey, src, plainSrc, srcDK, dstBucket, dstKey, dstEnc, rewriteAttrs{
			class: class, replaceMeta: replaceMeta, headers: headers, umeta: umeta, replaceTags: replaceTags, tags: tags, acl: aclh,
		})
	}
	if errors.Is(err, object.ErrSourceChanged) {
		return s3response.CopyObjectOutput{}, err
	}
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, dstBucket)
	}
	setSSEResponse(ctx, dstRec)
	etag, mtime := quoteETag(info.ETag), lastModified(info.Object)
	out := s3response.CopyObjectOutput{
		CopyObjectResult: &s3response.CopyObjectResult{ETag: &etag, LastModified: &mtime},
	}
	if info.VersionID != "" {
		out.VersionId = &info.VersionID
	}
	if src.VersionID != "" {
		out.CopySourceVersionId = &src.VersionID
	}
	return out, nil
}

// rewriteAttrs are the destination attributes a rewriting copy takes from
// the request.
type rewriteAttrs struct {
	class          string
	replaceMeta    bool
	headers, umeta map[string]string
	replaceTags    bool
	tags           map[string]string
	acl            map[string]string // owner and ACL headers of the copy
}

// rewriteCopy copies by reading the source's plaintext and writing it as
// a new object under the destination's encryption. The result is a simple
// (single-part) object, as an AWS CopyObject of a multipart object is.
func (b *Backend) rewriteCopy(ctx context.Context, srcBucket, srcKey string, src object.ObjectInfo, plainSrc object.Record, srcDK []byte,
	dstBucket, dstKey string, enc sseRequest, a rewriteAttrs) (object.ObjectInfo, *objectSSE, error) {
	var body io.Reader = &emptyReader{}
	if plainSrc.Size > 0 {
		rc, err := b.openPlain(ctx, srcBucket, srcKey, src.Object, srcDK, 0, plainSrc.Size)
		if err != nil {
			return object.ObjectInfo{}, nil, err
		}
		defer rc.Close()
		body = rc
	}
	headers := a.headers
	if !a.replaceMeta {
		headers = contentHeadersOf(src.Headers).toMap()
	}
	// The bytes are the same plaintext: a whole-object checksum still
	// holds; a composite one (of parts) does not describe a simple object.
	headers = mergeHeaders(mergeHeaders(headers, fullObjectChecksums(src.Headers)), a.acl)
	umeta, tags := a.umeta, a.tags
	if !a.replaceMeta {
		umeta = src.UserMeta
	}
	if !a.replaceTags {
		tags = src.Tags
	}
	opts := object.PutOptions{Size: -1, Class: a.class, UserMeta: umeta, Tags: cloneTags(tags)}
	if a.class == "" {
		opts.Class, opts.Vector = src.Class, src.Vector
	}
	var rec *objectSSE
	if enc.mode != "" {
		dk, r, err := b.newObjectKey(enc)
		if err != nil {
			return object.ObjectInfo{}, nil, err
		}
		rec = r
		if body, opts.Trailer, err = encryptBody(body, dk, enc.mode == modeS3); err != nil {
			return object.ObjectInfo{}, nil, err
		}
		headers = withSSE(headers, rec)
	}
	opts.Headers = headers
	info, err := b.layer.Put(ctx, dstBucket, dstKey, body, opts)
	return info, rec, err
}

// mergeHeaders returns a ∪ b (b wins), nil if both are empty.
func mergeHeaders(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// GetObjectTagging returns an object's tags.
func (b *Backend) GetObjectTagging(ctx context.Context, bucket, key, version string) (map[string]string, error) {
	info, err := b.head(ctx, "GetObjectTagging", bucket, key, &version)
	if err != nil {
		return nil, err
	}
	if info.Tags == nil {
		return map[string]string{}, nil
	}
	return info.Tags, nil
}

// PutObjectTagging replaces an object's tags (nil removes them).
func (b *Backend) PutObjectTagging(ctx context.Context, bucket, key, version string, tags map[string]string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := checkVersion(&version); err != nil {
		return err
	}
	if len(tags) > maxObjectTags {
		return s3err.GetAPIError(s3err.ErrObjectTaggingLimited)
	}
	if version != "" {
		// Tags of the current version can be changed through its ID;
		// those of older versions cannot (yet).
		cur, err := b.layer.Head(ctx, bucket, key)
		if err != nil {
			return b.mapErr("PutObjectTagging", err, bucket)
		}
		if cur.VersionID != version && !(version == object.NullVersion && cur.VersionID == "") {
			return s3err.GetAPIError(s3err.ErrNotImplemented)
		}
	}
	err := b.layer.UpdateObject(ctx, bucket, key, func(o *object.Record) error {
		o.Tags = cloneTags(tags)
		return nil
	})
	return b.mapErr("PutObjectTagging", err, bucket)
}

// DeleteObjectTagging removes an object's tags.
func (b *Backend) DeleteObjectTagging(ctx context.Context, bucket, key, version string) error {
	return b.PutObjectTagging(ctx, bucket, key, version, nil)
}
