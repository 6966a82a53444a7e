package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ssecKey is an SSE-C key with the headers the SDK expects (base64 key,
// base64 MD5).
type ssecKey struct{ key, md5 string }

func newSSECKey(seed uint64) ssecKey {
	raw := randBytes(seed, 32)
	sum := md5.Sum(raw)
	return ssecKey{base64.StdEncoding.EncodeToString(raw), base64.StdEncoding.EncodeToString(sum[:])}
}

func (k ssecKey) put(in *s3.PutObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key), aws.String(k.md5)
}

func (k ssecKey) get(in *s3.GetObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key), aws.String(k.md5)
}

func sseS3(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 }

// onDevices reports which of the needles occur in any file under the
// device directories (replica files of every tier).
func onDevices(t *testing.T, needles [][]byte) []bool {
	t.Helper()
	found := make([]bool, len(needles))
	err := filepath.WalkDir(filepath.Join(srv.dir, "dev"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // a file removed by a concurrent test
		}
		for i, n := range needles {
			if !found[i] && bytes.Contains(b, n) {
				found[i] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// needles cuts 64-byte samples at several offsets of data: a replica
// file's slice framing may split one, not all.
func needles(data []byte) [][]byte {
	var out [][]byte
	for _, off := range []int{0, len(data) / 3, len(data) / 2, len(data) - 200} {
		if off >= 0 && off+64 <= len(data) {
			out = append(out, data[off:off+64])
		}
	}
	return out
}

func assertCiphertextOnDevices(t *testing.T, what string, data []byte) {
	t.Helper()
	for i, f := range onDevices(t, needles(data)) {
		if f {
			t.Fatalf("%s: plaintext sample %d found on a device", what, i)
		}
	}
}

// unique returns random bytes no other test writes.
func unique(n int) []byte { return randBytes(rand.Uint64(), n) }

func TestSSES3PutGetRangeHeadList(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)

	// Control: an unencrypted object's plaintext is found on the devices,
	// so the scan below can tell.
	plain := unique(300 << 10)
	put(t, c, b, "plain", plain)
	found := onDevices(t, needles(plain))
	if !found[0] && !found[1] {
		t.Fatal("control: plaintext of an unencrypted object not found on the devices; the scan cannot see anything")
	}

	for _, size := range []int{0, 1, 64<<10 - 1, 64 << 10, 300<<10 + 7, 5<<20 + 11} {
		key := fmt.Sprintf("enc-%d", size)
		data := unique(size)
		out := put(t, c, b, key, data, sseS3)
		if out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Fatalf("%s: put answered encryption %q", key, out.ServerSideEncryption)
		}
		if want := `"` + md5hex(data) + `"`; *out.ETag != want {
			t.Fatalf("%s: SSE-S3 etag %s, want the plaintext MD5 %s", key, *out.ETag, want)
		}
		got, gout := get(t, c, b, key)
		if !bytes.Equal(got, data) || gout.ServerSideEncryption != types.ServerSideEncryptionAes256 || *gout.ContentLength != int64(size) {
			t.Fatalf("%s: get %d bytes (equal %v), encryption %q, length %d", key, len(got), bytes.Equal(got, data), gout.ServerSideEncryption, *gout.ContentLength)
		}
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &key})
		if err != nil || *h.ContentLength != int64(size) || h.ServerSideEncryption != types.ServerSideEncryptionAes256 || *h.ETag != *out.ETag {
			t.Fatalf("%s: head %v %+v", key, err, h)
		}
		if size >= 200 {
			assertCiphertextOnDevices(t, key, data)
		}
		r := rand.New(rand.NewPCG(uint64(size), 3))
		for i := 0; i < 12 && size > 0; i++ {
			off := r.IntN(size)
			end := off + r.IntN(size-off)
			got, _ := get(t, c, b, key, func(in *s3.GetObjectInput) { in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, end)) })
			if !bytes.Equal(got, data[off:end+1]) {
				t.Fatalf("%s: range %d-%d wrong", key, off, end)
			}
		}
	}
	lst, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, Prefix: aws.String("enc-5")})
	if err != nil || len(lst.Contents) != 1 || *lst.Contents[0].Size != 5<<20+11 {
		t.Fatalf("list reports %v %+v, want the plaintext size", err, lst)
	}
	attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: &b, Key: aws.String("enc-1"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || *attrs.ObjectSize != 1 {
		t.Fatalf("attributes: %v %+v", err, attrs)
	}
	// x-amz-server-side-encryption means nothing on a read: refused.
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("enc-1")}, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.SetHeaderValue("X-Amz-Server-Side-Encryption", "AES256"))
	})
	wantErr(t, "get with x-amz-server-side-encryption", err, "InvalidArgument", 400)
}

