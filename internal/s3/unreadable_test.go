package s3

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/terrace-storage/terrace/internal/meta"
)

// TestGetUnreadableObjectAnswers5xx: a GET of an object none of whose
// replicas can be read gets an S3 error (500 InternalError) — not a 200
// whose body is cut off, which clients see as a broken connection (found
// by the chaos suite).
func TestGetUnreadableObjectAnswers5xx(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "gone", randBytes(5, 200<<10))
	loc, err := srv.layer.Locate(ctx, b, "gone")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range loc.Extents {
		for _, r := range x.Replicas {
			id := meta.FormatID(x.Egroup)
			p := filepath.Join(srv.dir, "dev", string(r.Device), "eg", strings.ToLower(id[len(id)-2:]), id+".eg")
			// Truncate rather than remove: the node may hold the file open.
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("gone")})
	wantErr(t, "GET of an object with no readable replica", err, "InternalError", 500)
}
