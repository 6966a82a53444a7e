package metarange

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/terrace-storage/terrace/internal/meta"
)

// A command is one transaction as it travels in a raft entry:
//
//	id       8 bytes, big-endian: the proposer's waiter
//	ncmps    uvarint, then per compare: key (uvarint length, bytes), modrev (varint)
//	nops     uvarint, then per op: kind (1 byte: 0 put, 1 delete), key, and for a put the value
//
// Every member decodes the same bytes, so a command that fails to decode
// fails the same way everywhere and is answered as an error.

const (
	opPut    = 0
	opDelete = 1
)

var errBadCommand = errors.New("metarange: malformed command")

func encodeCommand(id uint64, t *meta.Txn) []byte {
	n := 8 + 2*binary.MaxVarintLen64
	for _, c := range t.Cmps {
		n += 2*binary.MaxVarintLen64 + len(c.Key)
	}
	for _, op := range t.Ops {
		n += 1 + 2*binary.MaxVarintLen64 + len(op.Key) + len(op.Value)
	}
	b := make([]byte, 8, n)
	binary.BigEndian.PutUint64(b, id)
	b = binary.AppendUvarint(b, uint64(len(t.Cmps)))
	for _, c := range t.Cmps {
		b = appendBytes(b, c.Key)
		b = binary.AppendVarint(b, c.ModRev)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Ops)))
	for _, op := range t.Ops {
		if op.Delete {
			b = append(b, opDelete)
			b = appendBytes(b, op.Key)
			continue
		}
		b = append(b, opPut)
		b = appendBytes(b, op.Key)
		b = appendBytes(b, op.Value)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// decodeCommand parses a command. The returned keys and values alias b.
func decodeCommand(b []byte) (uint64, meta.Txn, error) {
	var t meta.Txn
	if len(b) < 8 {
		return 0, t, fmt.Errorf("%w: %d bytes, want at least 8", errBadCommand, len(b))
	}
	d := decoder{b: b[8:]}
	id := binary.BigEndian.Uint64(b)
	ncmps := d.count()
	for i := uint64(0); i < ncmps && d.err == nil; i++ {
		k := d.bytes()
		rev := d.varint()
		if rev < 0 {
			d.fail("compare revision %d", rev)
		}
		t.Cmps = append(t.Cmps, meta.Cmp{Key: k, ModRev: rev})
	}
	nops := d.count()
	for i := uint64(0); i < nops && d.err == nil; i++ {
		kind := d.byte()
		switch kind {
		case opPut:
			k := d.bytes()
			t.Ops = append(t.Ops, meta.Op{Key: k, Value: d.bytes()})
		case opDelete:
			t.Ops = append(t.Ops, meta.Op{Key: d.bytes(), Delete: true})
		default:
			d.fail("op kind %d", kind)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err == nil && len(t.Ops) == 0 {
		d.fail("no ops")
	}
	if d.err != nil {
		return 0, meta.Txn{}, d.err
	}
	return id, t, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errBadCommand, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an element count, refusing one larger than the bytes left
// could hold (every element takes at least one byte), so a corrupt count
// cannot make the decoder allocate or loop without bound.
func (d *decoder) count() uint64 {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count %d with %d bytes left", n, len(d.b))
		return 0
	}
	return n
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d with %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
