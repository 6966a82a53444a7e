package s3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Protocol details clients trip on; each test names the AWS behaviour.

func TestBucketNameRules(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	for _, name := range []string{"foo..bar", "foo.-bar", "foo-.bar", "-foo", "foo-", "Foo", "ab", strings.Repeat("a", 64),
		"192.168.1.1", "xn--foo", "sthree-foo", "foo-s3alias", "foo--ol-s3", "foo_bar", "foo.mrap", "amzn-s3-demo-x", "foo--table-s3"} {
		// ("--x-s3" is refused too; the SDK routes such names to S3 Express.)
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		wantErr(t, "create "+name, err, "InvalidBucketName", 400)
	}
	for _, name := range []string{"foo.bar", "a-b-c", "abc", strings.Repeat("a", 63), "1.2.3.x"} {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
}

type listV2 struct {
	Prefix                string
	Delimiter             string
	StartAfter            string
	EncodingType          string
	ContinuationToken     *string
	NextContinuationToken string
	Contents              []struct{ Key string }
	CommonPrefixes        []struct{ Prefix string }
	IsTruncated           bool
}

type listV1 struct {
	Marker, NextMarker, Prefix, Delimiter, EncodingType string
	Contents                                            []struct{ Key string }
	CommonPrefixes                                      []struct{ Prefix string }
}

func TestListEncodingTypeURL(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	for _, k := range []string{"foo+1/bar", "foo/bar/xyzzy", "quux ab/thud", "asdf+b", "ü/x", "a%b"} {
		put(t, c, b, k, []byte("x"))
	}
	st, body, _ := signed(t, testUser, testSecret, http.MethodGet, "/"+b+"?list-type=2&delimiter=%2F&encoding-type=url", nil, nil)
	if st != 200 {
		t.Fatalf("list v2: %d %s", st, body)
	}
	var r listV2
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var keys, prefixes []string
	for _, k := range r.Contents {
		keys = append(keys, k.Key)
	}
	for _, p := range r.CommonPrefixes {
		prefixes = append(prefixes, p.Prefix)
	}
	if got, want := strings.Join(prefixes, " "), "foo%2B1/ foo/ quux%20ab/ %C3%BC/"; got != want {
		t.Fatalf("encoded prefixes %q, want %q", got, want)
	}
	if got, want := strings.Join(keys, " "), "a%25b asdf%2Bb"; got != want {
		t.Fatalf("encoded keys %q, want %q", got, want)
	}
	if r.EncodingType != "url" || r.Delimiter != "/" {
		t.Fatalf("encoding type %q delimiter %q", r.EncodingType, r.Delimiter)
	}
	// v1 too, markers included.
	st, body, _ = signed(t, testUser, testSecret, http.MethodGet, "/"+b+"?encoding-type=url&marker=a%25b&max-keys=1", nil, nil)
	var r1 listV1
	if err := xml.Unmarshal(body, &r1); err != nil || st != 200 {
		t.Fatalf("list v1: %d %v", st, err)
	}
	if r1.Marker != "a%25b" || len(r1.Contents) != 1 || r1.Contents[0].Key != "asdf%2Bb" || r1.NextMarker != "asdf%2Bb" || r1.EncodingType != "url" {
		t.Fatalf("v1 encoded: %+v", r1)
	}
	// Through the SDK (aws-sdk-go-v2 leaves decoding to the caller; boto3
	// decodes itself).
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &b, EncodingType: types.EncodingTypeUrl, Prefix: aws.String("quux ")})
	if err != nil || len(out.Contents) != 1 {
		t.Fatalf("sdk list: %v %+v", err, out)
	}
	if k, err := url.PathUnescape(*out.Contents[0].Key); err != nil || k != "quux ab/thud" || *out.Contents[0].Key != "quux%20ab/thud" {
		t.Fatalf("sdk key %q", *out.Contents[0].Key)
	}
	st, _, _ = signed(t, testUser, testSecret, http.MethodGet, "/"+b+"?list-type=2&encoding-type=base64", nil, nil)
	if st != 400 {
		t.Fatalf("unknown encoding type: %d", st)
	}
}

