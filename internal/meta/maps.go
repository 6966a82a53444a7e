package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/terrace-storage/terrace/internal/model"
)

// Key prefixes of the typed maps. One byte plus '/' keeps keys compact (etcd
// stores every key in every revision) while staying readable in a dump.
const (
	PrefixBucket = "b/"
	// PrefixBucketGuard holds each bucket's guard record; see BucketGuard.
	PrefixBucketGuard = "bg/"
	// PrefixVersion holds object versions: S3 versions of versioned
	// buckets, and superseded records kept for snapshots and clones.
	PrefixVersion = "r/"
	PrefixObject  = "o/"
	PrefixExtent  = "x/"
	PrefixEgroup  = "g/"
	PrefixAccess  = "a/"
	PrefixUpload  = "u/"
	PrefixCluster = "c/"
	PrefixPolicy  = "p/"
	PrefixJob     = "j/"
	PrefixSeq     = "s/"
	// PrefixIAM holds S3 users and their access-key index (package users).
	PrefixIAM = "i/"
)

// Bucket is a bucket record.
type Bucket struct {
	Name    string       `json:"n"`
	Created int64        `json:"c"` // unix nanoseconds
	Owner   string       `json:"o,omitempty"`
	Vector  model.Vector `json:"v,omitempty"` // default vector; zero = cluster default
	// Opaque S3 sub-resources stored for the gateway (ACL, policy, tags, ...).
	Attrs map[string][]byte `json:"a,omitempty"`
	// Versioning is the S3 versioning state: "" (never enabled),
	// "Enabled" or "Suspended".
	Versioning string `json:"ver,omitempty"`
	// Snapshots are the bucket's snapshots and the pins its clones hold:
	// every object version current at one of their revisions is kept.
	Snapshots []BucketSnapshot `json:"snaps,omitempty"`
	// Parent makes the bucket a clone: keys it has no record of are read
	// from the parent as of a snapshot revision.
	Parent *BucketParent `json:"parent,omitempty"`
	// Transform is what the Curator may do to the bucket's cold data
	// (docs/design/0010); nil means nothing.
	Transform *BucketTransform `json:"tf,omitempty"`
}

// BucketTransform is a bucket's policy for transforming its cold data in
// the background (docs/design/0010-curator-transforms.md).
type BucketTransform struct {
	// Compress names the codec for cold data: "" (none) or "zstd".
	Compress string `json:"c,omitempty"`
	// ColdAfter is how long an egroup must go unread and unwritten before
	// it is transformed (nanoseconds; 0 means the Curator's default).
	ColdAfter int64 `json:"ca,omitempty"`
	// EC is the erasure code for cold data, "K+M" (e.g. "4+2"), or "".
	EC string `json:"ec,omitempty"`
	// Dedup fingerprints the bucket's new extents so that the Curator can
	// make identical ones share one copy.
	Dedup bool `json:"dd,omitempty"`
}

// BucketSnapshot is a point in a bucket's history that reads can return
// to: a named snapshot, or the pin a clone holds on its source.
type BucketSnapshot struct {
	Name    string `json:"n"`
	Rev     int64  `json:"r"` // metadata revision; 0 while being created (pins everything)
	Created int64  `json:"c"` // unix ns
	// Clone, when set, is the clone bucket this pin serves (not a named
	// snapshot; released when the clone stops reading through).
	Clone string `json:"clone,omitempty"`
}

// BucketParent is a clone's source.
type BucketParent struct {
	Bucket   string `json:"b"`
	Snapshot string `json:"s"` // the pin's name in the parent's Snapshots
	Rev      int64  `json:"r"`
}

// BucketGuard is the part of a bucket's state that object writes depend
// on: which incarnation of the bucket they write into and whether it is
// being deleted. Object commits compare the guard's revision instead of
// the bucket record's, so changing a bucket's tags, ACL, policy or default
// vector never fails an upload in flight; creating, deleting or marking a
// bucket for deletion does. A bucket created before guards existed has no
// guard record (revision 0), which commits compare just as well.
//
// Changes that must fail concurrent writes (versioning or object-lock
// state, once they exist) rewrite the guard in the same transaction as the
// bucket record.
type BucketGuard struct {
	Created int64 `json:"c"` // the bucket record's Created: its incarnation
	// DeletingSince is when a DeleteBucket marked the bucket (unix ns),
	// 0 when it is not being deleted.
	DeletingSince int64 `json:"d,omitempty"`
}

