package s3

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/object"
)

// This file holds the pure request → object-layer translation helpers.
// They take and return plain values so that they can be fuzzed
// (translate_fuzz_test.go) without a server.

// maxKeyBytes is S3's object key limit (the object layer's too).
const maxKeyBytes = 1024

// maxObjectTags is S3's per-object tag limit.
const maxObjectTags = 10

// checkKey rejects keys the object layer cannot store, with the S3 error
// for each: empty → NoSuchKey (S3 has no empty keys), too long →
// KeyTooLongError, NUL → InvalidArgument. Every key it accepts the layer
// accepts.
func checkKey(key string) error {
	switch {
	case key == "":
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	case len(key) > maxKeyBytes:
		return s3err.GetKeyTooLongErr(int64(len(key)), maxKeyBytes)
	case strings.IndexByte(key, 0) >= 0:
		return errKeyHasNUL
	case !utf8.ValidString(key):
		return errKeyNotUTF8
	}
	return nil
}

// checkVersion accepts an absent version, "null", and the version IDs
// Terrace hands out (16 hex digits); anything else is a malformed ID.
func checkVersion(v *string) error {
	if v == nil || *v == "" || *v == object.NullVersion {
		return nil
	}
	if len(*v) == 16 && strings.Trim(*v, "0123456789abcdef") == "" {
		return nil
	}
	return s3err.GetInvalidArgumentErr(s3err.InvalidArgVersionId, *v)
}

// quoteETag returns the ETag as S3 sends it (quoted). Layer ETags are bare
// hex MD5s or "<hex md5 of part md5s>-N".
func quoteETag(etag string) string { return `"` + etag + `"` }

// lastModified returns an object's modification time.
func lastModified(o object.Record) time.Time { return time.Unix(0, o.Mtime).UTC() }

// className normalizes an x-amz-storage-class value. Class table names are
// upper case (object.Options.Validate), so the lookup is case-insensitive.
func className(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

// storageClass is the class reported for an object: the class it was
// written with, or STANDARD.
func storageClass(o object.Record) types.StorageClass {
	if o.Class == "" {
		return types.StorageClassStandard
	}
	return types.StorageClass(o.Class)
}

// parseCopySource splits x-amz-copy-source into bucket, key and version.
func parseCopySource(hdr string) (bucket, key, version string, err error) {
	bucket, key, version, err = backend.ParseCopySource(hdr)
	if err != nil {
		return "", "", "", err
	}
	if bucket == "" {
		return "", "", "", s3err.GetInvalidArgumentErr(s3err.InvalidArgCopySourceBucket, hdr)
	}
	if key == "" {
		return "", "", "", s3err.GetInvalidArgumentErr(s3err.InvalidArgCopySourceObject, hdr)
	}
	if err := checkVersion(&version); err != nil {
		return "", "", "", err
	}
	if err := checkKey(key); err != nil {
		return "", "", "", err
	}
	return bucket, key, version, nil
}

// objectRange translates a GET/HEAD Range header for an object of size
// bytes into [off, off+n). partial reports whether the answer is a 206 with
// Content-Range; an unparsable or multi-range header is ignored (full
// object), as S3 does. Unsatisfiable ranges are InvalidRange.
func objectRange(size int64, hdr string) (off, n int64, partial bool, err error) {
	off, n, partial, err = backend.ParseObjectRange(size, hdr)
	if err != nil {
		return 0, 0, false, err
	}
	if !partial {
		return 0, size, false, nil
	}
	// Hold versitygw's parser to the contract the layer relies on.
	if off < 0 || n <= 0 || off+n > size || off+n < off {
		return 0, 0, false, s3err.GetInvalidRangeErr(hdr, size)
	}
	return off, n, true, nil
}

// contentRange formats a Content-Range value.
func contentRange(off, n, size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size)
}

