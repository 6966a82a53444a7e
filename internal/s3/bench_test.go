package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// BenchmarkPutGetSSE measures 8 MiB PUT and GET through the gateway,
// unencrypted and SSE-S3, over directory devices.
func BenchmarkPutGetSSE(b *testing.B) {
	ctx := context.Background()
	c := client(b, testSecret)
	bucket := fmt.Sprintf("bench-sse-%d", bucketSeq.Add(1))
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		b.Fatal(err)
	}
	data := randBytes(1, 8<<20)
	for _, mode := range []types.ServerSideEncryption{"", types.ServerSideEncryptionAes256} {
		name := "plain"
		if mode != "" {
			name = "sse-s3"
		}
		b.Run("put-"+name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(name), Body: bytes.NewReader(data), ServerSideEncryption: mode}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get-"+name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(name)})
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, out.Body)
				out.Body.Close()
			}
		})
	}
}
