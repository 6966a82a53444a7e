package s3

import (
	"context"
	"errors"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
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
	enc, err := b.writeSSE(ctx, bucket)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	aclh, err := b.uploadACLHeaders(ctx, bucket)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	csh, err := uploadChecksumHeaders(in.ChecksumAlgorithm, in.ChecksumType)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	headers := mergeHeaders(mergeHeaders(ch.toMap(), aclh), csh)
	var rec *objectSSE
	if enc.mode != "" {
		// One data key for the whole object; every part is its own
		// stream under it (package sse).
		if _, rec, err = b.newObjectKey(enc); err != nil {
			return s3response.InitiateMultipartUploadResult{}, b.mapErr("CreateMultipartUpload", err, bucket)
		}
		headers = withSSE(headers, rec)
	}
	id, err := b.layer.CreateUpload(ctx, bucket, key, object.PutOptions{
		Class: requestClass(ctx, string(in.StorageClass)), Headers: headers, UserMeta: userMeta(in.Metadata), Tags: tags,
	})
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, b.mapErr("CreateMultipartUpload", err, bucket)
	}
	setSSEResponse(ctx, rec)
	setResponseHeader(ctx, "X-Amz-Checksum-Algorithm", csh[hdrUploadChecksumAlg])
	setResponseHeader(ctx, "X-Amz-Checksum-Type", csh[hdrUploadChecksumType])
	return s3response.InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadId: id}, nil
}

// uploadKey returns the data key of an encrypted upload (nil for a plain
// one), checking that an SSE-C upload's part requests carry its key.
func (b *Backend) uploadKey(ctx context.Context, up object.Upload) (*objectSSE, []byte, error) {
	rec, err := sseOf(up.Headers)
	if err != nil {
		return nil, nil, err
	}
	req, err := parseSSERequest(ctx, hSSECPrefix)
	if err != nil {
		return nil, nil, err
	}
	if req.mode == modeS3 && (rec == nil || rec.Mode != modeS3) {
		// A part cannot ask for an encryption its upload does not have.
		return nil, nil, errSSEPartHeader
	}
	if rec == nil || rec.Mode != modeC {
		if req.mode == modeC {
			return nil, nil, errSSECNotApplicable
		}
		if rec == nil {
			return nil, nil, nil
		}
	}
	if rec.Mode == modeS3 {
		if b.opts.Keys == nil {
			return nil, nil, errSSENoMasterKey
		}
		dk, err := b.opts.Keys.Open(sse.PurposeObjectKey, rec.Key)
		return rec, dk, err
	}
	if req.mode != modeC {
		return nil, nil, errSSECPartMissing
	}
	if req.keyMD5 != rec.KeyMD5 {
		return nil, nil, errSSECPartMismatch
	}
	dk, err := sse.OpenWithKEK(sse.CustomerKEK(req.customerKey), sse.PurposeObjectKey, rec.Key)
	if err != nil {
		return nil, nil, errSSECPartMismatch
	}
	return rec, dk, nil
}

// showsChecksums reports whether the request may see checksums of rec's
// plaintext: always for objects and uploads without SSE-C, and for SSE-C
// only with the customer key (as AWS). The checksums are computed before
// encryption; a caller without the key who saw them could confirm guesses
// of the content, which SSE-C ETags (of the ciphertext) avoid.
func showsChecksums(ctx context.Context, rec *objectSSE) bool {
	if rec == nil || rec.Mode != modeC {
		return true
	}
	req, err := parseSSERequest(ctx, hSSECPrefix)
	if err != nil || req.mode != modeC || req.keyMD5 != rec.KeyMD5 {
		return false
	}
	_, err = sse.OpenWithKEK(sse.CustomerKEK(req.customerKey), sse.PurposeObjectKey, rec.Key)
	return err == nil
}

