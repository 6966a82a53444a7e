package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/terrace-storage/terrace/internal/model"
)

// The binary record format. The records there are the most of — egroups,
// their access records, extents, objects and versions, one or more of
// each per object — are what every scan decodes by the million and what
// every GET and PUT reads or writes. As JSON (≈ 200 bytes for an egroup
// with two replicas) decoding them was two thirds of a scan's map stage
// (docs/perf.md, "Binary records"). They are written in a compact binary
// form instead; every other record stays JSON.
//
// A binary record starts with binaryMagic, a byte no JSON text starts
// with, then its kind (binaryEgroup, binaryAccess, binaryExtent) and its
// fields in a fixed order: integers as varints (encoding/binary), strings
// and byte strings as a length and the bytes, booleans as flag bits. A
// vector is written as its text ("ssd=1,hdd=2"), exactly what JSON
// holds, so it decodes to the same value. Decode reads both forms, so
// records written before binary records existed, and records written by
// a node set to JSON (SetBinaryRecords), read as they always have.
//
// A field added to one of these structs must be added here, in the same
// place in encode and decode, behind a new format byte if records
// without it must still decode (TestBinaryRecordsCoverEveryField fails
// until it is).

const (
	binaryMagic  = 0x01
	binaryEgroup = 'g'
	binaryAccess = 'a'
	binaryExtent = 'x'
	binaryObject = 'o'
	binaryVer    = 'v'
)

// binaryRecords says whether Encode writes egroup, access, extent,
// object and version records in the binary form (the default) or as
// JSON.
var binaryRecords atomic.Bool

func init() { binaryRecords.Store(true) }

// SetBinaryRecords chooses the form Encode writes egroup, access,
// extent, object and version records in: binary (true, the default) or JSON, which a cluster
// keeps while some of its nodes still run a version that reads only JSON
// (a rolling upgrade). Decode reads both either way. It is process-wide:
// a server sets it once at start-up from its configuration.
func SetBinaryRecords(on bool) { binaryRecords.Store(on) }

// encodeBinary returns the binary form of v if it is one of the records
// written that way.
func encodeBinary(v any) ([]byte, bool) {
	switch r := v.(type) {
	case Egroup:
		return r.appendBinary(make([]byte, 0, 96)), true
	case *Egroup:
		return r.appendBinary(make([]byte, 0, 96)), true
	case Access:
		return r.appendBinary(make([]byte, 0, 24)), true
	case *Access:
		return r.appendBinary(make([]byte, 0, 24)), true
	case Extent:
		return r.appendBinary(make([]byte, 0, 32)), true
	case *Extent:
		return r.appendBinary(make([]byte, 0, 32)), true
	case Object:
		return r.appendBinary(make([]byte, 0, 128), binaryObject, false), true
	case *Object:
		return r.appendBinary(make([]byte, 0, 128), binaryObject, false), true
	case Version:
		return r.Object.appendBinary(make([]byte, 0, 128), binaryVer, r.S3), true
	case *Version:
		return r.Object.appendBinary(make([]byte, 0, 128), binaryVer, r.S3), true
	}
	return nil, false
}

// A RecordDecoder decodes many records — a scan's, page after page —
// carving the egroups' replica lists out of shared blocks instead of
// allocating one per record. Decoded records may be kept: a block lives
// as long as any record using it, and each record's list is capped, so
// appending to it copies. The zero value is ready; not safe for
// concurrent use.
type RecordDecoder struct {
	replicas []EgroupReplica
	// lists remembers replica lists by their encoded bytes: egroups
	// share a few lists (one per set of devices), and copying a decoded
	// one is cheaper than looking up its three names per replica.
	lists map[string][]EgroupReplica
	// The last vector decoded and its text.
	lastVecText string
	lastVec     model.Vector
	lastVecSet  bool
	// reuse makes every record's replica list overwrite the last one's
	// (ReuseReplicas).
	reuse bool
}

// ReuseReplicas makes the decoder decode every egroup's replica list
// into the memory of the previous one: a caller that copies what it
// keeps of a record before decoding the next allocates nothing per
// record.
func (rd *RecordDecoder) ReuseReplicas() { rd.reuse = true }

// maxReplicaLists bounds a RecordDecoder's remembered replica lists.
const maxReplicaLists = 4096

