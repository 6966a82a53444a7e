package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func encrypt(t testing.TB, key, plain []byte) []byte {
	t.Helper()
	e, err := NewEncrypter(key, bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	// Read in odd-sized chunks to exercise partial copies.
	var out bytes.Buffer
	buf := make([]byte, 7777)
	for {
		n, err := e.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// readRange decrypts [off, off+n) of a stream held in memory the way the
// gateway does: header, then only the span.
func readRange(key, stream []byte, size, off, n int64) ([]byte, error) {
	s, err := OpenStream(key, stream[:HeaderSize])
	if err != nil {
		return nil, err
	}
	sp, err := RangeSpan(size, off, n)
	if err != nil {
		return nil, err
	}
	end := min(int64(len(stream)), sp.CipherOff+sp.CipherLen)
	r, err := s.NewReader(bytes.NewReader(stream[min(sp.CipherOff, end):end]), size, off, n)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func TestRoundTripSizesAndRanges(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	key, _ := NewDataKey()
	for _, size := range []int{0, 1, 15, PackageSize - 1, PackageSize, PackageSize + 1, 3*PackageSize + 17, 5 * PackageSize} {
		plain := randBytes(r, size)
		ct := encrypt(t, key, plain)
		if int64(len(ct)) != CipherSize(int64(size)) {
			t.Fatalf("size %d: ciphertext %d bytes, CipherSize says %d", size, len(ct), CipherSize(int64(size)))
		}
		if p, err := PlainSize(int64(len(ct))); err != nil || p != int64(size) {
			t.Fatalf("size %d: PlainSize(%d) = %d, %v", size, len(ct), p, err)
		}
		if bytes.Contains(ct, plain) && size > 16 {
			t.Fatalf("size %d: plaintext appears in the ciphertext", size)
		}
		got, err := Decrypt(key, ct)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: decrypt: %v (equal %v)", size, err, bytes.Equal(got, plain))
		}
		for i := 0; i < 40 && size > 0; i++ {
			off := r.Int64N(int64(size))
			n := 1 + r.Int64N(int64(size)-off)
			got, err := readRange(key, ct, int64(size), off, n)
			if err != nil || !bytes.Equal(got, plain[off:off+n]) {
				t.Fatalf("size %d range [%d,+%d): %v", size, off, n, err)
			}
		}
	}
}

func TestTamperingDetected(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	key, _ := NewDataKey()
	plain := randBytes(r, 3*PackageSize+100)
	ct := encrypt(t, key, plain)
	size := int64(len(plain))

	// Any flipped byte fails authentication (or the header check).
	for _, pos := range []int{0, 5, HeaderSize, HeaderSize + 100, len(ct) / 2, len(ct) - 1} {
		bad := bytes.Clone(ct)
		bad[pos] ^= 0x40
		if _, err := Decrypt(key, bad); err == nil {
			t.Fatalf("flipped byte %d: decrypted", pos)
		}
	}
	// A wrong key fails.
	other, _ := NewDataKey()
	if _, err := Decrypt(other, ct); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong key: %v", err)
	}
	// Truncation at a package boundary: the new last package was not
	// sealed as final.
	cut := ct[:HeaderSize+2*(PackageSize+TagSize)]
	if _, err := Decrypt(key, cut); !errors.Is(err, ErrAuth) {
		t.Fatalf("truncated: %v", err)
	}
	// Swapping two packages fails.
	sw := bytes.Clone(ct)
	a := sw[HeaderSize : HeaderSize+PackageSize+TagSize]
	b := sw[HeaderSize+PackageSize+TagSize : HeaderSize+2*(PackageSize+TagSize)]
	tmp := bytes.Clone(a)
	copy(a, b)
	copy(b, tmp)
	if _, err := Decrypt(key, sw); !errors.Is(err, ErrAuth) {
		t.Fatalf("swapped packages: %v", err)
	}
	// A ranged read over a tampered package fails, one over intact ones
	// works.
	bad := bytes.Clone(ct)
	bad[HeaderSize+PackageSize+TagSize+10] ^= 1 // package 1
	if _, err := readRange(key, bad, size, PackageSize+5, 10); !errors.Is(err, ErrAuth) {
		t.Fatalf("range over tampered package: %v", err)
	}
	if got, err := readRange(key, bad, size, 2*PackageSize+1, 50); err != nil || !bytes.Equal(got, plain[2*PackageSize+1:2*PackageSize+51]) {
		t.Fatalf("range over intact package: %v", err)
	}
	// A short ciphertext reader is reported.
	s, _ := OpenStream(key, ct)
	rd, _ := s.NewReader(bytes.NewReader(ct[HeaderSize:HeaderSize+100]), size, 0, size)
	if _, err := io.ReadAll(rd); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short reader: %v", err)
	}
}

func TestEmptyStreamAuthenticated(t *testing.T) {
	key, _ := NewDataKey()
	ct := encrypt(t, key, nil)
	if len(ct) != HeaderSize+TagSize {
		t.Fatalf("empty stream is %d bytes", len(ct))
	}
	other, _ := NewDataKey()
	if _, err := Decrypt(other, ct); !errors.Is(err, ErrAuth) {
		t.Fatalf("empty stream, wrong key: %v", err)
	}
}

func TestSaltMakesStreamsDiffer(t *testing.T) {
	key, _ := NewDataKey()
	plain := bytes.Repeat([]byte("a"), 1000)
	a, b := encrypt(t, key, plain), encrypt(t, key, plain)
	if bytes.Equal(a[HeaderSize:], b[HeaderSize:]) {
		t.Fatal("two streams of the same plaintext under one data key are identical: nonce reuse")
	}
}

func TestPlainSizeRejectsImpossibleSizes(t *testing.T) {
	for c := int64(-1); c < 3*(PackageSize+TagSize)+HeaderSize+40; c++ {
		p, err := PlainSize(c)
		if err != nil {
			continue
		}
		if CipherSize(p) != c {
			t.Fatalf("PlainSize(%d) = %d but CipherSize(%d) = %d", c, p, p, CipherSize(p))
		}
	}
	for _, c := range []int64{0, HeaderSize, HeaderSize + TagSize - 1, HeaderSize + PackageSize + TagSize + 5} {
		if _, err := PlainSize(c); err == nil {
			t.Fatalf("PlainSize(%d) accepted", c)
		}
	}
}

func TestLayoutPlan(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	key, _ := NewDataKey()
	var plain, object []byte
	var sizes []int64
	for _, n := range []int{PackageSize + 3, 0, 10, 2 * PackageSize, 1} {
		p := randBytes(r, n)
		ct := encrypt(t, key, p)
		plain = append(plain, p...)
		object = append(object, ct...)
		sizes = append(sizes, int64(len(ct)))
	}
	l, err := NewLayout(sizes)
	if err != nil || l.Plain != int64(len(plain)) {
		t.Fatalf("layout: %v, plain %d want %d", err, l.Plain, len(plain))
	}
	for i := 0; i < 200; i++ {
		off := r.Int64N(l.Plain)
		n := 1 + r.Int64N(l.Plain-off)
		segs, err := l.Plan(off, n)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, sg := range segs {
			stream := object[sg.Base : sg.Base+l.CipherSizes[sg.Stream]]
			b, err := readRange(key, stream, sg.PlainSize, sg.Off, sg.N)
			if err != nil {
				t.Fatalf("segment %+v: %v", sg, err)
			}
			got = append(got, b...)
		}
		if !bytes.Equal(got, plain[off:off+n]) {
			t.Fatalf("range [%d,+%d): wrong bytes via %+v", off, n, segs)
		}
	}
	if _, err := l.Plan(0, l.Plain+1); err == nil {
		t.Fatal("plan past the end accepted")
	}
	if _, err := NewLayout([]int64{5}); err == nil {
		t.Fatal("impossible stream size accepted")
	}
}

func TestKeyringSealOpenRotate(t *testing.T) {
	k1, _ := NewMasterKey("k1")
	k2, _ := NewMasterKey("k2")
	old, err := NewKeyring(k1)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("data key bytes")
	sealed, err := old.Seal(PurposeObjectKey, secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, string(secret)) {
		t.Fatal("sealed value contains the plaintext")
	}
	if _, err := old.Open(PurposeUserSecret, sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("opened for another purpose: %v", err)
	}
	// After rotation the new key seals and the old one still opens.
	rotated, _ := NewKeyring(k2, k1)
	if got, err := rotated.Open(PurposeObjectKey, sealed); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open after rotation: %v", err)
	}
	if rotated.SealedWithActive(sealed) {
		t.Fatal("old blob reported as sealed with the active key")
	}
	again, _ := rotated.Seal(PurposeObjectKey, secret)
	if !rotated.SealedWithActive(again) {
		t.Fatal("new blob not sealed with the active key")
	}
	// Without the old key it cannot be opened.
	only2, _ := NewKeyring(k2)
	if _, err := only2.Open(PurposeObjectKey, sealed); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("open without the sealing key: %v", err)
	}
	if s := rotated.String() + rotated.GoString(); strings.Contains(s, FormatKeyLine(k1)[3:]) {
		t.Fatalf("keyring printed key material: %s", s)
	}
}

func TestKeyringFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	k, err := CreateKeyringFile(p, "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateKeyringFile(p, "again"); err == nil {
		t.Fatal("overwrote an existing keyring")
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("keyring mode %v", st.Mode())
	}
	loaded, err := LoadKeyringFile(p)
	if err != nil || loaded.ActiveID() != "first" {
		t.Fatalf("load: %v", err)
	}
	sealed, _ := k.Seal(PurposeUserSecret, []byte("x"))
	if _, err := loaded.Open(PurposeUserSecret, sealed); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "noline", "id:not base64!", "id:" + strings.Repeat("A", 8), "bad id:AAAA"} {
		if _, err := ParseKeyring(bad); err == nil {
			t.Fatalf("ParseKeyring(%q) accepted", bad)
		}
	}
}

func TestCustomerKEK(t *testing.T) {
	ck1, _ := NewDataKey()
	ck2, _ := NewDataKey()
	dk, _ := NewDataKey()
	sealed, err := SealWithKEK(CustomerKEK(ck1), PurposeObjectKey, dk)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenWithKEK(CustomerKEK(ck1), PurposeObjectKey, sealed); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("open: %v", err)
	}
	if _, err := OpenWithKEK(CustomerKEK(ck2), PurposeObjectKey, sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong customer key: %v", err)
	}
}
