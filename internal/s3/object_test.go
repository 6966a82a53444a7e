package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestPutGetRangeHead(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	// Sizes around the 4 MiB extent boundary and the empty object.
	for i, size := range []int{0, 1, 4096, 4<<20 - 1, 4 << 20, 9<<20 + 3} {
		key := fmt.Sprintf("dir/obj-%d", size)
		data := randBytes(uint64(i), size)
		out := put(t, c, b, key, data)
		if want := `"` + md5hex(data) + `"`; *out.ETag != want {
			t.Fatalf("%s: put etag %s, want %s", key, *out.ETag, want)
		}
		got, gout := get(t, c, b, key)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: get returned %d bytes differing from the %d put", key, len(got), len(data))
		}
		if *gout.ETag != *out.ETag || *gout.ContentLength != int64(size) || gout.StorageClass != "" && gout.StorageClass != types.StorageClassStandard {
			t.Fatalf("%s: get etag %s length %d class %q", key, *gout.ETag, *gout.ContentLength, gout.StorageClass)
		}
		if size == 0 {
			continue
		}
		n := int64(size)
		for _, rc := range []struct {
			hdr      string
			off, end int64 // inclusive end
		}{
			{"bytes=0-0", 0, 0},
			{"bytes=0-", 0, n - 1},
			{fmt.Sprintf("bytes=%d-", n-1), n - 1, n - 1},
			{"bytes=-1", n - 1, n - 1},
			{fmt.Sprintf("bytes=-%d", n+10), 0, n - 1},
			{fmt.Sprintf("bytes=%d-%d", n/3, n/2), n / 3, n / 2},
			{fmt.Sprintf("bytes=1-%d", n+100), min(1, n-1), n - 1},
		} {
			if rc.hdr == "bytes=1-"+fmt.Sprint(n+100) && n == 1 {
				continue
			}
			got, gout := get(t, c, b, key, func(in *s3.GetObjectInput) { in.Range = aws.String(rc.hdr) })
			if !bytes.Equal(got, data[rc.off:rc.end+1]) {
				t.Fatalf("%s %s: got %d bytes, want [%d, %d]", key, rc.hdr, len(got), rc.off, rc.end)
			}
			if want := fmt.Sprintf("bytes %d-%d/%d", rc.off, rc.end, n); aws.ToString(gout.ContentRange) != want {
				t.Fatalf("%s %s: content-range %q, want %q", key, rc.hdr, aws.ToString(gout.ContentRange), want)
			}
		}
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: &key, Range: aws.String(fmt.Sprintf("bytes=%d-", n))})
		wantErr(t, key+" range past end", err, "InvalidRange", 416)

		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		if *h.ContentLength != n || *h.ETag != *out.ETag || h.LastModified == nil {
			t.Fatalf("%s: head %+v", key, h)
		}
	}
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("nope")})
	wantErr(t, "get missing", err, "NoSuchKey", 404)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("nope")})
	wantErr(t, "head missing", err, "NotFound", 404)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("no-such-bucket-x"), Key: aws.String("k")})
	wantErr(t, "get from missing bucket", err, "NoSuchBucket", 404)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String(strings.Repeat("k", 1025)), Body: strings.NewReader("x")})
	wantErr(t, "key too long", err, "KeyTooLongError", 400)
}

func TestContentHeadersAndUserMetadata(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	exp := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	put(t, c, b, "page.html.gz", []byte("<html>"), func(in *s3.PutObjectInput) {
		in.ContentType = aws.String("text/html; charset=utf-8")
		in.ContentEncoding = aws.String("gzip")
		in.ContentDisposition = aws.String(`attachment; filename="p.html"`)
		in.ContentLanguage = aws.String("en-GB")
		in.CacheControl = aws.String("max-age=60")
		in.Expires = &exp
		in.Metadata = map[string]string{"Owner": "ops", "purpose": "test value"}
	})
	_, out := get(t, c, b, "page.html.gz")
	for name, pair := range map[string][2]string{
		"content-type":        {aws.ToString(out.ContentType), "text/html; charset=utf-8"},
		"content-encoding":    {aws.ToString(out.ContentEncoding), "gzip"},
		"content-disposition": {aws.ToString(out.ContentDisposition), `attachment; filename="p.html"`},
		"content-language":    {aws.ToString(out.ContentLanguage), "en-GB"},
		"cache-control":       {aws.ToString(out.CacheControl), "max-age=60"},
		"meta owner":          {out.Metadata["owner"], "ops"},
		"meta purpose":        {out.Metadata["purpose"], "test value"},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: got %q, want %q", name, pair[0], pair[1])
		}
	}
	if out.ExpiresString == nil || !strings.Contains(*out.ExpiresString, "2031") {
		t.Errorf("expires %v", aws.ToString(out.ExpiresString))
	}
}