// replicaBlock is how many replicas a RecordDecoder allocates at once.
const replicaBlock = 512

// Decode is Decode with the decoder's blocks.
func (rd *RecordDecoder) Decode(b []byte, v any) error {
	if rd.reuse {
		rd.replicas = rd.replicas[:0]
	}
	if len(b) > 0 && b[0] == binaryMagic {
		return decodeBinaryWith(b, v, rd)
	}
	return Decode(b, v)
}

// decodeBinary decodes a binary record into v.
func decodeBinary(b []byte, v any) error { return decodeBinaryWith(b, v, nil) }

// decodeBinaryWith decodes a binary record into v, with rd's blocks and
// remembered lists when rd is not nil.
func decodeBinaryWith(b []byte, v any, rd *RecordDecoder) error {
	d := binDecoder{b: b[1:], rd: rd}
	kind := d.byte()
	var err error
	switch r := v.(type) {
	case *Egroup:
		err = d.expect(kind, binaryEgroup, r)
		if err == nil {
			*r, err = d.egroup()
		}
	case *Access:
		err = d.expect(kind, binaryAccess, r)
		if err == nil {
			*r, err = d.access()
		}
	case *Extent:
		err = d.expect(kind, binaryExtent, r)
		if err == nil {
			*r, err = d.extent()
		}
	case *Object:
		// As with JSON, a version record reads as an object (without its
		// S3 mark) and an object record as a version: code that reads both
		// maps into one type keeps working.
		err = d.expectObject(kind, r)
		if err == nil {
			*r, _, err = d.object()
		}
	case *Version:
		err = d.expectObject(kind, r)
		if err == nil {
			r.Object, r.S3, err = d.object()
		}
	default:
		err = fmt.Errorf("a binary record (kind %q) is not a %T", kind, v)
	}
	if err == nil && len(d.b) > 0 {
		err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if err != nil {
		return fmt.Errorf("meta: decode %T: binary record: %w", v, err)
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (eg *Egroup) appendBinary(b []byte) []byte {
	b = append(b, binaryMagic, binaryEgroup)
	b = binary.AppendUvarint(b, uint64(len(eg.Replicas)))
	for _, r := range eg.Replicas {
		b = appendString(b, string(r.Device))
		b = appendString(b, string(r.Node))
		b = appendString(b, string(r.Tier))
		b = append(b, boolByte(r.Bad))
	}
	b = append(b, byte(eg.State))
	b = binary.AppendVarint(b, eg.Size)
	b = appendString(b, eg.Vector.String())
	b = binary.AppendVarint(b, eg.Mtime)
	b = appendString(b, string(eg.Writer))
	b = appendString(b, eg.Codec)
	b = binary.AppendVarint(b, eg.Logical)
	flags := boolByte(eg.Incompressible)
	if eg.EC != nil {
		flags |= 2
	}
	if eg.TailFrom != 0 || eg.TailTo != 0 {
		flags |= 4
	}
	b = append(b, flags)
	if eg.EC != nil {
		b = binary.AppendVarint(b, int64(eg.EC.K))
		b = binary.AppendVarint(b, int64(eg.EC.M))
		b = binary.AppendVarint(b, eg.EC.StripLen)
	}
	if flags&4 != 0 {
		b = binary.AppendUvarint(b, eg.TailFrom)
		b = binary.AppendUvarint(b, eg.TailTo)
	}
	return b
}

func (a *Access) appendBinary(b []byte) []byte {
	b = append(b, binaryMagic, binaryAccess)
	b = binary.AppendVarint(b, a.Atime)
	b = binary.AppendVarint(b, a.Reads)
	b = binary.AppendVarint(b, a.WinStart)
	return binary.AppendVarint(b, a.WinReads)
}

func (x *Extent) appendBinary(b []byte) []byte {
	b = append(b, binaryMagic, binaryExtent)
	b = binary.AppendUvarint(b, x.Egroup)
	b = binary.AppendVarint(b, x.Off)
	b = binary.AppendVarint(b, x.Len)
	b = binary.AppendVarint(b, x.Ctime)
	b = appendString(b, x.Codec)
	b = binary.AppendVarint(b, x.Stored)
	b = binary.AppendUvarint(b, uint64(x.Sum))
	b = appendString(b, string(x.FP))
	return binary.AppendUvarint(b, x.Shares)
}

// appendBinary writes an object record (kind binaryObject) or a version
// record (binaryVer, with its S3 mark). Map entries go in key order, so
// a record has one binary form.
func (o *Object) appendBinary(b []byte, kind byte, s3 bool) []byte {
	b = append(b, binaryMagic, kind)
	b = binary.AppendVarint(b, o.Size)
	b = appendString(b, o.ETag)
	b = binary.AppendVarint(b, o.Mtime)
	b = appendString(b, o.Vector.String())
	b = appendString(b, o.Class)
	for _, m := range []map[string]string{o.Headers, o.UserMeta, o.Tags} {
		b = binary.AppendUvarint(b, uint64(len(m)))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b = appendString(b, k)
			b = appendString(b, m[k])
		}
	}
	b = binary.AppendUvarint(b, uint64(len(o.Parts)))
	for _, p := range o.Parts {
		b = binary.AppendVarint(b, p)
	}
	// Extents has no omitempty: JSON tells an empty list (a 0-byte
	// object's) from none, and so does this (0: none, n+1: n refs).
	if o.Extents == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(o.Extents))+1)
	}
	for _, x := range o.Extents {
		b = binary.AppendUvarint(b, x.ID)
		b = binary.AppendVarint(b, x.Off)
		b = binary.AppendVarint(b, x.Len)
	}
	b = appendString(b, o.VersionID)
	b = append(b, boolByte(o.DeleteMarker)|boolByte(s3)<<1)
	b = binary.AppendUvarint(b, o.Seq)
	return binary.AppendVarint(b, o.From)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// binDecoder reads a binary record's fields; the first error sticks and
