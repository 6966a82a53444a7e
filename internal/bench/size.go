package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Byte-size units. Binary units (KiB, or the bare K/M/G shorthand used by fio
// and dd) are powers of 1024; decimal units (KB, MB, GB) are powers of 1000.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// MaxObjectBytes is the largest object a workload may write: the S3 limit for
// a single PUT (5 GiB). Multipart uploads are not generated.
const MaxObjectBytes = 5 * GiB

// SizeDist is a distribution of object sizes. It is parsed from a short spec
// (see [ParseSizeDist]) and sampled deterministically from a 64-bit number, so
// an object's size is a function of its key and the run's seed.
type SizeDist struct {
	spec string
	kind sizeKind
	// lo and hi bound a uniform range; for a fixed size lo == hi.
	lo, hi int64
	// choices and cumulative weights for a weighted distribution.
	choices []int64
	cumw    []uint64
}

type sizeKind int

const (
	sizeFixed sizeKind = iota
	sizeUniform
	sizeWeighted
)

// sizeAliases are named distributions. "oltp" is the shape of the Curator
// paper's OLTP workload: mostly 8 KiB records with some 32 KiB ones.
var sizeAliases = map[string]string{
	"oltp": "8KiB:90,32KiB:10",
}

// ParseSizeDist parses an object-size distribution:
//
//	4KiB              every object is 4 KiB (also 4096, 4K, 4KB = 4000)
//	4KiB-1MiB         uniform over [4 KiB, 1 MiB], inclusive
//	8KiB:90,32KiB:10  weighted choice (weights are relative integers)
//	oltp              alias for 8KiB:90,32KiB:10
func ParseSizeDist(spec string) (SizeDist, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return SizeDist{}, errors.New("bench: empty size distribution")
	}
	if alias, ok := sizeAliases[strings.ToLower(s)]; ok {
		d, err := ParseSizeDist(alias)
		d.spec = strings.ToLower(s)
		return d, err
	}
	d := SizeDist{spec: s}
	switch {
	case strings.Contains(s, ":") || strings.Contains(s, ","):
		d.kind = sizeWeighted
		var total uint64
		for _, part := range strings.Split(s, ",") {
			sz, w, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				return SizeDist{}, fmt.Errorf("bench: size distribution %q: %q is not SIZE:WEIGHT", spec, part)
			}
			n, err := ParseBytes(sz)
			if err != nil {
				return SizeDist{}, fmt.Errorf("bench: size distribution %q: %w", spec, err)
			}
			wt, err := strconv.ParseUint(strings.TrimSpace(w), 10, 32)
			if err != nil || wt == 0 {
				return SizeDist{}, fmt.Errorf("bench: size distribution %q: weight %q must be a positive integer", spec, w)
			}
			total += wt
			d.choices = append(d.choices, n)
			d.cumw = append(d.cumw, total)
		}
		d.lo, d.hi = d.choices[0], d.choices[0]
		for _, c := range d.choices {
			d.lo, d.hi = min(d.lo, c), max(d.hi, c)
		}
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, err := ParseBytes(a)
		if err != nil {
			return SizeDist{}, fmt.Errorf("bench: size range %q: %w", spec, err)
		}
		hi, err := ParseBytes(b)
		if err != nil {
			return SizeDist{}, fmt.Errorf("bench: size range %q: %w", spec, err)
		}
		if lo > hi {
			return SizeDist{}, fmt.Errorf("bench: size range %q: low end %s is above high end %s", spec, FormatBytes(lo), FormatBytes(hi))
		}
		d.kind, d.lo, d.hi = sizeUniform, lo, hi
	default:
		n, err := ParseBytes(s)
		if err != nil {
			return SizeDist{}, fmt.Errorf("bench: object size %q: %w", spec, err)
		}
		d.kind, d.lo, d.hi = sizeFixed, n, n
	}
	if d.hi > MaxObjectBytes {
		return SizeDist{}, fmt.Errorf("bench: object size %s exceeds the %s single-PUT limit", FormatBytes(d.hi), FormatBytes(MaxObjectBytes))
	}
	return d, nil
}

// MustParseSizeDist is ParseSizeDist for constants known to be valid.
func MustParseSizeDist(spec string) SizeDist {
	d, err := ParseSizeDist(spec)
	if err != nil {
		panic(err)
	}
	return d
}

// String returns the spec the distribution was parsed from.
func (d SizeDist) String() string { return d.spec }

// IsZero reports whether d was never parsed.
func (d SizeDist) IsZero() bool { return d.spec == "" }

// Max is the largest size the distribution can produce.
func (d SizeDist) Max() int64 { return d.hi }

// Mean is the expected size.
func (d SizeDist) Mean() float64 {
	switch d.kind {
	case sizeUniform:
		return float64(d.lo+d.hi) / 2
	case sizeWeighted:
		var sum float64
		prev := uint64(0)
		for i, c := range d.choices {
			sum += float64(c) * float64(d.cumw[i]-prev)
			prev = d.cumw[i]
		}
		return sum / float64(prev)
	default:
		return float64(d.lo)
	}
}

// Sample maps a uniformly distributed 64-bit number to a size. The same u
// always yields the same size, which is what lets a reader know an object's
// size from its key alone.
func (d SizeDist) Sample(u uint64) int64 {
	switch d.kind {
	case sizeUniform:
		span := uint64(d.hi-d.lo) + 1
		return d.lo + int64(u%span)
	case sizeWeighted:
		total := d.cumw[len(d.cumw)-1]
		r := u % total
		for i, c := range d.cumw {
			if r < c {
				return d.choices[i]
			}
		}
		return d.choices[len(d.choices)-1]
	default:
		return d.lo
	}
}

// MarshalText implements encoding.TextMarshaler so a SizeDist prints as its
// spec in JSON.
func (d SizeDist) MarshalText() ([]byte, error) { return []byte(d.spec), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *SizeDist) UnmarshalText(b []byte) error {
	v, err := ParseSizeDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", KiB}, {"mib", MiB}, {"gib", GiB},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", KiB}, {"m", MiB}, {"g", GiB},
	{"b", 1},
}

// ParseBytes parses a byte count such as 4096, 4KiB, 4K (binary), 4KB
// (decimal), 1.5MiB or 0. Fractions are allowed when they come out whole.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, errors.New("bench: empty byte size")
	}
	mult := int64(1)
	num := t
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			num = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("bench: byte size %q has no number", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("bench: byte size %q is negative", s)
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("bench: byte size %q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: byte size %q is not a number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB)", s)
	}
	v := f * float64(mult)
	if f < 0 || math.IsNaN(v) || v > float64(math.MaxInt64/2) {
		return 0, fmt.Errorf("bench: byte size %q is out of range", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("bench: byte size %q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

// FormatBytes prints n with the largest binary unit that divides it exactly,
// so that ParseBytes(FormatBytes(n)) == n.
func FormatBytes(n int64) string {
	switch {
	case n != 0 && n%GiB == 0:
		return strconv.FormatInt(n/GiB, 10) + "GiB"
	case n != 0 && n%MiB == 0:
		return strconv.FormatInt(n/MiB, 10) + "MiB"
	case n != 0 && n%KiB == 0:
		return strconv.FormatInt(n/KiB, 10) + "KiB"
	default:
		return strconv.FormatInt(n, 10) + "B"
	}
}
