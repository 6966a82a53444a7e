package object

import (
	"context"
	"io"
	"maps"
)

// Trailer carries attributes of a write that are known only once its
// whole body has been read, for callers that transform the bytes they
// store: the S3 gateway encrypts bodies, so the MD5 of what the layer
// writes is not the ETag S3 clients expect, and checksums sent in an
// aws-chunked trailer arrive after the data.
type Trailer struct {
	// ETag, when set, is recorded instead of the MD5 of the bytes
	// written. It must be a hex MD5 (multipart ETags are computed from
	// part ETags).
	ETag string
	// Headers are added to the object's (or, for a part, the part's)
	// stored attributes.
	Headers map[string]string
}

// TrailerFunc is called after the body was read to EOF and written, and
// before the metadata commit. An error aborts the write and is returned
// as is.
type TrailerFunc func() (Trailer, error)

// applyTrailer runs fn (if any) and returns the ETag and headers to
// record.
func applyTrailer(fn TrailerFunc, etag string, headers map[string]string) (string, map[string]string, error) {
	if fn == nil {
		return etag, headers, nil
	}
	tr, err := fn()
	if err != nil {
		return "", nil, err
	}
	if tr.ETag != "" {
		etag = tr.ETag
	}
	if len(tr.Headers) > 0 {
		merged := maps.Clone(headers)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, tr.Headers)
		headers = merged
	}
	return etag, headers, nil
}

// PartOptions control UploadPartWith.
type PartOptions struct {
	// Size is the body length, or -1 to read to EOF.
	Size int64
	// ContentMD5, when set (hex), must match the MD5 of the bytes written.
	ContentMD5 string
	// Trailer, when set, supplies the part's ETag and attributes after
	// the body was read (see Trailer).
	Trailer TrailerFunc
}

// UploadPartWith is UploadPart with options.
func (l *Layer) UploadPartWith(ctx context.Context, bucket, uploadID string, num int, body io.Reader, opts PartOptions) (PartInfo, error) {
	return l.uploadPart(ctx, bucket, uploadID, num, body, opts)
}

// CompleteOptions control CompleteUploadWith.
type CompleteOptions struct {
	// Precondition makes the completion conditional (see Precondition).
	Precondition Precondition
	// Headers are added to the object's stored headers: attributes known
	// only once the parts are chosen (the gateway's multipart checksum).
	Headers map[string]string
}

// CompleteUploadWith is CompleteUpload with options.
func (l *Layer) CompleteUploadWith(ctx context.Context, bucket, uploadID string, parts []CompletePart, opts CompleteOptions) (ObjectInfo, error) {
	return l.completeUpload(ctx, bucket, uploadID, parts, opts)
}