func TestConditionalRequests(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	out := put(t, c, b, "k", []byte("conditional"))
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	lm := *h.LastModified
	etag := *out.ETag
	type cond func(*s3.GetObjectInput)
	for _, tc := range []struct {
		name   string
		set    cond
		status int // 0: success
	}{
		{"if-match ok", func(in *s3.GetObjectInput) { in.IfMatch = &etag }, 0},
		{"if-match star", func(in *s3.GetObjectInput) { in.IfMatch = aws.String("*") }, 0},
		{"if-match wrong", func(in *s3.GetObjectInput) { in.IfMatch = aws.String(`"0123"`) }, 412},
		{"if-none-match same", func(in *s3.GetObjectInput) { in.IfNoneMatch = &etag }, 304},
		{"if-none-match other", func(in *s3.GetObjectInput) { in.IfNoneMatch = aws.String(`"0123"`) }, 0},
		{"if-modified-since last-modified", func(in *s3.GetObjectInput) { in.IfModifiedSince = aws.Time(lm) }, 304},
		{"if-modified-since earlier", func(in *s3.GetObjectInput) { in.IfModifiedSince = aws.Time(lm.Add(-time.Hour)) }, 0},
		{"if-unmodified-since last-modified", func(in *s3.GetObjectInput) { in.IfUnmodifiedSince = aws.Time(lm) }, 0},
		{"if-unmodified-since earlier", func(in *s3.GetObjectInput) { in.IfUnmodifiedSince = aws.Time(lm.Add(-time.Hour)) }, 412},
	} {
		in := &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")}
		tc.set(in)
		res, err := c.GetObject(ctx, in)
		if tc.status == 0 {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			res.Body.Close()
			continue
		}
		if _, status := apiErr(err); status != tc.status {
			t.Fatalf("%s: got %v (status %d), want status %d", tc.name, err, status, tc.status)
		}
	}
	// Conditional PUT: create-only.
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("y"), IfNoneMatch: aws.String("*")})
	wantErr(t, "if-none-match put on existing", err, "PreconditionFailed", 412)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("new"), Body: strings.NewReader("y"), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatalf("if-none-match put on new key: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("y"), IfMatch: aws.String(`"0123"`)})
	wantErr(t, "if-match put with stale etag", err, "PreconditionFailed", 412)

	// Racing create-only writers: exactly one wins, every other one is
	// refused, and the object holds the winner's bytes.
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("race"),
				Body: strings.NewReader(fmt.Sprintf("writer %d", i)), IfNoneMatch: aws.String("*")})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("writers %d and %d both created the object", winner, i)
			}
			winner = i
			continue
		}
		if _, status := apiErr(err); status != 412 && status != 409 {
			t.Fatalf("losing writer %d: %v (status %d), want 412 or 409", i, err, status)
		}
	}
	if winner < 0 {
		t.Fatal("no create-only writer succeeded")
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("race")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(body) != fmt.Sprintf("writer %d", winner) {
		t.Fatalf("object holds %q, the winner was writer %d", body, winner)
	}
}

