package s3

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// Tests and fuzz targets for the request → object-layer translation
// helpers. Run a fuzz target with, for example:
//
//	go test ./internal/s3 -run '^$' -fuzz FuzzObjectRange -fuzztime 30s

func statusOf(err error) int {
	var se s3err.S3Error
	if errors.As(err, &se) {
		return se.StatusCode()
	}
	return 0
}

func TestObjectRange(t *testing.T) {
	for _, tc := range []struct {
		size    int64
		hdr     string
		off, n  int64
		partial bool
		status  int
	}{
		{10, "", 0, 10, false, 0},
		{10, "bytes=0-0", 0, 1, true, 0},
		{10, "bytes=0-", 0, 10, true, 0},
		{10, "bytes=9-", 9, 1, true, 0},
		{10, "bytes=-3", 7, 3, true, 0},
		{10, "bytes=-30", 0, 10, true, 0},
		{10, "bytes=2-100", 2, 8, true, 0},
		{10, "bytes=10-", 0, 0, false, 416},
		{10, "bytes=10-20", 0, 0, false, 416},
		{10, "bytes=-0", 0, 0, false, 416},
		{10, "bytes=5-2", 0, 10, false, 0},     // start > end: ignored
		{10, "bytes=0-1,4-5", 0, 10, false, 0}, // multi-range: ignored
		{10, "items=0-1", 0, 10, false, 0},
		{10, "bytes=x-1", 0, 10, false, 0},
		{0, "bytes=0-0", 0, 0, false, 416},
		{0, "bytes=-5", 0, 0, false, 0},
	} {
		off, n, partial, err := objectRange(tc.size, tc.hdr)
		if statusOf(err) != tc.status || (err == nil && (off != tc.off || n != tc.n || partial != tc.partial)) {
			t.Errorf("objectRange(%d, %q) = %d, %d, %v, %v; want %d, %d, %v, status %d",
				tc.size, tc.hdr, off, n, partial, err, tc.off, tc.n, tc.partial, tc.status)
		}
	}
}

func TestCopySourceRange(t *testing.T) {
	for _, tc := range []struct {
		size   int64
		hdr    string
		off, n int64
		ok     bool
	}{
		{10, "", 0, 10, true},
		{10, "bytes=0-9", 0, 10, true},
		{10, "bytes=3-3", 3, 1, true},
		{10, "bytes=3-", 3, 7, true},
		{10, "bytes=3-10", 0, 0, false},
		{10, "bytes=10-10", 0, 0, false},
		{10, "bytes=4-3", 0, 0, false},
		{10, "bytes=-3", 0, 0, false},
		{10, "bytes=+1-2", 0, 0, false},
		{10, "bytes=1-2-3", 0, 0, false},
		{10, "bytes 1-2", 0, 0, false},
		{0, "", 0, 0, true},
		{0, "bytes=0-0", 0, 0, false},
	} {
		off, n, err := copySourceRange(tc.size, tc.hdr)
		if (err == nil) != tc.ok || (err == nil && (off != tc.off || n != tc.n)) {
			t.Errorf("copySourceRange(%d, %q) = %d, %d, %v", tc.size, tc.hdr, off, n, err)
		}
		if err != nil && statusOf(err) != http.StatusBadRequest {
			t.Errorf("copySourceRange(%d, %q): error %v is not a 400", tc.size, tc.hdr, err)
		}
	}
}

func TestPartRange(t *testing.T) {
	parts := []int64{5, 5, 2}
	for _, tc := range []struct {
		num        int32
		off, n     int64
		count      int32
		wantStatus int
	}{
		{1, 0, 5, 3, 0}, {2, 5, 5, 3, 0}, {3, 10, 2, 3, 0}, {4, 0, 0, 3, 400}, {0, 0, 0, 3, 400},
	} {
		off, n, count, err := partRange(12, parts, tc.num)
		if statusOf(err) != tc.wantStatus || (err == nil && (off != tc.off || n != tc.n || count != tc.count)) {
			t.Errorf("part %d: %d %d %d %v", tc.num, off, n, count, err)
		}
	}
	if off, n, _, err := partRange(7, nil, 1); err != nil || off != 0 || n != 7 {
		t.Errorf("simple object part 1: %d %d %v", off, n, err)
	}
	if _, _, _, err := partRange(7, nil, 2); statusOf(err) != 400 {
		t.Errorf("simple object part 2: %v", err)
	}
}

