package extent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// SliceSize is the payload capacity of one slice. 64 KiB keeps checksum
// overhead at 0.01 % while a random 4 KiB read verifies at most 64 KiB.
const SliceSize = 64 << 10

// HeaderSize is the per-slice overhead.
const HeaderSize = 8

// ErrCorrupt means a slice failed its checksum or had an impossible header.
var ErrCorrupt = errors.New("extent: corrupt slice")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedLen is the on-disk size of an extent of n payload bytes.
func EncodedLen(n int64) int64 {
	if n <= 0 {
		return 0
	}
	slices := (n + SliceSize - 1) / SliceSize
	return n + slices*HeaderSize
}

func sliceCRC(hdrLen []byte, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdrLen)
	return crc32.Update(c, castagnoli, payload)
}

// Encode appends the slices of payload to dst and returns the result.
func Encode(dst, payload []byte) []byte {
	for len(payload) > 0 {
		n := min(len(payload), SliceSize)
		var hdr [HeaderSize]byte
		binary.LittleEndian.PutUint32(hdr[0:4], uint32(n))
		binary.LittleEndian.PutUint32(hdr[4:8], sliceCRC(hdr[0:4], payload[:n]))
		dst = append(dst, hdr[:]...)
		dst = append(dst, payload[:n]...)
		payload = payload[n:]
	}
	return dst
}

// sliceSpan returns, for an extent of extLen payload bytes, the index range
// [first, last] of slices covering payload bytes [from, to).
func sliceSpan(from, to int64) (first, last int64) {
	return from / SliceSize, (to - 1) / SliceSize
}

// decodeSlices verifies consecutive slices in buf, which starts at slice
// index first of an extent of extLen bytes, and returns their payloads
// concatenated.
//
// Payloads are compacted to the front of buf in place (one memmove, no
// allocation): the returned slice aliases buf.
func decodeSlices(buf []byte, first, extLen int64) ([]byte, error) {
	out := buf[:0]
	idx := first
	for len(buf) > 0 {
		want := min(SliceSize, extLen-idx*SliceSize)
		if want <= 0 {
			return nil, fmt.Errorf("%w: slice %d past extent end", ErrCorrupt, idx)
		}
		if len(buf) < HeaderSize {
			return nil, fmt.Errorf("%w: short header at slice %d", ErrCorrupt, idx)
		}
		n := int64(binary.LittleEndian.Uint32(buf[0:4]))
		if n != want {
			return nil, fmt.Errorf("%w: slice %d length %d, want %d", ErrCorrupt, idx, n, want)
		}
		if int64(len(buf)) < HeaderSize+n {
			return nil, fmt.Errorf("%w: short payload at slice %d", ErrCorrupt, idx)
		}
		payload := buf[HeaderSize : HeaderSize+n]
		if got := sliceCRC(buf[0:4], payload); got != binary.LittleEndian.Uint32(buf[4:8]) {
			return nil, fmt.Errorf("%w: slice %d checksum mismatch", ErrCorrupt, idx)
		}
		out = append(out, payload...)
		buf = buf[HeaderSize+n:]
		idx++
	}
	return out, nil
}

// ScanValid walks slices from the start of buf and returns the length of
// the longest prefix made of whole, valid slices. It is what recovery and
// scrubbing use when no extent map is at hand; it trusts nothing it reads.
func ScanValid(buf []byte) int64 {
	var off int64
	for int64(len(buf))-off >= HeaderSize {
		n := int64(binary.LittleEndian.Uint32(buf[off : off+4]))
		if n == 0 || n > SliceSize || off+HeaderSize+n > int64(len(buf)) {
			break
		}
		payload := buf[off+HeaderSize : off+HeaderSize+n]
		if sliceCRC(buf[off:off+4], payload) != binary.LittleEndian.Uint32(buf[off+4:off+8]) {
			break
		}
		off += HeaderSize + n
	}
	return off
}

// EncodedSpan returns where, relative to the start of an extent of extLen
// payload bytes, the slices covering payload bytes [from, to) begin and
// end, and the index of the first. A reader that assembles those bytes
// from elsewhere (an erasure-coded stripe) decodes them with DecodeSpan.
func EncodedSpan(extLen, from, to int64) (start, end, first int64) {
	first, last := sliceSpan(from, to)
	return first * (SliceSize + HeaderSize), EncodedLen(min(extLen, (last+1)*SliceSize)), first
}

// DecodeSpan verifies the slices in buf (as located by EncodedSpan, from
// slice first of an extent of extLen payload bytes) and returns their
// payload; a mismatch is ErrCorrupt. The result aliases buf.
func DecodeSpan(buf []byte, first, extLen int64) ([]byte, error) {
	return decodeSlices(buf, first, extLen)
}
