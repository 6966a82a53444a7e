package sse

import "fmt"

// Layout describes an encrypted object: one stream per part (one stream
// for a simple object), concatenated.
type Layout struct {
	// CipherSizes are the streams' sizes; PlainSizes their plaintext
	// sizes.
	CipherSizes, PlainSizes []int64
	// Plain is the object's plaintext size.
	Plain int64
}

// NewLayout checks every stream size and computes plaintext sizes.
func NewLayout(cipherSizes []int64) (Layout, error) {
	if len(cipherSizes) == 0 {
		return Layout{}, fmt.Errorf("%w: no streams", ErrFormat)
	}
	l := Layout{CipherSizes: cipherSizes, PlainSizes: make([]int64, len(cipherSizes))}
	for i, c := range cipherSizes {
		p, err := PlainSize(c)
		if err != nil {
			return Layout{}, fmt.Errorf("stream %d: %w", i, err)
		}
		l.PlainSizes[i] = p
		l.Plain += p
	}
	return l, nil
}

// Segment is the piece of a plaintext range that lies in one stream.
type Segment struct {
	// Stream is the stream's index; Base its offset in the object's
	// ciphertext.
	Stream int
	Base   int64
	// PlainSize is the stream's plaintext size; Off and N the piece of it
	// wanted.
	PlainSize, Off, N int64
	// Span is what to read of the stream (offsets relative to Base).
	Span Span
}

// Plan maps plaintext bytes [off, off+n) of the object onto segments of
// its streams, in order. n must be positive and the range inside the
// object.
func (l Layout) Plan(off, n int64) ([]Segment, error) {
	if off < 0 || n <= 0 || off > l.Plain || n > l.Plain-off {
		return nil, fmt.Errorf("sse: range [%d, +%d) outside %d plaintext bytes", off, n, l.Plain)
	}
	var segs []Segment
	var base, start int64 // ciphertext and plaintext offsets of stream i
	for i, p := range l.PlainSizes {
		end := start + p
		if n > 0 && off < end && p > 0 {
			o := off - start
			take := min(p-o, n)
			sp, err := RangeSpan(p, o, take)
			if err != nil {
				return nil, err
			}
			segs = append(segs, Segment{Stream: i, Base: base, PlainSize: p, Off: o, N: take, Span: sp})
			off += take
			n -= take
		}
		base += l.CipherSizes[i]
		start = end
	}
	if n != 0 {
		return nil, fmt.Errorf("sse: plan left %d bytes", n)
	}
	return segs, nil
}