func TestListV2EmptyContinuationToken(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	for _, k := range []string{"bar", "baz", "foo", "quxx"} {
		put(t, c, b, k, []byte("x"))
	}
	st, body, _ := signed(t, testUser, testSecret, http.MethodGet, "/"+b+"?list-type=2&continuation-token=", nil, nil)
	if st != 200 {
		t.Fatalf("empty continuation token: %d %s", st, body)
	}
	var r listV2
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.ContinuationToken == nil || *r.ContinuationToken != "" || r.IsTruncated || len(r.Contents) != 4 {
		t.Fatalf("empty token answer: %s", body)
	}
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &b, ContinuationToken: aws.String("")})
	if err != nil || aws.ToString(out.ContinuationToken) != "" || len(out.Contents) != 4 {
		t.Fatalf("sdk with empty token: %v %+v", err, out)
	}
	st, _, _ = signed(t, testUser, testSecret, http.MethodGet, "/"+b+"?list-type=2&continuation-token=%21%21", nil, nil)
	if st != 400 {
		t.Fatalf("garbage token: %d", st)
	}
}

func TestNotModifiedCarriesETag(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	out := put(t, c, b, "k", []byte("hello"))
	h, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		st, _, hd := signed(t, testUser, testSecret, method, "/"+b+"/k", nil, map[string]string{"If-None-Match": *out.ETag})
		if st != http.StatusNotModified || hd.Get("ETag") != *out.ETag || hd.Get("Last-Modified") == "" {
			t.Fatalf("%s If-None-Match: %d etag %q last-modified %q", method, st, hd.Get("ETag"), hd.Get("Last-Modified"))
		}
		st, _, hd = signed(t, testUser, testSecret, method, "/"+b+"/k", nil, map[string]string{"If-Modified-Since": h.LastModified.UTC().Format(http.TimeFormat)})
		if st != http.StatusNotModified || hd.Get("ETag") != *out.ETag {
			t.Fatalf("%s If-Modified-Since: %d etag %q", method, st, hd.Get("ETag"))
		}
	}
}

func TestIfNoneMatchETagOnWrites(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	first := put(t, c, b, "k", []byte("v1"))
	// If-None-Match with the current ETag refuses; with another ETag the
	// write goes ahead (HTTP semantics).
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("v2"), IfNoneMatch: first.ETag})
	wantErr(t, "If-None-Match current etag", err, "PreconditionFailed", 412)
	second, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("v2"), IfNoneMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
	if err != nil {
		t.Fatalf("If-None-Match other etag: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("v3"), IfNoneMatch: aws.String(`"x", ` + *second.ETag)})
	wantErr(t, "If-None-Match list with the etag", err, "PreconditionFailed", 412)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("new"), Body: strings.NewReader("v"), IfNoneMatch: first.ETag}); err != nil {
		t.Fatalf("If-None-Match etag on a missing key: %v", err)
	}
	// CompleteMultipartUpload likewise.
	id := startUpload(t, c, b, "k")
	p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("k"), UploadId: &id, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	mp := &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("k"), UploadId: &id, MultipartUpload: mp, IfNoneMatch: second.ETag})
	wantErr(t, "complete If-None-Match current etag", err, "PreconditionFailed", 412)
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("k"), UploadId: &id, MultipartUpload: mp, IfNoneMatch: first.ETag}); err != nil {
		t.Fatalf("complete If-None-Match old etag: %v", err)
	}
}

func TestCompleteMultipartIdempotent(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	id := startUpload(t, c, b, "k")
	p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("k"), UploadId: &id, PartNumber: aws.Int32(1), Body: strings.NewReader("only part")})
	if err != nil {
		t.Fatal(err)
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("k"), UploadId: &id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}
	first, err := c.CompleteMultipartUpload(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// A retried completion (its answer was lost) answers the same.
	again, err := c.CompleteMultipartUpload(ctx, in)
	if err != nil || *again.ETag != *first.ETag {
		t.Fatalf("second complete: %v", err)
	}
	// Once the object changed, the upload is gone for good.
	put(t, c, b, "k", []byte("overwritten"))
	_, err = c.CompleteMultipartUpload(ctx, in)
	wantErr(t, "complete after overwrite", err, "NoSuchUpload", 404)
}

func TestPartNumberOutOfRange(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "simple", []byte("x"))
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("simple"), PartNumber: aws.Int32(2)})
	wantErr(t, "part 2 of a simple object", err, "InvalidPart", 400)
	mpUpload(t, c, b, "mp", [][]byte{randBytes(1, 5<<20), randBytes(2, 10)}, nil, nil)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("mp"), PartNumber: aws.Int32(3)})
	wantErr(t, "part 3 of 2", err, "InvalidPart", 400)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("mp"), PartNumber: aws.Int32(3)})
	wantErr(t, "head part 3 of 2", err, "", 400)
}

