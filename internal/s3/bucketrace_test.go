package s3

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestPutsSurviveBucketTagging is the run a new user tried: 8 clients
// upload 4 KiB objects to one bucket while another client changes the
// bucket's tags in a loop.
// AWS never fails an upload because bucket configuration changed; neither
// may we. Every PUT must succeed and read back.
func TestPutsSurviveBucketTagging(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	ctx := context.Background()
	stop := make(chan struct{})
	var changes atomic.Int64
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: &b, Tagging: &types.Tagging{
				TagSet: []types.Tag{{Key: aws.String("round"), Value: aws.String(fmt.Sprint(i))}}}})
			if err != nil {
				t.Errorf("PutBucketTagging: %v", err)
				return
			}
			changes.Add(1)
		}
	}()
	const clients, perClient = 8, 60
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				key := fmt.Sprintf("c%d/%03d", w, i)
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &key,
					Body: bytes.NewReader(randBytes(uint64(w*1000+i), 4096))}); err != nil {
					failed.Add(1)
					t.Errorf("PUT %s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d PUTs failed while the bucket's tags changed", n, clients*perClient)
	}
	if changes.Load() < 5 {
		t.Fatalf("only %d tag changes during the uploads: the race was not exercised", changes.Load())
	}
	for w := range clients {
		for i := range perClient {
			key := fmt.Sprintf("c%d/%03d", w, i)
			if got, _ := get(t, c, b, key); md5hex(got) != md5hex(randBytes(uint64(w*1000+i), 4096)) {
				t.Fatalf("%s: wrong bytes", key)
			}
		}
	}
	t.Logf("%d PUTs, %d tag changes, 0 failed", clients*perClient, changes.Load())
}
