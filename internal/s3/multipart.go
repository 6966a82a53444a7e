package s3

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/object"
)

// upload returns an upload record after checking that it belongs to key
// (upload IDs are per bucket in the layer, per object in S3).
func (b *Backend) upload(ctx context.Context, op, bucket, key, uploadID string) (object.Upload, error) {
	if err := checkKey(key); err != nil {
		return object.Upload{}, err
	}
	up, _, err := b.layer.GetUpload(ctx, bucket, uploadID)
	if errors.Is(err, object.ErrNoSuchUpload) || (err == nil && up.Key != key) {
		return object.Upload{}, s3err.GetNoSuchUploadErr(uploadID)
	}
	if err != nil {
		return object.Upload{}, b.mapErr(op, err, bucket)
	}
	return up, nil
}

// uploadErr maps a layer error of an upload operation.
func (b *Backend) uploadErr(op string, err error, bucket, uploadID string) error {
	if errors.Is(err, object.ErrNoSuchUpload) {
		return s3err.GetNoSuchUploadErr(uploadID)
	}
	return b.mapErr(op, err, bucket)
}

// CreateMultipartUpload starts an upload; its storage class fixes the
// vector of every part.
func (b *Backend) CreateMultipartUpload(ctx context.Context, in s3response.CreateMultipartUploadInput) (s3response.InitiateMultipartUploadResult, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	if err := checkKey(key); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if in.ObjectLockMode != "" || in.ObjectLockLegalHoldStatus == types.ObjectLockLegalHoldStatusOn {
		return s3response.InitiateMultipartUploadResult{}, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
	}
	tags, err := parseTagging(deref(in.Tagging))
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	ch := contentHeaders{
		ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
		ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
		WebsiteRedirectLocation: in.WebsiteRedirectLocation,
	}
	id, err := b.layer.CreateUpload(ctx, bucket, key, object.PutOptions{
		Class: requestClass(ctx, string(in.StorageClass)), Headers: ch.toMap(), UserMeta: userMeta(in.Metadata), Tags: tags,
	})
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, b.mapErr("CreateMultipartUpload", err, bucket)
	}
	return s3response.InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadId: id}, nil
}

// UploadPart stores one part; its ETag is the part's MD5.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if in.PartNumber == nil {
		return nil, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	if _, err := b.upload(ctx, "UploadPart", bucket, key, uploadID); err != nil {
		return nil, err
	}
	declared := int64(-1)
	if in.ContentLength != nil {
		declared = *in.ContentLength
	}
	body, err := verifyBody(in.Body, declared, checksumHeaders{
		CRC32: in.ChecksumCRC32, CRC32C: in.ChecksumCRC32C, CRC64NVME: in.ChecksumCRC64NVME,
		SHA1: in.ChecksumSHA1, SHA256: in.ChecksumSHA256, SHA512: in.ChecksumSHA512, MD5: in.ChecksumMD5,
		XXHASH64: in.ChecksumXXHASH64, XXHASH3: in.ChecksumXXHASH3, XXHASH128: in.ChecksumXXHASH128,
	})
	if err != nil {
		return nil, err
	}
	p, err := b.layer.UploadPart(ctx, bucket, uploadID, int(*in.PartNumber), body, -1, "")
	if err != nil {
		return nil, b.uploadErr("UploadPart", err, bucket, uploadID)
	}
	etag := quoteETag(p.ETag)
	return &s3.UploadPartOutput{ETag: &etag}, nil
}

