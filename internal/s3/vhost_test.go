package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// vhostHTTP is an HTTP client that sends every request to the gateway,
// whatever the URL's host: virtual-hosted-style URLs
// (http://<bucket>.vhost.test:PORT/key) reach it with their Host.
func vhostHTTP() *http.Client {
	addr := strings.TrimPrefix(srv.url, "http://")
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
}

// vhostURL is the virtual-hosted-style URL of bucket/key.
func vhostURL(bucket, key string) string {
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.url, "http://"), ":")
	return "http://" + bucket + "." + testVirtualDomain + ":" + port + "/" + key
}

// vhostClient is an S3 client that addresses buckets virtual-hosted style.
func vhostClient(ak, secret string) *s3.Client {
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.url, "http://"), ":")
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + testVirtualDomain + ":" + port),
		Credentials: credentials.NewStaticCredentialsProvider(ak, secret, ""), HTTPClient: vhostHTTP(),
		Retryer: aws.NopRetryer{}, DisableLogOutputChecksumValidationSkipped: true,
	})
}

// TestVirtualHostPublicAccessBlock pins that RestrictPublicBuckets
// refuses anonymous virtual-hosted-style requests as it refuses
// path-style ones: the gate takes the bucket from the Host as versitygw
// does, not from the path.
func TestVirtualHostPublicAccessBlock(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-pab-vhost", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "page", []byte("public until restricted"))
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	anonVhost := func() int {
		resp, err := vhostHTTP().Get(vhostURL(b, "page"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := anonVhost(); st != 200 {
		t.Fatalf("anonymous virtual-hosted GET of a public object: %d", st)
	}
	if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b,
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := anon(t, http.MethodGet, "/"+b+"/page", nil); st != 403 {
		t.Fatalf("anonymous path-style GET under RestrictPublicBuckets: %d", st)
	}
	if st := anonVhost(); st != 403 {
		t.Fatalf("anonymous virtual-hosted GET under RestrictPublicBuckets: %d, want 403", st)
	}
}

// TestVirtualHostACLDocuments pins that the ACL documents Terrace
// rewrites are those of what versitygw authorized and answered: a
// virtual-hosted GET /NAME?acl is the ACL of object NAME in the Host's
// bucket — never that of a bucket called NAME (another user's, which the
// caller may not read) — and GET /?acl is the Host bucket's.
func TestVirtualHostACLDocuments(t *testing.T) {
	ctx := context.Background()
	victim, vc, _ := newUser(t, false)
	vb := fmt.Sprintf("t%d-acl-victim", bucketSeq.Add(1))
	if _, err := vc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &vb, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	if _, err := vc.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &vb, GrantRead: aws.String(`id="` + testUser + `"`)}); err != nil {
		t.Fatal(err)
	}
	attacker, ac, creds := newUser(t, false)
	ab := fmt.Sprintf("t%d-acl-attacker", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &ab}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, ab, vb, []byte("an object named like the victim's bucket"))
	if _, err := ac.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &vb}); err == nil {
		t.Fatal("attacker reads the victim bucket's ACL path-style")
	}
	vh := vhostClient(creds.AccessKey, creds.SecretKey)
	out, err := vh.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &ab, Key: &vb})
	if err != nil {
		t.Fatal(err)
	}
	var grants []string
	for _, g := range out.Grants {
		grants = append(grants, aws.ToString(g.Grantee.ID)+":"+string(g.Permission))
	}
	if owner := aws.ToString(out.Owner.ID); owner != attacker || strings.Join(grants, ",") != attacker+":FULL_CONTROL" {
		t.Fatalf("virtual-hosted GetObjectAcl(%s, %s): owner %s grants %v; want the object's (%s), not the bucket %s's (%s)",
			ab, vb, owner, grants, attacker, vb, victim)
	}
	bo, err := vh.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &ab})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(bo.Owner.ID) != attacker || len(bo.Grants) == 0 || aws.ToString(bo.Grants[0].Grantee.DisplayName) != attacker {
		t.Fatalf("virtual-hosted GetBucketAcl(%s): owner %s, grants %+v (want the rewritten document, with DisplayName)",
			ab, aws.ToString(bo.Owner.ID), bo.Grants)
	}
}

// TestVirtualHostChunkedUpload pins that a virtual-hosted-style upload
// with Transfer-Encoding: chunked and no Content-Length is spooled and
// stored, as a path-style one is (it used to get 411), and that its
// signature is checked first.
func TestVirtualHostChunkedUpload(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(78, 1<<20+3)
	send := func(key, secret string) (int, string) {
		req, err := http.NewRequest(http.MethodPut, vhostURL(b, key), io.NopCloser(bytes.NewReader(data)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // chunked
		sum := sha256.Sum256(data)
		payload := hex.EncodeToString(sum[:])
		req.Header.Set("X-Amz-Content-Sha256", payload)
		if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
			aws.Credentials{AccessKeyID: testUser, SecretAccessKey: secret}, req, payload, "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := vhostHTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	for _, key := range []string{"streamed", "dir/streamed"} {
		if st, body := send(key, testSecret); st != 200 {
			t.Fatalf("virtual-hosted chunked upload of %s: %d %s", key, st, body)
		}
		if got, _ := get(t, c, b, key); !bytes.Equal(got, data) {
			t.Fatalf("virtual-hosted chunked upload of %s stored wrong bytes", key)
		}
	}
	if st, body := send("refused", "wrong-secret"); st != 403 || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("virtual-hosted chunked upload with a wrong secret: %d %s", st, body)
	}
}