func TestSSECustomerKey(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	k1, k2 := newSSECKey(1), newSSECKey(2)
	data := unique(200<<10 + 3)
	out := put(t, c, b, "secret", data, k1.put)
	if aws.ToString(out.SSECustomerAlgorithm) != "AES256" || aws.ToString(out.SSECustomerKeyMD5) != k1.md5 {
		t.Fatalf("put answered algorithm %q md5 %q", aws.ToString(out.SSECustomerAlgorithm), aws.ToString(out.SSECustomerKeyMD5))
	}
	if *out.ETag == `"`+md5hex(data)+`"` {
		t.Fatal("SSE-C ETag is the plaintext MD5 (AWS's is not; it would confirm guesses of the content)")
	}
	assertCiphertextOnDevices(t, "SSE-C object", data)

	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("secret")})
	wantErr(t, "get without key", err, "InvalidRequest", 400)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("secret")}, func(o *s3.Options) {})
	wantErr(t, "get without key", err, "InvalidRequest", 400)
	in := &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("secret")}
	k2.get(in)
	_, err = c.GetObject(ctx, in)
	wantErr(t, "get with another key", err, "AccessDenied", 403)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("secret")})
	wantErr(t, "head without key", err, "", 400)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("secret"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k2.key), SSECustomerKeyMD5: aws.String(k2.md5)})
	wantErr(t, "head with another key", err, "", 403)

	got, gout := get(t, c, b, "secret", k1.get)
	if !bytes.Equal(got, data) || aws.ToString(gout.SSECustomerKeyMD5) != k1.md5 || aws.ToString(gout.SSECustomerAlgorithm) != "AES256" {
		t.Fatalf("get with key: equal %v, md5 %q", bytes.Equal(got, data), aws.ToString(gout.SSECustomerKeyMD5))
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("secret"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.key), SSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil || *h.ContentLength != int64(len(data)) {
		t.Fatalf("head with key: %v", err)
	}
	got, _ = get(t, c, b, "secret", k1.get, func(in *s3.GetObjectInput) { in.Range = aws.String("bytes=70000-140000") })
	if !bytes.Equal(got, data[70000:140001]) {
		t.Fatal("SSE-C range wrong")
	}
	// SSE-C headers on an unencrypted object are refused.
	put(t, c, b, "open", []byte("hello"))
	in = &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("open")}
	k1.get(in)
	_, err = c.GetObject(ctx, in)
	wantErr(t, "SSE-C headers on a plain object", err, "InvalidRequest", 400)

	// Malformed SSE-C requests.
	for _, tc := range []struct {
		what        string
		alg, k, md5 string
		code        string
	}{
		{"md5 of another key", "AES256", k1.key, k2.md5, "InvalidArgument"},
		{"short key", "AES256", base64.StdEncoding.EncodeToString([]byte("short")), k1.md5, "InvalidArgument"},
		{"no md5", "AES256", k1.key, "", "InvalidArgument"},
		{"other algorithm", "AES128", k1.key, k1.md5, "InvalidEncryptionAlgorithmError"},
		{"no algorithm", "", k1.key, k1.md5, "InvalidArgument"},
	} {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("bad"), Body: strings.NewReader("x")}, func(o *s3.Options) {
			o.APIOptions = append(o.APIOptions,
				smithyhttp.SetHeaderValue("X-Amz-Server-Side-Encryption-Customer-Algorithm", tc.alg),
				smithyhttp.SetHeaderValue("X-Amz-Server-Side-Encryption-Customer-Key", tc.k),
				smithyhttp.SetHeaderValue("X-Amz-Server-Side-Encryption-Customer-Key-Md5", tc.md5))
		})
		wantErr(t, tc.what, err, tc.code, 400)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("both"), Body: strings.NewReader("x"),
		ServerSideEncryption: types.ServerSideEncryptionAes256,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.key), SSECustomerKeyMD5: aws.String(k1.md5)})
	wantErr(t, "SSE-S3 and SSE-C together", err, "InvalidArgument", 400)
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("bad")}); err == nil {
		t.Fatal("a refused SSE-C put stored an object")
	}
}

