package cluster

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/terrace-storage/terrace/internal/users"
)

func s3Client(endpoint, ak, sk string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""), Retryer: aws.NopRetryer{},
		DisableLogOutputChecksumValidationSkipped: true})
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestUsersAndEncryptionAcrossNodes: a user created on one node's admin
// API works at once on every node's S3 gateway (users live in etcd), an
// SSE-S3 object written through one node reads back through another (all
// nodes share the master key), and a key rotated on one node stops
// working on all of them at once.
func TestUsersAndEncryptionAcrossNodes(t *testing.T) {
	c := startCluster(t, 3, 27700, "")
	ctx, cancel := ctxT(3 * time.Minute)
	defer cancel()
	var alice users.Credentials
	if err := call(ctx, "POST", c.Nodes[0].Admin, "/v1/users/alice", nil, &alice); err != nil {
		t.Fatal(err)
	}
	n1 := s3Client(c.Nodes[1].S3, alice.AccessKey, alice.SecretKey)
	n2 := s3Client(c.Nodes[2].S3, alice.AccessKey, alice.SecretKey)
	if _, err := n1.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("alice-data")}); err != nil {
		t.Fatalf("create bucket through node 2 with a user made on node 1: %v", err)
	}
	data := content(3, "sse", 1, 3<<20)
	if _, err := n1.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("alice-data"), Key: aws.String("k"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	out, err := n2.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("alice-data"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("read an SSE-S3 object through another node: %v", err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, data) || out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatal("SSE-S3 object differs when read through another node")
	}
	// Another user is denied on every node.
	var bob users.Credentials
	if err := call(ctx, "POST", c.Nodes[1].Admin, "/v1/users/bob", nil, &bob); err != nil {
		t.Fatal(err)
	}
	_, err = s3Client(c.Nodes[0].S3, bob.AccessKey, bob.SecretKey).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("alice-data"), Key: aws.String("k")})
	if errCode(err) != "AccessDenied" {
		t.Fatalf("bob on alice's bucket: %v", err)
	}
	// Rotation on node 3 takes effect on node 2 immediately.
	var rot users.Credentials
	if err := call(ctx, "POST", c.Nodes[2].Admin, "/v1/users/alice/keys/rotate", nil, &rot); err != nil {
		t.Fatal(err)
	}
	_, err = n1.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("alice-data"), Key: aws.String("k")})
	if err == nil {
		t.Fatal("old key still works on another node after rotation")
	}
	if _, err := s3Client(c.Nodes[1].S3, rot.AccessKey, rot.SecretKey).HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String("alice-data"), Key: aws.String("k")}); err != nil {
		t.Fatalf("rotated key on another node: %v", err)
	}
}
