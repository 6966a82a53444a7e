package bench

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestContentDeterministicAndDistinct(t *testing.T) {
	d := MustParseSizeDist("4KiB-64KiB")
	a := NewContentSource(42).Object("bench/k/00000001", d)
	b := NewContentSource(42).Object("bench/k/00000001", d)
	c := NewContentSource(42).Object("bench/k/00000002", d)
	e := NewContentSource(43).Object("bench/k/00000001", d)
	read := func(c Content) []byte {
		b, err := io.ReadAll(c.NewReader())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ab, bb := read(a), read(b)
	if !bytes.Equal(ab, bb) || int64(len(ab)) != a.Size() {
		t.Fatal("same seed and key must give the same bytes")
	}
	n := min(len(ab), int(c.Size()), int(e.Size()))
	if bytes.Equal(ab[:n], read(c)[:n]) || bytes.Equal(ab[:n], read(e)[:n]) {
		t.Fatal("different key or seed must give different bytes")
	}
}

func TestContentVerify(t *testing.T) {
	src := NewContentSource(1)
	c := src.Object("k", MustParseSizeDist("10000")) // 2 full blocks and a partial one
	data := make([]byte, c.Size())
	if n, err := c.ReadAt(data, 0); n != len(data) || err != nil {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if err := c.Verify(data, 0); err != nil {
		t.Fatal(err)
	}
	// Arbitrary chunking, as an HTTP body arrives.
	for _, chunk := range []int{1, 7, 8, 4095, 4096, 4097, 9999} {
		for off := 0; off < len(data); off += chunk {
			end := min(off+chunk, len(data))
			if err := c.Verify(data[off:end], int64(off)); err != nil {
				t.Fatalf("chunk %d at %d: %v", chunk, off, err)
			}
		}
	}
	// A flipped byte anywhere (header or filler) is found at its offset.
	for _, pos := range []int{0, 7, 8, 4095, 4096, 4100, 9999} {
		bad := bytes.Clone(data)
		bad[pos] ^= 1
		err := c.Verify(bad, 0)
		if err == nil || !strings.Contains(err.Error(), "differs at byte "+strconv.Itoa(pos)+" ") {
			t.Errorf("flip at %d: %v", pos, err)
		}
	}
	// Another object's bytes fail; too many bytes fail.
	other := make([]byte, c.Size())
	src.Object("k2", MustParseSizeDist("10000")).ReadAt(other, 0)
	if c.Verify(other, 0) == nil {
		t.Error("another object's content verified")
	}
	if c.Verify(append(bytes.Clone(data), 0), 0) == nil {
		t.Error("a longer body verified")
	}
}

func TestContentReader(t *testing.T) {
	c := NewContentSource(1).Object("k", MustParseSizeDist("5000"))
	r := c.NewReader()
	if r.Len() != 5000 {
		t.Fatalf("Len = %d", r.Len())
	}
	head := make([]byte, 100)
	io.ReadFull(r, head)
	if pos, _ := r.Seek(0, io.SeekCurrent); pos != 100 || r.Len() != 4900 {
		t.Fatalf("after 100 bytes: pos %d len %d", pos, r.Len())
	}
	r.Seek(-10, io.SeekEnd)
	tail, _ := io.ReadAll(r)
	if len(tail) != 10 || c.Verify(tail, 4990) != nil {
		t.Fatalf("tail %d bytes", len(tail))
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Error("negative seek accepted")
	}
	r.Seek(0, io.SeekStart)
	all, _ := io.ReadAll(r)
	if c.Verify(all, 0) != nil || len(all) != 5000 {
		t.Error("re-read after seek differs")
	}
}

func TestContentZeroSize(t *testing.T) {
	c := NewContentSource(1).Object("empty", MustParseSizeDist("0"))
	b, err := io.ReadAll(c.NewReader())
	if err != nil || len(b) != 0 || c.Verify(nil, 0) != nil {
		t.Fatalf("zero-size object: %d bytes, %v", len(b), err)
	}
}

func BenchmarkContentVerify4MiB(b *testing.B) {
	c := NewContentSource(1).Object("k", MustParseSizeDist("4MiB"))
	data := make([]byte, c.Size())
	c.ReadAt(data, 0)
	b.SetBytes(c.Size())
	for b.Loop() {
		if err := c.Verify(data, 0); err != nil {
			b.Fatal(err)
		}
	}
}
