package transform

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// Erasure coding of an egroup's bytes: the egroup's layout (its encoded
// slices, as one replica file would hold them) is cut into K data strips
// of equal length (the last zero-padded) and M parity strips; any K of
// the K+M strips give the layout back.

// MaxStrips bounds K+M: every strip sits on its own device, and an egroup
// record lists at most this many (the replica limit).
const MaxStrips = 8

// ErrTooFewStrips means fewer than K strips survive: the stripe cannot be
// decoded.
var ErrTooFewStrips = errors.New("transform: too few strips to reconstruct")

// ECShape is K data plus M parity strips.
type ECShape struct{ K, M int }

func (s ECShape) String() string { return fmt.Sprintf("%d+%d", s.K, s.M) }

// ParseEC parses "K+M" ("none" and "" give the zero shape).
func ParseEC(v string) (ECShape, error) {
	if v == "" || v == "none" {
		return ECShape{}, nil
	}
	ks, ms, ok := strings.Cut(v, "+")
	k, err1 := strconv.Atoi(ks)
	m, err2 := strconv.Atoi(ms)
	if !ok || err1 != nil || err2 != nil {
		return ECShape{}, fmt.Errorf("transform: erasure code %q: want K+M, e.g. 4+2", v)
	}
	s := ECShape{K: k, M: m}
	return s, s.Validate()
}

// Validate checks 1 <= M <= K and K+M <= MaxStrips.
func (s ECShape) Validate() error {
	if s.K < 1 || s.M < 1 || s.M > s.K || s.K+s.M > MaxStrips {
		return fmt.Errorf("transform: erasure code %d+%d: need K >= M >= 1 and K+M <= %d", s.K, s.M, MaxStrips)
	}
	return nil
}

// IsZero reports the absence of erasure coding.
func (s ECShape) IsZero() bool { return s.K == 0 }

var encoders sync.Map // ECShape -> reedsolomon.Encoder

func encoder(s ECShape) (reedsolomon.Encoder, error) {
	if e, ok := encoders.Load(s); ok {
		return e.(reedsolomon.Encoder), nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e, err := reedsolomon.New(s.K, s.M)
	if err != nil {
		return nil, err
	}
	encoders.Store(s, e)
	return e, nil
}

// StripLen is the length of each strip of a layout of n bytes.
func (s ECShape) StripLen(n int64) int64 { return (n + int64(s.K) - 1) / int64(s.K) }

// Encode cuts layout into K data strips and computes M parity strips.
func Encode(s ECShape, layout []byte) ([][]byte, error) {
	e, err := encoder(s)
	if err != nil {
		return nil, err
	}
	sl := s.StripLen(int64(len(layout)))
	if sl == 0 {
		return nil, errors.New("transform: erasure coding an empty layout")
	}
	buf := make([]byte, sl*int64(s.K+s.M))
	copy(buf, layout)
	strips := make([][]byte, s.K+s.M)
	for i := range strips {
		strips[i] = buf[int64(i)*sl : int64(i+1)*sl : int64(i+1)*sl]
	}
	if err := e.Encode(strips); err != nil {
		return nil, err
	}
	return strips, nil
}

// Reconstruct fills in the missing (nil) strips from the others. With
// dataOnly, parity strips are not rebuilt (a degraded read needs only the
// data).
func Reconstruct(s ECShape, strips [][]byte, dataOnly bool) error {
	e, err := encoder(s)
	if err != nil {
		return err
	}
	if len(strips) != s.K+s.M {
		return fmt.Errorf("transform: %d strips for %s", len(strips), s)
	}
	have := 0
	for _, st := range strips {
		if len(st) > 0 {
			have++
		}
	}
	if have < s.K {
		return fmt.Errorf("%w: %d of %s", ErrTooFewStrips, have, s)
	}
	if dataOnly {
		err = e.ReconstructData(strips)
	} else {
		err = e.Reconstruct(strips)
	}
	if err != nil {
		return fmt.Errorf("transform: reconstruct %s: %w", s, err)
	}
	return nil
}

// VerifyParity reports whether the parity strips match the data strips.
func VerifyParity(s ECShape, strips [][]byte) (bool, error) {
	e, err := encoder(s)
	if err != nil {
		return false, err
	}
	return e.Verify(strips)
}
