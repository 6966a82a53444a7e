// Command s3conformance is the aws-sdk-go-v2 half of the S3 conformance
// set (scripts/s3-conformance.sh runs it against a real `terrace server`).
// It manages users through the `terrace user` CLI, checks what clients of
// the Go SDK see, and prints one line per check, "go/NAME OUTCOME", where
// OUTCOME is "ok", the S3 error code (or HTTP status) the server answered,
// or "assert:..." when a successful answer was wrong.
// scripts/s3-conformance.expected holds the outcome each check must have.
//
// Usage: s3conformance -endpoint http://HOST:PORT -admin http://HOST:PORT -bin bin/terrace
// (root credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

var (
	endpoint = flag.String("endpoint", "", "S3 endpoint")
	admin    = flag.String("admin", "", "admin API endpoint")
	bin      = flag.String("bin", "bin/terrace", "terrace binary (user management)")
	run      = fmt.Sprintf("%x", time.Now().UnixMilli())
	ctx      = context.Background()
)

type creds struct {
	Name      string `json:"name"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

func terrace(args ...string) ([]byte, error) {
	cmd := exec.Command(*bin, append([]string{"--endpoint", *admin}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

func userCmd(args ...string) creds {
	out, err := terrace(append([]string{"user"}, append(args, "--json")...)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3conformance:", err)
		os.Exit(2)
	}
	var c creds
	if err := json.Unmarshal(out, &c); err != nil {
		fmt.Fprintln(os.Stderr, "s3conformance: user output:", err)
		os.Exit(2)
	}
	return c
}

func client(ak, sk string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: endpoint, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""), Retryer: aws.NopRetryer{},
		DisableLogOutputChecksumValidationSkipped: true})
}

type assertErr string

func (a assertErr) Error() string { return string(a) }

func expect(cond bool, format string, args ...any) {
	if !cond {
		panic(assertErr(fmt.Sprintf(format, args...)))
	}
}

func check(name string, fn func() error) {
	out := func() (res string) {
		defer func() {
			if r := recover(); r != nil {
				if a, ok := r.(assertErr); ok {
					res = "assert:" + strings.ReplaceAll(string(a), " ", "_")
					return
				}
				res = fmt.Sprintf("panic:%v", r)
			}
		}()
		err := fn()
		if err == nil {
			return "ok"
		}
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() != "" {
			return ae.ErrorCode()
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			return fmt.Sprint(re.HTTPStatusCode())
		}
		var st statusErr
		if errors.As(err, &st) {
			return string(st)
		}
		return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
	}()
	fmt.Printf("go/%s %s\n", name, out)
}

type statusErr string

func (s statusErr) Error() string { return string(s) }

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func main() {
	flag.Parse()
	root := client(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"))
	carol := userCmd("add", "carol-"+run)
	dave := userCmd("add", "dave-"+run)
	cc, dc := client(carol.AccessKey, carol.SecretKey), client(dave.AccessKey, dave.SecretKey)
	bucket := "go-conf-" + run

	check("user-create-bucket", func() error {
		_, err := cc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
		return err
	})
	data := random(1<<20 + 3)
	check("put-crc32-checksum", func() error {
		// The SDK computes the CRC32; the server verifies, stores and
		// returns it.
		out, err := cc.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("k"), Body: bytes.NewReader(data),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil {
			return err
		}
		g, err := cc.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			return err
		}
		defer g.Body.Close()
		b, err := io.ReadAll(g.Body) // the SDK validates the checksum while reading
		expect(err == nil && bytes.Equal(b, data), "body: %v", err)
		expect(aws.ToString(g.ChecksumCRC32) != "" && aws.ToString(g.ChecksumCRC32) == aws.ToString(out.ChecksumCRC32), "crc32 %q vs %q",
			aws.ToString(g.ChecksumCRC32), aws.ToString(out.ChecksumCRC32))
		return nil
	})
	check("cross-user-get-denied", func() error {
		_, err := dc.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("k")})
		return err
	})
	check("cross-user-head-bucket-denied", func() error {
		_, err := dc.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
		return err
	})
	check("non-ascii-metadata", func() error {
		meta := map[string]string{"city": "Zürich", "word": "こんにちは"}
		if _, err := cc.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("meta"), Body: strings.NewReader("x"), Metadata: meta}); err != nil {
			return err
		}
		h, err := cc.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("meta")})
		if err != nil {
			return err
		}
		for k, v := range meta {
			got, err := new(mime.WordDecoder).DecodeHeader(h.Metadata[k])
			expect(err == nil && got == v, "%s: %q", k, h.Metadata[k])
		}
		return nil
	})
	key := random(32)
	kb, ks := base64.StdEncoding.EncodeToString(key), md5.Sum(key)
	km := base64.StdEncoding.EncodeToString(ks[:])
	check("sse-c-multipart", func() error {
		up, err := cc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String("c"),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: &kb, SSECustomerKeyMD5: &km})
		if err != nil {
			return err
		}
		p1, p2 := random(5<<20), random(77)
		var parts []types.CompletedPart
		for i, p := range [][]byte{p1, p2} {
			n := int32(i + 1)
			o, err := cc.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String("c"), UploadId: up.UploadId, PartNumber: &n,
				Body: bytes.NewReader(p), SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: &kb, SSECustomerKeyMD5: &km})
			if err != nil {
				return err
			}
			parts = append(parts, types.CompletedPart{PartNumber: &n, ETag: o.ETag})
		}
		if _, err := cc.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: aws.String("c"), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			return err
		}
		g, err := cc.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("c"), Range: aws.String(fmt.Sprintf("bytes=%d-%d", 5<<20-5, 5<<20+5)),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: &kb, SSECustomerKeyMD5: &km})
		if err != nil {
			return err
		}
		defer g.Body.Close()
		b, _ := io.ReadAll(g.Body)
		expect(bytes.Equal(b, append(p1[5<<20-5:], p2[:6]...)), "range across parts")
		return nil
	})
	check("sse-c-get-without-key", func() error {
		_, err := cc.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("c")})
		return err
	})
	check("presigned-put", func() error {
		p, err := s3.NewPresignClient(cc).PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("presigned")})
		if err != nil {
			return err
		}
		req, _ := http.NewRequest(http.MethodPut, p.URL, strings.NewReader("via presigned url"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		expect(resp.StatusCode == 200, "status %d", resp.StatusCode)
		return nil
	})
	check("chunked-upload-without-content-length", func() error {
		body := random(2<<20 + 1)
		req, _ := http.NewRequest(http.MethodPut, *endpoint+"/"+bucket+"/chunked", io.NopCloser(bytes.NewReader(body)))
		req.ContentLength = -1
		sum := sha256.Sum256(body)
		payload := hex.EncodeToString(sum[:])
		req.Header.Set("X-Amz-Content-Sha256", payload)
		_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(ctx, aws.Credentials{AccessKeyID: carol.AccessKey, SecretAccessKey: carol.SecretKey}, req, payload, "s3", "us-east-1", time.Now())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return statusErr(fmt.Sprint(resp.StatusCode))
		}
		h, err := cc.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("chunked")})
		expect(err == nil && aws.ToInt64(h.ContentLength) == int64(len(body)), "stored size")
		return nil
	})
	check("expect-continue-bad-signature", func() error { return expectContinue(bucket, carol.AccessKey, "wrong") })
	check("expect-continue-good-signature", func() error { return expectContinue(bucket, carol.AccessKey, carol.SecretKey) })
	check("user-ls", func() error {
		out, err := terrace("user", "ls", "--json")
		if err != nil {
			return err
		}
		expect(strings.Contains(string(out), carol.Name) && !strings.Contains(string(out), carol.SecretKey), "listing")
		return nil
	})
	check("user-keys-rotate-old-key", func() error {
		rot := userCmd("keys", "rotate", dave.Name)
		expect(rot.AccessKey != dave.AccessKey, "same access key")
		_, err := client(rot.AccessKey, rot.SecretKey).ListBuckets(ctx, &s3.ListBucketsInput{})
		expect(err == nil, "new key: %v", err)
		_, err = dc.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	})
	check("user-rm", func() error {
		if _, err := terrace("user", "rm", carol.Name); err != nil {
			return err
		}
		_, err := cc.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	})
	check("root-still-reads-removed-users-bucket", func() error {
		_, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("k")})
		return err
	})
}

// expectContinue sends a PUT with Expect: 100-continue and reports
// "100-continue" or the final status received before any body was sent.
func expectContinue(bucket, ak, sk string) error {
	body := bytes.Repeat([]byte("e"), 4096)
	u, _ := url.Parse(*endpoint)
	req, _ := http.NewRequest(http.MethodPut, *endpoint+"/"+bucket+"/expect", bytes.NewReader(body))
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(ctx, aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req, payload, "s3", "us-east-1", time.Now())
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", req.URL.RequestURI(), u.Host, len(body))
	for k, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(conn, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprint(conn, "\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return statusErr("garbled")
	}
	if f[1] == "100" {
		return statusErr("100-continue")
	}
	return statusErr("status:" + f[1])
}
