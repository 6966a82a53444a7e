package s3

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// postObject sends a browser-form POST upload (versitygw's POSTObject,
// which calls Backend.PutObject) signed by the test user, with extra form
// fields (each covered by an exact policy condition) and extra headers.
// It returns the status and body of the answer.
func postObject(t *testing.T, bucket, key string, fields, hdr map[string]string, data []byte) (int, string) {
	t.Helper()
	now := time.Now().UTC()
	date, amzDate := now.Format("20060102"), now.Format("20060102T150405Z")
	cred := testUser + "/" + date + "/us-east-1/s3/aws4_request"
	conds := []string{`{"bucket":"` + bucket + `"}`, `{"key":"` + key + `"}`,
		`{"x-amz-algorithm":"AWS4-HMAC-SHA256"}`, `{"x-amz-credential":"` + cred + `"}`, `{"x-amz-date":"` + amzDate + `"}`}
	for k, v := range fields {
		conds = append(conds, `{"`+k+`":"`+v+`"}`)
	}
	pol := `{"expiration":"` + now.Add(time.Hour).Format("2006-01-02T15:04:05Z") + `","conditions":[` + strings.Join(conds, ",") + `]}`
	p64 := base64.StdEncoding.EncodeToString([]byte(pol))
	k := hmacSHA256(hmacSHA256(hmacSHA256(hmacSHA256([]byte("AWS4"+testSecret), date), "us-east-1"), "s3"), "aws4_request")
	all := map[string]string{"key": key, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": cred,
		"x-amz-date": amzDate, "policy": p64, "x-amz-signature": hex.EncodeToString(hmacSHA256(k, p64))}
	for k, v := range fields {
		all[k] = v
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for k, v := range all {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", "f")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	w.Close()
	req, err := http.NewRequest(http.MethodPost, srv.url+"/"+bucket, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPostObjectFormSettings pins that a browser-form POST upload honours
// the settings S3 takes from its form fields — SSE-S3, SSE-C, storage
// class, ACL — and refuses those it cannot honour (SSE-KMS, object lock,
// settings sent as headers) instead of storing the object without them.
func TestPostObjectFormSettings(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	ok := func(what string, st int, body string) {
		t.Helper()
		if st >= 300 {
			t.Fatalf("%s: %d %s", what, st, body)
		}
	}

	// SSE-S3.
	st, body := postObject(t, b, "s3obj", map[string]string{"x-amz-server-side-encryption": "AES256"}, nil, []byte("secret-1"))
	ok("SSE-S3 POST", st, body)
	info, err := srv.layer.Head(ctx, b, "s3obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, enc := info.Headers[hdrSSE]; !enc {
		t.Fatalf("POST asked for SSE-S3; stored unencrypted (headers %v)", info.Headers)
	}
	got, out := get(t, c, b, "s3obj")
	if string(got) != "secret-1" || out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("GET of the SSE-S3 POST upload: %q, encryption %q", got, out.ServerSideEncryption)
	}

	// SSE-C: unreadable without the key, readable with it.
	key := newSSECKey(77)
	st, body = postObject(t, b, "cobj", map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256",
		"x-amz-server-side-encryption-customer-key": key.key, "x-amz-server-side-encryption-customer-key-md5": key.md5}, nil, []byte("secret-2"))
	ok("SSE-C POST", st, body)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("cobj")})
	wantErr(t, "GET of the SSE-C POST upload without its key", err, "InvalidRequest", 400)
	if got, _ := get(t, c, b, "cobj", key.get); string(got) != "secret-2" {
		t.Fatalf("GET of the SSE-C POST upload with its key: %q", got)
	}

	// Storage class.
	st, body = postObject(t, b, "ia", map[string]string{"x-amz-storage-class": "STANDARD_IA"}, nil, []byte("cold"))
	ok("STANDARD_IA POST", st, body)
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("ia")})
	if err != nil || h.StorageClass != types.StorageClassStandardIa {
		t.Fatalf("HEAD of the STANDARD_IA POST upload: class %q, %v", h.StorageClass, err)
	}

	// ACL: refused where ACLs are disabled, stored where they are not.
	st, body = postObject(t, b, "pub", map[string]string{"acl": "public-read"}, nil, []byte("x"))
	if st != 400 || !strings.Contains(body, "AccessControlListNotSupported") {
		t.Fatalf("POST with acl=public-read to a BucketOwnerEnforced bucket: %d %s", st, body)
	}
	wb := fmt.Sprintf("t%d-post-object-writer", bucketSeq.Add(1))
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &wb, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	st, body = postObject(t, wb, "pub", map[string]string{"acl": "public-read"}, nil, []byte("x"))
	ok("POST with acl=public-read", st, body)
	acl, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &wb, Key: aws.String("pub")})
	if err != nil {
		t.Fatal(err)
	}
	public := false
	for _, g := range acl.Grants {
		if g.Grantee != nil && strings.HasSuffix(aws.ToString(g.Grantee.URI), "/AllUsers") && g.Permission == types.PermissionRead {
			public = true
		}
	}
	if !public {
		t.Fatalf("POST with acl=public-read: object ACL has no AllUsers READ grant")
	}

	// What cannot be honoured is refused, and nothing is stored.
	for _, tc := range []struct {
		key         string
		fields, hdr map[string]string
		status      int
		code        string
	}{
		{"kms", map[string]string{"x-amz-server-side-encryption": "aws:kms"}, nil, 501, "NotImplemented"},
		{"lock", map[string]string{"x-amz-object-lock-mode": "GOVERNANCE"}, nil, 400, "InvalidRequest"},
		{"hdr-sse", nil, map[string]string{"X-Amz-Server-Side-Encryption": "AES256"}, 400, "InvalidArgument"},
		{"hdr-class", nil, map[string]string{"X-Amz-Storage-Class": "STANDARD_IA"}, 400, "InvalidArgument"},
	} {
		st, body := postObject(t, b, tc.key, tc.fields, tc.hdr, []byte("x"))
		if st != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
			t.Errorf("POST %s: %d %s, want %d %s", tc.key, st, body, tc.status, tc.code)
		}
		if _, err := srv.layer.Head(ctx, b, tc.key); err == nil {
			t.Errorf("POST %s was refused but stored", tc.key)
		}
	}
}