func TestNonASCIIUserMetadata(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	meta := map[string]string{"city": "Zürich", "greeting": "こんにちは", "plain": "ascii"}
	put(t, c, b, "k", []byte("x"), func(in *s3.PutObjectInput) { in.Metadata = meta })
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range meta {
		if got := decodeMIMEHeader(h.Metadata[k]); got != v {
			t.Fatalf("metadata %s: got %q (raw %q), want %q", k, got, h.Metadata[k], v)
		}
	}
	// On the wire non-ASCII values are RFC 2047 encoded words, as AWS
	// sends them, so every HTTP client can carry them.
	_, _, hdr := signed(t, testUser, testSecret, http.MethodHead, "/"+b+"/k", nil, nil)
	if v := hdr.Get("X-Amz-Meta-City"); !strings.HasPrefix(v, "=?UTF-8?") {
		t.Fatalf("raw non-ASCII metadata header %q", v)
	}
	if v := hdr.Get("X-Amz-Meta-Plain"); v != "ascii" {
		t.Fatalf("ASCII metadata %q", v)
	}
}

// TestChunkedUploadWithoutLength sends PutObject with Transfer-Encoding:
// chunked and no Content-Length (what streaming clients do when they do
// not know the size).
func TestChunkedUploadWithoutLength(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(77, 3<<20+5)
	req, err := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/streamed", io.NopCloser(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked
	sum := sha256.Sum256(data)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testUser, SecretAccessKey: testSecret}, req, payload, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.TransferEncoding) != 0 && resp.StatusCode != 200 {
		t.Fatalf("chunked put: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("ETag") != `"`+md5hex(data)+`"` {
		t.Fatalf("chunked put etag %q", resp.Header.Get("ETag"))
	}
	got, _ := get(t, c, b, "streamed")
	if !bytes.Equal(got, data) {
		t.Fatal("chunked upload stored wrong bytes")
	}
	// A payload hash that does not match the chunked body is refused.
	req, _ = http.NewRequest(http.MethodPut, srv.url+"/"+b+"/bad", io.NopCloser(bytes.NewReader(data[:100])))
	req.ContentLength = -1
	req.Header.Set("X-Amz-Content-Sha256", payload)
	_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testUser, SecretAccessKey: testSecret}, req, payload, "s3", "us-east-1", time.Now())
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("chunked put with a wrong payload hash: %d", resp.StatusCode)
	}
}

// patternReader yields limit bytes of 'x' and counts what was read.
type patternReader struct {
	n, limit atomic.Int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	n, limit := r.n.Load(), r.limit.Load()
	if n >= limit {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), limit-n)]
	for i := range p {
		p[i] = 'x'
	}
	r.n.Add(int64(len(p)))
	return len(p), nil
}

// TestChunkedUploadAuthorizedBeforeSpool pins that a chunked upload
// without Content-Length is not spooled before it is known to be allowed:
// a bad signature is answered before the body is read, and so is an
// anonymous upload to a bucket that does not let anyone write; an
// anonymous upload to a bucket that does is spooled and stored.
func TestChunkedUploadAuthorizedBeforeSpool(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	const size = 96 << 20
	send := func(key string, sign func(*http.Request)) (int, int64) {
		t.Helper()
		r := &patternReader{}
		r.limit.Store(size)
		req, err := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/"+key, r)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // chunked
		if sign != nil {
			sign(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, r.n.Load() // cut off while sending: fine, if early
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, r.n.Load()
	}
	badSig := func(req *http.Request) {
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		_ = v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: testUser, SecretAccessKey: "wrong-secret"}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	}
	// A refused request's body is drained up to maxDrainBytes; whatever
	// more the client sent sits in socket buffers.
	const early = maxDrainBytes + 16<<20
	for _, tc := range []struct {
		what string
		sign func(*http.Request)
	}{{"bad signature", badSig}, {"anonymous, private bucket", nil}} {
		st, sent := send("refused", tc.sign)
		if (st != 0 && st != 403) || sent > early {
			t.Errorf("%s: status %d after the client sent %d MiB of %d", tc.what, st, sent>>20, size>>20)
		}
	}
	if _, err := srv.layer.Head(ctx, b, "refused"); err == nil {
		t.Fatal("a refused chunked upload was stored")
	}

	// Anonymous uploads to a bucket whose policy lets anyone write work.
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/public", io.NopCloser(strings.NewReader("anyone may write")))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("anonymous chunked upload to a public-write bucket: %d %s", resp.StatusCode, body)
	}
	if got, _ := get(t, c, b, "public"); string(got) != "anyone may write" {
		t.Fatalf("anonymous chunked upload stored %q", got)
	}
}

