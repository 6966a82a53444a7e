package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestRoundTripAndRatio(t *testing.T) {
	text := bytes.Repeat([]byte(`{"level":"info","msg":"GET /photos/cat.jpg 200","ms":12}`+"\n"), 2000)
	random := make([]byte, 100_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	for _, tc := range []struct {
		name string
		in   []byte
		pays bool
	}{{"json", text, true}, {"random", random, false}, {"empty", nil, false}} {
		c, err := Compress(CodecZstd, nil, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Pays(int64(len(c)), int64(len(tc.in)), 0.9); got != tc.pays {
			t.Errorf("%s: %d → %d bytes, pays=%v want %v", tc.name, len(tc.in), len(c), got, tc.pays)
		}
		out, err := Decompress(CodecZstd, nil, c, int64(len(tc.in)), Sum(tc.in))
		if err != nil || !bytes.Equal(out, tc.in) {
			t.Fatalf("%s: round trip: %v", tc.name, err)
		}
		// A record that disagrees with the frame is corruption, never data.
		if _, err := Decompress(CodecZstd, nil, c, int64(len(tc.in))+1, Sum(tc.in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: wrong length accepted: %v", tc.name, err)
		}
		if _, err := Decompress(CodecZstd, nil, c, int64(len(tc.in)), Sum(tc.in)+1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: wrong checksum accepted: %v", tc.name, err)
		}
	}
	if _, err := Compress("lz77", nil, text); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("unknown codec: %v", err)
	}
}

// FuzzDecompress feeds arbitrary stored bytes and records to Decompress:
// it must never panic, never return more than the recorded length, and
// whatever it returns must match the recorded checksum.
//
//	go test -fuzz FuzzDecompress ./internal/transform
func FuzzDecompress(f *testing.F) {
	payload := bytes.Repeat([]byte("terrace "), 100)
	good, _ := Compress(CodecZstd, nil, payload)
	f.Add(good, int64(len(payload)), Sum(payload))
	f.Add(good[:len(good)/2], int64(len(payload)), Sum(payload))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, int64(0), uint32(0))
	f.Add([]byte{}, int64(1<<40), uint32(7))
	f.Add(append(append([]byte(nil), good...), good...), int64(2*len(payload)), Sum(append(append([]byte(nil), payload...), payload...)))
	f.Fuzz(func(t *testing.T, stored []byte, n int64, sum uint32) {
		out, err := Decompress(CodecZstd, nil, stored, n, sum)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if int64(len(out)) != n || Sum(out) != sum {
			t.Fatalf("returned %d bytes for a record of %d", len(out), n)
		}
	})
}

func benchText(n int) []byte {
	r := rand.New(rand.NewPCG(5, 6))
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`{"ts":` + string(rune('0'+r.IntN(10))) + `,"level":"info","path":"/api/v1/items/` + string(rune('a'+r.IntN(26))) + `","status":200}` + "\n")
	}
	return b.Bytes()[:n]
}

// BenchmarkCompress and BenchmarkDecompress measure one 1 MiB extent of
// JSON logs (the Curator's cost per extent, a read's cost per extent).
func BenchmarkCompress(b *testing.B) {
	in := benchText(1 << 20)
	b.SetBytes(int64(len(in)))
	var out []byte
	for i := 0; i < b.N; i++ {
		out, _ = Compress(CodecZstd, out, in)
	}
	b.ReportMetric(float64(len(out))/float64(len(in)), "ratio")
}

func BenchmarkDecompress(b *testing.B) {
	in := benchText(1 << 20)
	c, _ := Compress(CodecZstd, nil, in)
	sum := Sum(in)
	b.SetBytes(int64(len(in)))
	var out []byte
	for i := 0; i < b.N; i++ {
		var err error
		if out, err = Decompress(CodecZstd, out, c, int64(len(in)), sum); err != nil {
			b.Fatal(err)
		}
	}
}
