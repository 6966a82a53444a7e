package chaos

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/devcluster"
)

// The client load. Keys come in two families:
//
//   - hot keys "h<gen>/k<i>", written, read and deleted over and over by
//     every client at once — the registers whose histories the checker
//     searches for linearizability. The generation changes every
//     hotPeriod, which bounds each key's history and so the search;
//   - fresh keys "f/c<client>/<n>", written once by one client, then read,
//     listed and deleted — the bulk of the data the nemesis and the
//     Curator work on.
const (
	hotKeys   = 12
	hotPeriod = 45 * time.Second
	// maxFresh bounds a client's live fresh keys; past it the client
	// deletes before it writes more.
	maxFresh = 150
	bucket   = "chaos"
)

// Operation mix (weights).
var opWeights = []struct {
	kind   history.Kind
	weight int
}{{history.Put, 33}, {history.Get, 40}, {history.Delete, 10}, {history.Multipart, 1}, {history.List, 6}}

// objectSize draws a size: mostly small objects, some of several extents.
func objectSize(rng *rand.Rand) int64 {
	x := rng.IntN(100)
	logU := func(lo, hi int64) int64 {
		// log-uniform in [lo, hi)
		f := float64(lo) * math.Pow(float64(hi)/float64(lo), rng.Float64())
		return min(hi-1, max(lo, int64(f)))
	}
	switch {
	case x < 3:
		return 0
	case x < 15:
		return logU(1, 100)
	case x < 60:
		return logU(100, 16<<10)
	case x < 85:
		return logU(16<<10, 256<<10)
	case x < 99:
		return logU(256<<10, 2<<20)
	default:
		return logU(2<<20, 9<<20)
	}
}

// content is the body of write id: a ChaCha8 stream keyed by the run's
// seed and the write ID, so every write's bytes are distinct (except
// empty ones) and reproducible.
func content(seed uint64, id int64, size int64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(id))
	copy(key[16:], "terrace-chaos-v1")
	b := make([]byte, size)
	rand.NewChaCha8(key).Read(b)
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// endpoint is one node's S3 endpoint.
type endpoint struct {
	node string
	s3   *s3.Client
}

// newS3Client is an S3 client for one node with retries off: a failed
// request is recorded as it happened, never hidden behind a retry.
func newS3Client(url string, hc *http.Client) *s3.Client {
	cfg := aws.Config{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider(devcluster.AccessKey, devcluster.SecretKey, ""),
		HTTPClient:                 hc,
		Retryer:                    func() aws.Retryer { return aws.NopRetryer{} },
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(url)
		o.UsePathStyle = true
		o.ContinueHeaderThresholdBytes = -1
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
}

// newHTTPClient is shared by the S3 clients: a keep-alive pool sized to
// the load and a short dial timeout (a dead node refuses at once).
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: 4 * conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true, DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
	}}
}

// load runs the clients and records the history.
type load struct {
	seed      uint64
	eps       []endpoint
	timeout   time.Duration
	start     time.Time
	hist      *history.Writer
	nextOp    atomic.Int64
	nextWrite atomic.Int64

	mu  sync.Mutex
	ops []history.Op
}

func (l *load) now() int64 { return time.Since(l.start).Nanoseconds() }

func (l *load) record(op history.Op) {
	op.ID = l.nextOp.Add(1)
	l.hist.Add(op)
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// snapshot returns the operations recorded so far.
func (l *load) snapshot() []history.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]history.Op(nil), l.ops...)
}

// outcome classifies an error: nil is OK; a refused connection or an S3
// error the server answered with a 4xx certainly had no effect; anything
// else (timeouts, resets, 5xx) may have.
func outcome(err error) (history.Outcome, string) {
	if err == nil {
		return history.OK, ""
	}
	msg := shortErr(err)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return history.Fail, msg
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		return history.Fail, msg
	}
	return history.Unknown, msg
}

func shortErr(err error) string {
	var ae smithy.APIError
	s := err.Error()
	if errors.As(err, &ae) {
		s = ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s = fmt.Sprintf("HTTP %d %s", re.HTTPStatusCode(), s)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s = "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		s = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		s = "connection reset"
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func isNoSuchKey(err error) bool {
	var nk *types.NoSuchKey
	if errors.As(err, &nk) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey"
}

func unquote(s *string) string {
	if s == nil {
		return ""
	}
	return strings.Trim(*s, `"`)
}

// client is one load client's state.
type client struct {
	l     *load
	id    int
	rng   *rand.Rand
	fresh []string
	nextN int
}

func (l *load) run(ctx context.Context, clients int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := &client{l: l, id: i, rng: rand.New(rand.NewPCG(l.seed, uint64(i)+0x636c69656e74))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c.step(ctx)
			}
		}()
	}
	return &wg
}

func (c *client) hotKey() string {
	gen := time.Since(c.l.start) / hotPeriod
	return fmt.Sprintf("h%d/k%d", gen, c.rng.IntN(hotKeys))
}

func (c *client) pickKind() history.Kind {
	total := 0
	for _, w := range opWeights {
		total += w.weight
	}
	x := c.rng.IntN(total)
	for _, w := range opWeights {
		if x < w.weight {
			return w.kind
		}
		x -= w.weight
	}
	return history.Get
}