// every later read returns zero values.
type binDecoder struct {
	b   []byte
	err error
	// rd, when set, provides the blocks egroup replica lists are carved
	// from and the lists already decoded.
	rd *RecordDecoder
}

var errShort = errors.New("cut short")

func (d *binDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *binDecoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *binDecoder) expect(kind, want byte, v any) error {
	if d.err != nil {
		return d.err
	}
	if kind != want {
		return fmt.Errorf("a record of kind %q is not a %T", kind, v)
	}
	return nil
}

func (d *binDecoder) expectObject(kind byte, v any) error {
	if kind == binaryVer {
		kind = binaryObject
	}
	return d.expect(kind, binaryObject, v)
}

func (d *binDecoder) uvarint() uint64 {
	if len(d.b) > 0 && d.b[0] < 0x80 {
		// One byte, as most lengths and counts are: binary.Uvarint's
		// answer without its call.
		x := uint64(d.b[0])
		d.b = d.b[1:]
		return x
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *binDecoder) varint() int64 {
	if len(d.b) > 0 && d.b[0] < 0x80 {
		ux := uint64(d.b[0]) // binary.Varint's zig-zag decoding of one byte
		d.b = d.b[1:]
		x := int64(ux >> 1)
		if ux&1 != 0 {
			x = ^x
		}
		return x
	}
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes returns the next length-prefixed byte string, aliasing the
// record (callers copy what they keep).
func (d *binDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// name returns the next string, one of the few a cluster has many
// records with (device, node and tier names, codecs, storage classes,
// header names), from names. Strings a client chooses freely (version
// IDs, user metadata and tag keys) are not interned: they would fill the
// table and leave the names that repeat uninterned.
func (d *binDecoder) name() string { return names.get(d.bytes()) }

// names interns the short strings egroup and extent records repeat: a
// decoded record shares them instead of allocating its own copies (an
// egroup with two replicas and an EC layout decodes in 2 allocations
// instead of 10).
// Bounded: past maxNames distinct strings, or for long ones, a string
// is allocated as usual.
var names nameTable

const (
	maxNames   = 4096
	maxNameLen = 64
)

// nameTable is copy-on-write: a lookup is an atomic load and a map read,
// with no lock whose counter every decoding core would write (a read
// lock's two atomic adds per name were a tenth of a scan's decode time).
// Inserts copy the map, and there are at most maxNames of them.
type nameTable struct {
	m  atomic.Pointer[map[string]string]
	mu sync.Mutex // serialises inserts
}

func (t *nameTable) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxNameLen {
		return string(b)
	}
	if m := t.m.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok { // no allocation for the lookup
			return s
		}
	}
	s := string(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m.Load()
	if old != nil {
		if s, ok := (*old)[s]; ok {
			return s
		}
		if len(*old) >= maxNames {
			return s
		}
	}
	m := make(map[string]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[s] = s
	t.m.Store(&m)
	return s
}

func lenOf(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

func (d *binDecoder) flags(max byte) byte {
	f := d.byte()
	if f > max {
		d.fail(fmt.Errorf("unknown flags %#x", f))
	}
	return f
}

func (d *binDecoder) int() int {
	x := d.varint()
	if int64(int(x)) != x {
		d.fail(fmt.Errorf("integer %d out of range", x))
	}
	return int(x)
}

func (d *binDecoder) egroup() (Egroup, error) {
	var eg Egroup
	n := d.uvarint()
	// Each replica takes at least four bytes: a bound before allocating.
	if n > uint64(len(d.b))/4 {
		d.fail(fmt.Errorf("%d replicas in %d bytes", n, len(d.b)))
	}
	if n > 0 && d.err == nil {
		if d.rd == nil {
			eg.Replicas = make([]EgroupReplica, n)
			d.replicaList(eg.Replicas)
		} else {
			eg.Replicas = d.rd.carve(int(n))
			d.rd.replicaList(d, eg.Replicas)
		}
	}
	eg.State = EgroupState(d.byte())
	eg.Size = d.varint()
	vec := d.bytes()
	eg.Mtime = d.varint()
	eg.Writer = model.NodeID(d.name())
	eg.Codec = d.name()
	eg.Logical = d.varint()
	f := d.flags(7)
	eg.Incompressible = f&1 != 0
	if f&2 != 0 {
		eg.EC = &ECLayout{K: d.int(), M: d.int(), StripLen: d.varint()}
	}
	if f&4 != 0 {
		eg.TailFrom = d.uvarint()
		eg.TailTo = d.uvarint()
	}
	if d.err != nil {
		return Egroup{}, d.err
	}
	v, err := d.vector(vec)
	if err != nil {
		return Egroup{}, err
	}
	eg.Vector = v
	return eg, nil
}

// vector is cachedVector, answered without the shared cache when the
// record decoder's last vector had the same text (consecutive egroups
// mostly do).
func (d *binDecoder) vector(b []byte) (model.Vector, error) {
	rd := d.rd
	if rd == nil {
		return cachedVector(b)
	}
	if rd.lastVecSet && string(b) == rd.lastVecText {
		return rd.lastVec, nil
	}
	v, err := cachedVector(b)
	if err == nil {
		rd.lastVecText, rd.lastVec, rd.lastVecSet = string(b), v, true
	}
	return v, err
}

// replicaList decodes len(rs) replicas into rs.
func (d *binDecoder) replicaList(rs []EgroupReplica) {
	for i := range rs {
		r := &rs[i]
		r.Device = model.DeviceID(d.name())
		r.Node = model.NodeID(d.name())
		r.Tier = model.Tier(d.name())
		r.Bad = d.flags(1) == 1
	}
}

// carve returns a capped slice of n fresh replicas from the block.
func (rd *RecordDecoder) carve(n int) []EgroupReplica {
	if cap(rd.replicas)-len(rd.replicas) < n {
		rd.replicas = make([]EgroupReplica, 0, max(replicaBlock, n))
	}
	at := len(rd.replicas)
	rd.replicas = rd.replicas[:at+n]
	return rd.replicas[at : at+n : at+n]
}

// replicaList decodes d's next len(rs) replicas into rs, copying a list
// with the same bytes decoded before.
func (rd *RecordDecoder) replicaList(d *binDecoder, rs []EgroupReplica) {
	start := d.b
	for range rs {
		d.bytes()
		d.bytes()
		d.bytes()
		d.byte()
	}
	if d.err != nil {
		return
	}
	raw := start[:len(start)-len(d.b)]
	if known, ok := rd.lists[string(raw)]; ok && len(known) == len(rs) {
		copy(rs, known)
		return
	}
	sub := binDecoder{b: raw}
	sub.replicaList(rs)
	if sub.err != nil {
		d.fail(sub.err)
		return
	}
	if rd.lists == nil {
		rd.lists = map[string][]EgroupReplica{}
	}
	if len(rd.lists) < maxReplicaLists {
		rd.lists[string(raw)] = slices.Clone(rs)
	}
}

// count reads a count of entries each at least min bytes long, refusing
// one the rest of the record cannot hold (before anything is allocated).
func (d *binDecoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail(fmt.Errorf("%d entries in %d bytes", n, len(d.b)))
		return 0
	}
	return int(n)
}

// stringMap reads a map; internKeys interns its keys (headers: a few
// names repeated in every record) — user metadata and tag keys, like
// version IDs, are the client's and would only fill the name table.
func (d *binDecoder) stringMap(internKeys bool) map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		var k string
		if internKeys {
			k = d.name()
		} else {
			k = d.string()
		}
		m[k] = d.string()
	}
	return m
}

func (d *binDecoder) string() string { return string(d.bytes()) }

func (d *binDecoder) object() (Object, bool, error) {
	var o Object
	o.Size = d.varint()
	o.ETag = d.string()
	o.Mtime = d.varint()
	vec := d.bytes()
	o.Class = d.name()
	o.Headers = d.stringMap(true)
	o.UserMeta = d.stringMap(false)
	o.Tags = d.stringMap(false)
	if n := d.count(1); n > 0 {
		o.Parts = make([]int64, n)
		for i := range o.Parts {
			o.Parts[i] = d.varint()
		}
	}
	if n := d.uvarint(); n > 0 {
		n--
		if n > uint64(len(d.b)/3) {
			d.fail(fmt.Errorf("%d extent refs in %d bytes", n, len(d.b)))
			n = 0
		}
		o.Extents = make([]ExtentRef, n)
		for i := range o.Extents {
			o.Extents[i] = ExtentRef{ID: d.uvarint(), Off: d.varint(), Len: d.varint()}
		}
	}
	o.VersionID = d.string()
	f := d.flags(3)
	o.DeleteMarker = f&1 != 0
	o.Seq = d.uvarint()
	o.From = d.varint()
	if d.err != nil {
		return Object{}, false, d.err
	}
	v, err := cachedVector(vec)
	if err != nil {
		return Object{}, false, err
	}
	o.Vector = v
	return o, f&2 != 0, nil
}

func (d *binDecoder) access() (Access, error) {
	a := Access{Atime: d.varint(), Reads: d.varint(), WinStart: d.varint(), WinReads: d.varint()}
	if d.err != nil {
		return Access{}, d.err
	}
	return a, nil
}

func (d *binDecoder) extent() (Extent, error) {
	var x Extent
	x.Egroup = d.uvarint()
	x.Off = d.varint()
	x.Len = d.varint()
	x.Ctime = d.varint()
	x.Codec = d.name()
	x.Stored = d.varint()
	sum := d.uvarint()
	if sum > 1<<32-1 {
		d.fail(fmt.Errorf("checksum %d out of range", sum))
	}
	x.Sum = uint32(sum)
	if fp := d.bytes(); len(fp) > 0 {
		x.FP = append([]byte(nil), fp...)
	}
	x.Shares = d.uvarint()
	if d.err != nil {
		return Extent{}, d.err
	}
	return x, nil
}

// vectorCache holds parsed vectors by their text: a cluster has a handful
// of distinct vectors and every egroup record names one. A cached
// vector's Counts map is shared by every record decoded with it, so a
// decoded egroup's Vector is read-only (Clone it to change it; no code
// changes a decoded vector). Bounded: past maxCachedVectors distinct
// texts, vectors are parsed each time.
var vectorCache sync.Map // string → model.Vector

var cachedVectors atomic.Int64

const maxCachedVectors = 1024

// cachedVector parses a vector's text as JSON decoding does (the empty
// text is the zero vector), through vectorCache.
func cachedVector(b []byte) (model.Vector, error) {
	if len(b) == 0 {
		return model.Vector{}, nil
	}
	if v, ok := vectorCache.Load(string(b)); ok {
		return v.(model.Vector), nil
	}
	var v model.Vector
	if err := v.UnmarshalText(b); err != nil {
		return model.Vector{}, err
	}
	if cachedVectors.Load() < maxCachedVectors {
		if _, loaded := vectorCache.LoadOrStore(string(b), v); !loaded {
			cachedVectors.Add(1)
		}
	}
	return v, nil
}