// ExtentRef is an object's reference to a run of bytes of an extent.
type ExtentRef struct {
	ID  uint64 `json:"i"`
	Off int64  `json:"o,omitempty"` // offset into the extent
	Len int64  `json:"l"`
}

// Object is an object record: attributes plus the ordered extent refs.
type Object struct {
	Size     int64             `json:"s"`
	ETag     string            `json:"e"`
	Mtime    int64             `json:"m"` // unix nanoseconds
	Vector   model.Vector      `json:"v"`
	Class    string            `json:"k,omitempty"`
	Headers  map[string]string `json:"h,omitempty"`  // content-type and friends
	UserMeta map[string]string `json:"um,omitempty"` // x-amz-meta-*
	Tags     map[string]string `json:"t,omitempty"`
	Parts    []int64           `json:"p,omitempty"` // part sizes of a multipart object
	Extents  []ExtentRef       `json:"x"`
	// VersionID is the S3 version ("" in a never-versioned bucket, "null"
	// for versions written while versioning was off or suspended).
	VersionID string `json:"vid,omitempty"`
	// DeleteMarker records a delete: an S3 delete marker (VersionID set)
	// or, in an unversioned bucket, a tombstone kept for snapshots and
	// clones (reads see no object).
	DeleteMarker bool `json:"dm,omitempty"`
	// Seq orders a key's versions (monotonic per key).
	Seq uint64 `json:"q,omitempty"`
	// From is the metadata revision at which this version became current;
	// 0 means the revision of the record's key (set when the record is
	// rewritten later, e.g. tags, so the version keeps its place in time).
	From int64 `json:"fr,omitempty"`
}

// Version is a record in the version map.
type Version struct {
	Object
	// S3 marks an S3 version (listed, readable by version ID); others are
	// kept only because a snapshot or clone still sees them.
	S3 bool `json:"s3,omitempty"`
}

// Extent locates a run of bytes inside an extent group. Relocating data
// (GC, tiering of one extent) rewrites only this record.
type Extent struct {
	Egroup uint64 `json:"g"`
	Off    int64  `json:"o"` // file offset of the extent's first slice
	Len    int64  `json:"l"` // payload bytes
	// Ctime is when the extent was written (unix ns). Data removal leaves
	// young unreferenced extents alone: their object may not be committed.
	Ctime int64 `json:"t,omitempty"`
	// Codec, when set ("zstd"), says the slices at Off hold the extent's
	// Len payload bytes compressed into Stored bytes, and Sum is the
	// CRC32C (Castagnoli) of the uncompressed payload: slice checksums
	// cover what is stored, Sum covers what a read returns.
	Codec  string `json:"c,omitempty"`
	Stored int64  `json:"sl,omitempty"`
	Sum    uint32 `json:"cs,omitempty"`
	// FP is the SHA-256 of the payload, recorded at write time for
	// buckets with dedup on; Shares names the extent whose bytes this one
	// was switched to share (dedup), 0 otherwise.
	FP     []byte `json:"fp,omitempty"`
	Shares uint64 `json:"sh,omitempty"`
}

// StoredLen is the number of payload bytes the extent's slices hold on
// disk: the compressed length for a compressed extent, else Len.
func (x Extent) StoredLen() int64 {
	if x.Codec != "" {
		return x.Stored
	}
	return x.Len
}

// EgroupState is the life-cycle state of an extent group.
type EgroupState uint8

// Egroup states.
const (
	EgroupOpen EgroupState = iota
	EgroupSealed
)