// UploadPart stores one part; its ETag is the part's MD5.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if in.PartNumber == nil {
		return nil, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	up, err := b.upload(ctx, "UploadPart", bucket, key, uploadID)
	if err != nil {
		return nil, err
	}
	rec, dk, err := b.uploadKey(ctx, up)
	if err != nil {
		return nil, b.mapErr("UploadPart", err, bucket)
	}
	declared := int64(-1)
	if in.ContentLength != nil {
		declared = *in.ContentLength
	}
	alg, _ := uploadChecksum(up.Headers)
	body, bc, err := verifyBody(in.Body, declared, checksumHeaders{
		CRC32: in.ChecksumCRC32, CRC32C: in.ChecksumCRC32C, CRC64NVME: in.ChecksumCRC64NVME,
		SHA1: in.ChecksumSHA1, SHA256: in.ChecksumSHA256, SHA512: in.ChecksumSHA512, MD5: in.ChecksumMD5,
		XXHASH64: in.ChecksumXXHASH64, XXHASH3: in.ChecksumXXHASH3, XXHASH128: in.ChecksumXXHASH128,
	}, alg)
	if err != nil {
		return nil, err
	}
	if alg != "" && bc != nil && bc.alg != alg {
		return nil, s3err.GetChecksumTypeMismatchErr(alg, bc.alg)
	}
	popts := object.PartOptions{Size: -1}
	var enc object.TrailerFunc
	if dk != nil {
		if body, enc, err = encryptBody(body, dk, rec.Mode == modeS3); err != nil {
			return nil, b.mapErr("UploadPart", err, bucket)
		}
	}
	popts.Trailer = withChecksum(enc, bc.partHeaders)
	p, err := b.layer.UploadPartWith(ctx, bucket, uploadID, int(*in.PartNumber), body, popts)
	if err != nil {
		return nil, b.uploadErr("UploadPart", err, bucket, uploadID)
	}
	setSSEResponse(ctx, rec)
	etag := quoteETag(p.ETag)
	cs := checksumOut(p.Attrs)
	return &s3.UploadPartOutput{ETag: &etag, ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME,
		ChecksumSHA1: cs.SHA1, ChecksumSHA256: cs.SHA256}, nil
}

// UploadPartCopy makes a part from a range of an existing object. With
// equal vectors the part shares the source's extents.
//
// As in CopyObject, the source record judged is the one copied; a source
// replaced in between makes the part copy start over.
func (b *Backend) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	for attempt := 1; ; attempt++ {
		out, err := b.uploadPartCopy(ctx, in)
		if !errors.Is(err, object.ErrSourceChanged) {
			return out, err
		}
		if attempt == copyAttempts {
			return out, b.mapErr("UploadPartCopy", err, deref(in.Bucket))
		}
	}
}

// uploadPartCopy is one attempt of UploadPartCopy. It returns
// object.ErrSourceChanged unmapped, for UploadPartCopy to retry.
func (b *Backend) uploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	bucket, key, uploadID := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if in.PartNumber == nil {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	up, err := b.upload(ctx, "UploadPartCopy", bucket, key, uploadID)
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	rec, dk, err := b.uploadKey(ctx, up)
	if err != nil {
		return s3response.CopyPartResult{}, b.mapErr("UploadPartCopy", err, bucket)
	}
	srcBucket, srcKey, srcVersion, err := parseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	src, err := b.layer.HeadVersion(ctx, srcBucket, srcKey, srcVersion)
	if err != nil {
		return s3response.CopyPartResult{}, b.mapErr("UploadPartCopy", err, srcBucket)
	}
	b.copySourceRead(srcBucket, srcKey)
	plainSrc, srcRec, err := plainView(src.Object)
	if err != nil {
		return s3response.CopyPartResult{}, b.mapErr("UploadPartCopy", err, srcBucket)
	}
	srcDK, err := b.dataKey(ctx, srcRec, hCopySSECPrefix)
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
	off, n, err := copySourceRange(plainSrc.Size, deref(in.CopySourceRange))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	var p object.PartInfo
	if alg, _ := uploadChecksum(up.Headers); srcRec == nil && rec == nil && alg == "" && srcVersion == "" {
		p, err = b.layer.UploadPartCopyWith(ctx, bucket, uploadID, int(*in.PartNumber), srcBucket, srcKey, off, n,
			object.PartCopyOptions{SourceRev: src.Rev})
	} else {
		// Either side is encrypted or the part needs a checksum: copy the
		// plaintext through the gateway, decrypting and (for an encrypted
		// upload) re-encrypting.
		p, err = b.copyPartPlain(ctx, bucket, uploadID, int(*in.PartNumber), srcBucket, srcKey, src.Object, srcDK, off, n, rec, dk, alg)
	}
	if errors.Is(err, object.ErrSourceChanged) {
		return s3response.CopyPartResult{}, err
	}
	if err != nil {
		return s3response.CopyPartResult{}, b.uploadErr("UploadPartCopy", err, bucket, uploadID)
	}
	setSSEResponse(ctx, rec)
	etag := quoteETag(p.ETag)
	return s3response.CopyPartResult{ETag: &etag, LastModified: time.Unix(0, p.Mtime).UTC()}, nil
}

