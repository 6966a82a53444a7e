package meta

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// recordTypes are the records the hot paths decode (scans, GETs, PUTs,
// bucket lookups); each returns a fresh value to decode into.
var recordTypes = []func() any{
	func() any { return new(Egroup) },
	func() any { return new(Access) },
	func() any { return new(Extent) },
	func() any { return new(Object) },
	func() any { return new(Version) },
	func() any { return new(Bucket) },
	func() any { return new(BucketGuard) },
	func() any { return new(Part) },
	func() any { return new(Upload) },
}

// jsonRecord is a record as JSON, the form every record had before
// egroup, access, extent, object and version records were written
// binary (codec.go).
func jsonRecord(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sampleRecords() [][]byte {
	v := model.MustParseVector("ssd=1,hdd=2")
	return [][]byte{
		jsonRecord(Egroup{State: EgroupSealed, Size: 12 << 20, Vector: v, Mtime: 1764000000000000000, Writer: "n1", Codec: "zstd", Logical: 99,
			Replicas: []EgroupReplica{{Node: "n1", Device: "n1-ssd0", Tier: "ssd"}, {Node: "n2", Device: "n2-hdd1", Tier: "hdd", Bad: true}},
			EC:       &ECLayout{K: 4, M: 2, StripLen: 1 << 20}}),
		jsonRecord(Access{Atime: 1764000000000000000, Reads: 12, WinStart: 1763990000000000000, WinReads: 3}),
		jsonRecord(Extent{Egroup: 7, Off: 4096, Len: 4096, Ctime: 1764000000000000000, FP: []byte{1, 2, 3}}),
		jsonRecord(Object{Size: 4096, ETag: "abc", Mtime: 1, Vector: v, Headers: map[string]string{"Content-Type": "text/plain"},
			UserMeta: map[string]string{"k": "é"}, Tags: map[string]string{"a": "b"}, Parts: []int64{5 << 20, 1},
			Extents: []ExtentRef{{ID: 1, Len: 4096}, {ID: 2, Off: 7, Len: 9}}, VersionID: "null", Seq: 3, From: 9}),
		jsonRecord(Version{Object: Object{Size: 1, ETag: "x", DeleteMarker: true}, S3: true}),
		jsonRecord(Bucket{Name: "b", Created: 5, Vector: v, Attrs: map[string][]byte{"acl": []byte("<x/>")}, Versioning: "Enabled",
			Snapshots: []BucketSnapshot{{Name: "s", Rev: 4}}, Parent: &BucketParent{Bucket: "p", Snapshot: "s", Rev: 4},
			Transform: &BucketTransform{Compress: "zstd", ColdAfter: 3600e9, EC: "4+2", Dedup: true}}),
		jsonRecord(BucketGuard{Created: 5, DeletingSince: 6}),
		[]byte(`{"S":5,"E":"case-insensitive","x":null,"v":"any=2"}`),
		[]byte(`{"z":1,"z":2,"v":""}`),
		[]byte(`{"e":"\xff\xfe"}`),
		[]byte(`{"r":[{"d":"a"},null],"s":1}`),
		[]byte(`[]`), []byte(`null`), []byte(`{"z":"1"}`), []byte(`{"z":1.5}`), []byte(`{"v":"ssd=1,ssd=1"}`), []byte(`{`),
	}
}

// FuzzDecodeMatchesStd: Decode accepts exactly the JSON encoding/json
// accepts for every hot record type, and decodes them to the same value —
// records written by any version, or damaged ones, read as they always
// have.
func FuzzDecodeMatchesStd(f *testing.F) {
	for _, b := range sampleRecords() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[0] == binaryMagic {
			return // binary records: FuzzDecodeBinary
		}
		for _, mk := range recordTypes {
			want, got := mk(), mk()
			werr := json.Unmarshal(b, want)
			gerr := Decode(b, got)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%T from %q: encoding/json says %v, Decode says %v", want, b, werr, gerr)
			}
			if werr == nil && !reflect.DeepEqual(want, got) {
				t.Fatalf("%T from %q:\nencoding/json %+v\nDecode        %+v", want, b, want, got)
			}
		}
	})
}

// TestDecodeRoundTrip: every sample record that encodes decodes back to
// the same value (the records the system writes).
func TestDecodeRoundTrip(t *testing.T) {
	for _, b := range sampleRecords()[:7] {
		for _, mk := range recordTypes {
			want, got := mk(), mk()
			if json.Unmarshal(b, want) != nil {
				continue
			}
			if err := Decode(b, got); err != nil {
				t.Fatalf("%T from %s: %v", got, b, err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%T from %s: got %+v, want %+v", got, b, got, want)
			}
		}
	}
}

// BenchmarkDecode decodes the records the hot paths read, with Decode and
// with encoding/json for comparison.
func BenchmarkDecode(b *testing.B) {
	recs := sampleRecords()
	for _, c := range []struct {
		name string
		rec  []byte
		mk   func() any
	}{{"egroup", recs[0], recordTypes[0]}, {"extent", recs[2], recordTypes[2]}, {"object", recs[3], recordTypes[3]}} {
		b.Run(c.name+"/Decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := Decode(c.rec, c.mk()); err != nil {
					b.Fatal(err)
				}
			}
		})
		if bin, ok := encodeBinary(mustDecode(c.rec, c.mk())); ok {
			b.Run(c.name+"/binary", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := Decode(bin, c.mk()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := json.Unmarshal(c.rec, c.mk()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustDecode(b []byte, v any) any {
	if err := Decode(b, v); err != nil {
		panic(err)
	}
	return v
}
