package s3

import (
	"context"
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
)

// Server-side encryption in the gateway. Bodies are encrypted here, before
// the object layer sees them, so every tier (the remote one included) only
// ever stores ciphertext; see package sse for the format and the key
// hierarchy. versitygw passes none of the SSE headers to the backend, so
// they are read from, and answered on, the underlying fasthttp request.

// hdrSSE is the key, in an object's or upload's stored headers, of its
// encryption record (sse.ObjectRecord).
const hdrSSE = sse.ObjectHeader

// hdrChecksumType is the stored checksum's type (FULL_OBJECT or
// COMPOSITE); the value itself is stored under x-amz-checksum-<alg>.
const hdrChecksumType = "x-amz-checksum-type"

// Request and response header names.
const (
	hSSE         = "X-Amz-Server-Side-Encryption"
	hSSEKMSKeyID = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	// SSE-C headers are these names after a prefix: hSSECPrefix for the
	// request's object, hCopySSECPrefix for a copy source.
	hSSECPrefix     = "X-Amz-"
	hCopySSECPrefix = "X-Amz-Copy-Source-"
	hSSECAlgorithm  = "Server-Side-Encryption-Customer-Algorithm"
	hSSECKey        = "Server-Side-Encryption-Customer-Key"
	hSSECKeyMD5     = "Server-Side-Encryption-Customer-Key-Md5"
)

// Encryption modes of a stored object.
const (
	modeS3 = sse.ModeS3
	modeC  = sse.ModeC
)

// objectSSE is an object's (or multipart upload's) encryption record.
type objectSSE = sse.ObjectRecord

// sseOf returns a stored encryption record (nil: not encrypted).
func sseOf(headers map[string]string) (*objectSSE, error) {
	raw, ok := headers[hdrSSE]
	if !ok {
		return nil, nil
	}
	return sse.ParseObjectRecord(raw)
}

// sseRequest is the encryption a request asks for or presents.
type sseRequest struct {
	mode        string // "", modeS3 or modeC
	customerKey []byte // SSE-C
	keyMD5      string // SSE-C, base64
}