// copyPartPlain makes a part from plaintext bytes [off, off+n) of a
// source, encrypting them when the upload is encrypted.
func (b *Backend) copyPartPlain(ctx context.Context, bucket, uploadID string, num int, srcBucket, srcKey string, src object.Record, srcDK []byte,
	off, n int64, rec *objectSSE, dk []byte, alg types.ChecksumAlgorithm) (object.PartInfo, error) {
	var body io.Reader = &emptyReader{}
	if n > 0 {
		rc, err := b.openPlain(ctx, srcBucket, srcKey, src, srcDK, off, n)
		if err != nil {
			return object.PartInfo{}, err
		}
		defer rc.Close()
		body = rc
	}
	body, bc, err := verifyBody(body, -1, checksumHeaders{}, alg)
	if err != nil {
		return object.PartInfo{}, err
	}
	opts := object.PartOptions{Size: -1}
	var enc object.TrailerFunc
	if dk != nil {
		if body, enc, err = encryptBody(body, dk, rec.Mode == modeS3); err != nil {
			return object.PartInfo{}, err
		}
	}
	opts.Trailer = withChecksum(enc, bc.partHeaders)
	return b.layer.UploadPartWith(ctx, bucket, uploadID, num, body, opts)
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
	up, err := b.upload(ctx, "CompleteMultipartUpload", bucket, key, uploadID)
	if err != nil {
		if done, ok := b.completedBefore(ctx, bucket, key, in); ok {
			return done, "", nil
		}
		return res, "", err
	}
	rec, err := sseOf(up.Headers)
	if err != nil {
		return res, "", b.mapErr("CompleteMultipartUpload", err, bucket)
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
	alg, ctype := uploadChecksum(up.Headers)
	var extra map[string]string
	if in.MpuObjectSize != nil || rec != nil || alg != "" {
		stored, err := b.allParts(ctx, bucket, uploadID)
		if err != nil {
			return res, "", b.uploadErr("CompleteMultipartUpload", err, bucket, uploadID)
		}
		byNum := map[int]object.PartInfo{}
		for _, p := range stored {
			byNum[p.Num] = p
		}
		var total int64
		var cparts []completedPart
		for i, p := range parts {
			sp, ok := byNum[p.Num]
			if !ok {
				continue // the layer answers InvalidPart
			}
			sz := partPlainSize(sp.Size, rec)
			// The layer checks the 5 MiB minimum on stored sizes, which
			// an encrypted part exceeds a little; check the plaintext.
			if rec != nil && i < len(parts)-1 && sz < object.MinPartBytes {
				return res, "", s3err.GetEntityTooSmallErr(sz, object.MinPartBytes)
			}
			total += sz
			cp := in.MultipartUpload.Parts[i]
			cparts = append(cparts, completedPart{num: p.Num, plainSize: sz, stored: sp.Attrs[checksumHeader(alg)],
				requested: deref(partChecksum(cp, alg))})
		}
		if in.MpuObjectSize != nil && total != *in.MpuObjectSize {
			return res, "", s3err.GetIncorrectMpObjectSizeErr(*in.MpuObjectSize, total)
		}
		if len(cparts) == len(parts) {
			if extra, err = multipartChecksum(alg, ctype, cparts); err != nil {
				return res, "", b.mapErr("CompleteMultipartUpload", err, bucket)
			}
		}
	}
	info, err := b.layer.CompleteUploadWith(ctx, bucket, uploadID, parts, object.CompleteOptions{
		Precondition: putPrecondition(in.IfMatch, in.IfNoneMatch), Headers: extra,
	})
	if err != nil {
		if errors.Is(err, object.ErrNoSuchUpload) {
			if done, ok := b.completedBefore(ctx, bucket, key, in); ok {
				return done, "", nil // a concurrent retry of this request won
			}
		}
		return res, "", b.uploadErr("CompleteMultipartUpload", err, bucket, uploadID)
	}
	setSSEResponse(ctx, rec)
	return completeResult(bucket, key, info.Object, showsChecksums(ctx, rec)), info.VersionID, nil
}

// completedBefore answers a CompleteMultipartUpload whose upload is gone
// because this same request already completed it (a retry after a lost
// answer): AWS answers it again with the object's ETag. The object at key
// must still be the one those parts made (same multipart ETag).
func (b *Backend) completedBefore(ctx context.Context, bucket, key string, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, bool) {
	etags := make([]string, 0, len(in.MultipartUpload.Parts))
	for _, p := range in.MultipartUpload.Parts {
		etags = append(etags, deref(p.ETag))
	}
	want := multipartETagOf(etags)
	if want == "" {
		return s3response.CompleteMultipartUploadResult{}, false
	}
	info, err := b.layer.Head(ctx, bucket, key)
	if err != nil || info.ETag != want {
		return s3response.CompleteMultipartUploadResult{}, false
	}
	rec, err := sseOf(info.Headers)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, false
	}
	setSSEResponse(ctx, rec)
	return completeResult(bucket, key, info.Object, showsChecksums(ctx, rec)), true
}

