package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestECAnyKStrips: for random layouts and shapes, every way of losing up
// to M strips decodes back to the layout; losing M+1 is refused.
func TestECAnyKStrips(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	for iter := 0; iter < 50; iter++ {
		k := 1 + r.IntN(6)
		m := 1 + r.IntN(min(k, MaxStrips-k))
		s := ECShape{K: k, M: m}
		layout := make([]byte, 1+r.IntN(300_000))
		for i := range layout {
			layout[i] = byte(r.Uint32())
		}
		strips, err := Encode(s, layout)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if ok, _ := VerifyParity(s, strips); !ok {
			t.Fatalf("seed %d: fresh parity does not verify", seed)
		}
		lose := r.Perm(k + m)[:m]
		damaged := make([][]byte, len(strips))
		copy(damaged, strips)
		for _, i := range lose {
			damaged[i] = nil
		}
		if err := Reconstruct(s, damaged, false); err != nil {
			t.Fatalf("seed %d %s lose %v: %v", seed, s, lose, err)
		}
		var got []byte
		for i := 0; i < k; i++ {
			got = append(got, damaged[i]...)
		}
		if !bytes.Equal(got[:len(layout)], layout) {
			t.Fatalf("seed %d %s lose %v: wrong bytes", seed, s, lose)
		}
		for i := range strips {
			if !bytes.Equal(damaged[i], strips[i]) {
				t.Fatalf("seed %d: strip %d rebuilt wrong", seed, i)
			}
		}
		tooMany := make([][]byte, len(strips))
		copy(tooMany, strips)
		for _, i := range r.Perm(k + m)[:m+1] {
			tooMany[i] = nil
		}
		if err := Reconstruct(s, tooMany, true); !errors.Is(err, ErrTooFewStrips) {
			t.Fatalf("seed %d: lost M+1 strips: %v", seed, err)
		}
		strips[r.IntN(k+m)][0] ^= 1
		if ok, _ := VerifyParity(s, strips); ok {
			t.Fatalf("seed %d: flipped strip byte passes parity", seed)
		}
	}
}

func TestParseEC(t *testing.T) {
	for in, want := range map[string]string{"4+2": "4+2", "2+1": "2+1", "none": "", "6+2": "6+2"} {
		s, err := ParseEC(in)
		if err != nil || (want != "" && s.String() != want) || (want == "" && !s.IsZero()) {
			t.Errorf("ParseEC(%q) = %v, %v", in, s, err)
		}
	}
	for _, bad := range []string{"4", "4+", "+2", "0+1", "2+3", "7+2", "a+b", "4+0"} {
		if _, err := ParseEC(bad); err == nil {
			t.Errorf("ParseEC(%q) accepted", bad)
		}
	}
}

// FuzzParseEC: any string either parses to a valid shape that prints back
// to itself, or is refused; never a panic.
//
//	go test -fuzz FuzzParseEC ./internal/transform
func FuzzParseEC(f *testing.F) {
	for _, s := range []string{"4+2", "none", "", "8+0", "+", "1+1", "99999999999999999999+1", "4+2+1", "-1+-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseEC(s)
		if err != nil || sh.IsZero() {
			return
		}
		if sh.Validate() != nil {
			t.Fatalf("ParseEC(%q) = %v, which does not validate", s, sh)
		}
		again, err := ParseEC(sh.String())
		if err != nil || again != sh {
			t.Fatalf("ParseEC(%q) = %v does not round trip: %v %v", s, sh, again, err)
		}
	})
}
