package sse

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Format constants (version 1).
const (
	// KeySize is the size of data keys, master keys and SSE-C keys.
	KeySize = 32
	// HeaderSize is the stream header: magic and version, then the salt.
	HeaderSize = 32
	// PackageSize is the plaintext size of every package but the last.
	PackageSize = 64 << 10
	// TagSize is the GCM tag each package carries.
	TagSize = 16

	saltSize     = HeaderSize - 4
	sealedPkgMax = PackageSize + TagSize
)

var magic = [4]byte{'T', 'S', 'E', 1}

// Errors.
var (
	// ErrAuth means ciphertext failed authentication: wrong key, or data
	// that was corrupted, truncated, reordered or forged.
	ErrAuth = errors.New("sse: message authentication failed")
	// ErrFormat means bytes are not a version-1 stream, or a size is not
	// a possible ciphertext size.
	ErrFormat = errors.New("sse: not an encrypted stream")
)

// packages is the number of packages a plaintext of n bytes is sealed in.
func packages(n int64) int64 {
	if n <= 0 {
		return 1
	}
	return (n + PackageSize - 1) / PackageSize
}

// CipherSize is the size of the stream that encrypts n plaintext bytes.
func CipherSize(n int64) int64 {
	return HeaderSize + n + TagSize*packages(n)
}

// PlainSize inverts CipherSize; sizes no plaintext maps to are ErrFormat.
func PlainSize(c int64) (int64, error) {
	if c < HeaderSize+TagSize {
		return 0, fmt.Errorf("%w: %d bytes is too short", ErrFormat, c)
	}
	body := c - HeaderSize
	n := (body + sealedPkgMax - 1) / sealedPkgMax
	p := body - n*TagSize
	if p < 0 || CipherSize(p) != c {
		return 0, fmt.Errorf("%w: %d bytes is not a ciphertext size", ErrFormat, c)
	}
	return p, nil
}

// NewDataKey returns a fresh random data key.
func NewDataKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("sse: random: %w", err)
	}
	return k, nil
}

// streamAEAD derives the stream key from the data key and the salt.
func streamAEAD(dataKey, salt []byte) (cipher.AEAD, error) {
	if len(dataKey) != KeySize {
		return nil, fmt.Errorf("sse: data key is %d bytes, want %d", len(dataKey), KeySize)
	}
	m := hmac.New(sha256.New, dataKey)
	m.Write([]byte("terrace-sse v1 stream"))
	m.Write(salt)
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func nonce(buf *[12]byte, seq int64, final bool) []byte {
	binary.BigEndian.PutUint64(buf[:8], uint64(seq))
	var f uint32
	if final {
		f = 1
	}
	binary.BigEndian.PutUint32(buf[8:], f)
	return buf[:]
}

// Encrypter is an io.Reader producing the encrypted stream of a plaintext
// reader. It reads one package ahead to know which package is the last.
type Encrypter struct {
	src    io.Reader
	aead   cipher.AEAD
	seq    int64
	header []byte // unsent header bytes
	out    []byte // unsent sealed bytes
	in     []byte // next package's plaintext, read ahead
	inN    int
	srcEOF bool
	done   bool
	err    error
	nb     [12]byte
}

// NewEncrypter starts an encrypted stream of src under dataKey with a
// fresh random salt.
func NewEncrypter(dataKey []byte, src io.Reader) (*Encrypter, error) {
	var salt [saltSize]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("sse: random: %w", err)
	}
	return newEncrypterSalt(dataKey, salt, src)
}

// newEncrypterSalt is NewEncrypter with a given salt (deterministic
// streams for fuzz seeds; never reuse a salt under one data key).
func newEncrypterSalt(dataKey []byte, salt [saltSize]byte, src io.Reader) (*Encrypter, error) {
	var hdr [HeaderSize]byte
	copy(hdr[:4], magic[:])
	copy(hdr[4:], salt[:])
	aead, err := streamAEAD(dataKey, hdr[4:])
	if err != nil {
		return nil, err
	}
	return &Encrypter{
		src: src, aead: aead, header: hdr[:],
		in:  make([]byte, PackageSize+1),
		out: make([]byte, 0, sealedPkgMax),
	}, nil
}

