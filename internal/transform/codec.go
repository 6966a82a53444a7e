package transform

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Codec names. An empty codec means the bytes are stored as they are.
const (
	CodecNone = ""
	CodecZstd = "zstd"
)

// MaxExtentBytes bounds what Decompress will produce (object extents are
// at most 64 MiB).
const MaxExtentBytes = 64 << 20

// ErrCorrupt means stored bytes did not decode to what their record says:
// wrong length, wrong checksum, or not a valid frame.
var ErrCorrupt = errors.New("transform: stored data does not decode to the recorded bytes")

// ErrUnknownCodec is returned for codec names this build does not know.
var ErrUnknownCodec = errors.New("transform: unknown codec")

// ValidCodec reports whether name is a codec Compress accepts ("" included).
func ValidCodec(name string) bool { return name == CodecNone || name == CodecZstd }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum is the checksum of an extent's uncompressed payload (CRC32C).
func Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var (
	encOnce sync.Once
	enc     *zstd.Encoder
	dec     *zstd.Decoder
	encErr  error
)

func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	encOnce.Do(func() {
		// Concurrency 1 per call: callers run in parallel already, and the
		// Curator's CPU budget is two workers, not every core.
		enc, encErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
			zstd.WithZeroFrames(true))
		if encErr != nil {
			return
		}
		dec, encErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxExtentBytes),
			zstd.WithDecoderMaxWindow(MaxExtentBytes))
	})
	return enc, dec, encErr
}

// Compress returns src compressed with codec, appended to dst[:0].
func Compress(codec string, dst, src []byte) ([]byte, error) {
	switch codec {
	case CodecZstd:
		e, _, err := codecs()
		if err != nil {
			return nil, err
		}
		return e.EncodeAll(src, dst[:0]), nil
	case CodecNone:
		return append(dst[:0], src...), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownCodec, codec)
}

// Decompress decodes stored bytes written by Compress(codec) back into the
// n-byte payload whose Sum is sum. Anything else — a frame that decodes to
// a different length or checksum, or does not decode — is ErrCorrupt; no
// more than n bytes are ever produced.
func Decompress(codec string, dst, stored []byte, n int64, sum uint32) ([]byte, error) {
	if n < 0 || n > MaxExtentBytes {
		return nil, fmt.Errorf("%w: recorded length %d out of range", ErrCorrupt, n)
	}
	var out []byte
	switch codec {
	case CodecZstd:
		_, d, err := codecs()
		if err != nil {
			return nil, err
		}
		if int64(cap(dst)) < n {
			dst = make([]byte, 0, n)
		}
		// The frame header declares its content size; refuse frames that
		// claim more than the record says before decoding them.
		var h zstd.Header
		if err := h.Decode(stored); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if h.HasFCS && h.FrameContentSize != uint64(n) {
			return nil, fmt.Errorf("%w: frame holds %d bytes, record says %d", ErrCorrupt, h.FrameContentSize, n)
		}
		out, err = d.DecodeAll(stored, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	case CodecNone:
		out = append(dst[:0], stored...)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownCodec, codec)
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("%w: decoded %d bytes, record says %d", ErrCorrupt, len(out), n)
	}
	if Sum(out) != sum {
		return nil, fmt.Errorf("%w: checksum of the decoded bytes does not match", ErrCorrupt)
	}
	return out, nil
}

// Pays reports whether storing stored bytes instead of logical ones is
// worth it at the given maximum ratio (stored/logical): 0.9 keeps data
// compressed only if it saves at least 10 %.
func Pays(stored, logical int64, maxRatio float64) bool {
	return logical > 0 && float64(stored) <= maxRatio*float64(logical)
}
