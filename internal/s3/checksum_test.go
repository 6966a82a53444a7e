package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func b64crc32(b []byte, tab *crc32.Table) string {
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], crc32.Checksum(b, tab))
	return base64.StdEncoding.EncodeToString(out[:])
}

func b64sha256(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func TestChecksumsStoredAndReturned(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	data := randBytes(11, 300<<10+5)
	crc := b64crc32(data, crc32.IEEETable)
	castagnoli := b64crc32(data, crc32.MakeTable(crc32.Castagnoli))

	// SDK-computed (aws-chunked trailer or header) and explicit header.
	out := put(t, c, b, "crc32", data, func(in *s3.PutObjectInput) { in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32 })
	if aws.ToString(out.ChecksumCRC32) != crc || out.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("put answered crc32 %q type %q, want %q", aws.ToString(out.ChecksumCRC32), out.ChecksumType, crc)
	}
	put(t, c, b, "crc32c", data, func(in *s3.PutObjectInput) { in.ChecksumCRC32C = aws.String(castagnoli) })
	put(t, c, b, "sha256-enc", data, func(in *s3.PutObjectInput) {
		in.ChecksumSHA256 = aws.String(b64sha256(data))
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	})
	for _, tc := range []struct {
		key, want string
		get       func(*s3.GetObjectOutput) *string
		head      func(*s3.HeadObjectOutput) *string
	}{
		{"crc32", crc, func(o *s3.GetObjectOutput) *string { return o.ChecksumCRC32 }, func(o *s3.HeadObjectOutput) *string { return o.ChecksumCRC32 }},
		{"crc32c", castagnoli, func(o *s3.GetObjectOutput) *string { return o.ChecksumCRC32C }, func(o *s3.HeadObjectOutput) *string { return o.ChecksumCRC32C }},
		{"sha256-enc", b64sha256(data), func(o *s3.GetObjectOutput) *string { return o.ChecksumSHA256 }, func(o *s3.HeadObjectOutput) *string { return o.ChecksumSHA256 }},
	} {
		// The SDK validates the body against the checksum it receives.
		got, gout := get(t, c, b, tc.key, func(in *s3.GetObjectInput) { in.ChecksumMode = types.ChecksumModeEnabled })
		if !bytes.Equal(got, data) || aws.ToString(tc.get(gout)) != tc.want || gout.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("%s: get checksum %q type %q, want %q", tc.key, aws.ToString(tc.get(gout)), gout.ChecksumType, tc.want)
		}
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &tc.key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || aws.ToString(tc.head(h)) != tc.want {
			t.Fatalf("%s: head checksum %v %q", tc.key, err, aws.ToString(tc.head(h)))
		}
		// Without checksum mode, and for ranges, none is sent.
		_, gout = get(t, c, b, tc.key)
		if tc.get(gout) != nil {
			t.Fatalf("%s: checksum sent without x-amz-checksum-mode", tc.key)
		}
		_, gout = get(t, c, b, tc.key, func(in *s3.GetObjectInput) {
			in.ChecksumMode, in.Range = types.ChecksumModeEnabled, aws.String("bytes=0-9")
		})
		if tc.get(gout) != nil {
			t.Fatalf("%s: whole-object checksum sent for a range", tc.key)
		}
	}
	attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: &b, Key: aws.String("crc32"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum}})
	if err != nil || attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumCRC32) != crc {
		t.Fatalf("attributes checksum: %v %+v", err, attrs)
	}
	// A copy of the same bytes keeps its checksum.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("copy"), CopySource: aws.String(b + "/crc32")}); err != nil {
		t.Fatal(err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("copy"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC32) != crc {
		t.Fatalf("copy lost its checksum: %v", err)
	}
}

func TestMultipartChecksums(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	parts := [][]byte{randBytes(21, 5<<20), randBytes(22, 5<<20), randBytes(23, 1234)}
	all := bytes.Join(parts, nil)

	// COMPOSITE SHA256: checksum of the concatenated part checksums, "-N".
	comp := sha256.New()
	for _, p := range parts {
		s := sha256.Sum256(p)
		comp.Write(s[:])
	}
	wantComposite := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(comp.Sum(nil)), len(parts))
	out := mpUpload(t, c, b, "composite", parts,
		func(in *s3.CreateMultipartUploadInput) { in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256 },
		func(in *s3.UploadPartInput) { in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256 })
	if aws.ToString(out.ChecksumSHA256) != wantComposite || out.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("composite: %q %q, want %q", aws.ToString(out.ChecksumSHA256), out.ChecksumType, wantComposite)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("composite"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumSHA256) != wantComposite || h.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("head composite: %v %q %q", err, aws.ToString(h.ChecksumSHA256), h.ChecksumType)
	}

	// FULL_OBJECT CRC32C: the CRC of the whole object, combined from the
	// parts' CRCs.
	out = mpUpload(t, c, b, "full", parts,
		func(in *s3.CreateMultipartUploadInput) {
			in.ChecksumAlgorithm, in.ChecksumType = types.ChecksumAlgorithmCrc32c, types.ChecksumTypeFullObject
		},
		func(in *s3.UploadPartInput) { in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c })
	want := b64crc32(all, crc32.MakeTable(crc32.Castagnoli))
	if aws.ToString(out.ChecksumCRC32C) != want || out.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("full-object crc32c %q %q, want %q", aws.ToString(out.ChecksumCRC32C), out.ChecksumType, want)
	}
	got, _ := get(t, c, b, "full", func(in *s3.GetObjectInput) { in.ChecksumMode = types.ChecksumModeEnabled })
	if !bytes.Equal(got, all) {
		t.Fatal("full-object multipart body wrong")
	}

	// Parts list their checksums; a wrong one in Complete is InvalidPart;
	// a part with another algorithm is refused.
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("bad"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	if up.ChecksumAlgorithm != types.ChecksumAlgorithmCrc32 || up.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("create answered %q %q", up.ChecksumAlgorithm, up.ChecksumType)
	}
	p1, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("bad"), UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(parts[2]), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil || aws.ToString(p1.ChecksumCRC32) != b64crc32(parts[2], crc32.IEEETable) {
		t.Fatalf("part checksum: %v %q", err, aws.ToString(p1.ChecksumCRC32))
	}
	_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("bad"), UploadId: up.UploadId, PartNumber: aws.Int32(2),
		Body: bytes.NewReader(parts[2]), ChecksumAlgorithm: types.ChecksumAlgorithmSha1})
	wantErr(t, "part with another algorithm", err, "", 400)
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("bad"), UploadId: up.UploadId})
	if err != nil || len(lp.Parts) != 1 || aws.ToString(lp.Parts[0].ChecksumCRC32) != aws.ToString(p1.ChecksumCRC32) || lp.ChecksumAlgorithm != types.ChecksumAlgorithmCrc32 {
		t.Fatalf("list parts: %v %+v", err, lp)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("bad"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag, ChecksumCRC32: aws.String("AAAAAA==")}}}})
	wantErr(t, "wrong part checksum", err, "InvalidPart", 400)
	_, err = c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("x"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeFullObject})
	wantErr(t, "FULL_OBJECT SHA256", err, "InvalidRequest", 400)
}