// AWS's answers for SSE request errors.
var (
	errSSEKMSUnsupported = s3err.APIError{
		Code: "NotImplemented",
		Description: "SSE-KMS (aws:kms) is not supported: Terrace has no KMS configured. " +
			"Use SSE-S3 (x-amz-server-side-encryption: AES256) or SSE-C.",
		HTTPStatusCode: http.StatusNotImplemented,
	}
	errSSEMethod = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "The encryption method specified is not supported",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECAlgorithm = s3err.APIError{
		Code:           "InvalidEncryptionAlgorithmError",
		Description:    "The encryption request you specified is not valid. The valid value is AES256.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECNoAlgorithm = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECNoKey = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECBadKey = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "The secret key was invalid for the specified algorithm.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECNoKeyMD5 = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECKeyMD5 = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "The calculated MD5 hash of the key did not match the hash that was provided.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECWithSSE = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Server Side Encryption with Customer provided key is incompatible with the encryption method specified",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errSSECRequired: an SSE-C object read without its key.
	errSSECRequired = s3err.APIError{
		Code:           "InvalidRequest",
		Description:    "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errSSECWrongKey: an SSE-C object read with another key.
	errSSECWrongKey = s3err.APIError{
		Code:           "AccessDenied",
		Description:    "Access Denied. The SSE-C key does not match the key the object was stored with.",
		HTTPStatusCode: http.StatusForbidden,
	}
	// errSSECNotApplicable: SSE-C headers on a request for an object that
	// is not SSE-C encrypted.
	errSSECNotApplicable = s3err.APIError{
		Code:           "InvalidRequest",
		Description:    "The encryption parameters are not applicable to this object.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECPartMissing = s3err.APIError{
		Code:           "InvalidRequest",
		Description:    "The multipart upload initiate requested encryption. Subsequent part requests must include the appropriate encryption parameters.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errSSECPartMismatch = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "The provided encryption parameters did not match the ones used originally.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errSSEKMSKeyWithoutKMS: a KMS key ID without
	// x-amz-server-side-encryption: aws:kms (which is refused anyway).
	errSSEKMSKeyWithoutKMS = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errSSEPartHeader: x-amz-server-side-encryption on a part of an
	// upload that is not SSE-S3 (the upload's encryption is chosen when
	// it is created).
	errSSEPartHeader = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "x-amz-server-side-encryption header is not supported for this operation.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errSSENoMasterKey: SSE-S3 asked of a gateway started without a
	// master keyring (only possible when embedding without one).
	errSSENoMasterKey = s3err.APIError{
		Code:           "NotImplemented",
		Description:    "SSE-S3 needs a master key; this gateway was started without one.",
		HTTPStatusCode: http.StatusNotImplemented,
	}
)

// parseSSERequest reads the SSE headers of a write (prefix hSSECPrefix) or
// of a copy source (prefix hCopySSECPrefix, SSE-C only).
func parseSSERequest(ctx context.Context, prefix string) (sseRequest, error) {
	alg := requestHeader(ctx, prefix+hSSECAlgorithm)
	key := requestHeader(ctx, prefix+hSSECKey)
	keyMD5 := requestHeader(ctx, prefix+hSSECKeyMD5)
	var req sseRequest
	if prefix == hSSECPrefix {
		switch v := requestHeader(ctx, hSSE); v {
		case "":
		case "AES256":
			req.mode = modeS3
		case "aws:kms", "aws:kms:dsse":
			return sseRequest{}, errSSEKMSUnsupported
		default:
			return sseRequest{}, errSSEMethod
		}
		if requestHeader(ctx, hSSEKMSKeyID) != "" && req.mode != "" {
			// A KMS key ID only makes sense with aws:kms.
			return sseRequest{}, errSSEMethod
		}
	}
	if alg == "" && key == "" && keyMD5 == "" {
		return req, nil
	}
	if req.mode != "" {
		return sseRequest{}, errSSECWithSSE
	}
	switch {
	case alg == "":
		return sseRequest{}, errSSECNoAlgorithm
	case alg != "AES256":
		return sseRequest{}, errSSECAlgorithm
	case key == "":
		return sseRequest{}, errSSECNoKey
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != sse.KeySize {
		return sseRequest{}, errSSECBadKey
	}
	if keyMD5 == "" {
		return sseRequest{}, errSSECNoKeyMD5
	}
	sum := md5.Sum(raw)
	if got := base64.StdEncoding.EncodeToString(sum[:]); subtle.ConstantTimeCompare([]byte(got), []byte(keyMD5)) != 1 {
		return sseRequest{}, errSSECKeyMD5
	}
	return sseRequest{mode: modeC, customerKey: raw, keyMD5: keyMD5}, nil
}

// writeSSE resolves the encryption of a new object or upload: the
// request's, else the bucket's default (PutBucketEncryption).
func (b *Backend) writeSSE(ctx context.Context, bucket string) (sseRequest, error) {
	req, err := parseSSERequest(ctx, hSSECPrefix)
	if err == nil && requestHeader(ctx, hSSEKMSKeyID) != "" {
		// Not with aws:kms (refused above): the key ID would be ignored.
		return sseRequest{}, errSSEKMSKeyWithoutKMS
	}
	if err != nil || req.mode != "" {
		return req, err
	}
	def, err := b.bucketEncryption(ctx, bucket)
	if err != nil {
		return sseRequest{}, err
	}
	if def == "AES256" {
		req.mode = modeS3
	}
	return req, nil
}

// newObjectKey makes a data key for a new object and its sealed record.
func (b *Backend) newObjectKey(req sseRequest) ([]byte, *objectSSE, error) {
	dk, err := sse.NewDataKey()
	if err != nil {
		return nil, nil, err
	}
	rec := &objectSSE{Mode: req.mode}
	switch req.mode {
	case modeS3:
		if b.opts.Keys == nil {
			return nil, nil, errSSENoMasterKey
		}
		rec.Key, err = b.opts.Keys.Seal(sse.PurposeObjectKey, dk)
	case modeC:
		rec.Key, err = sse.SealWithKEK(sse.CustomerKEK(req.customerKey), sse.PurposeObjectKey, dk)
		rec.KeyMD5 = req.keyMD5
	default:
		return nil, nil, fmt.Errorf("s3: no encryption mode")
	}
	if err != nil {
		return nil, nil, err
	}
	return dk, rec, nil
}

// withSSE returns headers plus the encryption record (a new map).
func withSSE(headers map[string]string, rec *objectSSE) map[string]string {
	out := map[string]string{}
	for k, v := range headers {
		out[k] = v
	}
	if rec == nil {
		delete(out, hdrSSE)
		return out
	}
	out[hdrSSE] = rec.Encode()
	return out
}

// dataKey opens the data key of a stored record with what the request
// presents (prefix hSSECPrefix for the request's own SSE-C headers,
// hCopySSECPrefix for a copy source's). It enforces AWS's rules: an SSE-C object needs its
// key, a wrong key is AccessDenied, SSE-C headers on another object are
// refused. rec nil (not encrypted) returns nil, nil.
func (b *Backend) dataKey(ctx context.Context, rec *objectSSE, prefix string) ([]byte, error) {
	req, err := parseSSERequest(ctx, prefix)
	if prefix == hSSECPrefix && err == nil && req.mode == modeS3 {
		// x-amz-server-side-encryption has no meaning on reads; AWS
		// rejects it on GET/HEAD.
		return nil, errSSEMethod
	}
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Mode != modeC {
		if req.mode == modeC {
			return nil, errSSECNotApplicable
		}
		if rec == nil {
			return nil, nil
		}
	}
	switch rec.Mode {
	case modeS3:
		if b.opts.Keys == nil {
			return nil, errSSENoMasterKey
		}
		dk, err := b.opts.Keys.Open(sse.PurposeObjectKey, rec.Key)
		if err != nil {
			return nil, fmt.Errorf("s3: open SSE-S3 data key: %w", err)
		}
		return dk, nil
	default: // modeC
		if req.mode != modeC {
			return nil, errSSECRequired
		}
		if subtle.ConstantTimeCompare([]byte(req.keyMD5), []byte(rec.KeyMD5)) != 1 {
			return nil, errSSECWrongKey
		}
		dk, err := sse.OpenWithKEK(sse.CustomerKEK(req.customerKey), sse.PurposeObjectKey, rec.Key)
		if err != nil {
			// Same MD5, different key: practically impossible, but
			// refuse rather than decrypt garbage.
			return nil, errSSECWrongKey
		}
		return dk, nil
	}
}

// setSSEResponse sets the response headers AWS sends for an object
// stored with rec (nothing for plain objects).
func setSSEResponse(ctx context.Context, rec *objectSSE) {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil || rec == nil {
		return
	}
	switch rec.Mode {
	case modeS3:
		rc.Response.Header.Set(hSSE, "AES256")
	case modeC:
		rc.Response.Header.Set(hSSECPrefix+hSSECAlgorithm, "AES256")
		rc.Response.Header.Set(hSSECPrefix+hSSECKeyMD5, rec.KeyMD5)
	}
}

// plainView returns the object record as clients see it: plaintext size
// and part sizes for an encrypted object.
func plainView(o object.Record) (object.Record, *objectSSE, error) {
	rec, err := sseOf(o.Headers)
	if err != nil || rec == nil {
		return o, rec, err
	}
	l, err := cipherLayout(o)
	if err != nil {
		return o, rec, err
	}
	o.Size = l.Plain
	if len(o.Parts) > 0 {
		o.Parts = l.PlainSizes
	}
	return o, rec, nil
}

// cipherLayout is the stream layout of an encrypted object: one stream
// per part.
func cipherLayout(o object.Record) (sse.Layout, error) {
	streams := o.Parts
	if len(streams) == 0 {
		streams = []int64{o.Size}
	}
	l, err := sse.NewLayout(streams)
	if err != nil {
		return sse.Layout{}, fmt.Errorf("s3: encrypted object layout: %w", err)
	}
	return l, nil
}

// listSize is the size a listing reports (plaintext for encrypted
// objects; the stored size if the record cannot be interpreted).
func listSize(o object.Record) int64 {
	if v, _, err := plainView(o); err == nil {
		return v.Size
	}
	return o.Size
}

// encryptBody wraps a plaintext body for storing under dk. With etag set,
// the returned trailer records the plaintext's MD5 as the ETag (SSE-S3:
// AWS's ETag is the MD5 of the plaintext); SSE-C keeps the MD5 of the
// stored bytes, which reveals nothing about the plaintext (AWS's SSE-C
// ETags are not MD5s of the data either).
func encryptBody(body io.Reader, dk []byte, etag bool) (io.Reader, object.TrailerFunc, error) {
	var h hash.Hash
	if etag {
		h = md5.New()
		body = io.TeeReader(body, h)
	}
	enc, err := sse.NewEncrypter(dk, body)
	if err != nil {
		return nil, nil, err
	}
	if h == nil {
		return enc, nil, nil
	}
	return enc, func() (object.Trailer, error) {
		return object.Trailer{ETag: hex.EncodeToString(h.Sum(nil))}, nil
	}, nil
}

// openPlain opens plaintext bytes [off, off+n) (n > 0) of o (the record a
// head returned, stored sizes) for reading. Unencrypted objects are one
// layer read; encrypted ones read, per stream they touch, the header and
// the packages covering the range. Every read is of that record's own
// extents (object.Layer.Open), so headers and body never mix two versions
// of an overwritten object, and the key is not looked up again.
func (b *Backend) openPlain(ctx context.Context, bucket, key string, o object.Record, dk []byte, off, n int64) (io.ReadCloser, error) {
	info := object.ObjectInfo{Bucket: bucket, Key: key, Object: o}
	get := func(coff, cn int64) (io.ReadCloser, error) {
		_, rc, err := b.layer.Open(ctx, info, coff, cn)
		return rc, err
	}
	if dk == nil {
		return get(off, n)
	}
	l, err := cipherLayout(o)
	if err != nil {
		return nil, err
	}
	segs, err := l.Plan(off, n)
	if err != nil {
		return nil, err
	}
	pr := &plainReader{get: get, dk: dk, segs: segs}
	// Open the first segment now so that errors become status codes.
	if err := pr.next(); err != nil {
		return nil, err
	}
	return pr, nil
}

// plainReader decrypts the segments of a ranged read one after another.
type plainReader struct {
	get  func(off, n int64) (io.ReadCloser, error)
	dk   []byte
	segs []sse.Segment
	cur  io.Reader
	rc   io.ReadCloser
}

// next opens the next segment: one read when the span starts at the first
// package (header and packages are contiguous), else the header and the
// span separately.
func (p *plainReader) next() error {
	sg := p.segs[0]
	p.segs = p.segs[1:]
	var rc io.ReadCloser
	var header [sse.HeaderSize]byte
	var err error
	if sg.Span.CipherOff == sse.HeaderSize {
		if rc, err = p.get(sg.Base, sse.HeaderSize+sg.Span.CipherLen); err != nil {
			return err
		}
		if _, err = io.ReadFull(rc, header[:]); err != nil {
			rc.Close()
			return fmt.Errorf("s3: read stream header: %w", err)
		}
	} else {
		hr, err := p.get(sg.Base, sse.HeaderSize)
		if err != nil {
			return err
		}
		_, err = io.ReadFull(hr, header[:])
		hr.Close()
		if err != nil {
			return fmt.Errorf("s3: read stream header: %w", err)
		}
		if rc, err = p.get(sg.Base+sg.Span.CipherOff, sg.Span.CipherLen); err != nil {
			return err
		}
	}
	st, err := sse.OpenStream(p.dk, header[:])
	if err != nil {
		rc.Close()
		return err
	}
	r, err := st.NewReader(rc, sg.PlainSize, sg.Off, sg.N)
	if err != nil {
		rc.Close()
		return err
	}
	p.cur, p.rc = r, rc
	return nil
}

func (p *plainReader) Read(buf []byte) (int, error) {
	for {
		n, err := p.cur.Read(buf)
		if err != io.EOF {
			return n, err
		}
		p.rc.Close()
		p.rc = nil
		if len(p.segs) == 0 {
			return n, io.EOF
		}
		if err := p.next(); err != nil {
			return n, err
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (p *plainReader) Close() error {
	if p.rc != nil {
		return p.rc.Close()
	}
	return nil
}

// systemHeaders are the stored headers that describe the bytes rather
// than the representation (encryption record, checksums): a copy that
// shares the bytes keeps them.
func systemHeaders(h map[string]string) map[string]string {
	var out map[string]string
	for k, v := range h {
		if k == hdrSSE || strings.HasPrefix(k, "x-amz-checksum-") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// fullObjectChecksums returns the stored whole-object checksum headers
// (none if the stored checksum is composite, i.e. of parts).
func fullObjectChecksums(h map[string]string) map[string]string {
	if h[hdrChecksumType] == string(types.ChecksumTypeComposite) {
		return nil
	}
	var out map[string]string
	for k, v := range h {
		if strings.HasPrefix(k, "x-amz-checksum-") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