// chunkedPut sends a chunked PUT without Content-Length of size bytes of
// 'x', signed with ak/sk (UNSIGNED-PAYLOAD), and returns the status, the
// S3 error code and how much of the body the client got to send.
func chunkedPut(t *testing.T, ak, sk, path string, size int64) (int, string, int64) {
	t.Helper()
	r := &patternReader{}
	r.limit.Store(size)
	req, err := http.NewRequest(http.MethodPut, srv.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", r.n.Load() // cut off while sending: fine, if early
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Code string }
	_ = xml.Unmarshal(body, &e)
	return resp.StatusCode, e.Code, r.n.Load()
}

// TestChunkedUploadSignedAuthorizedBeforeSpool: a signed chunked upload
// without Content-Length is spooled only when the signer may write to the
// bucket — a user without a grant, or any user writing to a bucket that
// does not exist, gets 403 / 404 before the body is read — and the pre-check
// lets through what versitygw allows: the owner, an admin, a user a bucket
// policy lets write (under the key the policy names), and object
// sub-resources authorized by their own action.
func TestChunkedUploadSignedAuthorizedBeforeSpool(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c) // root's
	bob, _, bc := newUser(t, false)
	_, _, adm := newUser(t, true)
	const size = 96 << 20
	const early = maxDrainBytes + 16<<20
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/" + b + "/x", 403, "AccessDenied"},
		{"/no-such-bucket-" + strings.ToLower(t.Name()) + "/x", 404, "NoSuchBucket"},
	} {
		st, code, sent := chunkedPut(t, bc.AccessKey, bc.SecretKey, tc.path, size)
		if (st != 0 && (st != tc.status || code != tc.code)) || sent > early {
			t.Errorf("bob PUT %s: %d %s after the client sent %d MiB of %d; want %d %s before the body", tc.path, st, code, sent>>20, size>>20, tc.status, tc.code)
		}
	}
	if _, err := srv.layer.Head(ctx, b, "x"); err == nil {
		t.Fatal("a refused chunked upload was stored")
	}

	// What versitygw allows still works.
	policy := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":{"AWS":["` + bob + `"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::` + b + `/bob/*"},` +
		`{"Effect":"Allow","Principal":{"AWS":["` + bob + `"]},"Action":"s3:PutObjectTagging","Resource":"arn:aws:s3:::` + b + `/tagged"}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	if st, code, _ := chunkedPut(t, bc.AccessKey, bc.SecretKey, "/"+b+"/bob/ok", 1<<20); st != 200 {
		t.Errorf("bob's chunked upload under the key the policy grants: %d %s", st, code)
	}
	if st, code, sent := chunkedPut(t, bc.AccessKey, bc.SecretKey, "/"+b+"/elsewhere", size); (st != 0 && st != 403) || sent > early {
		t.Errorf("bob's chunked upload outside the grant: %d %s after %d MiB", st, code, sent>>20)
	}
	if st, code, _ := chunkedPut(t, adm.AccessKey, adm.SecretKey, "/"+b+"/by-admin", 1<<20); st != 200 {
		t.Errorf("admin's chunked upload: %d %s", st, code)
	}
	own := newBucket(t, clientFor(bc.AccessKey, bc.SecretKey))
	if st, code, _ := chunkedPut(t, bc.AccessKey, bc.SecretKey, "/"+own+"/mine", 1<<20); st != 200 {
		t.Errorf("owner's chunked upload: %d %s", st, code)
	}
	put(t, c, b, "tagged", []byte("x"))
	tagging := `<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`
	req, _ := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/tagged?tagging", io.NopCloser(strings.NewReader(tagging)))
	req.ContentLength = -1
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	_ = v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: bc.AccessKey, SecretAccessKey: bc.SecretKey}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("chunked PutObjectTagging allowed by s3:PutObjectTagging alone: %d %s", resp.StatusCode, body)
	}
}

