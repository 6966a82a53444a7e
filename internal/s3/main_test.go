package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
	"github.com/terrace-storage/terrace/internal/users"
)

// The end-to-end tests share one in-process gateway (embedgw allows one per
// process): versitygw in front of a real object layer over Pebble and
// directory devices, two ssd and two hdd.
const (
	testUser   = "terrace-test"
	testSecret = "terrace-test-secret"
)

// testVirtualDomain is the gateway's virtual domain: <bucket>.vhost.test
// requests are virtual-hosted style (vhost_test.go dials them to the
// gateway's address).
const testVirtualDomain = "vhost.test"

// tooWideClass maps to a vector no device set can hold (three ssd
// replicas, two ssd devices): writes with it must fail with 507.
const tooWideClass = "TERRACE_TOO_WIDE"

var srv struct {
	url   string
	dir   string // devices live under dir/dev
	layer *object.Layer
	be    *Backend
	kv    meta.KV
	keys  *sse.Keyring
	users *users.Store
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "terrace-s3-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv.dir = dir
	mk, err := sse.NewMasterKey("test-1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if srv.keys, err = sse.NewKeyring(mk); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	layer, closeLayer, err := openLayer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open layer:", err)
		return 1
	}
	defer closeLayer()
	srv.layer = layer
	srv.users = users.New(srv.kv, srv.keys, testUser)

	addr, err := freeAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	be := NewBackend(layer, BackendOptions{Logger: log, Keys: srv.keys})
	srv.be = be
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, be, ServeConfig{Address: addr, RootUser: testUser, RootPassword: testSecret, Ready: ready,
			IAM: NewStoreIAM(srv.users, testUser), VirtualDomain: testVirtualDomain})
	}()
	select {
	case <-ready:
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "serve:", err)
		cancel()
		return 1
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "gateway did not become ready")
		cancel()
		return 1
	}
	srv.url = "http://" + addr
	code := m.Run()
	cancel()
	if err := <-errc; err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		code = 1
	}
	return code
}

func openLayer(dir string) (*object.Layer, func(), error) {
	var devs []*device.Device
	for i, tier := range []model.Tier{"ssd", "ssd", "hdd", "hdd"} {
		id := model.DeviceID(fmt.Sprintf("n1/%s%d", tier, i%2))
		d, err := device.Open(id, device.Spec{Tier: tier, Path: filepath.Join(dir, "dev", string(id)), Capacity: 8 << 30})
		if err != nil {
			return nil, nil, err
		}
		d.SetThroughput(200e6, 200e6)
		devs = append(devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		return nil, nil, err
	}
	srv.kv = kv
	local := object.NewLocal("n1", "r1", devs)
	classes := object.DefaultClasses()
	classes[tooWideClass] = model.MustParseVector("ssd=3")
	l, err := object.New(kv, local, local, object.Options{
		Classes: classes,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		kv.Close()
		return nil, nil, err
	}
	return l, func() { l.Close(); kv.Close() }, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// client returns an S3 client for the shared gateway, path-style, with
// static credentials and no retries (a retried failure would hide the
// first answer).
func client(t testing.TB, secret string) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.url),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(testUser, secret, ""),
		Retryer:      aws.NopRetryer{},
		DisableLogOutputChecksumValidationSkipped: true,
	})
}

var bucketSeq atomic.Int64

// newBucket creates a fresh bucket for one test.
func newBucket(t *testing.T, c *s3.Client) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", bucketSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// apiErr returns the S3 error code and HTTP status of err.
func apiErr(err error) (string, int) {
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// wantErr fails unless err carries the S3 code and status.
func wantErr(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %s (%d)", what, code, status)
	}
	gc, gs := apiErr(err)
	if (code != "" && gc != code) || gs != status {
		t.Fatalf("%s: got %q (%d), want %q (%d): %v", what, gc, gs, code, status, err)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func put(t *testing.T, c *s3.Client, bucket, key string, data []byte, mod ...func(*s3.PutObjectInput)) *s3.PutObjectOutput {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)}
	for _, f := range mod {
		f(in)
	}
	out, err := c.PutObject(context.Background(), in)
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return out
}

func get(t *testing.T, c *s3.Client, bucket, key string, mod ...func(*s3.GetObjectInput)) ([]byte, *s3.GetObjectOutput) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key}
	for _, f := range mod {
		f(in)
	}
	out, err := c.GetObject(context.Background(), in)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return b, out
}