func TestDeleteAndDeleteObjects(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	var ids []types.ObjectIdentifier
	for i := range 5 {
		k := fmt.Sprintf("d/%d", i)
		put(t, c, b, k, []byte(k))
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
	}
	ids = append(ids, types.ObjectIdentifier{Key: aws.String("never-existed")})
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("missing")}); err != nil {
		t.Fatalf("deleting a missing key must succeed: %v", err)
	}
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &b, Delete: &types.Delete{Objects: ids}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 6 || len(out.Errors) != 0 {
		t.Fatalf("deleted %d, errors %+v", len(out.Deleted), out.Errors)
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	if err != nil || len(l.Contents) != 0 {
		t.Fatalf("after delete-multiple: %d objects, %v", len(l.Contents), err)
	}
	_, err = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("no-such-bucket-y"), Delete: &types.Delete{Objects: ids[:1]}})
	wantErr(t, "delete-multiple in missing bucket", err, "NoSuchBucket", 404)
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	b2 := newBucket(t, c)
	data := randBytes(9, 5<<20+17)
	src := put(t, c, b, "src", data, func(in *s3.PutObjectInput) {
		in.ContentType = aws.String("image/png")
		in.Metadata = map[string]string{"a": "1"}
		in.Tagging = aws.String("k1=v1&k2=v2")
	})

	// COPY (default): attributes and tags follow the source.
	co, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b2, Key: aws.String("copy"), CopySource: aws.String(b + "/src")})
	if err != nil {
		t.Fatal(err)
	}
	if *co.CopyObjectResult.ETag != *src.ETag {
		t.Fatalf("copy etag %s, source %s", *co.CopyObjectResult.ETag, *src.ETag)
	}
	got, out := get(t, c, b2, "copy")
	if !bytes.Equal(got, data) || aws.ToString(out.ContentType) != "image/png" || out.Metadata["a"] != "1" || aws.ToInt32(out.TagCount) != 2 {
		t.Fatalf("COPY: %d bytes, type %q, meta %v, tags %d", len(got), aws.ToString(out.ContentType), out.Metadata, aws.ToInt32(out.TagCount))
	}

	// REPLACE: the request's attributes; tagging directive REPLACE.
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: &b2, Key: aws.String("replaced"), CopySource: aws.String(b + "/src"),
		MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("text/plain"),
		Metadata:         map[string]string{"b": "2"},
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("only=one"),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, out = get(t, c, b2, "replaced")
	if aws.ToString(out.ContentType) != "text/plain" || out.Metadata["b"] != "2" || out.Metadata["a"] != "" || aws.ToInt32(out.TagCount) != 1 {
		t.Fatalf("REPLACE: type %q meta %v tags %d", aws.ToString(out.ContentType), out.Metadata, aws.ToInt32(out.TagCount))
	}
	tg, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &b2, Key: aws.String("replaced")})
	if err != nil || len(tg.TagSet) != 1 || *tg.TagSet[0].Key != "only" {
		t.Fatalf("replaced tags %+v %v", tg, err)
	}

	// Copy onto itself needs a change.
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("src"), CopySource: aws.String(b + "/src")})
	wantErr(t, "self copy without change", err, "InvalidRequest", 400)
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: &b, Key: aws.String("src"), CopySource: aws.String(b + "/src"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"c": "3"},
	}); err != nil {
		t.Fatalf("self copy with REPLACE: %v", err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("src")})
	if err != nil || h.Metadata["c"] != "3" || *h.ETag != *src.ETag {
		t.Fatalf("after self copy: %+v %v", h, err)
	}

	// Source preconditions and errors. Keys with spaces and unicode must
	// survive the copy-source encoding.
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b2, Key: aws.String("x"), CopySource: aws.String(b + "/src"), CopySourceIfMatch: aws.String(`"00"`)})
	wantErr(t, "copy-source-if-match", err, "PreconditionFailed", 412)
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b2, Key: aws.String("x"), CopySource: aws.String(b + "/missing")})
	wantErr(t, "copy missing source", err, "NoSuchKey", 404)
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("no-such-bucket-z"), Key: aws.String("x"), CopySource: aws.String(b + "/src")})
	wantErr(t, "copy to missing bucket", err, "NoSuchBucket", 404)
	odd := "dir with space/ünïcode+plus&amp.txt"
	put(t, c, b, odd, []byte("odd"))
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b2, Key: aws.String(odd), CopySource: aws.String(b + "/" + urlPathEscape(odd))}); err != nil {
		t.Fatalf("copy odd key: %v", err)
	}
	if got, _ := get(t, c, b2, odd); string(got) != "odd" {
		t.Fatalf("odd copy %q", got)
	}
}