// step performs one random operation.
func (c *client) step(ctx context.Context) {
	ep := c.l.eps[c.rng.IntN(len(c.l.eps))]
	kind := c.pickKind()
	if kind == history.Put && len(c.fresh) >= maxFresh {
		kind = history.Delete
	}
	hot := c.rng.IntN(2) == 0
	var key string
	switch {
	case hot:
		key = c.hotKey()
	case kind.IsWrite():
		key = fmt.Sprintf("f/c%d/%d", c.id, c.nextN)
		c.nextN++
		c.fresh = append(c.fresh, key)
	case len(c.fresh) > 0:
		i := c.rng.IntN(len(c.fresh))
		key = c.fresh[i]
		if kind == history.Delete {
			c.fresh = append(c.fresh[:i], c.fresh[i+1:]...)
		}
	default:
		key = c.hotKey()
	}
	switch kind {
	case history.Put:
		c.put(ctx, ep, key)
	case history.Multipart:
		c.multipart(ctx, ep, key)
	case history.Get:
		c.get(ctx, ep, key, false)
	case history.Delete:
		c.delete(ctx, ep, key)
	case history.List:
		prefix := fmt.Sprintf("f/c%d/", c.id)
		if hot {
			prefix = fmt.Sprintf("h%d/", time.Since(c.l.start)/hotPeriod)
		}
		c.list(ctx, ep, prefix)
	}
}

func (c *client) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	// Operations in flight when the load stops finish (or time out): an
	// operation cut short by our own shutdown would be a false unknown.
	return context.WithTimeout(context.WithoutCancel(ctx), c.l.timeout)
}

func (c *client) put(ctx context.Context, ep endpoint, key string) {
	id := c.l.nextWrite.Add(1)
	body := content(c.l.seed, id, objectSize(c.rng))
	op := history.Op{Client: c.id, Node: ep.node, Kind: history.Put, Key: key, Write: id,
		Size: int64(len(body)), Digest: digest(body), ETag: md5hex(body)}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	op.Call = c.l.now()
	_, err := ep.s3.PutObject(octx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	op.Return = c.l.now()
	op.Outcome, op.Err = outcome(err)
	c.l.record(op)
}

// multipart uploads two parts (5 MiB, the minimum for all but the last,
// and up to 1 MiB) and completes; only the completion is a write.
func (c *client) multipart(ctx context.Context, ep endpoint, key string) {
	id := c.l.nextWrite.Add(1)
	size := 5<<20 + 1 + c.rng.Int64N(1<<20)
	body := content(c.l.seed, id, size)
	parts := [][]byte{body[:5<<20], body[5<<20:]}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.l.timeout)
	defer cancel()
	up, err := ep.s3.CreateMultipartUpload(octx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return // no object can appear without a completion
	}
	abort := func() {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ep.s3.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId})
	}
	var done []types.CompletedPart
	var sums []byte
	for i, p := range parts {
		out, err := ep.s3.UploadPart(octx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ContentLength: aws.Int64(int64(len(p)))})
		if err != nil {
			abort()
			return
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
		s := md5.Sum(p)
		sums = append(sums, s[:]...)
	}
	op := history.Op{Client: c.id, Node: ep.node, Kind: history.Multipart, Key: key, Write: id,
		Size: size, Digest: digest(body), ETag: fmt.Sprintf("%s-%d", md5hex(sums), len(parts))}
	op.Call = c.l.now()
	_, err = ep.s3.CompleteMultipartUpload(octx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	op.Return = c.l.now()
	op.Outcome, op.Err = outcome(err)
	c.l.record(op)
	if op.Outcome != history.OK {
		abort()
	}
}

// get reads a whole object; final marks the verification reads.
func (c *client) get(ctx context.Context, ep endpoint, key string, final bool) history.Op {
	op := history.Op{Client: c.id, Node: ep.node, Kind: history.Get, Key: key, Final: final}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	op.Call = c.l.now()
	out, err := ep.s3.GetObject(octx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var body []byte
	if err == nil {
		body, err = io.ReadAll(out.Body)
		out.Body.Close()
		if err == nil && out.ContentLength != nil && int64(len(body)) != *out.ContentLength {
			err = fmt.Errorf("short body: %d of %d bytes", len(body), *out.ContentLength)
		}
	}
	op.Return = c.l.now()
	switch {
	case err == nil:
		op.Outcome, op.Found = history.OK, true
		op.Size, op.Digest, op.ETag = int64(len(body)), digest(body), unquote(out.ETag)
	case isNoSuchKey(err):
		op.Outcome = history.OK
	default:
		// A failed read tells nothing about the object: unknown.
		_, op.Err = outcome(err)
		op.Outcome = history.Unknown
	}
	c.l.record(op)
	return op
}

func (c *client) delete(ctx context.Context, ep endpoint, key string) {
	op := history.Op{Client: c.id, Node: ep.node, Kind: history.Delete, Key: key}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	op.Call = c.l.now()
	_, err := ep.s3.DeleteObject(octx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	op.Return = c.l.now()
	op.Outcome, op.Err = outcome(err)
	c.l.record(op)
}

// list lists a prefix, every page; the listing is one operation.
func (c *client) list(ctx context.Context, ep endpoint, prefix string) {
	op := history.Op{Client: c.id, Node: ep.node, Kind: history.List, Prefix: prefix}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	op.Call = c.l.now()
	var token *string
	var err error
	for page := 0; page < 100; page++ {
		var out *s3.ListObjectsV2Output
		out, err = ep.s3.ListObjectsV2(octx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix),
			ContinuationToken: token, MaxKeys: aws.Int32(200)})
		if err != nil {
			break
		}
		for _, o := range out.Contents {
			op.Entries = append(op.Entries, history.Entry{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: unquote(o.ETag)})
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		token = out.NextContinuationToken
	}
	op.Return = c.l.now()
	op.Outcome, op.Err = outcome(err)
	if op.Outcome != history.OK {
		op.Outcome, op.Entries = history.Unknown, nil // a failed listing shows nothing
	}
	c.l.record(op)
}
