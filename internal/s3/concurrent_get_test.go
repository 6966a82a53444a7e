package s3

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestPlainGetDuringOverwrites: a GET without a Range of a key being
// overwritten must return one whole version — never 416 InvalidRange (the
// range resolved on the version HEAD saw, applied to a smaller one) and
// ideally not 409 OperationAborted either. Found by the chaos suite on
// hot keys (a few 416 and hundreds of 409 per 100,000 operations).
//
// Known issue, not yet fixed: GetObject reads the record (HEAD), resolves
// the range on it, then reads the data with a second lookup; a plain GET
// should read the data and take its headers from that one lookup. Set
// TERRACE_TEST_KNOWN_ISSUES=1 to run it.
func TestPlainGetDuringOverwrites(t *testing.T) {
	if os.Getenv("TERRACE_TEST_KNOWN_ISSUES") == "" {
		t.Skip("known issue (GET races an overwrite): set TERRACE_TEST_KNOWN_ISSUES=1")
	}
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "hot", randBytes(1, 300<<10))
	stop := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(stop); i++ {
			size := []int{300 << 10, 10, 70 << 10}[i%3]
			put(t, c, b, "hot", randBytes(uint64(i), size))
		}
	}()
	var mu sync.Mutex
	codes := map[string]int{}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("hot")})
				if err == nil {
					io.Copy(io.Discard, out.Body)
					out.Body.Close()
					continue
				}
				code, _ := apiErr(err)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(codes) > 0 {
		t.Fatalf("plain GETs during overwrites failed: %v", codes)
	}
}
