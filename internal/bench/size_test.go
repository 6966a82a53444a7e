package bench

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"4KiB", 4096}, {"4kib", 4096}, {"4K", 4096}, {"4k", 4096},
		{"4KB", 4000}, {"1MiB", 1 << 20}, {"1M", 1 << 20}, {"1MB", 1_000_000}, {"2GiB", 2 << 30},
		{"1.5MiB", 3 << 19}, {" 8 KiB ", 8192}, {"12B", 12},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "4XB", "1.5B", "abc", "99999999999GiB"} {
		if _, err := ParseBytes(in); err == nil || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("ParseBytes(%q): want a bench: error, got %v", in, err)
		}
	}
}

func TestFormatBytesRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 4096, 4097, 1 << 20, 3 << 19, 5 << 30} {
		s := FormatBytes(n)
		got, err := ParseBytes(s)
		if err != nil || got != n {
			t.Errorf("ParseBytes(FormatBytes(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
}

func TestParseSizeDist(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		lo, hi   int64
		mean     float64
		wantSpec string
	}{
		{"4KiB", 4096, 4096, 4096, "4KiB"},
		{"4096", 4096, 4096, 4096, "4096"},
		{"4KiB-1MiB", 4096, 1 << 20, float64(4096+1<<20) / 2, "4KiB-1MiB"},
		{"1KiB-1KiB", 1024, 1024, 1024, "1KiB-1KiB"},
		{"oltp", 8192, 32768, 0.9*8192 + 0.1*32768, "oltp"},
		{"OLTP", 8192, 32768, 0.9*8192 + 0.1*32768, "oltp"},
		{"8KiB:90,32KiB:10", 8192, 32768, 0.9*8192 + 0.1*32768, "8KiB:90,32KiB:10"},
		{"1MiB:1", 1 << 20, 1 << 20, 1 << 20, "1MiB:1"},
		{"0", 0, 0, 0, "0"},
	} {
		d, err := ParseSizeDist(tc.spec)
		if err != nil {
			t.Errorf("ParseSizeDist(%q): %v", tc.spec, err)
			continue
		}
		if d.Max() != tc.hi || d.String() != tc.wantSpec {
			t.Errorf("ParseSizeDist(%q): max %d spec %q; want %d %q", tc.spec, d.Max(), d, tc.hi, tc.wantSpec)
		}
		if m := d.Mean(); m < tc.mean-0.5 || m > tc.mean+0.5 {
			t.Errorf("ParseSizeDist(%q).Mean() = %v, want %v", tc.spec, m, tc.mean)
		}
		for u := uint64(0); u < 1000; u++ {
			s := d.Sample(u * 0x9e3779b97f4a7c15)
			if s < tc.lo || s > tc.hi {
				t.Fatalf("%q: sample %d outside [%d, %d]", tc.spec, s, tc.lo, tc.hi)
			}
		}
	}
}

func TestParseSizeDistErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty size distribution"},
		{"1MiB-4KiB", "low end 1MiB is above high end 4KiB"},
		{"4KiB-", "size range"},
		{"-4KiB", "size range"},
		{"8KiB:0", "must be a positive integer"},
		{"8KiB:x", "must be a positive integer"},
		{"8KiB,32KiB", "is not SIZE:WEIGHT"},
		{"6GiB", "exceeds the 5GiB single-PUT limit"},
		{"4KiB-6GiB", "exceeds the 5GiB single-PUT limit"},
		{"lots", "object size \"lots\""},
	} {
		_, err := ParseSizeDist(tc.spec)
		if err == nil || !strings.HasPrefix(err.Error(), "bench: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSizeDist(%q) error = %v; want one containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestSizeDistSampleShape(t *testing.T) {
	// OLTP: 90 % 8 KiB, 10 % 32 KiB over object keys.
	d := MustParseSizeDist("oltp")
	src := NewContentSource(7)
	var small int
	const n = 20000
	for i := range n {
		switch src.ObjectSize(FormatBytes(int64(i)), d) {
		case 8 * KiB:
			small++
		case 32 * KiB:
		default:
			t.Fatal("oltp produced another size")
		}
	}
	if frac := float64(small) / n; frac < 0.88 || frac > 0.92 {
		t.Errorf("oltp 8KiB fraction %.3f, want ≈ 0.90", frac)
	}
	// Uniform: covers the range evenly (each quarter 25 % ± 2 %).
	u := MustParseSizeDist("0-1023")
	var quarters [4]int
	for i := range n {
		quarters[u.Sample(mix64(uint64(i)))/256]++
	}
	for q, c := range quarters {
		if f := float64(c) / n; f < 0.23 || f > 0.27 {
			t.Errorf("uniform quarter %d has %.3f of samples", q, f)
		}
	}
}

func TestSizeDistJSON(t *testing.T) {
	var d SizeDist
	if err := d.UnmarshalText([]byte("4KiB-1MiB")); err != nil {
		t.Fatal(err)
	}
	b, _ := d.MarshalText()
	if string(b) != "4KiB-1MiB" {
		t.Errorf("MarshalText = %q", b)
	}
	if err := d.UnmarshalText([]byte("nope")); err == nil {
		t.Error("UnmarshalText accepted a bad spec")
	}
}