// UploadPartCopy makes a part from a range of an existing object. With
// equal vectors the part shares the source's extents.
func (b *Backend) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if in.PartNumber == nil {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	if _, err := b.upload(ctx, "UploadPartCopy", bucket, key, uploadID); err != nil {
		return s3response.CopyPartResult{}, err
	}
	srcBucket, srcKey, err := parseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	src, err := b.layer.Head(ctx, srcBucket, srcKey)
	if err != nil {
		return s3response.CopyPartResult{}, b.mapErr("UploadPartCopy", err, srcBucket)
	}
	if o := deref(in.ExpectedSourceBucketOwner); o != "" {
		sb, _, err := b.layer.GetBucket(ctx, srcBucket)
		if err != nil {
			return s3response.CopyPartResult{}, b.mapErr("UploadPartCopy", err, srcBucket)
		}
		if bucketOwner(sb) != o {
			return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrAccessDenied)
		}
	}
	if err := evalPreconditions(src.ETag, lastModified(src.Object), preconditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodifiedSince: in.CopySourceIfUnmodifiedSince,
	}); err != nil {
		return s3response.CopyPartResult{}, err
	}
	off, n, err := copySourceRange(src.Size, deref(in.CopySourceRange))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	p, err := b.layer.UploadPartCopy(ctx, bucket, uploadID, int(*in.PartNumber), srcBucket, srcKey, off, n)
	if err != nil {
		return s3response.CopyPartResult{}, b.uploadErr("UploadPartCopy", err, bucket, uploadID)
	}
	etag := quoteETag(p.ETag)
	return s3response.CopyPartResult{ETag: &etag, LastModified: time.Unix(0, p.Mtime).UTC()}, nil
}

// allParts lists every stored part of an upload in number order.
func (b *Backend) allParts(ctx context.Context, bucket, uploadID string) ([]object.PartInfo, error) {
	var out []object.PartInfo
	after := 0
	for {
		page, more, err := b.layer.ListParts(ctx, bucket, uploadID, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out, nil
		}
		after = page[len(page)-1].Num
	}
}

// CompleteMultipartUpload assembles the object. Part numbers must ascend
// (InvalidPartOrder), every part must exist with the given ETag
// (InvalidPart), and every part but the last must be at least 5 MiB
// (EntityTooSmall). The ETag is S3's: MD5 of the part MD5s, "-N".
func (b *Backend) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	var res s3response.CompleteMultipartUploadResult
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if in.MultipartUpload == nil || len(in.MultipartUpload.Parts) == 0 {
		return res, "", s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	if _, err := b.upload(ctx, "CompleteMultipartUpload", bucket, key, uploadID); err != nil {
		return res, "", err
	}
	parts := make([]object.CompletePart, 0, len(in.MultipartUpload.Parts))
	for _, p := range in.MultipartUpload.Parts {
		if p.PartNumber == nil || p.ETag == nil {
			return res, "", s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		if *p.PartNumber < 1 {
			return res, "", s3err.GetInvalidArgumentErr(s3err.InvalidArgCompleteMpPartNumber, strconv.Itoa(int(*p.PartNumber)))
		}
		parts = append(parts, object.CompletePart{Num: int(*p.PartNumber), ETag: *p.ETag})
	}
	if in.MpuObjectSize != nil {
		stored, err := b.allParts(ctx, bucket, uploadID)
		if err != nil {
			return res, "", b.uploadErr("CompleteMultipartUpload", err, bucket, uploadID)
		}
		sizes := map[int]int64{}
		for _, p := range stored {
			sizes[p.Num] = p.Size
		}
		var total int64
		for _, p := range parts {
			total += sizes[p.Num]
		}
		if total != *in.MpuObjectSize {
			return res, "", s3err.GetIncorrectMpObjectSizeErr(*in.MpuObjectSize, total)
		}
	}
	info, err := b.layer.CompleteUpload(ctx, bucket, uploadID, parts, putPrecondition(in.IfMatch, in.IfNoneMatch))
	if err != nil {
		return res, "", b.uploadErr("CompleteMultipartUpload", err, bucket, uploadID)
	}
	etag := quoteETag(info.ETag)
	loc := "/" + bucket + "/" + key
	return s3response.CompleteMultipartUploadResult{Location: &loc, Bucket: &bucket, Key: &key, ETag: &etag}, "", nil
}

// AbortMultipartUpload discards an upload and its parts.
func (b *Backend) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput) error {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if _, err := b.upload(ctx, "AbortMultipartUpload", bucket, key, uploadID); err != nil {
		return err
	}
	return b.uploadErr("AbortMultipartUpload", b.layer.AbortUpload(ctx, bucket, uploadID), bucket, uploadID)
}