// fill reads until e.in holds PackageSize+1 bytes or the source ends.
func (e *Encrypter) fill() error {
	for e.inN < len(e.in) && !e.srcEOF {
		n, err := e.src.Read(e.in[e.inN:])
		e.inN += n
		if err == io.EOF {
			e.srcEOF = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Read implements io.Reader.
func (e *Encrypter) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if len(e.header) > 0 {
		n := copy(p, e.header)
		e.header = e.header[n:]
		return n, nil
	}
	for len(e.out) == 0 {
		if e.done {
			return 0, io.EOF
		}
		if err := e.fill(); err != nil {
			e.err = err
			return 0, err
		}
		// A package is final when nothing follows it: fewer than
		// PackageSize+1 bytes were available.
		take, final := e.inN, true
		if e.inN > PackageSize {
			take, final = PackageSize, false
		}
		e.out = e.aead.Seal(e.out[:0], nonce(&e.nb, e.seq, final), e.in[:take], nil)
		e.seq++
		copy(e.in, e.in[take:e.inN])
		e.inN -= take
		e.done = final
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// Stream is an opened encrypted stream: its key, ready to decrypt
// packages.
type Stream struct {
	aead cipher.AEAD
}

// OpenStream checks a stream header and derives the stream's key.
func OpenStream(dataKey, header []byte) (*Stream, error) {
	if len(header) < HeaderSize || [4]byte(header[:4]) != magic {
		return nil, ErrFormat
	}
	aead, err := streamAEAD(dataKey, header[4:HeaderSize])
	if err != nil {
		return nil, err
	}
	return &Stream{aead: aead}, nil
}

// Span is the ciphertext a plaintext range of a stream needs: bytes
// [CipherOff, CipherOff+CipherLen) of the stream (header included in the
// offsets), starting at package FirstPackage.
type Span struct {
	CipherOff, CipherLen int64
	FirstPackage         int64
	// Skip is how many plaintext bytes of the first package precede the
	// range.
	Skip int64
}

// RangeSpan returns the span of [off, off+n) of a stream whose plaintext
// is size bytes. The range must lie inside the plaintext and n must be
// positive.
func RangeSpan(size, off, n int64) (Span, error) {
	if off < 0 || n <= 0 || off > size || n > size-off {
		return Span{}, fmt.Errorf("sse: range [%d, +%d) outside %d plaintext bytes", off, n, size)
	}
	first := off / PackageSize
	last := (off + n - 1) / PackageSize
	lastLen := min(PackageSize, size-last*PackageSize) + TagSize
	return Span{
		CipherOff:    HeaderSize + first*sealedPkgMax,
		CipherLen:    (last-first)*sealedPkgMax + lastLen,
		FirstPackage: first,
		Skip:         off - first*PackageSize,
	}, nil
}

// NewReader returns the plaintext of [off, off+n) of a stream of size
// plaintext bytes, reading the ciphertext of its span (RangeSpan) from r.
// Every package is authenticated before any of its bytes is returned;
// failures are ErrAuth, and a short r is io.ErrUnexpectedEOF.
func (s *Stream) NewReader(r io.Reader, size, off, n int64) (io.Reader, error) {
	sp, err := RangeSpan(size, off, n)
	if err != nil {
		return nil, err
	}
	return &decrypter{s: s, r: r, seq: sp.FirstPackage, last: packages(size) - 1,
		size: size, skip: sp.Skip, left: n,
		buf: make([]byte, 0, sealedPkgMax)}, nil
}

type decrypter struct {
	s          *Stream
	r          io.Reader
	seq, last  int64
	size       int64
	skip, left int64
	buf        []byte // sealed package
	plain      []byte // decrypted bytes not yet returned
	err        error
	nb         [12]byte
}

func (d *decrypter) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	for len(d.plain) == 0 {
		if d.left == 0 {
			return 0, io.EOF
		}
		if d.seq > d.last {
			d.err = fmt.Errorf("%w: range runs past the last package", ErrFormat)
			return 0, d.err
		}
		plainLen := min(PackageSize, d.size-d.seq*PackageSize)
		sealed := d.buf[:plainLen+TagSize]
		if _, err := io.ReadFull(d.r, sealed); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			d.err = err
			return 0, err
		}
		final := d.seq == d.last
		pt, err := d.s.aead.Open(sealed[:0], nonce(&d.nb, d.seq, final), sealed, nil)
		if err != nil {
			d.err = fmt.Errorf("%w: package %d", ErrAuth, d.seq)
			return 0, d.err
		}
		d.seq++
		pt = pt[d.skip:]
		d.skip = 0
		if int64(len(pt)) > d.left {
			pt = pt[:d.left]
		}
		d.left -= int64(len(pt))
		d.plain = pt
	}
	n := copy(p, d.plain)
	d.plain = d.plain[n:]
	return n, nil
}

// Decrypt decrypts a whole stream held in memory (tests, small values).
func Decrypt(dataKey, stream []byte) ([]byte, error) {
	size, err := PlainSize(int64(len(stream)))
	if err != nil {
		return nil, err
	}
	s, err := OpenStream(dataKey, stream)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		// Authenticate the empty final package.
		var nb [12]byte
		if _, err := s.aead.Open(nil, nonce(&nb, 0, true), stream[HeaderSize:], nil); err != nil {
			return nil, ErrAuth
		}
		return []byte{}, nil
	}
	r, err := s.NewReader(bytesReader(stream[HeaderSize:]), size, 0, size)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

type sliceReader struct{ b []byte }

func bytesReader(b []byte) *sliceReader { return &sliceReader{b} }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}