func TestSSEKMSRefused(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("x"),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms})
	wantErr(t, "aws:kms put", err, "NotImplemented", 501)
	_, err = c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("k"),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("alias/x")})
	wantErr(t, "aws:kms multipart", err, "NotImplemented", 501)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("x"),
		ServerSideEncryption: "rot13"})
	wantErr(t, "unknown algorithm", err, "InvalidArgument", 400)
	_, err = c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: &b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAwsKms}}}}})
	wantErr(t, "aws:kms bucket default", err, "NotImplemented", 501)
}

// mpUpload uploads parts (each a byte slice) with per-request options and
// completes; it returns the completion output.
func mpUpload(t *testing.T, c *s3.Client, bucket, key string, parts [][]byte, create func(*s3.CreateMultipartUploadInput), part func(*s3.UploadPartInput)) *s3.CompleteMultipartUploadOutput {
	t.Helper()
	ctx := context.Background()
	cin := &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key}
	if create != nil {
		create(cin)
	}
	up, err := c.CreateMultipartUpload(ctx, cin)
	if err != nil {
		t.Fatalf("create upload: %v", err)
	}
	var done []types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		pin := &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId, PartNumber: &n, Body: bytes.NewReader(p)}
		if part != nil {
			part(pin)
		}
		out, err := c.UploadPart(ctx, pin)
		if err != nil {
			t.Fatalf("part %d: %v", n, err)
		}
		done = append(done, types.CompletedPart{PartNumber: &n, ETag: out.ETag})
	}
	out, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	return out
}

func partsETag(parts [][]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(parts))
}

func TestSSEMultipart(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	parts := [][]byte{unique(5 << 20), unique(5<<20 + 1), unique(70001)}
	all := bytes.Join(parts, nil)

	// SSE-S3: ETag is S3's md5-of-part-md5s of the plaintext.
	out := mpUpload(t, c, b, "s3mp", parts, func(in *s3.CreateMultipartUploadInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 }, nil)
	if *out.ETag != partsETag(parts) || out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("SSE-S3 multipart etag %s (want %s), encryption %q", *out.ETag, partsETag(parts), out.ServerSideEncryption)
	}
	got, gout := get(t, c, b, "s3mp")
	if !bytes.Equal(got, all) || *gout.ContentLength != int64(len(all)) {
		t.Fatal("SSE-S3 multipart get wrong")
	}
	// A range across the part boundary, and part 2 by number.
	got, _ = get(t, c, b, "s3mp", func(in *s3.GetObjectInput) { in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", 5<<20-10, 5<<20+10)) })
	if !bytes.Equal(got, all[5<<20-10:5<<20+11]) {
		t.Fatal("range across parts wrong")
	}
	got, gout = get(t, c, b, "s3mp", func(in *s3.GetObjectInput) { in.PartNumber = aws.Int32(2) })
	if !bytes.Equal(got, parts[1]) || aws.ToInt32(gout.PartsCount) != 3 {
		t.Fatalf("part 2 wrong (count %d)", aws.ToInt32(gout.PartsCount))
	}
	assertCiphertextOnDevices(t, "SSE-S3 multipart", parts[1])

	// SSE-C: every part needs the key; parts copied from an SSE-C
	// source with the copy-source key.
	k := newSSECKey(9)
	src := unique(5<<20 + 1000)
	put(t, c, b, "csrc", src, k.put)
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("cmp"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil {
		t.Fatal(err)
	}
	// Refusals use small bodies: the gateway answers before reading and
	// drains at most 256 KiB of an unread body before closing.
	_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(parts[2])})
	wantErr(t, "SSE-C part without key", err, "InvalidRequest", 400)
	k2 := newSSECKey(10)
	_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(parts[2]),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k2.key), SSECustomerKeyMD5: aws.String(k2.md5)})
	wantErr(t, "SSE-C part with another key", err, "InvalidArgument", 400)
	p1, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(parts[0]),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId, PartNumber: aws.Int32(2),
		CopySource: aws.String(b + "/csrc"), CopySourceRange: aws.String("bytes=100-5243499"),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(k.key), CopySourceSSECustomerKeyMD5: aws.String(k.md5),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId})
	if err != nil || len(lp.Parts) != 2 || *lp.Parts[0].Size != int64(len(parts[0])) || *lp.Parts[1].Size != 5243400 {
		t.Fatalf("list parts: %v %+v", err, lp)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("cmp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: p1.ETag}, {PartNumber: aws.Int32(2), ETag: p2.CopyPartResult.ETag}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(parts[0]), src[100:5243500]...)
	got, _ = get(t, c, b, "cmp", k.get)
	if !bytes.Equal(got, want) {
		t.Fatal("SSE-C multipart with a copied part: wrong bytes")
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("cmp")})
	wantErr(t, "SSE-C multipart get without key", err, "InvalidRequest", 400)

	// The 5 MiB minimum applies to the plaintext, not the (larger)
	// ciphertext.
	up, err = c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("small"), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{unique(5<<20 - 100), unique(10)} {
		n := int32(i + 1)
		o, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("small"), UploadId: up.UploadId, PartNumber: &n, Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: &n, ETag: o.ETag})
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("small"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	wantErr(t, "encrypted part under 5 MiB", err, "EntityTooSmall", 400)
}

