package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestSSECPartChecksumsNeedTheKey: an SSE-C upload's part checksums are
// of the plaintext (computed before encryption). AWS returns them from
// ListParts only with the upload's SSE-C key; without it a caller that
// cannot read the object learns each part's plaintext SHA-256 — it
// confirms guesses of the content, which SSE-C ETags deliberately avoid.
func TestSSECPartChecksumsNeedTheKey(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	k := newSSECKey(77)
	secret := []byte("the launch code is 0000")
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("mp"),
		ChecksumAlgorithm:    types.ChecksumAlgorithmSha256,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("mp"), UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(secret), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(secret)
	guess := base64.StdEncoding.EncodeToString(sum[:])
	// No SSE-C headers: the caller does not have the key.
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("mp"), UploadId: up.UploadId})
	if err != nil {
		return // refused without the key: fine
	}
	for _, p := range lp.Parts {
		if aws.ToString(p.ChecksumSHA256) == guess {
			t.Fatalf("ListParts without the SSE-C key returned part %d's plaintext SHA-256 %s", aws.ToInt32(p.PartNumber), guess)
		}
	}
	// With the key the checksums are there (as AWS answers).
	lp, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("mp"), UploadId: up.UploadId,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.Parts) != 1 || aws.ToString(lp.Parts[0].ChecksumSHA256) != guess {
		t.Fatalf("ListParts with the key: %+v, want part 1 with SHA-256 %s", lp.Parts, guess)
	}
}
