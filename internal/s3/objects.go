package s3

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/meta"
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
	info, err := b.layer.Head(ctx, bucket, key)
	return info, b.mapErr(op, err, bucket)
}

// putPrecondition turns If-Match / If-None-Match of a write into an
// object-layer precondition, which the layer checks before writing and
// again atomically with the commit (nil when neither header is set).
func putPrecondition(ifMatch, ifNoneMatch *string) object.Precondition {
	if ifMatch == nil && ifNoneMatch == nil {
		return nil
	}
	return func(etag string, exists bool) error {
		return backend.EvaluateObjectPutPreconditions(etag, ifMatch, ifNoneMatch, exists)
	}
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
	body, err := verifyBody(in.Body, declared, checksumHeaders{
		CRC32: in.ChecksumCRC32, CRC32C: in.ChecksumCRC32C, CRC64NVME: in.ChecksumCRC64NVME,
		SHA1: in.ChecksumSHA1, SHA256: in.ChecksumSHA256, SHA512: in.ChecksumSHA512, MD5: in.ChecksumMD5,
		XXHASH64: in.ChecksumXXHASH64, XXHASH3: in.ChecksumXXHASH3, XXHASH128: in.ChecksumXXHASH128,
	})
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	ch := contentHeaders{
		ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
		ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
		WebsiteRedirectLocation: in.WebsiteRedirectLocation,
	}
	info, err := b.layer.Put(ctx, bucket, key, body, object.PutOptions{
		Size:     -1, // read to EOF so that body checksums are verified before commit
		Class:    requestClass(ctx, ""),
		Headers:  ch.toMap(),
		UserMeta: userMeta(in.Metadata),
		Tags:     tags,

		Precondition: putPrecondition(in.IfMatch, in.IfNoneMatch),
	})
	if err != nil {
		return s3response.PutObjectOutput{}, b.mapErr("PutObject", err, bucket)
	}
	size := info.Size
	return s3response.PutObjectOutput{ETag: quoteETag(info.ETag), Size: &size}, nil
}

// readSpec is the byte range a GET or HEAD answers.
type readSpec struct {
	off, n       int64
	contentRange *string
	partsCount   *int32
}

// resolveRead applies partNumber or Range (versitygw rejects both at once).
func resolveRead(o meta.Object, rng *string, part *int32) (readSpec, error) {
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

func tagCount(o meta.Object) *int32 {
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
	if err != nil {
		return nil, err
	}
	o := info.Object
	mtime := lastModified(o)
	if err := evalPreconditions(o.ETag, mtime, preconditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodifiedSince: in.IfUnmodifiedSince,
	}); err != nil {
		return nil, err
	}
	rs, err := resolveRead(o, in.Range, in.PartNumber)
	if err != nil {
		return nil, err
	}
	ch := contentHeadersOf(o.Headers)
	etag := quoteETag(o.ETag)
	return &s3.HeadObjectOutput{
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
		Metadata:                o.UserMeta,
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
	if err != nil {
		return nil, err
	}
	o := info.Object
	mtime := lastModified(o)
	if err := evalPreconditions(o.ETag, mtime, preconditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodifiedSince: in.IfUnmodifiedSince,
	}); err != nil {
		return nil, err
	}
	rs, err := resolveRead(o, in.Range, in.PartNumber)
	if err != nil {
		return nil, err
	}
	var body io.ReadCloser = io.NopCloser(&emptyReader{})
	if rs.n > 0 {
		// The record read above and the one Get reads may differ under a
		// concurrent overwrite; Get re-reads it, so headers and body could
		// disagree. Compare ETags and report a conflict rather than serve
		// a mix.
		ginfo, rc, err := b.layer.Get(ctx, bucket, key, rs.off, rs.n)
		if err != nil {
			return nil, b.mapErr("GetObject", err, bucket)
		}
		if ginfo.ETag != o.ETag || ginfo.Size != o.Size {
			rc.Close()
			return nil, errConflict
		}
		// Read the first bytes before the status goes out: an object
		// whose replicas all fail then gets its 5xx answer, not 200 and a
		// connection cut mid-body (found by the chaos suite).
		br := bufio.NewReaderSize(rc, 64<<10)
		if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
			rc.Close()
			return nil, b.mapErr("GetObject", err, bucket)
		}
		body = readCloser{Reader: br, Closer: rc}
	}
	ch := contentHeadersOf(o.Headers)
	etag := quoteETag(o.ETag)
	return &s3.GetObjectOutput{
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
		Metadata:                o.UserMeta,
		StorageClass:            storageClass(o),
		TagCount:                tagCount(o),
		PartsCount:              rs.partsCount,
	}, nil
}

// readCloser reads through a buffer and closes the underlying body.
type readCloser struct {
	io.Reader
	io.Closer
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }

// GetObjectAttributes returns ETag, size, storage class and, for multipart
// objects, the part sizes. versitygw filters them to the requested set.
func (b *Backend) GetObjectAttributes(ctx context.Context, in *s3.GetObjectAttributesInput) (s3response.GetObjectAttributesResponse, error) {
	info, err := b.head(ctx, "GetObjectAttributes", deref(in.Bucket), deref(in.Key), in.VersionId)
	if err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	o := info.Object
	etag, size, mtime := o.ETag, o.Size, lastModified(o)
	res := s3response.GetObjectAttributesResponse{
		ETag: &etag, ObjectSize: &size, StorageClass: storageClass(o), LastModified: &mtime,
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
		info, err := b.layer.Head(ctx, bucket, key)
		switch {
		case errors.Is(err, object.ErrNoSuchKey):
			return &s3.DeleteObjectOutput{}, nil
		case err != nil:
			return nil, b.mapErr("DeleteObject", err, bucket)
		}
		if err := backend.EvaluateObjectDeletePreconditions(info.ETag, lastModified(info.Object), info.Size,
			backend.ObjectDeletePreconditions{
				IfMatch: in.IfMatch, IfMatchLastModTime: in.IfMatchLastModifiedTime, IfMatchSize: in.IfMatchSize,
			}); err != nil {
			return nil, err
		}
	}
	if err := b.layer.Delete(ctx, bucket, key); err != nil {
		return nil, b.mapErr("DeleteObject", err, bucket)
	}
	return &s3.DeleteObjectOutput{}, nil
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
		_, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: in.Bucket, Key: obj.Key, VersionId: obj.VersionId, IfMatch: obj.ETag,
			IfMatchLastModifiedTime: obj.LastModifiedTime, IfMatchSize: obj.Size,
		})
		if err != nil {
			res.Error = append(res.Error, s3err.ObjectDeleteError(obj.Key, obj.VersionId, err))
			continue
		}
		res.Deleted = append(res.Deleted, types.DeletedObject{Key: obj.Key, VersionId: obj.VersionId})
	}
	return res, nil
}

// CopyObject copies an object. With equal vectors the copy shares the
// source's extents (no data moves); a storage class whose vector differs
// rewrites the bytes. COPY (default) keeps the source's content headers and
// user metadata, REPLACE takes the request's; tags likewise with the
// tagging directive.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	dstBucket, dstKey := deref(in.Bucket), deref(in.Key)
	if err := checkKey(dstKey); err != nil {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	if in.ObjectLockMode != "" || in.ObjectLockLegalHoldStatus == types.ObjectLockLegalHoldStatusOn {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
	}
	srcBucket, srcKey, err := parseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	src, err := b.layer.Head(ctx, srcBucket, srcKey)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, srcBucket)
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
	if srcBucket == dstBucket && srcKey == dstKey && !replaceMeta && !replaceTags && (class == "" || class == src.Class) {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	opts := object.CopyOptions{ReplaceMeta: replaceMeta, ReplaceTags: replaceTags, Class: class}
	if replaceMeta {
		opts.Headers = contentHeaders{
			ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
			ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
			WebsiteRedirectLocation: in.WebsiteRedirectLocation,
		}.toMap()
		opts.UserMeta = userMeta(in.Metadata)
	}
	if replaceTags {
		if opts.Tags, err = parseTagging(deref(in.Tagging)); err != nil {
			return s3response.CopyObjectOutput{}, err
		}
	}
	info, err := b.layer.Copy(ctx, srcBucket, srcKey, dstBucket, dstKey, opts)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.mapErr("CopyObject", err, dstBucket)
	}
	etag, mtime := quoteETag(info.ETag), lastModified(info.Object)
	return s3response.CopyObjectOutput{
		CopyObjectResult: &s3response.CopyObjectResult{ETag: &etag, LastModified: &mtime},
	}, nil
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
	err := b.layer.UpdateObject(ctx, bucket, key, func(o *meta.Object) error {
		o.Tags = cloneTags(tags)
		return nil
	})
	return b.mapErr("PutObjectTagging", err, bucket)
}

// DeleteObjectTagging removes an object's tags.
func (b *Backend) DeleteObjectTagging(ctx context.Context, bucket, key, version string) error {
	return b.PutObjectTagging(ctx, bucket, key, version, nil)
}

// GetObjectAcl answers with the bucket owner holding full control: objects
// carry no ACLs of their own.
func (b *Backend) GetObjectAcl(ctx context.Context, in *s3.GetObjectAclInput) (*s3.GetObjectAclOutput, error) {
	bucket := deref(in.Bucket)
	if _, err := b.head(ctx, "GetObjectAcl", bucket, deref(in.Key), in.VersionId); err != nil {
		return nil, err
	}
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return nil, b.mapErr("GetObjectAcl", err, bucket)
	}
	owner := bucketOwner(bk)
	return &s3.GetObjectAclOutput{
		Owner: &types.Owner{ID: &owner},
		Grants: []types.Grant{{
			Grantee:    &types.Grantee{ID: &owner, Type: types.TypeCanonicalUser},
			Permission: types.PermissionFullControl,
		}},
	}, nil
}
