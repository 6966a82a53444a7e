package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
)

// Object content is a pure function of (seed, key) so that any process can
// verify a GET without a stored copy. Generating and checking it must cost
// far less than moving the bytes over loopback (GETs run at GB/s here), so
// content is assembled from a 1 MiB random table with memcpy, never produced
// byte by byte:
//
//	block j of an object (4 KiB; the last may be short):
//	  [0, 8)     little-endian mix(id, j)          — names the object and block
//	  [8, 4096)  table[off(id, j) : off(id, j)+4088] — cheap, incompressible filler
//
// The per-block header makes every block unique to its key and position, so a
// misdirected, shifted or stale block is always detected; the filler catches
// corruption inside the block.
const (
	contentBlockBytes  = 4096
	contentHeaderBytes = 8
	contentTableBytes  = 1 << 20
)

// ContentSource generates and verifies object content for one seed.
type ContentSource struct {
	seed  uint64
	table []byte
}

// NewContentSource builds the random table for seed (≈1 ms).
func NewContentSource(seed uint64) *ContentSource {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "terrace-bench-content-v1")
	t := make([]byte, contentTableBytes+contentBlockBytes)
	_, _ = rand.NewChaCha8(key).Read(t)
	return &ContentSource{seed: seed, table: t}
}

// Seed returns the seed the source was built with.
func (s *ContentSource) Seed() uint64 { return s.seed }

// Object returns the content of key, whose size is drawn from dist by the
// key's hash: the same (seed, key, dist) always gives the same bytes.
func (s *ContentSource) Object(key string, dist SizeDist) Content {
	id := s.id(key)
	return Content{src: s, id: id, size: dist.Sample(mix64(id ^ 0x5bd1e9955bd1e995))}
}

// ObjectSize returns the size Object would give, without building it.
func (s *ContentSource) ObjectSize(key string, dist SizeDist) int64 {
	return dist.Sample(mix64(s.id(key) ^ 0x5bd1e9955bd1e995))
}

func (s *ContentSource) id(key string) uint64 {
	return mix64(fnv64(key) ^ mix64(s.seed))
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// mix64 is the splitmix64 finalizer: a cheap bijection with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Content is one object's bytes, described rather than stored.
type Content struct {
	src  *ContentSource
	id   uint64
	size int64
}

// Size is the object's length in bytes.
func (c Content) Size() int64 { return c.size }

// walk calls fn for each run of expected bytes covering [off, off+n): fn gets
// the position of the run relative to off and the expected bytes.
func (c Content) walk(off int64, n int, fn func(rel int, want []byte) bool) {
	var hdr [contentHeaderBytes]byte
	rel := 0
	for rel < n {
		pos := off + int64(rel)
		blk := uint64(pos / contentBlockBytes)
		in := int(pos % contentBlockBytes)
		var want []byte
		if in < contentHeaderBytes {
			binary.LittleEndian.PutUint64(hdr[:], mix64(c.id+blk*0x9e3779b97f4a7c15))
			want = hdr[in:]
		} else {
			o := int(mix64(c.id^(blk*0xc2b2ae3d27d4eb4f+1))%(contentTableBytes/8)) * 8
			want = c.src.table[o+in-contentHeaderBytes : o+contentBlockBytes-contentHeaderBytes]
		}
		if len(want) > n-rel {
			want = want[:n-rel]
		}
		if !fn(rel, want) {
			return
		}
		rel += len(want)
	}
}

// ReadAt fills p with the object's bytes at off (io.ReaderAt).
func (c Content) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("bench: negative offset")
	}
	if off >= c.size {
		return 0, io.EOF
	}
	n := len(p)
	if rem := c.size - off; int64(n) > rem {
		n = int(rem)
	}
	c.walk(off, n, func(rel int, want []byte) bool {
		copy(p[rel:], want)
		return true
	})
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Verify checks that p holds the object's bytes at off. It reports the first
// differing offset; bytes past the object's end are an error.
func (c Content) Verify(p []byte, off int64) error {
	if off+int64(len(p)) > c.size {
		return fmt.Errorf("bench: verify: %d bytes past the expected size %d", off+int64(len(p))-c.size, c.size)
	}
	var bad = -1
	c.walk(off, len(p), func(rel int, want []byte) bool {
		got := p[rel : rel+len(want)]
		if string(got) == string(want) {
			return true
		}
		for i := range want {
			if got[i] != want[i] {
				bad = rel + i
				break
			}
		}
		return false
	})
	if bad >= 0 {
		return fmt.Errorf("bench: verify: content differs at byte %d of %d", off+int64(bad), c.size)
	}
	return nil
}

// NewReader returns an io.ReadSeeker over the content, usable as a PUT body:
// the S3 client can seek it to sign or resend the payload.
func (c Content) NewReader() *ContentReader { return &ContentReader{c: c} }

// ContentReader streams a Content.
type ContentReader struct {
	c   Content
	off int64
}

// Read implements io.Reader.
func (r *ContentReader) Read(p []byte) (int, error) {
	n, err := r.c.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (r *ContentReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.c.size + offset
	default:
		return 0, errors.New("bench: seek: bad whence")
	}
	if abs < 0 {
		return 0, errors.New("bench: seek: negative position")
	}
	r.off = abs
	return abs, nil
}

// Len returns the number of unread bytes (used by HTTP clients to set the
// content length).
func (r *ContentReader) Len() int {
	if r.off >= r.c.size {
		return 0
	}
	return int(r.c.size - r.off)
}
