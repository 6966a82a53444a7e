package s3

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// overwriteAfterCopyHead makes the next CopyObject or UploadPartCopy of
// bucket/key see the source overwritten (by put) between reading its
// record and copying it, once.
func overwriteAfterCopyHead(t *testing.T, bucket, key string, put func()) {
	t.Helper()
	var fired atomic.Bool
	hook := func(b, k string) {
		if b == bucket && k == key && fired.CompareAndSwap(false, true) {
			put()
		}
	}
	srv.be.afterCopyHead.Store(&hook)
	t.Cleanup(func() {
		srv.be.afterCopyHead.Store(nil)
		if !fired.Load() {
			t.Error("the overwrite hook did not run")
		}
	})
}

// TestCopyOfOverwrittenSourceSSE pins that CopyObject copies the source
// record it read: an SSE-S3 source overwritten between the read (which
// gave the copy its encryption record) and the copy is read again, and
// the copy is readable, with the new bytes. The copy used to share the
// new record's extents under the old record's data key: every GET of it
// failed authentication.
func TestCopyOfOverwrittenSourceSSE(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "src", []byte("first plaintext"), sseS3)
	second := []byte("second plaintext")
	overwriteAfterCopyHead(t, b, "src", func() {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("src"), Body: bytes.NewReader(second),
			ServerSideEncryption: types.ServerSideEncryptionAes256})
		if err != nil {
			t.Errorf("overwrite: %v", err)
		}
	})
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("dst"), CopySource: aws.String(b + "/src"),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("dst")})
	if err != nil {
		t.Fatalf("GET of the copy: %v", err)
	}
	defer out.Body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(out.Body); err != nil || !bytes.Equal(got.Bytes(), second) {
		t.Fatalf("copy reads %q, %v; want %q", got.Bytes(), err, second)
	}
}

// TestCopySourceConditionJudgesCopiedRecord pins that
// x-amz-copy-source-if-match holds for the bytes copied: a source
// overwritten between the condition's check and the copy is judged
// again, and the copy (CopyObject and UploadPartCopy alike) is refused
// with 412 instead of copying bytes the condition rejects.
func TestCopySourceConditionJudgesCopiedRecord(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	etagA := put(t, c, b, "src", []byte("version A")).ETag
	overwrite := func() {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("src"), Body: bytes.NewReader([]byte("version B!"))}); err != nil {
			t.Errorf("overwrite: %v", err)
		}
	}
	t.Run("CopyObject", func(t *testing.T) {
		overwriteAfterCopyHead(t, b, "src", overwrite)
		_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("dst"), CopySource: aws.String(b + "/src"), CopySourceIfMatch: etagA})
		if err == nil {
			got, _ := get(t, c, b, "dst")
			t.Fatalf("copy with if-match %s of an overwritten source succeeded, copied %q", *etagA, got)
		}
		wantErr(t, "copy with if-match of an overwritten source", err, "PreconditionFailed", 412)
	})
	put(t, c, b, "src", []byte("version A"))
	t.Run("UploadPartCopy", func(t *testing.T) {
		id := startUpload(t, c, b, "mp")
		overwriteAfterCopyHead(t, b, "src", overwrite)
		_, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &b, Key: aws.String("mp"), UploadId: &id, PartNumber: aws.Int32(1),
			CopySource: aws.String(b + "/src"), CopySourceIfMatch: etagA})
		wantErr(t, "part copy with if-match of an overwritten source", err, "PreconditionFailed", 412)
		parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("mp"), UploadId: &id})
		if err != nil || len(parts.Parts) != 0 {
			t.Fatalf("refused part copy left parts %v (%v)", parts.Parts, err)
		}
	})
}
