package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// multipartETag is S3's ETag of a multipart object: the MD5 of the
// concatenated binary part MD5s, "-N".
func multipartETag(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(parts))
}

func startUpload(t *testing.T, c *s3.Client, b, key string, mod ...func(*s3.CreateMultipartUploadInput)) string {
	t.Helper()
	in := &s3.CreateMultipartUploadInput{Bucket: &b, Key: &key}
	for _, f := range mod {
		f(in)
	}
	out, err := c.CreateMultipartUpload(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return *out.UploadId
}

func uploadPart(t *testing.T, c *s3.Client, b, key, id string, num int32, data []byte) types.CompletedPart {
	t.Helper()
	out, err := c.UploadPart(context.Background(), &s3.UploadPartInput{Bucket: &b, Key: &key, UploadId: &id, PartNumber: &num, Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("upload part %d: %v", num, err)
	}
	if want := `"` + md5hex(data) + `"`; *out.ETag != want {
		t.Fatalf("part %d etag %s, want %s", num, *out.ETag, want)
	}
	return types.CompletedPart{PartNumber: &num, ETag: out.ETag}
}

func complete(c *s3.Client, b, key, id string, parts ...types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
	return c.CompleteMultipartUpload(context.Background(), &s3.CompleteMultipartUploadInput{
		Bucket: &b, Key: &key, UploadId: &id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
}

func TestMultipart(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	const mib = 1 << 20
	src := randBytes(100, 12*mib)
	put(t, c, b, "source", src, func(in *s3.PutObjectInput) { in.ContentType = aws.String("text/csv") })

	key := "assembled"
	id := startUpload(t, c, b, key, func(in *s3.CreateMultipartUploadInput) {
		in.ContentType = aws.String("application/x-test")
		in.Metadata = map[string]string{"origin": "multipart"}
		in.Tagging = aws.String("mp=yes")
	})
	p1 := randBytes(1, 5*mib)
	p3 := randBytes(3, 1234)
	// Part 2 copies bytes [1 MiB, 7 MiB) of the source.
	copied := src[1*mib : 7*mib]
	parts := []types.CompletedPart{uploadPart(t, c, b, key, id, 1, p1)}
	cp, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
		Bucket: &b, Key: &key, UploadId: &id, PartNumber: aws.Int32(2),
		CopySource: aws.String(b + "/source"), CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", 1*mib, 7*mib-1)),
	})
	if err != nil {
		t.Fatalf("upload part copy: %v", err)
	}
	if want := `"` + md5hex(copied) + `"`; *cp.CopyPartResult.ETag != want {
		t.Fatalf("part copy etag %s, want %s", *cp.CopyPartResult.ETag, want)
	}
	parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(2), ETag: cp.CopyPartResult.ETag})
	parts = append(parts, uploadPart(t, c, b, key, id, 3, p3))

	// The upload is listed; its parts too.
	lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &b})
	if err != nil || len(lu.Uploads) != 1 || *lu.Uploads[0].UploadId != id || *lu.Uploads[0].Key != key {
		t.Fatalf("list uploads %+v %v", lu, err)
	}
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: &key, UploadId: &id})
	if err != nil || len(lp.Parts) != 3 || *lp.Parts[1].Size != int64(len(copied)) {
		t.Fatalf("list parts %+v %v", lp, err)
	}
	lp, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: &key, UploadId: &id, MaxParts: aws.Int32(2)})
	if err != nil || len(lp.Parts) != 2 || !aws.ToBool(lp.IsTruncated) || aws.ToString(lp.NextPartNumberMarker) != "2" {
		t.Fatalf("list parts page %+v %v", lp, err)
	}
	lp, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: &key, UploadId: &id, PartNumberMarker: aws.String("2")})
	if err != nil || len(lp.Parts) != 1 || *lp.Parts[0].PartNumber != 3 {
		t.Fatalf("list parts after 2 %+v %v", lp, err)
	}

	// Failures first (they leave the upload intact).
	_, err = complete(c, b, key, id, parts[1], parts[0], parts[2])
	wantErr(t, "bad order", err, "InvalidPartOrder", 400)
	bad := parts[1]
	bad.ETag = aws.String(`"` + md5hex([]byte("other")) + `"`)
	_, err = complete(c, b, key, id, parts[0], bad, parts[2])
	wantErr(t, "wrong etag", err, "InvalidPart", 400)
	_, err = complete(c, b, key, id, parts[0], types.CompletedPart{PartNumber: aws.Int32(9), ETag: parts[0].ETag})
	wantErr(t, "missing part", err, "InvalidPart", 400)
	_, err = complete(c, b, key, id, parts[2], types.CompletedPart{PartNumber: aws.Int32(4), ETag: parts[2].ETag})
	wantErr(t, "unknown part after small", err, "InvalidPart", 400)
	_, err = complete(c, b, key, "0123456789abcdef0123456789abcdef", parts...)
	wantErr(t, "unknown upload", err, "NoSuchUpload", 404)
	_, err = complete(c, b, "other-key", id, parts...)
	wantErr(t, "upload of another key", err, "NoSuchUpload", 404)

	res, err := complete(c, b, key, id, parts...)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	want := bytes.Join([][]byte{p1, copied, p3}, nil)
	if etag := multipartETag(p1, copied, p3); *res.ETag != etag {
		t.Fatalf("complete etag %s, want %s", *res.ETag, etag)
	}
	got, out := get(t, c, b, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled object differs (%d bytes, want %d)", len(got), len(want))
	}
	if *out.ETag != *res.ETag || aws.ToString(out.ContentType) != "application/x-test" || out.Metadata["origin"] != "multipart" || aws.ToInt32(out.TagCount) != 1 {
		t.Fatalf("assembled attributes: etag %s type %q meta %v tags %d", *out.ETag, aws.ToString(out.ContentType), out.Metadata, aws.ToInt32(out.TagCount))
	}
	// GET/HEAD ?partNumber= serve one part.
	got, out = get(t, c, b, key, func(in *s3.GetObjectInput) { in.PartNumber = aws.Int32(2) })
	if !bytes.Equal(got, copied) || aws.ToInt32(out.PartsCount) != 3 {
		t.Fatalf("part 2: %d bytes, parts count %d", len(got), aws.ToInt32(out.PartsCount))
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &key, PartNumber: aws.Int32(3)})
	if err != nil || *h.ContentLength != int64(len(p3)) {
		t.Fatalf("head part 3: %+v %v", h, err)
	}
	attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: &b, Key: &key,
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectParts, types.ObjectAttributesEtag}})
	if err != nil || attrs.ObjectParts == nil || len(attrs.ObjectParts.Parts) != 3 || !strings.HasSuffix(aws.ToString(attrs.ETag), "-3") {
		t.Fatalf("object attributes %+v %v", attrs, err)
	}
	// The completed upload is gone.
	_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: &key, UploadId: &id, PartNumber: aws.Int32(1), Body: strings.NewReader("x")})
	wantErr(t, "part after complete", err, "NoSuchUpload", 404)
	lu, err = c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &b})
	if err != nil || len(lu.Uploads) != 0 {
		t.Fatalf("uploads after complete: %+v %v", lu.Uploads, err)
	}
}