func TestSSECopy(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	k1, k2 := newSSECKey(21), newSSECKey(22)
	data := unique(150<<10 + 1)
	put(t, c, b, "plain", data)
	put(t, c, b, "s3", data, sseS3)
	put(t, c, b, "c1", data, k1.put)

	copyObj := func(src, dst string, mod func(*s3.CopyObjectInput)) (*s3.CopyObjectOutput, error) {
		in := &s3.CopyObjectInput{Bucket: &b, Key: aws.String(dst), CopySource: aws.String(b + "/" + src)}
		if mod != nil {
			mod(in)
		}
		return c.CopyObject(ctx, in)
	}
	srcC1 := func(in *s3.CopyObjectInput) {
		in.CopySourceSSECustomerAlgorithm, in.CopySourceSSECustomerKey, in.CopySourceSSECustomerKeyMD5 = aws.String("AES256"), aws.String(k1.key), aws.String(k1.md5)
	}
	dstC2 := func(in *s3.CopyObjectInput) {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k2.key), aws.String(k2.md5)
	}
	// plain → SSE-S3
	out, err := copyObj("plain", "p2s3", func(in *s3.CopyObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 })
	if err != nil || out.ServerSideEncryption != types.ServerSideEncryptionAes256 || *out.CopyObjectResult.ETag != `"`+md5hex(data)+`"` {
		t.Fatalf("plain→SSE-S3: %v %+v", err, out)
	}
	// SSE-S3 → SSE-S3 (shares extents) and to another class (rewrites).
	if _, err := copyObj("s3", "s3copy", func(in *s3.CopyObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 }); err != nil {
		t.Fatal(err)
	}
	if _, err := copyObj("s3", "s3ia", func(in *s3.CopyObjectInput) {
		in.ServerSideEncryption, in.StorageClass = types.ServerSideEncryptionAes256, types.StorageClassStandardIa
	}); err != nil {
		t.Fatal(err)
	}
	// SSE-C source without its key is refused; with it, to SSE-C under
	// another key, to plain (no destination encryption), and in place to
	// a new key (key rotation).
	_, err = copyObj("c1", "x", nil)
	wantErr(t, "copy SSE-C source without key", err, "InvalidRequest", 400)
	if _, err := copyObj("c1", "c2", func(in *s3.CopyObjectInput) { srcC1(in); dstC2(in) }); err != nil {
		t.Fatal(err)
	}
	if _, err := copyObj("c1", "c2plain", srcC1); err != nil {
		t.Fatal(err)
	}
	if _, err := copyObj("c1", "c1", func(in *s3.CopyObjectInput) { srcC1(in); dstC2(in) }); err != nil {
		t.Fatalf("in-place key rotation: %v", err)
	}
	// SSE-S3 → SSE-C.
	if _, err := copyObj("s3", "s3toc", dstC2); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		opts func(*s3.GetObjectInput)
		enc  types.ServerSideEncryption
	}{
		{"p2s3", nil, types.ServerSideEncryptionAes256},
		{"s3copy", nil, types.ServerSideEncryptionAes256},
		{"s3ia", nil, types.ServerSideEncryptionAes256},
		{"c2", k2.get, ""},
		{"c2plain", nil, ""},
		{"c1", k2.get, ""},
		{"s3toc", k2.get, ""},
	} {
		var mods []func(*s3.GetObjectInput)
		if tc.opts != nil {
			mods = append(mods, tc.opts)
		}
		got, gout := get(t, c, b, tc.key, mods...)
		if !bytes.Equal(got, data) || gout.ServerSideEncryption != tc.enc {
			t.Fatalf("%s: equal %v, encryption %q want %q", tc.key, bytes.Equal(got, data), gout.ServerSideEncryption, tc.enc)
		}
	}
	// After rotation the old key no longer opens c1.
	in := &s3.GetObjectInput{Bucket: &b, Key: aws.String("c1")}
	k1.get(in)
	_, err = c.GetObject(ctx, in)
	wantErr(t, "old key after rotation", err, "AccessDenied", 403)
	loc, err := srv.layer.Locate(ctx, b, "s3ia")
	if err != nil || loc.Vector != "hdd=2" {
		t.Fatalf("class change of an encrypted copy: vector %v, %v", loc.Vector, err)
	}
}

