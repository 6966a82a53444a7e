package s3

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestAuth(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "k", []byte("secret data"))

	wrong := client(t, "not-the-secret")
	_, err := wrong.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")})
	wantErr(t, "wrong secret", err, "SignatureDoesNotMatch", 403)
	_, err = wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("overwrite")})
	wantErr(t, "wrong secret put", err, "SignatureDoesNotMatch", 403)
	_, err = wrong.ListBuckets(ctx, &s3.ListBucketsInput{})
	wantErr(t, "wrong secret list", err, "SignatureDoesNotMatch", 403)

	stranger := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.url), UsePathStyle: true, Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("nobody", "whatever-secret", ""),
	})
	_, err = stranger.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("k")})
	wantErr(t, "unknown access key", err, "InvalidAccessKeyId", 403)

	resp, err := http.Get(srv.url + "/" + b + "/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous GET: status %d, want 403", resp.StatusCode)
	}
	if got, _ := get(t, c, b, "k"); string(got) != "secret data" {
		t.Fatalf("object changed by a refused request: %q", got)
	}
}

func TestPresigned(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(21, 100000)
	put(t, c, b, "dir/k", data)
	ps := s3.NewPresignClient(c)

	req, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("dir/k")}, s3.WithPresignExpires(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(req.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Fatalf("presigned GET: status %d, %d bytes", resp.StatusCode, len(got))
	}

	// Tampering with the signed URL is refused.
	resp, err = http.Get(strings.Replace(req.URL, "dir/k", "dir/k2", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tampered presigned GET: status %d, want 403", resp.StatusCode)
	}
	// A URL signed with the wrong secret is refused.
	wreq, err := s3.NewPresignClient(client(t, "not-the-secret")).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("dir/k")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(wreq.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("presigned with wrong secret: status %d, want 403", resp.StatusCode)
	}

	// Presigned PUT.
	preq, err := ps.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("uploaded")})
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPut, preq.URL, bytes.NewReader([]byte("via presigned put")))
	resp, err = http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned PUT: status %d", resp.StatusCode)
	}
	if got, _ := get(t, c, b, "uploaded"); string(got) != "via presigned put" {
		t.Fatalf("presigned PUT stored %q", got)
	}
}

func TestHealthPath(t *testing.T) {
	resp, err := http.Get(srv.url + "/-/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("health: %d", resp.StatusCode)
	}
}

func TestServeConfig(t *testing.T) {
	var c ServeConfig
	c.EnsureDefaults()
	if err := c.Validate(); err == nil {
		t.Fatal("config without root credentials accepted")
	}
	c.RootUser, c.RootPassword = "u", "p"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.String(), "p ") || !strings.Contains(c.String(), "address=127.0.0.1:9000") {
		t.Fatalf("String() = %s", c.String())
	}
	// The address is checked before the gateway starts (the shared test
	// gateway holds srv's address).
	err := Serve(context.Background(), NewBackend(srv.layer, BackendOptions{}), ServeConfig{
		Address: strings.TrimPrefix(srv.url, "http://"), RootUser: "u", RootPassword: "p",
	})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("serve on a used address: %v", err)
	}
}