// completeResult is CompleteMultipartUpload's answer for a completed
// object.
func completeResult(bucket, key string, o object.Record, withChecksums bool) s3response.CompleteMultipartUploadResult {
	etag := quoteETag(o.ETag)
	loc := "/" + bucket + "/" + key
	res := s3response.CompleteMultipartUploadResult{Location: &loc, Bucket: &bucket, Key: &key, ETag: &etag}
	if !withChecksums {
		return res
	}
	cs := checksumOut(o.Headers)
	res.ChecksumCRC32, res.ChecksumCRC32C, res.ChecksumCRC64NVME, res.ChecksumSHA1, res.ChecksumSHA256 = cs.CRC32, cs.CRC32C, cs.CRC64NVME, cs.SHA1, cs.SHA256
	res.ChecksumSHA512, res.ChecksumMD5, res.ChecksumXXHASH64, res.ChecksumXXHASH3, res.ChecksumXXHASH128 = cs.SHA512, cs.MD5, cs.XXHASH64, cs.XXHASH3, cs.XXHASH128
	if cs.Type != "" {
		res.ChecksumType = &cs.Type
	}
	return res
}

// partChecksum is the checksum a CompleteMultipartUpload request lists
// for a part, for the upload's algorithm.
func partChecksum(p types.CompletedPart, alg types.ChecksumAlgorithm) *string {
	switch alg {
	case types.ChecksumAlgorithmCrc32:
		return p.ChecksumCRC32
	case types.ChecksumAlgorithmCrc32c:
		return p.ChecksumCRC32C
	case types.ChecksumAlgorithmCrc64nvme:
		return p.ChecksumCRC64NVME
	case types.ChecksumAlgorithmSha1:
		return p.ChecksumSHA1
	case types.ChecksumAlgorithmSha256:
		return p.ChecksumSHA256
	}
	return nil
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
	rec, err := sseOf(up.Headers)
	if err != nil {
		return s3response.ListPartsResult{}, b.mapErr("ListParts", err, bucket)
	}
	if alg, typ := uploadChecksum(up.Headers); alg != "" {
		out.ChecksumAlgorithm, out.ChecksumType = alg, typ
	}
	show := showsChecksums(ctx, rec)
	for _, p := range parts {
		var cs checksumFields
		if show {
			cs = checksumOut(p.Attrs)
		}
		out.Parts = append(out.Parts, s3response.Part{
			PartNumber: p.Num, ETag: quoteETag(p.ETag), Size: partPlainSize(p.Size, rec), LastModified: time.Unix(0, p.Mtime).UTC(),
			ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumCRC64NVME: cs.CRC64NVME, ChecksumSHA1: cs.SHA1,
			ChecksumSHA256: cs.SHA256, ChecksumSHA512: cs.SHA512, ChecksumMD5: cs.MD5,
		})
		out.NextPartNumberMarker = p.Num
	}
	return out, nil
}

// partPlainSize is a stored part's size as clients see it.
func partPlainSize(stored int64, rec *objectSSE) int64 {
	if rec == nil {
		return stored
	}
	if p, err := sse.PlainSize(stored); err == nil {
		return p
	}
	return stored
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