// partRange returns the bytes of part num (1-based) of an object whose
// multipart part sizes are parts (nil for a simple upload, which has the
// single part 1).
func partRange(size int64, parts []int64, num int32) (off, n int64, count int32, err error) {
	// A part number past the object's parts is 400 InvalidPart (what
	// AWS answers and conformance suites expect; versitygw's helper would
	// give 416 InvalidPartNumber).
	if len(parts) == 0 {
		if num != 1 {
			return 0, 0, 1, s3err.GetAPIError(s3err.ErrInvalidPart)
		}
		return 0, size, 1, nil
	}
	count = int32(len(parts))
	if num < 1 || num > count {
		return 0, 0, count, s3err.GetAPIError(s3err.ErrInvalidPart)
	}
	for _, p := range parts[:num-1] {
		off += p
	}
	n = parts[num-1]
	if off < 0 || n < 0 || off+n > size {
		return 0, 0, count, fmt.Errorf("s3: part table %v does not fit object size %d", parts, size)
	}
	return off, n, count, nil
}

// copySourceRange translates x-amz-copy-source-range ("bytes=first-last",
// both inclusive) for a source of size bytes into [off, off+n). An empty
// header copies the whole source. "bytes=first-" runs to the end.
func copySourceRange(size int64, hdr string) (off, n int64, err error) {
	if hdr == "" {
		return 0, size, nil
	}
	bad := s3err.GetInvalidArgumentErr(s3err.InvalidArgCopySourceRange, hdr)
	spec, ok := strings.CutPrefix(hdr, "bytes=")
	if !ok {
		return 0, 0, bad
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok || !isDigits(first) || (last != "" && !isDigits(last)) {
		return 0, 0, bad
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, 0, bad
	}
	b := size - 1
	if last != "" {
		if b, err = strconv.ParseInt(last, 10, 64); err != nil {
			return 0, 0, bad
		}
	}
	if b < a {
		return 0, 0, bad
	}
	if a >= size || b >= size {
		return 0, 0, s3err.GetInvalidArgExceedingRange(size)
	}
	return a, b - a + 1, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Keys of the content headers kept in object.Record.Headers.
const (
	hdrContentType        = "content-type"
	hdrContentEncoding    = "content-encoding"
	hdrContentDisposition = "content-disposition"
	hdrContentLanguage    = "content-language"
	hdrCacheControl       = "cache-control"
	hdrExpires            = "expires"
	hdrWebsiteRedirect    = "x-amz-website-redirect-location"
)

// contentHeaders are the stored representation headers of an object, as
// the versitygw inputs and outputs carry them (nil = absent).
type contentHeaders struct {
	ContentType, ContentEncoding, ContentDisposition, ContentLanguage *string
	CacheControl, Expires, WebsiteRedirectLocation                    *string
}

func (c contentHeaders) fields() []struct {
	key string
	val *string
} {
	return []struct {
		key string
		val *string
	}{
		{hdrContentType, c.ContentType},
		{hdrContentEncoding, c.ContentEncoding},
		{hdrContentDisposition, c.ContentDisposition},
		{hdrContentLanguage, c.ContentLanguage},
		{hdrCacheControl, c.CacheControl},
		{hdrExpires, c.Expires},
		{hdrWebsiteRedirect, c.WebsiteRedirectLocation},
	}
}

// toMap returns the headers to store: only non-empty ones, nil if none.
func (c contentHeaders) toMap() map[string]string {
	var m map[string]string
	for _, f := range c.fields() {
		if f.val == nil || *f.val == "" {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[f.key] = *f.val
	}
	return m
}

// contentHeadersOf is the inverse of toMap.
func contentHeadersOf(m map[string]string) contentHeaders {
	get := func(k string) *string {
		if v, ok := m[k]; ok && v != "" {
			return &v
		}
		return nil
	}
	return contentHeaders{
		ContentType:             get(hdrContentType),
		ContentEncoding:         get(hdrContentEncoding),
		ContentDisposition:      get(hdrContentDisposition),
		ContentLanguage:         get(hdrContentLanguage),
		CacheControl:            get(hdrCacheControl),
		Expires:                 get(hdrExpires),
		WebsiteRedirectLocation: get(hdrWebsiteRedirect),
	}
}

// userMeta returns the x-amz-meta-* map to store: keys lower-cased (S3
// metadata names are case-insensitive and versitygw already merged
// duplicates), nil if empty.
func userMeta(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		v = decodeMetaValue(v)
		lk := strings.ToLower(k)
		if prev, ok := out[lk]; ok && k != lk {
			v = prev + "," + v
		}
		out[lk] = v
	}
	return out
}

// parseTagging parses an x-amz-tagging header (URL-encoded k=v pairs).
func parseTagging(s string) (map[string]string, error) {
	tags, err := backend.ParseObjectTags(s)
	if err != nil {
		return nil, err
	}
	if len(tags) > maxObjectTags {
		return nil, s3err.GetAPIError(s3err.ErrObjectTaggingLimited)
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return tags, nil
}

// cloneTags copies a tag map (nil if empty).
func cloneTags(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// preconditions are the conditional-read headers of GET/HEAD/copy source.
type preconditions struct {
	IfMatch, IfNoneMatch          *string
	IfModSince, IfUnmodifiedSince *time.Time
}

// evalPreconditions checks conditional headers against an object. Dates
// compare at the one-second precision of Last-Modified, and
// If-Unmodified-Since is inclusive (an object last modified exactly at the
// given date is unmodified since it), as HTTP and S3 define them.
func evalPreconditions(etag string, mtime time.Time, pc preconditions) error {
	mod := mtime.Truncate(time.Second)
	var unmod *time.Time
	if pc.IfUnmodifiedSince != nil {
		// backend.EvaluatePreconditions tests date.After(mod); moving the
		// date by 1ns makes that "date >= mod".
		t := pc.IfUnmodifiedSince.Add(time.Nanosecond)
		unmod = &t
	}
	return backend.EvaluatePreconditions(etag, mod, backend.PreConditions{
		IfMatch: pc.IfMatch, IfNoneMatch: pc.IfNoneMatch, IfModSince: pc.IfModSince, IfUnmodeSince: unmod,
	})
}

// encodeToken and decodeToken make ListObjectsV2 continuation tokens
// opaque and XML-safe: the key to continue after, base64url-encoded.
func encodeToken(key string) string {
	if key == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

func decodeToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 || len(b) > maxKeyBytes || !utf8.Valid(b) {
		return "", errBadContinuationToken
	}
	return string(b), nil
}

// requestClass is the storage class of a write: the one versitygw parsed
// into the input, else the request's x-amz-storage-class header (versitygw
// passes it for CopyObject only).
func requestClass(ctx context.Context, parsed string) string {
	if c := className(parsed); c != "" {
		return c
	}
	return className(requestHeader(ctx, "X-Amz-Storage-Class"))
}

// requestHeader reads a header of the underlying HTTP request. versitygw
// passes the fasthttp request context to every backend call; the
// x-amz-storage-class of PutObject and CreateMultipartUpload reaches the
// backend only this way.
//
// For a browser-form POST upload (versitygw's POSTObject, which calls
// PutObject) it reads the form field of that name instead, as S3 does:
// the upload's settings (encryption, storage class, ACL) are form fields,
// covered by the signed policy, and its headers are signed by nothing.
func requestHeader(ctx context.Context, name string) string {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil {
		return ""
	}
	if fields, ok := postFormFields(rc); ok {
		return fields[formFieldName(name)]
	}
	return string(rc.Request.Header.Peek(name))
}

// postFormFields returns the form fields of a browser-form POST upload
// (lower-cased names, as versitygw's form parser stores them); ok is false
// for any other request.
func postFormFields(rc *fasthttp.RequestCtx) (map[string]string, bool) {
	if string(rc.Method()) != fasthttp.MethodPost {
		return nil, false
	}
	res, ok := rc.UserValue(string(utils.ContextKeyObjectPostResult)).(middlewares.PostObjectResult)
	if !ok {
		return nil, false
	}
	return res.Fields, true
}

// formFieldName is the POST form field that carries what the header name
// carries on a PUT.
func formFieldName(header string) string {
	if n := strings.ToLower(header); n != "x-amz-acl" {
		return n
	}
	return "acl"
}
