package sse

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkEncrypt measures sealing a 16 MiB stream (AES-256-GCM in 64 KiB
// packages).
func BenchmarkEncrypt(b *testing.B) {
	key, _ := NewDataKey()
	plain := bytes.Repeat([]byte{7}, 16<<20)
	b.SetBytes(int64(len(plain)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e, _ := NewEncrypter(key, bytes.NewReader(plain))
		if _, err := io.Copy(io.Discard, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecrypt measures opening a whole 16 MiB stream.
func BenchmarkDecrypt(b *testing.B) {
	key, _ := NewDataKey()
	plain := bytes.Repeat([]byte{7}, 16<<20)
	e, _ := NewEncrypter(key, bytes.NewReader(plain))
	ct, _ := io.ReadAll(e)
	size := int64(len(plain))
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, _ := OpenStream(key, ct)
		r, _ := s.NewReader(bytes.NewReader(ct[HeaderSize:]), size, 0, size)
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecryptSmallRange measures a 4 KiB ranged read: one package.
func BenchmarkDecryptSmallRange(b *testing.B) {
	key, _ := NewDataKey()
	plain := bytes.Repeat([]byte{7}, 16<<20)
	e, _ := NewEncrypter(key, bytes.NewReader(plain))
	ct, _ := io.ReadAll(e)
	size := int64(len(plain))
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64(i*7919*4096) % (size - 4096)
		sp, _ := RangeSpan(size, off, 4096)
		s, _ := OpenStream(key, ct)
		r, _ := s.NewReader(bytes.NewReader(ct[sp.CipherOff:sp.CipherOff+sp.CipherLen]), size, off, 4096)
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