func TestEvalPreconditions(t *testing.T) {
	mtime := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	lm := mtime.Truncate(time.Second) // what Last-Modified shows
	at := func(d time.Duration) *time.Time { v := lm.Add(d); return &v }
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		pc     preconditions
		status int
	}{
		{"none", preconditions{}, 0},
		{"match", preconditions{IfMatch: str("abc")}, 0},
		{"no match", preconditions{IfMatch: str("abd")}, 412},
		{"none-match hit", preconditions{IfNoneMatch: str("abc")}, 304},
		{"modified since last-modified", preconditions{IfModSince: at(0)}, 304},
		{"modified since before", preconditions{IfModSince: at(-time.Second)}, 0},
		{"unmodified since last-modified", preconditions{IfUnmodifiedSince: at(0)}, 0},
		{"unmodified since before", preconditions{IfUnmodifiedSince: at(-time.Second)}, 412},
		{"match wins over unmodified", preconditions{IfMatch: str("abc"), IfUnmodifiedSince: at(-time.Hour)}, 0},
	} {
		if got := statusOf(evalPreconditions("abc", mtime, tc.pc)); got != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.status)
		}
	}
}

func TestMapErr(t *testing.T) {
	b := NewBackend(srv.layer, BackendOptions{})
	for _, tc := range []struct {
		err    error
		code   string
		status int
	}{
		{object.ErrNoSuchBucket, "NoSuchBucket", 404},
		{object.ErrNoSuchKey, "NoSuchKey", 404},
		{object.ErrBucketNotEmpty, "BucketNotEmpty", 409},
		{object.ErrInvalidRange, "InvalidRange", 416},
		{object.ErrInvalidPart, "InvalidPart", 400},
		{object.ErrInvalidPartOrder, "InvalidPartOrder", 400},
		{object.ErrEntityTooSmall, "EntityTooSmall", 400},
		{object.ErrInsufficientStorage, "InsufficientStorage", 507},
		{object.ErrUnknownClass, "InvalidStorageClass", 400},
		{model.ErrInvalidVector, "InvalidStorageClass", 400},
		{object.ErrNoSuchUpload, "NoSuchUpload", 404},
		{object.ErrBadDigest, "BadDigest", 400},
		{object.ErrTooLarge, "EntityTooLarge", 400},
		{object.ErrIncompleteBody, "IncompleteBody", 400},
		{errors.New("disk on fire"), "InternalError", 500},
	} {
		wrapped := errors.Join(errors.New("context"), tc.err)
		got := b.mapErr("test", wrapped, "bkt")
		var se s3err.S3Error
		if !errors.As(got, &se) || se.BaseError().Code != tc.code || se.StatusCode() != tc.status {
			t.Errorf("%v → %v, want %s (%d)", tc.err, got, tc.code, tc.status)
		}
	}
	// s3err errors raised inside the write path pass through unchanged.
	inner := s3err.GetChecksumBadDigestErr("CRC32")
	if got := b.mapErr("test", errors.Join(errors.New("write"), inner), "bkt"); got != error(inner) {
		t.Errorf("s3err passthrough: %v", got)
	}
}

func FuzzObjectRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=-5", "bytes=5-", "bytes=3-2", "bytes=0-1,2-3", "bytes=-", "bytes=9223372036854775807-",
		"bytes=-9223372036854775808", "bytes=0-99999999999999999999", "Bytes=1-2", "bytes= 1-2"} {
		f.Add(int64(10), s)
		f.Add(int64(0), s)
	}
	f.Fuzz(func(t *testing.T, size int64, hdr string) {
		if size < 0 {
			size = -(size + 1)
		}
		off, n, partial, err := objectRange(size, hdr)
		if err != nil {
			if statusOf(err) != http.StatusRequestedRangeNotSatisfiable {
				t.Fatalf("objectRange(%d, %q): error %v is not a 416", size, hdr, err)
			}
			return
		}
		if off < 0 || n < 0 || off > size || n > size-off {
			t.Fatalf("objectRange(%d, %q) = [%d, +%d) outside the object", size, hdr, off, n)
		}
		if !partial && (off != 0 || n != size) {
			t.Fatalf("objectRange(%d, %q): full answer [%d, +%d)", size, hdr, off, n)
		}
		if partial && n == 0 {
			t.Fatalf("objectRange(%d, %q): empty partial answer", size, hdr)
		}
		if hdr == "" && partial {
			t.Fatal("no header, partial answer")
		}
	})
}

func FuzzCopySourceRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=0-", "bytes=-1", "bytes=5-4", "bytes=1-2-3", "bytes=00-01", "bytes=0-9223372036854775807"} {
		f.Add(int64(10), s)
		f.Add(int64(0), s)
	}
	f.Fuzz(func(t *testing.T, size int64, hdr string) {
		if size < 0 {
			size = -(size + 1)
		}
		off, n, err := copySourceRange(size, hdr)
		if err != nil {
			if statusOf(err) != http.StatusBadRequest {
				t.Fatalf("copySourceRange(%d, %q): error %v is not a 400", size, hdr, err)
			}
			return
		}
		if off < 0 || n < 0 || off > size || n > size-off {
			t.Fatalf("copySourceRange(%d, %q) = [%d, +%d) outside the source", size, hdr, off, n)
		}
		if hdr != "" && n == 0 {
			t.Fatalf("copySourceRange(%d, %q): empty range accepted", size, hdr)
		}
	})
}