// ListParts lists an upload's parts after PartNumberMarker.
func (b *Backend) ListParts(ctx context.Context, in *s3.ListPartsInput) (s3response.ListPartsResult, error) {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	up, err := b.upload(ctx, "ListParts", bucket, key, uploadID)
	if err != nil {
		return s3response.ListPartsResult{}, err
	}
	marker := 0
	if s := deref(in.PartNumberMarker); s != "" {
		if marker, err = strconv.Atoi(s); err != nil || marker < 0 {
			return s3response.ListPartsResult{}, s3err.GetInvalidArgMaxLimiter("part-number-marker", s)
		}
	}
	limit := 1000
	if in.MaxParts != nil && *in.MaxParts > 0 && *in.MaxParts < 1000 {
		limit = int(*in.MaxParts)
	}
	parts, truncated, err := b.layer.ListParts(ctx, bucket, uploadID, marker, limit)
	if err != nil {
		return s3response.ListPartsResult{}, b.uploadErr("ListParts", err, bucket, uploadID)
	}
	out := s3response.ListPartsResult{
		Bucket: bucket, Key: key, UploadID: uploadID, PartNumberMarker: marker, MaxParts: limit,
		IsTruncated: truncated, StorageClass: classOr(up.Class),
		ChecksumAlgorithm: "null", ChecksumType: "null",
	}
	for _, p := range parts {
		out.Parts = append(out.Parts, s3response.Part{
			PartNumber: p.Num, ETag: quoteETag(p.ETag), Size: p.Size, LastModified: time.Unix(0, p.Mtime).UTC(),
		})
		out.NextPartNumberMarker = p.Num
	}
	return out, nil
}

func classOr(c string) types.StorageClass {
	if c == "" {
		return types.StorageClassStandard
	}
	return types.StorageClass(c)
}

// ListMultipartUploads lists in-progress uploads by key, then initiation
// time, with versitygw's paginator (prefix, delimiter, key and upload-ID
// markers). The layer returns at most 1000 uploads per bucket and prefix
// to paginate over.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	bucket, prefix, delim := deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter)
	keyMarker, idMarker := deref(in.KeyMarker), deref(in.UploadIdMarker)
	limit := 1000
	if in.MaxUploads != nil && *in.MaxUploads >= 0 && *in.MaxUploads < 1000 {
		limit = int(*in.MaxUploads)
	}
	ups, _, err := b.layer.ListUploads(ctx, bucket, prefix, 0)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, b.mapErr("ListMultipartUploads", err, bucket)
	}
	var list []s3response.Upload
	for _, u := range ups {
		if keyMarker != "" && (u.Key < keyMarker || (u.Key == keyMarker && idMarker == "")) {
			continue
		}
		list = append(list, s3response.Upload{
			Key: u.Key, UploadID: u.ID, StorageClass: classOr(u.Class), Initiated: time.Unix(0, u.Created).UTC(),
		})
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Key != list[j].Key {
			return list[i].Key < list[j].Key
		}
		if !list[i].Initiated.Equal(list[j].Initiated) {
			return list[i].Initiated.Before(list[j].Initiated)
		}
		return list[i].UploadID < list[j].UploadID
	})
	out := s3response.ListMultipartUploadsResult{
		Bucket: bucket, Prefix: prefix, Delimiter: delim, KeyMarker: keyMarker, UploadIDMarker: idMarker, MaxUploads: limit,
	}
	if limit == 0 {
		return out, nil
	}
	page, err := backend.ListMultipartUploads(list, prefix, delim, keyMarker, idMarker, limit)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	out.Uploads, out.CommonPrefixes, out.IsTruncated = page.Uploads, page.CommonPrefixes, page.IsTruncated
	out.NextKeyMarker, out.NextUploadIDMarker = page.NextKeyMarker, page.NextUploadIDMarker
	return out, nil
}