// urlPathEscape escapes a key for x-amz-copy-source as SDKs do.
func urlPathEscape(k string) string {
	var sb strings.Builder
	for _, r := range []byte(k) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.IndexByte("-_.~/", r) >= 0:
			sb.WriteByte(r)
		default:
			fmt.Fprintf(&sb, "%%%02X", r)
		}
	}
	return sb.String()
}

func TestObjectTagging(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "k", []byte("x"), func(in *s3.PutObjectInput) { in.Tagging = aws.String("env=prod&team=a%20b") })
	tg, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, x := range tg.TagSet {
		m[*x.Key] = *x.Value
	}
	if len(m) != 2 || m["env"] != "prod" || m["team"] != "a b" {
		t.Fatalf("tags %v", m)
	}
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: &b, Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("x"), Value: aws.String("y")}}}}); err != nil {
		t.Fatal(err)
	}
	_, out := get(t, c, b, "k")
	if aws.ToInt32(out.TagCount) != 1 {
		t.Fatalf("tag count %d", aws.ToInt32(out.TagCount))
	}
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: &b, Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	tg, err = c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &b, Key: aws.String("k")})
	if err != nil || len(tg.TagSet) != 0 {
		t.Fatalf("after delete: %+v %v", tg, err)
	}
	_, err = c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &b, Key: aws.String("missing")})
	wantErr(t, "tags of missing key", err, "NoSuchKey", 404)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("bad"), Body: strings.NewReader("x"), Tagging: aws.String("a=<b>")})
	wantErr(t, "invalid tag", err, "InvalidTag", 400)
}

func TestChecksumsVerified(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	// The SDK computes and sends a CRC32 the backend must verify.
	for _, algo := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmSha256} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String(string(algo)), Body: bytes.NewReader(randBytes(3, 70000)), ChecksumAlgorithm: algo}); err != nil {
			t.Fatalf("%s: %v", algo, err)
		}
	}
	// A wrong checksum header is rejected and nothing is stored.
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("bad"), Body: strings.NewReader("hello"), ChecksumCRC32: aws.String("AAAAAA==")})
	wantErr(t, "bad crc32", err, "BadDigest", 400)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("bad")})
	wantErr(t, "head after bad digest", err, "NotFound", 404)
	// Content-MD5 mismatch (verified by versitygw, rejected before commit).
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("bad"), Body: strings.NewReader("hello"), ContentMD5: aws.String("AAAAAAAAAAAAAAAAAAAAAA==")})
	wantErr(t, "bad content-md5", err, "BadDigest", 400)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("bad")})
	wantErr(t, "head after bad md5", err, "NotFound", 404)
}

func TestGetObjectAttributes(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(4, 1000)
	put(t, c, b, "k", data)
	a, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: &b, Key: aws.String("k"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectSize, types.ObjectAttributesStorageClass}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(a.ETag) != md5hex(data) || aws.ToInt64(a.ObjectSize) != 1000 || a.StorageClass != types.StorageClassStandard {
		t.Fatalf("attributes %+v", a)
	}
}

// TestRawRequests sends unsigned and malformed requests: they must be
// refused with S3 errors, never crash the server.
func TestRawRequests(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "k", []byte("x"))
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/" + b + "/k", ""},
		{"PUT", "/" + b + "/k", "data"},
		{"GET", "/" + b + "?list-type=2&max-keys=-1", ""},
		{"POST", "/" + b + "?delete", "<Delete><Object><Key>k</Key></Object>"},
		{"GET", "/%ff%fe/k", ""},
		{"PUT", "/" + b + "/k?partNumber=0&uploadId=zz", "x"},
	} {
		req, _ := http.NewRequest(r.method, srv.url+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("%s %s: status %d: %s", r.method, r.path, resp.StatusCode, body)
		}
	}
	// Still serving.
	if got, _ := get(t, c, b, "k"); string(got) != "x" {
		t.Fatalf("after raw requests: %q", got)
	}
}
