package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Journal record format (little endian):
//
//	| body length uint32 | crc32c(body) uint32 | body |
//	body: type u8 | log u64 | segment u32 | stripe u32 | pos u64 | epoch u64 | token [16] | data
//
// The CRC covers the whole body, so a torn or corrupt record is detected
// before any field of it is trusted.
const (
	recordHeaderBytes = 8
	bodyFixedBytes    = 1 + 8 + 4 + 4 + 8 + 8 + TokenBytes
	// MaxRecordBytes bounds one record: an entry of at most 1 MiB plus the
	// fixed fields. A larger length field is corruption, not a record.
	MaxRecordBytes = recordHeaderBytes + bodyFixedBytes + 1<<20
)

// TokenBytes is the size of a writer token.
const TokenBytes = 16

// Token identifies one append attempt (client ID and sequence number): a
// retried write with the same token is the same write.
type Token [TokenBytes]byte

// Kind is what a position holds.
type Kind uint8

// Kinds. Values are stored in journal records: never renumber.
const (
	KindNone Kind = 0
	KindData Kind = 1
	KindFill Kind = 2 // junk written so a hole can be skipped
	KindTrim Kind = 3 // trimmed: the bytes may be reclaimed

	// Replica-level records (not position kinds).
	kindSeal  Kind = 4 // epoch field: the sealed epoch
	kindReset Kind = 5 // every earlier record of the replica is void
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindData:
		return "data"
	case KindFill:
		return "fill"
	case KindTrim:
		return "trim"
	case kindSeal:
		return "seal"
	case kindReset:
		return "reset"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Key names one stripe replica: a stripe of a segment of a log.
type Key struct {
	Log     uint64
	Segment uint32
	Stripe  uint32
}

func (k Key) String() string {
	return fmt.Sprintf("log %d segment %d stripe %d", k.Log, k.Segment, k.Stripe)
}

// record is one decoded journal record.
type record struct {
	kind  Kind
	key   Key
	pos   uint64
	epoch uint64
	token Token
	data  []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt reports a record whose CRC or length is wrong.
var errCorrupt = errors.New("store: corrupt journal record")

// errShort reports a record cut off by the end of the file (a torn write).
var errShort = errors.New("store: torn journal record")

// appendRecord encodes r onto dst.
func appendRecord(dst []byte, r *record) []byte {
	n := bodyFixedBytes + len(r.data)
	start := len(dst)
	dst = append(dst, make([]byte, recordHeaderBytes+n)...)
	b := dst[start:]
	binary.LittleEndian.PutUint32(b[0:], uint32(n))
	body := b[recordHeaderBytes:]
	body[0] = byte(r.kind)
	binary.LittleEndian.PutUint64(body[1:], r.key.Log)
	binary.LittleEndian.PutUint32(body[9:], r.key.Segment)
	binary.LittleEndian.PutUint32(body[13:], r.key.Stripe)
	binary.LittleEndian.PutUint64(body[17:], r.pos)
	binary.LittleEndian.PutUint64(body[25:], r.epoch)
	copy(body[33:33+TokenBytes], r.token[:])
	copy(body[bodyFixedBytes:], r.data)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(body, castagnoli))
	return dst
}

// decodeRecord decodes the record at the start of b and returns it with its
// encoded length. errShort means b ends inside the record; errCorrupt
// means the length or CRC is wrong. The returned data aliases b.
func decodeRecord(b []byte) (record, int, error) {
	if len(b) < recordHeaderBytes {
		return record{}, 0, errShort
	}
	n := int(binary.LittleEndian.Uint32(b[0:]))
	if n < bodyFixedBytes || recordHeaderBytes+n > MaxRecordBytes {
		return record{}, 0, fmt.Errorf("%w: body length %d", errCorrupt, n)
	}
	if len(b) < recordHeaderBytes+n {
		return record{}, 0, errShort
	}
	body := b[recordHeaderBytes : recordHeaderBytes+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return record{}, 0, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	r := record{
		kind:  Kind(body[0]),
		key:   Key{Log: binary.LittleEndian.Uint64(body[1:]), Segment: binary.LittleEndian.Uint32(body[9:]), Stripe: binary.LittleEndian.Uint32(body[13:])},
		pos:   binary.LittleEndian.Uint64(body[17:]),
		epoch: binary.LittleEndian.Uint64(body[25:]),
		data:  body[bodyFixedBytes:],
	}
	copy(r.token[:], body[33:33+TokenBytes])
	if r.kind < KindData || r.kind > kindReset {
		return record{}, 0, fmt.Errorf("%w: unknown kind %d", errCorrupt, r.kind)
	}
	if r.kind != KindData && len(r.data) != 0 {
		return record{}, 0, fmt.Errorf("%w: %s record with %d data bytes", errCorrupt, r.kind, len(r.data))
	}
	return r, recordHeaderBytes + n, nil
}