func TestBucketDefaultEncryption(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	_, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: &b})
	wantErr(t, "no default encryption", err, "ServerSideEncryptionConfigurationNotFoundError", 404)
	_, err = c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: &b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ge, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: &b})
	if err != nil || len(ge.ServerSideEncryptionConfiguration.Rules) != 1 ||
		ge.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAes256 {
		t.Fatalf("get encryption: %v %+v", err, ge)
	}
	data := unique(100 << 10)
	out := put(t, c, b, "default", data)
	if out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("default-encrypted put answered %q", out.ServerSideEncryption)
	}
	assertCiphertextOnDevices(t, "bucket default", data)
	// SSE-C on a default-encrypted bucket wins.
	k := newSSECKey(31)
	put(t, c, b, "cust", data, k.put)
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("cust")}); err == nil {
		t.Fatal("SSE-C object readable without its key in a default-encrypted bucket")
	}
	if _, err := c.DeleteBucketEncryption(ctx, &s3.DeleteBucketEncryptionInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	out = put(t, c, b, "after", []byte("plain again"))
	if out.ServerSideEncryption != "" {
		t.Fatalf("put after DeleteBucketEncryption answered %q", out.ServerSideEncryption)
	}
	got, _ := get(t, c, b, "default")
	if !bytes.Equal(got, data) {
		t.Fatal("object written under the old default unreadable")
	}
	_, err = c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String("no-such-bucket-enc"), ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}})
	wantErr(t, "encryption of a missing bucket", err, "NoSuchBucket", 404)
	// Malformed body.
	req, _ := http.NewRequest(http.MethodPut, srv.url+"/"+b+"?encryption", strings.NewReader("<nope"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("unsigned PutBucketEncryption: %d, want 403", resp.StatusCode)
	}
}

// TestSSEHeadersThatWouldBeIgnored pins that encryption headers the
// gateway cannot act on are refused, as AWS refuses them, rather than
// accepted and dropped: a KMS key ID without x-amz-server-side-encryption:
// aws:kms (PUT, CreateMultipartUpload, copy), and
// x-amz-server-side-encryption on a part of an upload that is not SSE-S3.
func TestSSEHeadersThatWouldBeIgnored(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	kmsKey := "arn:aws:kms:us-east-1:111122223333:key/x"
	withKMSKey := func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", kmsKey))
	}
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("kms"), Body: strings.NewReader("x")}, withKMSKey)
	wantErr(t, "PUT with a KMS key ID alone", err, "InvalidArgument", 400)
	if _, err := srv.layer.Head(ctx, b, "kms"); err == nil {
		t.Fatal("PUT with a KMS key ID alone stored the object")
	}
	k := newSSECKey(31)
	in := &s3.PutObjectInput{Bucket: &b, Key: aws.String("kms"), Body: strings.NewReader("x")}
	k.put(in)
	_, err = c.PutObject(ctx, in, withKMSKey)
	wantErr(t, "SSE-C PUT with a KMS key ID", err, "InvalidArgument", 400)
	_, err = c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("kms")}, withKMSKey)
	wantErr(t, "CreateMultipartUpload with a KMS key ID alone", err, "InvalidArgument", 400)
	put(t, c, b, "src", []byte("x"))
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("kms"), CopySource: aws.String(b + "/src")}, withKMSKey)
	wantErr(t, "copy with a KMS key ID alone", err, "InvalidArgument", 400)

	withSSE := func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Amz-Server-Side-Encryption", "AES256"))
	}
	part := func(id string) error {
		_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b, Key: aws.String("mp"), UploadId: &id, PartNumber: aws.Int32(1),
			Body: strings.NewReader("x")}, withSSE)
		return err
	}
	plain := startUpload(t, c, b, "mp")
	wantErr(t, "UploadPart with x-amz-server-side-encryption, unencrypted upload", part(plain), "InvalidArgument", 400)
	parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("mp"), UploadId: &plain})
	if err != nil || len(parts.Parts) != 0 {
		t.Fatalf("refused part stored: %v (%v)", parts.Parts, err)
	}
	encrypted := startUpload(t, c, b, "mp", func(in *s3.CreateMultipartUploadInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 })
	if err := part(encrypted); err != nil {
		t.Fatalf("UploadPart with x-amz-server-side-encryption, SSE-S3 upload: %v", err)
	}
}