func TestMultipartSmallPartAndAbort(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	key := "small"
	id := startUpload(t, c, b, key)
	p1 := uploadPart(t, c, b, key, id, 1, randBytes(5, 1<<20))
	p2 := uploadPart(t, c, b, key, id, 2, randBytes(6, 100))
	_, err := complete(c, b, key, id, p1, p2)
	wantErr(t, "small first part", err, "EntityTooSmall", 400)
	// A single small part is a valid object.
	res, err := complete(c, b, key, id, p1)
	if err != nil {
		t.Fatalf("complete with one small part: %v", err)
	}
	if want := multipartETag(randBytes(5, 1<<20)); *res.ETag != want {
		t.Fatalf("etag %s, want %s", *res.ETag, want)
	}

	id2 := startUpload(t, c, b, "aborted")
	uploadPart(t, c, b, "aborted", id2, 1, []byte("x"))
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b, Key: aws.String("aborted"), UploadId: &id2}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("aborted"), UploadId: &id2})
	wantErr(t, "parts of aborted upload", err, "NoSuchUpload", 404)
	_, err = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b, Key: aws.String("aborted"), UploadId: &id2})
	wantErr(t, "abort twice", err, "NoSuchUpload", 404)

	// Part copy range errors.
	put(t, c, b, "src", []byte("0123456789"))
	id3 := startUpload(t, c, b, "pc")
	for _, r := range []string{"bytes=5-10", "bytes=10-12", "bytes=7-3", "items=0-1", "bytes=-3"} {
		_, err = c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &b, Key: aws.String("pc"), UploadId: &id3, PartNumber: aws.Int32(1),
			CopySource: aws.String(b + "/src"), CopySourceRange: aws.String(r)})
		wantErr(t, "copy range "+r, err, "InvalidArgument", 400)
	}
	if _, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &b, Key: aws.String("pc"), UploadId: &id3, PartNumber: aws.Int32(1),
		CopySource: aws.String(b + "/src"), CopySourceRange: aws.String("bytes=2-4")}); err != nil {
		t.Fatal(err)
	}
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("pc"), UploadId: &id3})
	if err != nil || len(lp.Parts) != 1 || *lp.Parts[0].Size != 3 || *lp.Parts[0].ETag != `"`+md5hex([]byte("234"))+`"` {
		t.Fatalf("copied part %+v %v", lp.Parts, err)
	}
}

func TestListMultipartUploadsPaging(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	want := map[string]bool{}
	for _, k := range []string{"a/1", "a/2", "b", "b", "c/d/e"} {
		want[startUpload(t, c, b, k)+" "+k] = true
	}
	seen := map[string]bool{}
	var keyMarker, idMarker *string
	for range 10 {
		out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &b, MaxUploads: aws.Int32(2), KeyMarker: keyMarker, UploadIdMarker: idMarker})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range out.Uploads {
			seen[*u.UploadId+" "+*u.Key] = true
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		keyMarker, idMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	if len(seen) != len(want) {
		t.Fatalf("paged uploads %v, want %v", seen, want)
	}
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &b, Delimiter: aws.String("/")})
	if err != nil || len(out.Uploads) != 2 || len(out.CommonPrefixes) != 2 {
		t.Fatalf("with delimiter: %d uploads %d prefixes %v", len(out.Uploads), len(out.CommonPrefixes), err)
	}
}

// TestCompleteEmptyETag pins that CompleteMultipartUpload answers
// InvalidPart for a part listed with an empty <ETag></ETag>, as AWS
// does, instead of taking whatever part has that number.
func TestCompleteEmptyETag(t *testing.T) {
	c := client(t, testSecret)
	b := newBucket(t, c)
	id := startUpload(t, c, b, "k")
	uploadPart(t, c, b, "k", id, 1, []byte("part-one"))
	_, err := complete(c, b, "k", id, types.CompletedPart{PartNumber: aws.Int32(1), ETag: aws.String("")})
	wantErr(t, "complete with an empty ETag", err, "InvalidPart", 400)
	if _, err := srv.layer.Head(context.Background(), b, "k"); err == nil {
		t.Fatal("complete with an empty ETag stored the object")
	}
}
