package s3

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/terrace-storage/terrace/internal/model"
)

// TestStorageClassVectors checks that x-amz-storage-class becomes the
// replication vector of the class table, visible through Layer.Locate
// (what `terrace object locate` prints), and that GET, HEAD and LIST
// report the class.
func TestStorageClassVectors(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(11, 300<<10)
	for _, tc := range []struct {
		class  types.StorageClass
		vector string
		tiers  map[model.Tier]int // replicas per tier
	}{
		{"", "any=2", nil},
		{types.StorageClassStandard, "any=2", nil},
		{types.StorageClassReducedRedundancy, "any=1", nil},
		{types.StorageClassStandardIa, "hdd=2", map[model.Tier]int{"hdd": 2}},
		{types.StorageClassOnezoneIa, "hdd=1", map[model.Tier]int{"hdd": 1}},
		{types.StorageClassExpressOnezone, "ssd=1", map[model.Tier]int{"ssd": 1}},
	} {
		key := "obj-" + string(tc.class)
		put(t, c, b, key, data, func(in *s3.PutObjectInput) { in.StorageClass = tc.class })
		loc, err := srv.layer.Locate(ctx, b, key)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range loc.Tiers {
			total += n
		}
		if loc.Vector != tc.vector || total != model.MustParseVector(tc.vector).Total() {
			t.Fatalf("%s: locate vector %s tiers %v, want %s", tc.class, loc.Vector, loc.Tiers, tc.vector)
		}
		for tier, n := range tc.tiers {
			if loc.Tiers[tier] != n {
				t.Fatalf("%s: %d replicas on %s, want %d (%v)", tc.class, loc.Tiers[tier], tier, n, loc.Tiers)
			}
		}
		wantClass := tc.class
		if wantClass == "" {
			wantClass = types.StorageClassStandard
		}
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &key})
		if err != nil || h.StorageClass != wantClass {
			t.Fatalf("%s: head class %q %v", tc.class, h.StorageClass, err)
		}
		got, out := get(t, c, b, key)
		if !bytes.Equal(got, data) || out.StorageClass != wantClass {
			t.Fatalf("%s: get class %q", tc.class, out.StorageClass)
		}
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, Prefix: aws.String("obj-STANDARD_IA")})
	if err != nil || len(l.Contents) != 1 || l.Contents[0].StorageClass != types.ObjectStorageClassStandardIa {
		t.Fatalf("list class %+v %v", l.Contents, err)
	}

	// A copy into another class rewrites the data under its vector.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("to-ia"), CopySource: aws.String(b + "/obj-"),
		StorageClass: types.StorageClassStandardIa}); err != nil {
		t.Fatal(err)
	}
	if loc, err := srv.layer.Locate(ctx, b, "to-ia"); err != nil || loc.Vector != "hdd=2" || loc.Tiers["hdd"] != 2 {
		t.Fatalf("copied into STANDARD_IA: %+v %v", loc, err)
	}
	// Multipart uploads take the class at creation.
	id := startUpload(t, c, b, "mp-ia", func(in *s3.CreateMultipartUploadInput) { in.StorageClass = types.StorageClassStandardIa })
	p := uploadPart(t, c, b, "mp-ia", id, 1, data)
	if _, err := complete(c, b, "mp-ia", id, p); err != nil {
		t.Fatal(err)
	}
	if loc, err := srv.layer.Locate(ctx, b, "mp-ia"); err != nil || loc.Vector != "hdd=2" || loc.Class != "STANDARD_IA" {
		t.Fatalf("multipart STANDARD_IA: %+v %v", loc, err)
	}

	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("x"), Body: bytes.NewReader(data), StorageClass: "NO_SUCH_CLASS"})
	wantErr(t, "unknown class", err, "InvalidStorageClass", 400)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("x"), Body: bytes.NewReader(data), StorageClass: tooWideClass})
	wantErr(t, "class the tiers cannot hold", err, "InsufficientStorage", 507)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("x")})
	wantErr(t, "head after failed put", err, "NotFound", 404)
}

// TestBucketDefaultVector: a bucket's default vector (set through the admin
// API) applies to STANDARD and class-less writes.
func TestBucketDefaultVector(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	if err := srv.layer.SetBucketVector(ctx, b, model.MustParseVector("ssd=2")); err != nil {
		t.Fatal(err)
	}
	put(t, c, b, "k", []byte("x"))
	if loc, err := srv.layer.Locate(ctx, b, "k"); err != nil || loc.Vector != "ssd=2" || loc.Tiers["ssd"] != 2 {
		t.Fatalf("bucket default: %+v %v", loc, err)
	}
}

// TestRefusedUploadGetsTheError: an upload refused before its body is
// read (an unknown storage class) answers the S3 error, not a connection
// reset while the client is still writing — every time.
func TestRefusedUploadGetsTheError(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(12, 1536<<10) // below the SDK's 100-continue threshold
	for i := range 20 {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("refused-" + strconv.Itoa(i)), Body: bytes.NewReader(data), StorageClass: "NO_SUCH_CLASS"})
		wantErr(t, "unknown class", err, "InvalidStorageClass", 400)
	}
}
