package s3

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestBucketLifecycle(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := "lifecycle-bucket"
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
	wantErr(t, "create twice", err, "BucketAlreadyOwnedByYou", 409)

	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("head: %v", err)
	}
	loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(b)})
	if err != nil {
		t.Fatalf("location: %v", err)
	}
	if loc.LocationConstraint != "" { // us-east-1 is reported as empty, like AWS
		t.Fatalf("location %q", loc.LocationConstraint)
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range lb.Buckets {
		names = append(names, *x.Name)
		if *x.Name == b && (x.CreationDate == nil || x.CreationDate.IsZero()) {
			t.Fatalf("bucket %s has no creation date", b)
		}
	}
	if !slices.Contains(names, b) || !slices.IsSorted(names) {
		t.Fatalf("list buckets %v: want sorted, containing %s", names, b)
	}

	put(t, c, b, "k", []byte("x"))
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
	wantErr(t, "delete non-empty", err, "BucketNotEmpty", 409)

	// An abandoned multipart upload does not keep a bucket alive.
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("delete empty: %v", err)
	}
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)})
	wantErr(t, "head deleted", err, "NotFound", 404)
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
	wantErr(t, "delete deleted", err, "NoSuchBucket", 404)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	wantErr(t, "put into deleted", err, "NoSuchBucket", 404)
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b)})
	wantErr(t, "list deleted", err, "NoSuchBucket", 404)

	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("Bad_Name")})
	wantErr(t, "invalid name", err, "InvalidBucketName", 400)
}

func TestBucketSubresources(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)

	_, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: &b})
	wantErr(t, "tags before put", err, "NoSuchTagSet", 404)
	tags := []types.Tag{{Key: aws.String("team"), Value: aws.String("storage")}}
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: &b, Tagging: &types.Tagging{TagSet: tags}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: &b})
	if err != nil || len(got.TagSet) != 1 || *got.TagSet[0].Value != "storage" {
		t.Fatalf("bucket tags %+v, %v", got, err)
	}
	if _, err := c.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}

	v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &b})
	if err != nil || v.Status != "" {
		t.Fatalf("versioning %+v, %v", v, err)
	}
	acl, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil || acl.Owner == nil || *acl.Owner.ID != testUser {
		t.Fatalf("acl %+v, %v", acl, err)
	}
	_, err = c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: &b})
	wantErr(t, "policy", err, "NoSuchBucketPolicy", 404)
	_, err = c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: &b})
	wantErr(t, "cors", err, "NoSuchCORSConfiguration", 404)
	_, err = c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: &b})
	wantErr(t, "object lock", err, "ObjectLockConfigurationNotFoundError", 404)
}
