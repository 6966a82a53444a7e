package device

// The remote backend keeps replica files as objects in an S3-compatible
// bucket (aws-sdk-go-v2, already the S3 client of the benchmarks).
// Objects are immutable, so a file being written is staged in memory and
// uploaded whole on Sync; the Curator only demotes sealed egroups, which
// arrive through one create-append-sync-verify copy.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// remoteTimeout bounds one remote request.
const remoteTimeout = 60 * time.Second

type remoteBackend struct {
	c      *s3.Client
	bucket string
	prefix string
}

// parseRemoteURL splits http(s)://[key:secret@]host:port/bucket[/prefix].
func parseRemoteURL(raw string) (endpoint, bucket, prefix, key, secret string, err error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", "", "", "", fmt.Errorf("remote device url %q: want http(s)://[key:secret@]host:port/bucket[/prefix]", raw)
	}
	path := strings.Trim(u.Path, "/")
	bucket, prefix, _ = strings.Cut(path, "/")
	if bucket == "" {
		return "", "", "", "", "", fmt.Errorf("remote device url %q: no bucket", raw)
	}
	if prefix != "" {
		prefix += "/"
	}
	if u.User != nil {
		key = u.User.Username()
		secret, _ = u.User.Password()
	}
	return u.Scheme + "://" + u.Host, bucket, prefix, key, secret, nil
}

func newRemoteBackend(raw string) (*remoteBackend, error) {
	endpoint, bucket, prefix, key, secret, err := parseRemoteURL(raw)
	if err != nil {
		return nil, err
	}
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(key, secret, ""),
	})
	b := &remoteBackend{c: c, bucket: bucket, prefix: prefix}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		if _, cerr := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); cerr != nil {
			return nil, fmt.Errorf("remote device %s: bucket %s unreachable (%v) and cannot be created: %w", endpoint, bucket, err, cerr)
		}
	}
	return b, nil
}

func (b *remoteBackend) key(name string) string { return b.prefix + name }

func isNotFound(err error) bool {
	var nk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nk) || errors.As(err, &nf) || strings.Contains(err.Error(), "StatusCode: 404")
}

func (b *remoteBackend) open(name string, create bool) (rawFile, error) {
	f := &remoteFile{b: b, key: b.key(name)}
	if create {
		f.buf, f.staged, f.dirty = []byte{}, true, true
		return f, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	h, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(f.key)})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%s: %w", name, ErrNotExist)
		}
		return nil, err
	}
	f.remoteSize = aws.ToInt64(h.ContentLength)
	return f, nil
}

func (b *remoteBackend) remove(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.key(name))})
	return err
}

func (b *remoteBackend) walk(fn func(name string, size int64, mtime time.Time)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*remoteTimeout)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			fn(strings.TrimPrefix(aws.ToString(o.Key), b.prefix), aws.ToInt64(o.Size), aws.ToTime(o.LastModified))
		}
	}
	return nil
}

func (b *remoteBackend) list() ([]string, error) {
	var out []string
	err := b.walk(func(n string, _ int64, _ time.Time) { out = append(out, n) })
	return out, err
}

func (b *remoteBackend) listInfo() ([]FileInfo, error) {
	var out []FileInfo
	err := b.walk(func(n string, sz int64, mt time.Time) { out = append(out, FileInfo{Name: n, Size: sz, ModTime: mt}) })
	return out, err
}

func (b *remoteBackend) stat(name string) (FileInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	h, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.key(name))})
	if err != nil {
		if isNotFound(err) {
			return FileInfo{}, fmt.Errorf("%s: %w", name, ErrNotExist)
		}
		return FileInfo{}, err
	}
	return FileInfo{Name: name, Size: aws.ToInt64(h.ContentLength), ModTime: aws.ToTime(h.LastModified)}, nil
}

func (b *remoteBackend) usedBytes() (int64, error) {
	var n int64
	err := b.walk(func(_ string, sz int64, _ time.Time) { n += sz })
	return n, err
}

// remoteFile is one object. While staged (being written) its bytes live in
// buf and Sync uploads them; otherwise reads are ranged GETs.
type remoteFile struct {
	b          *remoteBackend
	key        string
	mu         sync.Mutex
	buf        []byte
	staged     bool
	dirty      bool
	remoteSize int64
}

// stage downloads the object so it can be modified (rare: an explicit
// remote replica of an open egroup).
func (f *remoteFile) stage() error {
	if f.staged {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	o, err := f.b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(f.b.bucket), Key: aws.String(f.key)})
	if err != nil {
		return err
	}
	defer o.Body.Close()
	buf, err := io.ReadAll(o.Body)
	if err != nil {
		return err
	}
	f.buf, f.staged = buf, true
	return nil
}

func (f *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged {
		if off >= int64(len(f.buf)) {
			return 0, io.EOF
		}
		n := copy(p, f.buf[off:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if off >= f.remoteSize {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.remoteSize) - 1
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	o, err := f.b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(f.b.bucket), Key: aws.String(f.key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end))})
	if err != nil {
		return 0, err
	}
	defer o.Body.Close()
	n, err := io.ReadFull(o.Body, p[:end-off+1])
	if err != nil {
		return n, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *remoteFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.stage(); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if end > int64(len(f.buf)) {
		nb := make([]byte, end)
		copy(nb, f.buf)
		f.buf = nb
	}
	copy(f.buf[off:], p)
	f.dirty = true
	return len(p), nil
}

func (f *remoteFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uploadLocked()
}

// uploadLocked uploads the staged bytes if they changed since the last
// upload.
func (f *remoteFile) uploadLocked() error {
	if !f.dirty {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	_, err := f.b.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(f.b.bucket), Key: aws.String(f.key),
		Body: bytes.NewReader(f.buf), ContentLength: aws.Int64(int64(len(f.buf)))})
	if err != nil {
		return err
	}
	f.dirty = false
	f.remoteSize = int64(len(f.buf))
	return nil
}

func (f *remoteFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.stage(); err != nil {
		return err
	}
	if size < int64(len(f.buf)) {
		f.buf = f.buf[:size]
	} else {
		nb := make([]byte, size)
		copy(nb, f.buf)
		f.buf = nb
	}
	f.dirty = true
	return nil
}

// Close uploads staged bytes not yet uploaded, like a local file whose
// dirty pages the kernel still writes back after close: the extent store
// closes idle handles when its cache is full, and an Append followed by a
// Sync on a fresh handle would otherwise report durable bytes that were
// dropped here (and the device would go on counting them as used). An
// upload that fails is returned; the device then fails (Device's Close).
func (f *remoteFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if f.staged {
		err = f.uploadLocked()
	}
	f.buf, f.staged = nil, false
	return err
}

func (f *remoteFile) size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged {
		return int64(len(f.buf)), nil
	}
	return f.remoteSize, nil
}
