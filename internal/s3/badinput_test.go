package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestKeysAreOpaque: keys that look like paths (.., //, ./, absolute,
// backslashes) are names, not paths: each either round-trips byte for
// byte or is refused with a 4xx S3 error (the gateway refuses keys whose
// segments climb above the bucket), and nothing is ever written outside
// the node's data directory (replica files are named by egroup ID, never
// by key).
func TestKeysAreOpaque(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(srv.dir), fmt.Sprintf("terrace-escape-%d", os.Getpid()))
	keys := []string{"../../../../" + filepath.Base(outside), "a//b", "./x", "..", ".", "/abs/olute", `back\slash\..\..`,
		"dev/n1/ssd0/../../../meta/CURRENT", strings.Repeat("../", 300) + "deep", "ünïcödé/文字", " leading space"}
	stored := 0
	for i, k := range keys {
		data := randBytes(uint64(i), 1000+i)
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &k, Body: bytes.NewReader(data)})
		if err != nil {
			if code, status := apiErr(err); status < 400 || status >= 500 || code == "" {
				t.Fatalf("PUT %q: %v, want success or a 4xx S3 error", k, err)
			}
			t.Logf("refused %q: %v", k, err)
			continue
		}
		stored++
		got, _ := get(t, c, b, k)
		if !bytes.Equal(got, data) {
			t.Fatalf("%q did not round-trip", k)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("a key created %s outside the data directory", outside)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	if err != nil || len(list.Contents) != stored || stored < 6 {
		t.Fatalf("list: %v, %d keys listed, %d stored", err, len(list.Contents), stored)
	}
}

// TestBadNamesGetCleanErrors: NUL bytes, invalid UTF-8, over-long keys and
// path tricks in bucket names get S3 errors (4xx with an S3 error body),
// never a 5xx, a hang or a stored object.
func TestBadNamesGetCleanErrors(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	ctx := context.Background()
	for _, k := range []string{"nul\x00byte", "bad\xff\xfeutf8", strings.Repeat("k", 1025)} {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &k, Body: strings.NewReader("x")})
		code, status := apiErr(err)
		if err == nil || status < 400 || status >= 500 || code == "" {
			t.Errorf("PUT %q: %v (code %q, status %d), want a 4xx S3 error", k, err, code, status)
		}
	}
	for _, bucket := range []string{"..", "../etc", "UPPER", "x", strings.Repeat("b", 64), "has_underscore-", "-lead"} {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
		if _, status := apiErr(err); err == nil || status < 400 || status >= 500 {
			t.Errorf("CreateBucket %q: %v (status %d), want 4xx", bucket, err, status)
		}
	}
	// Raw requests a SDK would not send: encoded NUL and traversal in the
	// path, an oversized header.
	raw := func(method, path string, hdr map[string]string) int {
		req, err := http.NewRequest(method, srv.url+path, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // the server closed the connection: a refusal too
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/" + b + "/a%00b", "/" + b + "/%2e%2e%2f%2e%2e%2fetc", "/%2e%2e/k", "/" + b + "/%ff"} {
		if st := raw("PUT", p, nil); st >= 500 {
			t.Errorf("unsigned PUT %s: %d", p, st)
		}
	}
	if st := raw("GET", "/"+b+"/k", map[string]string{"X-Big": strings.Repeat("h", 1<<20)}); st >= 500 {
		t.Errorf("1 MiB header: %d", st)
	}
}
