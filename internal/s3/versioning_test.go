package s3

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestVersioningWithSDK walks S3 versioning as a client sees it: enable,
// overwrite, read old versions, delete marker (404 with the marker
// header, 405 for the marker's own ID), list versions, restore an old
// version by copying it over the key, permanent delete, suspend.
func TestVersioningWithSDK(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	ctx := context.Background()
	key := "doc.txt"
	st, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &b})
	if err != nil || st.Status != "" {
		t.Fatalf("fresh bucket versioning: %q, %v", st.Status, err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &b}); st.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("after enabling: %q", st.Status)
	}
	var ids []string
	for _, body := range []string{"first", "second", "third"} {
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &key, Body: strings.NewReader(body)})
		if err != nil || out.VersionId == nil || *out.VersionId == "" {
			t.Fatalf("put %s: %v (version %v)", body, err, out)
		}
		ids = append(ids, *out.VersionId)
	}
	get := func(version *string) (string, *s3.GetObjectOutput, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: &key, VersionId: version})
		if err != nil {
			return "", nil, err
		}
		defer out.Body.Close()
		body, _ := io.ReadAll(out.Body)
		return string(body), out, nil
	}
	if body, out, err := get(nil); err != nil || body != "third" || aws.ToString(out.VersionId) != ids[2] {
		t.Fatalf("current: %q %v", body, err)
	}
	if body, _, err := get(&ids[0]); err != nil || body != "first" {
		t.Fatalf("old version: %q, %v", body, err)
	}
	del, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: &key})
	if err != nil || !aws.ToBool(del.DeleteMarker) || del.VersionId == nil {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	_, _, err = get(nil)
	wantErr(t, "GET after delete", err, "NoSuchKey", 404)
	_, _, err = get(del.VersionId)
	wantErr(t, "GET of the marker's version", err, "MethodNotAllowed", 405)
	_, _, err = get(aws.String("0123456789abcdef"))
	wantErr(t, "GET of an unknown version", err, "NoSuchVersion", 404)
	_, _, err = get(aws.String("not-a-version"))
	wantErr(t, "GET of a malformed version", err, "InvalidArgument", 400)

	lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	if len(lv.DeleteMarkers) != 1 || !aws.ToBool(lv.DeleteMarkers[0].IsLatest) || len(lv.Versions) != 3 ||
		aws.ToString(lv.Versions[0].VersionId) != ids[2] || aws.ToBool(lv.Versions[0].IsLatest) {
		t.Fatalf("versions: %d markers, %d versions", len(lv.DeleteMarkers), len(lv.Versions))
	}
	// Restore the first version by copying it over the key.
	cp, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: &key, CopySource: aws.String(b + "/" + key + "?versionId=" + ids[0])})
	if err != nil || cp.VersionId == nil || aws.ToString(cp.CopySourceVersionId) != ids[0] {
		t.Fatalf("restore by copy: %+v, %v", cp, err)
	}
	if body, _, err := get(nil); err != nil || body != "first" {
		t.Fatalf("after restore: %q, %v", body, err)
	}
	// Permanent delete of a version.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: &key, VersionId: &ids[1]}); err != nil {
		t.Fatal(err)
	}
	_, _, err = get(&ids[1])
	wantErr(t, "GET of a deleted version", err, "NoSuchVersion", 404)
	// Suspend: writes become the null version.
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &key, Body: strings.NewReader("suspended")})
	if err != nil || aws.ToString(out.VersionId) != "null" {
		t.Fatalf("put while suspended: %v, version %q", err, aws.ToString(out.VersionId))
	}
	if body, _, err := get(aws.String("null")); err != nil || body != "suspended" {
		t.Fatalf("null version: %q, %v", body, err)
	}
	if body, _, err := get(&ids[0]); err != nil || body != "first" {
		t.Fatalf("older versions survive suspension: %q, %v", body, err)
	}
}

// TestSnapshotBucketOverS3: a snapshot is a read-only bucket every client
// can read (GET, HEAD, LIST) and nobody can write.
func TestSnapshotBucketOverS3(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	ctx := context.Background()
	put(t, c, b, "a", []byte("before"))
	snap, err := srv.layer.CreateSnapshot(ctx, b, "s1")
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, b, "a", []byte("after"))
	put(t, c, b, "b", []byte("new"))
	if got, _ := get(t, c, snap.Served, "a"); string(got) != "before" {
		t.Fatalf("snapshot GET: %q", got)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &snap.Served, Key: aws.String("b")}); err == nil {
		t.Fatal("a key written after the snapshot is visible in it")
	}
	ls, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &snap.Served})
	if err != nil || len(ls.Contents) != 1 || aws.ToString(ls.Contents[0].Key) != "a" {
		t.Fatalf("snapshot listing: %v, %d keys", err, len(ls.Contents))
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &snap.Served, Key: aws.String("x"), Body: strings.NewReader("x")})
	wantErr(t, "PUT into a snapshot", err, "AccessDenied", 403)
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &snap.Served, Key: aws.String("a")})
	wantErr(t, "DELETE in a snapshot", err, "AccessDenied", 403)
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("mine--snap-x")})
	if _, st := apiErr(err); err == nil || st != 400 {
		t.Fatalf("creating a reserved bucket name: %v", err)
	}
}

// TestListObjectVersionsDelimiterPaging pins that ListObjectVersions with
// a delimiter and a small max-keys pages to the end, each common prefix
// and key once (as ListObjectsV2 does), when a page ends on a prefix.
func TestListObjectVersionsDelimiterPaging(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/1", "a/2", "b"} {
		put(t, c, b, k, []byte("x"))
	}
	var km, vm *string
	var seen []string
	for page := 0; ; page++ {
		if page == 6 {
			t.Fatalf("no end after %d pages: %v", page, seen)
		}
		out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &b, Delimiter: aws.String("/"),
			MaxKeys: aws.Int32(1), KeyMarker: km, VersionIdMarker: vm})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range out.CommonPrefixes {
			seen = append(seen, "prefix "+*p.Prefix)
		}
		for _, v := range out.Versions {
			seen = append(seen, *v.Key)
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		km, vm = out.NextKeyMarker, out.NextVersionIdMarker
		if aws.ToString(vm) == "" {
			vm = nil
		}
	}
	if got := strings.Join(seen, ", "); got != "prefix a/, b" {
		t.Fatalf("pages: %s, want prefix a/, b", got)
	}
}

// TestMFADeleteRefused pins that a versioning configuration enabling MFA
// delete answers 501 NotImplemented and changes nothing, instead of being
// accepted with MFA delete dropped.
func TestMFADeleteRefused(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled, MFADelete: types.MFADeleteEnabled}})
	wantErr(t, "PutBucketVersioning with MFADelete Enabled", err, "NotImplemented", 501)
	st, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &b})
	if err != nil || st.Status != "" {
		t.Fatalf("versioning after the refused configuration: %q, %v", st.Status, err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled, MFADelete: types.MFADeleteDisabled}}); err != nil {
		t.Fatalf("PutBucketVersioning with MFADelete Disabled: %v", err)
	}
}