// FuzzNames checks key and copy-source translation against the object
// layer itself: every key checkKey accepts, the layer accepts, and every key
// it refuses, it refuses with an S3 error.
func FuzzNames(f *testing.F) {
	ctx := context.Background()
	bucket := "fuzz-names"
	if err := srv.layer.CreateBucket(ctx, bucket, "", model.Vector{}); err != nil && !errors.Is(err, object.ErrBucketExists) {
		f.Fatal(err)
	}
	for _, s := range []string{"k", "a/b", "/", "a\x00b", strings.Repeat("x", 1025), "é", "%2F", "b/k?versionId=null", "b/k?versionId=3",
		"/b/a%20b", "b/", "nobucket", "b/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := checkKey(s)
		_, herr := srv.layer.Head(ctx, bucket, s)
		if err == nil && errors.Is(herr, object.ErrInvalidKey) {
			t.Fatalf("checkKey accepted %q, the layer refuses it: %v", s, herr)
		}
		if err != nil && statusOf(err) == 0 {
			t.Fatalf("checkKey(%q): %v is not an S3 error", s, err)
		}
		if err != nil && !errors.Is(herr, object.ErrInvalidKey) && s != "" {
			t.Fatalf("checkKey refused %q (%v), the layer accepts it", s, err)
		}
		sb, sk, _, err := parseCopySource(s)
		if err != nil {
			if statusOf(err) == 0 {
				t.Fatalf("parseCopySource(%q): %v is not an S3 error", s, err)
			}
			return
		}
		if sb == "" || checkKey(sk) != nil {
			t.Fatalf("parseCopySource(%q) = %q, %q", s, sb, sk)
		}
	})
}

// FuzzMetadata round-trips content headers, user metadata, tags and
// continuation tokens through their stored forms.
func FuzzMetadata(f *testing.F) {
	f.Add("text/plain", "gzip", "attachment", "en", "no-cache", "Thu, 01 Jan 2030 00:00:00 GMT", "/x", "Key", "v", "a=b&c=d")
	f.Add("", "", "", "", "", "", "", "", "", "")
	f.Add("x", "", "", "", "", "", "", "UPPER", "", "k=%zz")
	f.Add("", "", "", "", "", "", "", "a", "b", "a=1&a=2")
	f.Add("", "", "", "", "", "", "", "k", "v", "1=1&2=2&3=3&4=4&5=5&6=6&7=7&8=8&9=9&10=10&11=11")
	f.Fuzz(func(t *testing.T, ct, ce, cd, cl, cc, exp, wrl, mk, mv, tagging string) {
		ptr := func(s string) *string { return &s }
		in := contentHeaders{ptr(ct), ptr(ce), ptr(cd), ptr(cl), ptr(cc), ptr(exp), ptr(wrl)}
		m := in.toMap()
		out := contentHeadersOf(m)
		for i, f := range in.fields() {
			g := out.fields()[i]
			if (*f.val == "") != (g.val == nil) || (g.val != nil && *g.val != *f.val) {
				t.Fatalf("%s: %q became %v", f.key, *f.val, g.val)
			}
		}
		if len(m) == 0 && m != nil {
			t.Fatal("empty header map stored as non-nil")
		}
		um := userMeta(map[string]string{mk: mv})
		if mk != "" || mv != "" || um != nil {
			if um[strings.ToLower(mk)] != mv || len(um) != 1 {
				t.Fatalf("user meta %q=%q became %v", mk, mv, um)
			}
		}
		tags, err := parseTagging(tagging)
		if err != nil {
			if statusOf(err) != http.StatusBadRequest {
				t.Fatalf("parseTagging(%q): %v is not a 400", tagging, err)
			}
		} else {
			if len(tags) > maxObjectTags || (tags != nil && len(tags) == 0) {
				t.Fatalf("parseTagging(%q) = %v", tagging, tags)
			}
			if c := cloneTags(tags); !maps.Equal(c, tags) {
				t.Fatalf("cloneTags changed %v", tags)
			}
		}
		for _, key := range []string{mk, mv, tagging} {
			tok := encodeToken(key)
			back, err := decodeToken(tok)
			valid := key != "" && len(key) <= maxKeyBytes && utf8.ValidString(key)
			if valid && (err != nil || back != key) {
				t.Fatalf("token of %q decoded to %q, %v", key, back, err)
			}
			if _, err := decodeToken(key); err != nil && statusOf(err) != http.StatusBadRequest {
				t.Fatalf("decodeToken(%q): %v", key, err)
			}
		}
	})
}
