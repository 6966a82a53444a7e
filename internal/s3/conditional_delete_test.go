package s3

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestConditionalDelete: DeleteObject with If-Match / x-amz-if-match-size
// deletes only the object the condition held for (the delete commits
// comparing that record), judges an encrypted object by its plaintext
// size, and a version by its own attributes.
func TestConditionalDelete(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	out := put(t, c, b, "k", []byte("hello"))
	_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("k"), IfMatch: aws.String(`"0123"`)})
	wantErr(t, "delete with a stale etag", err, "PreconditionFailed", 412)
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("k"), IfMatch: out.ETag, IfMatchSize: aws.Int64(5)}); err != nil {
		t.Fatalf("delete with the current etag and size: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("k")}); err == nil {
		t.Fatal("conditionally deleted object still there")
	}
	// Encrypted: the size a client compares is the plaintext's.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("enc"), Body: strings.NewReader("secret bytes"),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("enc"), IfMatchSize: aws.Int64(12)}); err != nil {
		t.Fatalf("delete of an encrypted object by its plaintext size: %v", err)
	}
	// A missing key is a success, conditions or not.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("never"), IfMatch: aws.String(`"0123"`)}); err != nil {
		t.Fatalf("conditional delete of a missing key: %v", err)
	}
}