// EgroupReplica is one replica of an extent group.
type EgroupReplica struct {
	Device model.DeviceID `json:"d"`
	Node   model.NodeID   `json:"n"`
	Tier   model.Tier     `json:"t"`
	// Bad marks a replica that failed a checksum or lost its tail; readers
	// skip it and the Curator repairs it.
	Bad bool `json:"b,omitempty"`
}

// Replica returns the model view of the replica.
func (r EgroupReplica) Replica() model.Replica {
	return model.Replica{Device: r.Device, Node: r.Node, Tier: r.Tier}
}

// Egroup is an extent-group record.
type Egroup struct {
	Replicas []EgroupReplica `json:"r"`
	State    EgroupState     `json:"s"`
	// Size is the committed length of every replica file; bytes past it
	// belong to unacknowledged writes and are truncated on recovery.
	// While the egroup is open and TailTo is set, Size is only a lower
	// bound: its writer does not rewrite the record for every small
	// commit (see TailFrom).
	Size   int64        `json:"z"`
	Vector model.Vector `json:"v"`
	Mtime  int64        `json:"m"`
	// Writer is the node whose writer appends to the egroup while it is
	// open; only that node seals it during recovery.
	Writer model.NodeID `json:"w,omitempty"`
	// Codec is the codec the Curator compressed the egroup's extents with
	// ("" for plain data; individual extents that did not compress are
	// stored plain and say so in their own records). Logical is the
	// payload bytes the egroup holds before compression (0 when plain).
	Codec   string `json:"c,omitempty"`
	Logical int64  `json:"lg,omitempty"`
	// Incompressible remembers that compressing this egroup's data did not
	// pay (ratio above the Curator's threshold), so it is not retried.
	Incompressible bool `json:"nc,omitempty"`
	// EC, when set, makes the egroup erasure coded: Replicas are its K+M
	// strips in order (data strips first), each a file of StripLen payload
	// bytes in slices; Size is the length of the layout they encode (the
	// file one replica would be).
	EC *ECLayout `json:"ec,omitempty"`
	// TailFrom and TailTo, when TailTo is set, say that the open egroup's
	// writer may have committed extents past Size without rewriting this
	// record, and that every such extent's ID lies in [TailFrom, TailTo)
	// (the writer rewrites the record before it commits one outside).
	// Whoever seals the egroup for a writer that is gone reads those
	// extent records to find the committed length (docs/design/0000
	// invariant 8). Zero once sealed.
	TailFrom uint64 `json:"tf,omitempty"`
	TailTo   uint64 `json:"tt,omitempty"`
}

// ECLayout is an erasure-coded egroup's shape.
type ECLayout struct {
	K        int   `json:"k"`
	M        int   `json:"m"`
	StripLen int64 `json:"sl"`
}

// Access is the eventually consistent access record of an extent group.
type Access struct {
	Atime int64 `json:"a"`
	Reads int64 `json:"r"`
	// WinStart and WinReads count reads in the current window (tiering
	// promotes egroups read often recently, not ones read often ever).
	WinStart int64 `json:"ws,omitempty"`
	WinReads int64 `json:"wr,omitempty"`
}

// Upload is an in-progress multipart upload.
type Upload struct {
	Key      string            `json:"k"`
	Created  int64             `json:"c"`
	Vector   model.Vector      `json:"v"`
	Class    string            `json:"cl,omitempty"`
	Headers  map[string]string `json:"h,omitempty"`
	UserMeta map[string]string `json:"um,omitempty"`
	Tags     map[string]string `json:"t,omitempty"`
	// Completing is when a complete began (unix ns; 0: none): parts are
	// refused from then on, so the parts it read stay the upload's.
	Completing int64 `json:"cp,omitempty"`
}

// Part is one uploaded part of a multipart upload.
type Part struct {
	Size    int64       `json:"s"`
	ETag    string      `json:"e"`
	Mtime   int64       `json:"m"`
	Extents []ExtentRef `json:"x"`
	// Attrs are the gateway's attributes of the part (its checksum).
	Attrs map[string]string `json:"a,omitempty"`
}

// Key builders. IDs are fixed-width hex so that key order is numeric order.

