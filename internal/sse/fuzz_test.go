package sse

import (
	"bytes"
	"io"
	"testing"
)

var fuzzKey = bytes.Repeat([]byte{7}, KeySize)

// FuzzDecrypt feeds arbitrary bytes and ranges to the decoder: it must
// never panic, never return more bytes than asked, and never accept a
// stream that was not produced by the encrypter under the key.
func FuzzDecrypt(f *testing.F) {
	// A fixed salt makes the good stream the same in every fuzz worker.
	e, err := newEncrypterSalt(fuzzKey, [saltSize]byte{1, 2, 3}, bytes.NewReader(bytes.Repeat([]byte("terrace"), 20000)))
	if err != nil {
		f.Fatal(err)
	}
	good, err := io.ReadAll(e)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, int64(0), int64(10))
	f.Add(good[:HeaderSize+TagSize], int64(0), int64(1))
	f.Add([]byte("TSE\x01"), int64(3), int64(4))
	f.Add([]byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, stream []byte, off, n int64) {
		if _, err := Decrypt(fuzzKey, stream); err == nil && !bytes.Equal(stream, good) {
			// Only the encrypter's streams authenticate: the fuzzer
			// cannot forge GCM.
			t.Fatalf("forged stream of %d bytes decrypted", len(stream))
		}
		size, err := PlainSize(int64(len(stream)))
		if err != nil || len(stream) < HeaderSize {
			return
		}
		s, err := OpenStream(fuzzKey, stream[:HeaderSize])
		if err != nil {
			return
		}
		sp, err := RangeSpan(size, off, n)
		if err != nil {
			return
		}
		if sp.CipherOff < HeaderSize || sp.CipherOff+sp.CipherLen > int64(len(stream)) {
			t.Fatalf("span %+v outside a %d-byte stream", sp, len(stream))
		}
		r, err := s.NewReader(bytes.NewReader(stream[sp.CipherOff:sp.CipherOff+sp.CipherLen]), size, off, n)
		if err != nil {
			t.Fatalf("reader for a valid span: %v", err)
		}
		got, err := io.ReadAll(io.LimitReader(r, n+1))
		if int64(len(got)) > n {
			t.Fatalf("returned %d bytes for a %d-byte range", len(got), n)
		}
		if err == nil && bytes.Equal(stream, good) {
			plain, _ := Decrypt(fuzzKey, good)
			if !bytes.Equal(got, plain[off:off+n]) {
				t.Fatal("wrong plaintext for a range of a good stream")
			}
		}
	})
}

// FuzzRoundTrip encrypts arbitrary plaintext and reads arbitrary ranges.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello"), int64(1), int64(3))
	f.Add(bytes.Repeat([]byte{1}, PackageSize+5), int64(PackageSize-2), int64(6))
	f.Fuzz(func(t *testing.T, plain []byte, off, n int64) {
		ct := encrypt(t, fuzzKey, plain)
		if int64(len(ct)) != CipherSize(int64(len(plain))) {
			t.Fatalf("ciphertext size %d", len(ct))
		}
		all, err := Decrypt(fuzzKey, ct)
		if err != nil || !bytes.Equal(all, plain) {
			t.Fatalf("round trip: %v", err)
		}
		size := int64(len(plain))
		if off < 0 || n <= 0 || off >= size || n > size-off {
			return
		}
		got, err := readRange(fuzzKey, ct, size, off, n)
		if err != nil || !bytes.Equal(got, plain[off:off+n]) {
			t.Fatalf("range [%d,+%d): %v", off, n, err)
		}
	})
}

// FuzzOpenSealed feeds arbitrary sealed strings to the keyring and the
// customer-key opener.
func FuzzOpenSealed(f *testing.F) {
	k, _ := NewKeyring(MasterKey{ID: "a", Key: fuzzKey})
	s, _ := k.Seal(PurposeObjectKey, []byte("x"))
	c, _ := SealWithKEK(CustomerKEK(fuzzKey), PurposeObjectKey, []byte("x"))
	f.Add(s)
	f.Add(c)
	f.Add("k1:a:")
	f.Fuzz(func(t *testing.T, sealed string) {
		if pt, err := k.Open(PurposeObjectKey, sealed); err == nil && sealed != s && !bytes.Equal(pt, []byte("x")) {
			t.Fatalf("forged %q opened", sealed)
		}
		_, _ = OpenWithKEK(CustomerKEK(fuzzKey), PurposeObjectKey, sealed)
		_, _ = ParseKeyring(sealed)
	})
}
