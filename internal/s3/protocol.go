package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/object"
)

// Protocol details versitygw leaves to the backend or gets wrong, each
// fixed here in the thinnest place. (Tests: protocol_test.go.)

var bucketNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// validBucketName applies AWS's general-purpose bucket naming rules.
// versitygw's check misses adjacent periods and period-hyphen pairs
// ("foo..bar", "foo.-bar", "foo-.bar") and the reserved prefixes and
// suffixes.
func validBucketName(name string) bool {
	if !bucketNameRe.MatchString(name) || net.ParseIP(name) != nil {
		return false
	}
	if strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return false
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// urlEncode is S3's EncodingType=url: every byte but unreserved characters
// and '/' percent-encoded (a space is %20, '+' is %2B).
func urlEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// listEncoding reads encoding-type, which versitygw does not pass on:
// "url" or none; anything else is AWS's InvalidArgument.
func listEncoding(ctx context.Context) (bool, error) {
	switch v := requestQuery(ctx, "encoding-type"); v {
	case "":
		return false, nil
	case "url":
		return true, nil
	default:
		return false, s3err.APIError{Code: "InvalidArgument", Description: "Invalid Encoding Method specified in Request", HTTPStatusCode: 400}
	}
}

// requestQuery returns a query parameter of the underlying request.
func requestQuery(ctx context.Context, name string) string {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil {
		return ""
	}
	return string(rc.QueryArgs().Peek(name))
}

// hasQuery reports whether the underlying request has a query parameter
// (even an empty one).
func hasQuery(ctx context.Context, name string) bool {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	return ok && rc != nil && rc.QueryArgs().Has(name)
}

// encodePtr URL-encodes a response field in place when enc is set.
func encodePtr(enc bool, p *string) *string {
	if !enc || p == nil {
		return p
	}
	v := urlEncode(*p)
	return &v
}

// setNotModifiedHeaders adds ETag and Last-Modified to a 304 answer, as
// HTTP requires and AWS does (versitygw sends none).
func setNotModifiedHeaders(ctx context.Context, err error, etag string, mtime time.Time) {
	if apiErr, ok := err.(s3err.APIError); !ok || apiErr.HTTPStatusCode != 304 {
		return
	}
	setResponseHeader(ctx, "ETag", etag)
	setResponseHeader(ctx, "Last-Modified", mtime.UTC().Format(time.RFC1123[:len(time.RFC1123)-3]+"GMT"))
}

// putPrecondition turns If-Match / If-None-Match of a write into an
// object-layer precondition, which the layer checks before writing and
// again atomically with the commit (nil when neither header is set).
// If-None-Match with ETags follows HTTP (refused when the object's ETag is
// listed) where versitygw answers NotImplemented.
func putPrecondition(ifMatch, ifNoneMatch *string) object.Precondition {
	if ifMatch == nil && ifNoneMatch == nil {
		return nil
	}
	return func(etag string, exists bool) error {
		if ifNoneMatch != nil && strings.TrimSpace(*ifNoneMatch) != "*" {
			if exists && etagListed(*ifNoneMatch, etag) {
				return s3err.GetAPIError(s3err.ErrPreconditionFailed)
			}
			if ifMatch == nil {
				return nil
			}
			return backend.EvaluateObjectPutPreconditions(etag, ifMatch, nil, exists)
		}
		return backend.EvaluateObjectPutPreconditions(etag, ifMatch, ifNoneMatch, exists)
	}
}

// etagListed reports whether an If-(None-)Match list names etag.
func etagListed(list, etag string) bool {
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimPrefix(strings.TrimSpace(e), "W/")
		if strings.Trim(e, `"`) == etag {
			return true
		}
	}
	return false
}

// multipartETagOf is S3's ETag of a multipart object made of parts with
// these ETags ("" if one is not an MD5).
func multipartETagOf(etags []string) string {
	h := md5.New()
	for _, e := range etags {
		raw, err := hex.DecodeString(strings.Trim(e, `"`))
		if err != nil || len(raw) != md5.Size {
			return ""
		}
		h.Write(raw)
	}
	return fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(etags))
}

// encodeMetaValue returns a user-metadata value as it goes on the wire:
// non-ASCII values as RFC 2047 encoded words, as AWS sends them (raw UTF-8
// in a header is not portable across HTTP clients).
func encodeMetaValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] >= utf8.RuneSelf || v[i] < 0x20 {
			return mime.BEncoding.Encode("UTF-8", v)
		}
	}
	return v
}

// decodeMetaValue decodes RFC 2047 encoded words a client sent (so that
// metadata round-trips through clients that encode it themselves).
func decodeMetaValue(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		return v
	}
	return d
}

// responseMeta is the user metadata as sent in a response.
func responseMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = encodeMetaValue(v)
	}
	return out
}