func BucketKey(bucket string) []byte { return []byte(PrefixBucket + bucket) }

func BucketGuardKey(bucket string) []byte { return []byte(PrefixBucketGuard + bucket) }

// VersionKey orders a key's versions newest first (by inverted Seq).
func VersionKey(bucket, key string, seq uint64) []byte {
	return []byte(fmt.Sprintf("%s%s\x00%s\x00%016x", PrefixVersion, bucket, key, ^seq))
}

// VersionPrefix is the key prefix of all versions of bucket/key (key
// exact) or, with key "", of the bucket.
func VersionPrefix(bucket, key string) []byte {
	if key == "" {
		return []byte(PrefixVersion + bucket + "\x00")
	}
	return []byte(PrefixVersion + bucket + "\x00" + key + "\x00")
}

// SplitVersionKey returns bucket, key and seq from a version map key.
func SplitVersionKey(k []byte) (bucket, key string, seq uint64, ok bool) {
	s := strings.TrimPrefix(string(k), PrefixVersion)
	bucket, rest, ok := strings.Cut(s, "\x00")
	if !ok {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(rest, 0)
	if i < 0 {
		return "", "", 0, false
	}
	inv, err := strconv.ParseUint(rest[i+1:], 16, 64)
	if err != nil {
		return "", "", 0, false
	}
	return bucket, rest[:i], ^inv, true
}

func ObjectKey(bucket, key string) []byte { return []byte(PrefixObject + bucket + "\x00" + key) }

// ObjectPrefix is the key prefix of all objects of a bucket whose names start with prefix.
func ObjectPrefix(bucket, prefix string) []byte {
	return []byte(PrefixObject + bucket + "\x00" + prefix)
}

// SplitObjectKey returns bucket and object key from an object map key.
func SplitObjectKey(k []byte) (bucket, key string, ok bool) {
	s := strings.TrimPrefix(string(k), PrefixObject)
	bucket, key, ok = strings.Cut(s, "\x00")
	return
}

func ExtentKey(id uint64) []byte { return []byte(PrefixExtent + FormatID(id)) }
func EgroupKey(id uint64) []byte { return []byte(PrefixEgroup + FormatID(id)) }
func AccessKey(id uint64) []byte { return []byte(PrefixAccess + FormatID(id)) }

// PrefixHot holds promotion requests: the access tracker writes one when
// an egroup's reads in the hot window reach the promotion threshold, and
// the Curator master promotes it without waiting for a scan.
const PrefixHot = PrefixJob + "p/"

// HotKey is the promotion request of an egroup.
func HotKey(id uint64) []byte { return []byte(PrefixHot + FormatID(id)) }

// ParseHotKey returns the egroup of a promotion request key.
func ParseHotKey(k []byte) (uint64, error) {
	s := string(k)
	if !strings.HasPrefix(s, PrefixHot) {
		return 0, fmt.Errorf("meta: %q is not a promotion request key", s)
	}
	return ParseID(k)
}

// HotRequest is a promotion request: the reads in the window when it was
// made and when.
type HotRequest struct {
	Reads int64 `json:"r"`
	At    int64 `json:"t"` // unix ns
}

func UploadKey(bucket, uploadID string) []byte {
	return []byte(PrefixUpload + bucket + "\x00" + uploadID)
}

// PartKey sorts parts numerically after their upload record.
func PartKey(bucket, uploadID string, part int) []byte {
	return []byte(fmt.Sprintf("%s%s\x00%s\x00%05d", PrefixUpload, bucket, uploadID, part))
}

// FormatID prints an ID as 16 hex digits.
func FormatID(id uint64) string { return fmt.Sprintf("%016x", id) }

// ParseID parses the hex ID at the end of a map key.
func ParseID(key []byte) (uint64, error) {
	if i := bytes.LastIndexByte(key, '/'); i >= 0 {
		key = key[i+1:]
	}
	// The fast path for what FormatID writes: scans parse millions.
	if len(key) == 16 {
		var id uint64
		for _, c := range key {
			switch {
			case '0' <= c && c <= '9':
				c -= '0'
			case 'a' <= c && c <= 'f':
				c -= 'a' - 10
			case 'A' <= c && c <= 'F':
				c -= 'A' - 10
			default:
				return strconv.ParseUint(string(key), 16, 64) // its error
			}
			id = id<<4 | uint64(c)
		}
		return id, nil
	}
	return strconv.ParseUint(string(key), 16, 64)
}

// Encode serialises a record. Egroup, access and extent records are
// binary (codec.go; JSON after SetBinaryRecords(false)); every other
// record is JSON with short field names, compact enough for etcd.
func Encode(v any) []byte {
	if binaryRecords.Load() {
		if b, ok := encodeBinary(v); ok {
			return b
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Records are plain structs; failing to marshal one is a bug.
		panic(fmt.Sprintf("meta: encode %T: %v", v, err))
	}
	return b
}

// v1Semantics makes the v2 decoder behave exactly as encoding/json
// (case-insensitive names, duplicate names allowed, invalid UTF-8
// replaced, durations as nanoseconds, legacy merging): records written
// by any version decode as they always have.
var v1Semantics = jsonv1.DefaultOptionsV1()

// Decode parses a record. It decodes with the v2 implementation of JSON
// (github.com/go-json-experiment/json, the code Go's encoding/json runs
// on under GOEXPERIMENT=jsonv2) set to v1 semantics: the same results as
// encoding/json (FuzzDecodeMatchesStd), with less time and a third of the
// allocations per record — every scan, GET and metadata read decodes
// records (docs/perf.md, "Decoding records").
func Decode(b []byte, v any) error {
	if len(b) > 0 && b[0] == binaryMagic {
		return decodeBinary(b, v)
	}
	if err := jsonv2.Unmarshal(b, v, v1Semantics); err != nil {
		return fmt.Errorf("meta: decode %T: %w", v, err)
	}
	return nil
}

// GetRecord reads and decodes one record, returning its ModRev.
func GetRecord(ctx context.Context, kv KV, key []byte, v any) (int64, error) {
	it, err := kv.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	return it.ModRev, Decode(it.Value, v)
}

// Sequence hands out unique IDs from a counter key, reserving them in
// blocks so that ID allocation costs one metadata commit per block.
type Sequence struct {
	kv    KV
	key   []byte
	block uint64

	next, limit uint64
	mu          chanMutex
}

// chanMutex is a mutex that honours context cancellation.
type chanMutex chan struct{}

// NewSequence returns a sequence over the counter at s/<name>.
func NewSequence(kv KV, name string, block uint64) *Sequence {
	if block == 0 {
		block = 1024
	}
	return &Sequence{kv: kv, key: []byte(PrefixSeq + name), block: block, mu: make(chanMutex, 1)}
}

// Block returns the IDs Next will hand out before it takes a new block
// from the counter: [from, to). Both are 0 before the first Next.
func (s *Sequence) Block(ctx context.Context) (from, to uint64, err error) {
	select {
	case s.mu <- struct{}{}:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	defer func() { <-s.mu }()
	if s.next == 0 {
		return 0, 0, nil
	}
	return s.next, s.limit, nil
}

// Next returns a fresh ID (never 0).
func (s *Sequence) Next(ctx context.Context) (uint64, error) {
	select {
	case s.mu <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.mu }()
	for s.next == 0 || s.next >= s.limit {
		it, err := s.kv.Get(ctx, s.key)
		var cur uint64
		var rev int64
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, err
		default:
			cur, err = strconv.ParseUint(string(it.Value), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meta: corrupt sequence %s: %w", s.key, err)
			}
			rev = it.ModRev
		}
		var t Txn
		t.If(s.key, rev)
		t.Put(s.key, []byte(strconv.FormatUint(cur+s.block, 10)))
		if _, err := s.kv.Commit(ctx, &t); errors.Is(err, ErrConflict) {
			continue
		} else if err != nil {
			return 0, err
		}
		s.next, s.limit = cur+1, cur+s.block+1
	}
	id := s.next
	s.next++
	return id, nil
}