// TestChunkedSpoolBudget: the bytes of chunked uploads spooled at once on
// a node are bounded (BackendOptions.MaxSpoolBytes). An upload that does
// not fit in what is left gets 503 SlowDown, one larger than the whole
// budget 400 EntityTooLarge; an upload gives its share back when it ends.
func TestChunkedSpoolBudget(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	defer srv.be.spoolBudget.setLimit(srv.be.spoolBudget.setLimit(8 << 20))

	if st, code, _ := chunkedPut(t, testUser, testSecret, "/"+b+"/huge", 12<<20); st != 400 || code != "EntityTooLarge" {
		t.Errorf("chunked upload larger than the whole spool budget: %d %s, want 400 EntityTooLarge", st, code)
	}
	if n := srv.be.spoolBudget.inUse(); n != 0 {
		t.Fatalf("a refused upload keeps %d bytes of the budget", n)
	}

	// One upload holds 6 MiB of the budget, its client stalled.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/first", pr)
	req.ContentLength = -1
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testUser, SecretAccessKey: testSecret}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	first := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	if _, err := pw.Write(bytes.Repeat([]byte("f"), 6<<20)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.be.spoolBudget.inUse() < 6<<20; {
		if time.Now().After(deadline) {
			t.Fatalf("the first upload holds %d bytes of the budget", srv.be.spoolBudget.inUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st, code, _ := chunkedPut(t, testUser, testSecret, "/"+b+"/second", 4<<20); st != 503 || code != "SlowDown" {
		t.Errorf("chunked upload over what is left of the budget: %d %s, want 503 SlowDown", st, code)
	}
	if st, code, _ := chunkedPut(t, testUser, testSecret, "/"+b+"/small", 1<<20); st != 200 {
		t.Errorf("chunked upload that fits in what is left: %d %s", st, code)
	}
	pw.Close()
	if st := <-first; st != 200 {
		t.Fatalf("first upload: %d", st)
	}
	if n := srv.be.spoolBudget.inUse(); n != 0 {
		t.Fatalf("finished uploads keep %d bytes of the budget", n)
	}
	if st, code, _ := chunkedPut(t, testUser, testSecret, "/"+b+"/second", 4<<20); st != 200 {
		t.Errorf("chunked upload once the budget is free again: %d %s", st, code)
	}
	if got, _ := get(t, c, b, "first"); len(got) != 6<<20 {
		t.Fatalf("first upload stored %d bytes", len(got))
	}

	// A negative budget turns spooling off.
	srv.be.spoolBudget.setLimit(-1)
	if st, code, _ := chunkedPut(t, testUser, testSecret, "/"+b+"/unspooled", 1<<20); st != 411 || code != "MissingContentLength" {
		t.Errorf("chunked upload with spooling off: %d %s, want 411 MissingContentLength", st, code)
	}
}

// TestExpectContinueAfterAuth: a request with Expect: 100-continue and a
// bad signature is refused before the client sends its body; a good one
// is told to continue.
func TestExpectContinueAfterAuth(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	send := func(secret string, key string) (string, []byte) {
		body := bytes.Repeat([]byte("z"), 1000)
		req, _ := http.NewRequest(http.MethodPut, srv.url+"/"+b+"/"+key, bytes.NewReader(body))
		sum := sha256.Sum256(body)
		payload := hex.EncodeToString(sum[:])
		req.Header.Set("X-Amz-Content-Sha256", payload)
		req.Header.Set("Expect", "100-continue")
		_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testUser, SecretAccessKey: secret}, req, payload, "s3", "us-east-1", time.Now())
		u, _ := url.Parse(srv.url)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Headers only; the body follows only after 100 Continue.
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.URL.RequestURI(), u.Host, len(body))
		for k, vs := range req.Header {
			for _, v := range vs {
				fmt.Fprintf(conn, "%s: %s\r\n", k, v)
			}
		}
		fmt.Fprint(conn, "\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		status, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(status, " 100 ") {
			br.ReadString('\n') // blank line after the interim response
			conn.Write(body)
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := io.ReadAll(resp.Body)
			return "100 then " + resp.Status, rb
		}
		resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(status), br)), req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		return resp.Status, rb
	}
	if st, body := send("wrong-secret", "expect"); !strings.HasPrefix(st, "403") || !bytes.Contains(body, []byte("SignatureDoesNotMatch")) {
		t.Fatalf("bad signature with Expect: %s %s", st, body)
	}
	// Keys that need escaping sign their escaped path.
	for _, key := range []string{"expect", "foo%2B1/b%20r", "%C3%BC%25x"} {
		if st, body := send(testSecret, key); st != "100 then 200 OK" {
			t.Fatalf("good signature with Expect, key %s: %s %s", key, st, body)
		}
		k, _ := url.PathUnescape(key)
		if _, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &b, Key: &k}); err != nil {
			t.Fatalf("key %q not stored under its name: %v", k, err)
		}
	}
}

// decodeMIMEHeader decodes RFC 2047 encoded words (as AWS sends non-ASCII
// metadata), leaving other values as they are.
func decodeMIMEHeader(s string) string {
	d, err := new(mime.WordDecoder).DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}
