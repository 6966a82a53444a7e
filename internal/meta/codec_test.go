package meta

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// binaryTypes are the records written in the binary form.
var binaryTypes = []func() any{
	func() any { return new(Egroup) }, func() any { return new(Access) }, func() any { return new(Extent) },
	func() any { return new(Object) }, func() any { return new(Version) },
}

// fillEveryField sets every field of the struct v points to (recursively,
// through slices and pointers) to a value no field has by default.
func fillEveryField(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEveryField(t, v.Elem(), n)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[model.Vector]() {
			v.Set(reflect.ValueOf(model.MustParseVector("ssd=1,hdd=2")))
			return
		}
		for i := range v.NumField() {
			fillEveryField(t, v.Field(i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillEveryField(t, k, n)
			fillEveryField(t, e, n)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillEveryField(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * 1_000_003)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	default:
		t.Fatalf("field of kind %s: teach fillEveryField and the binary codec", v.Kind())
	}
}

// TestBinaryRecordsCoverEveryField: a record with every field set comes
// back from its binary form with every field set — a field added to
// Egroup, Access or Extent without adding it to codec.go fails here.
func TestBinaryRecordsCoverEveryField(t *testing.T) {
	for _, mk := range binaryTypes {
		want := mk()
		n := 0
		fillEveryField(t, reflect.ValueOf(want).Elem(), &n)
		b, ok := encodeBinary(want)
		if !ok || b[0] != binaryMagic {
			t.Fatalf("%T is not written binary", want)
		}
		got := mk()
		if err := Decode(b, got); err != nil {
			t.Fatalf("%T: %v", got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%T does not survive its binary form:\n got %+v\nwant %+v", got, got, want)
		}
	}
}

// randomRecord draws an egroup, access or extent record with the field
// values records take (zero often).
func randomRecord(rng *rand.Rand) any {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	i64 := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64N(1 << 40)
		}
		return rng.Int64()
	}
	switch rng.IntN(5) {
	case 3, 4:
		o := Object{Size: i64(), ETag: pick("", "d41d8cd98f00b204e9800998ecf8427e", "abc-2"), Mtime: i64(), Class: pick("", "STANDARD", "GLACIER"),
			VersionID: pick("", "null", "v0000001"), DeleteMarker: rng.IntN(5) == 0, Seq: rng.Uint64() >> rng.IntN(64), From: i64()}
		if v := pick("", "hdd=2", "any=3"); v != "" {
			o.Vector = model.MustParseVector(v)
		}
		strMap := func() map[string]string {
			if rng.IntN(2) == 0 {
				return nil
			}
			m := map[string]string{}
			for range 1 + rng.IntN(3) {
				m[pick("Content-Type", "Cache-Control", "k", "é")] = pick("", "text/plain", "v\x00x")
			}
			return m
		}
		o.Headers, o.UserMeta, o.Tags = strMap(), strMap(), strMap()
		for range rng.IntN(3) {
			o.Parts = append(o.Parts, i64())
		}
		switch rng.IntN(3) {
		case 0:
			o.Extents = []ExtentRef{} // a 0-byte object's: empty, not absent
		case 1:
			for range 1 + rng.IntN(4) {
				o.Extents = append(o.Extents, ExtentRef{ID: rng.Uint64(), Off: i64(), Len: i64()})
			}
		}
		if rng.IntN(2) == 0 {
			return &Version{Object: o, S3: rng.IntN(2) == 0}
		}
		return &o
	case 0:
		eg := Egroup{State: EgroupState(rng.IntN(2)), Size: i64(), Mtime: i64(), Writer: model.NodeID(pick("", "n1", "node-é")),
			Codec: pick("", "zstd"), Logical: i64(), Incompressible: rng.IntN(2) == 0}
		if v := pick("", "hdd=2", "ssd=1,hdd=2", "any=3", "mem=1,remote=1"); v != "" {
			eg.Vector = model.MustParseVector(v)
		}
		for range rng.IntN(4) {
			eg.Replicas = append(eg.Replicas, EgroupReplica{Device: model.DeviceID(pick("n1/ssd0", "n2/hdd1", "")),
				Node: model.NodeID(pick("n1", "n2")), Tier: model.Tier(pick("ssd", "hdd", "")), Bad: rng.IntN(3) == 0})
		}
		if rng.IntN(3) == 0 {
			eg.EC = &ECLayout{K: rng.IntN(20), M: rng.IntN(5), StripLen: i64()}
		}
		return &eg
	case 1:
		return &Access{Atime: i64(), Reads: i64(), WinStart: i64(), WinReads: i64()}
	}
	x := Extent{Egroup: rng.Uint64(), Off: i64(), Len: i64(), Ctime: i64(), Codec: pick("", "zstd"), Stored: i64(),
		Sum: rng.Uint32(), Shares: rng.Uint64() >> rng.IntN(64)}
	if rng.IntN(2) == 0 {
		x.FP = make([]byte, 32)
		for i := range x.FP {
			x.FP[i] = byte(rng.IntN(256))
		}
	}
	return &x
}

// TestBinaryDecodesAsJSON: over seeded random records, the binary form
// decodes to exactly what the record's JSON form decodes to.
func TestBinaryDecodesAsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 11))
	for i := range 5000 {
		rec := randomRecord(rng)
		b, _ := encodeBinary(rec)
		fromJSON := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		fromBinary := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		if err := Decode(jsonRecord(rec), fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := Decode(b, fromBinary); err != nil {
			t.Fatalf("record %d %+v: %v", i, rec, err)
		}
		if !reflect.DeepEqual(fromBinary, fromJSON) {
			t.Fatalf("record %d:\nbinary %+v\nJSON   %+v", i, fromBinary, fromJSON)
		}
		if len(b) >= len(jsonRecord(rec)) {
			t.Fatalf("record %d: binary %d bytes, JSON %d", i, len(b), len(jsonRecord(rec)))
		}
	}
}

// TestBinaryRecordErrors: a binary record cut short anywhere, with bytes
// after it, of another kind, or claiming more than it holds is an error,
// never a wrong record.
func TestBinaryRecordErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 300 {
		rec := randomRecord(rng)
		b, _ := encodeBinary(rec)
		for cut := 1; cut < len(b); cut++ {
			into := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
			if err := Decode(b[:cut], into); err == nil {
				t.Fatalf("%T cut to %d of %d bytes decodes: %+v", rec, cut, len(b), into)
			}
		}
		into := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		if err := Decode(append(b, 0), into); err == nil || !strings.Contains(err.Error(), "after the record") {
			t.Fatalf("%T with a byte after it: %v", rec, err)
		}
	}
	eg, _ := encodeBinary(Egroup{Size: 1})
	for _, into := range []any{new(Access), new(Extent), new(Object), new(Bucket)} {
		if err := Decode(eg, into); err == nil {
			t.Fatalf("an egroup record decodes as %T", into)
		}
	}
	huge := []byte{binaryMagic, binaryEgroup, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3}
	if err := Decode(huge, new(Egroup)); err == nil || !strings.Contains(err.Error(), "replicas in") {
		t.Fatalf("an egroup claiming 4G replicas: %v", err)
	}
	badVector := []byte{binaryMagic, binaryEgroup, 0, 0, 0}
	badVector = appendString(badVector, "ssd=")
	badVector = append(badVector, 0, 0, 0, 0, 0)
	if err := Decode(badVector, new(Egroup)); err == nil {
		t.Fatal("an egroup with vector \"ssd=\" decodes")
	}
}

// FuzzDecodeBinary: any bytes after the binary marker decode to an error
// or to a record whose binary form is a fixed point (decodes, and encodes
// to itself again).
func FuzzDecodeBinary(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		b, _ := encodeBinary(randomRecord(rng))
		f.Add(b[1:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte{binaryMagic}, body...)
		for _, mk := range binaryTypes {
			got := mk()
			if Decode(b, got) != nil {
				continue
			}
			again, ok := encodeBinary(got)
			if !ok {
				t.Fatalf("%T not written binary", got)
			}
			// The binary form is canonical: decoding it and encoding again
			// gives the same bytes. (Not the same value: a vector text
			// such as "ssd=0,hdd=1" keeps its zero count until encoded,
			// as with JSON.)
			back := mk()
			if err := Decode(again, back); err != nil {
				t.Fatalf("%T %+v: its binary form does not decode: %v", got, got, err)
			}
			if third, _ := encodeBinary(back); string(third) != string(again) {
				t.Fatalf("%T %+v: encodes to %q, then to %q", got, got, again, third)
			}
		}
	})
}

// TestSetBinaryRecords: with binary records off, Encode writes JSON, and
// both forms decode either way.
func TestSetBinaryRecords(t *testing.T) {
	defer SetBinaryRecords(true)
	rec := Extent{Egroup: 3, Off: 4096, Len: 5}
	bin := Encode(rec)
	SetBinaryRecords(false)
	js := Encode(rec)
	if bin[0] != binaryMagic || js[0] != '{' {
		t.Fatalf("binary %q, JSON %q", bin, js)
	}
	for _, b := range [][]byte{bin, js} {
		var x Extent
		if err := Decode(b, &x); err != nil || !reflect.DeepEqual(x, rec) {
			t.Fatalf("%q: %+v, %v", b, x, err)
		}
	}
}

// TestNamesKeepClientStringsOut: decoding objects whose version IDs, user
// metadata and tag keys are all different does not fill the name table,
// so device and tier names still find room in it.
func TestNamesKeepClientStringsOut(t *testing.T) {
	before := lenOf(names.m.Load())
	for i := range 2000 {
		b, _ := encodeBinary(Object{ETag: "e", VersionID: fmt.Sprintf("v%08d", i), Headers: map[string]string{"Content-Type": "text/plain"},
			UserMeta: map[string]string{fmt.Sprintf("m%d", i): "x"}, Tags: map[string]string{fmt.Sprintf("t%d", i): "y"}, Extents: []ExtentRef{}})
		var o Object
		if err := Decode(b, &o); err != nil {
			t.Fatal(err)
		}
	}
	grew := lenOf(names.m.Load()) - before
	if grew > 2 {
		t.Fatalf("2,000 objects with their own version IDs and keys added %d names", grew)
	}
}

// ParseID's fixed-width fast path answers exactly what strconv does, for
// IDs as FormatID writes them and for keys it does not.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"g/0000000000000001", "x/ffffffffffffffff", "a/FFFFFFFFFFFFFFFF", "0000000000000000",
		"g/000000000000000g", "g/+000000000000001", "g/1", "g/", "", "g/00000000000000001", "x/0x00000000000001", "g/a/b/0123456789abcdef"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		s := string(key)
		if i := strings.LastIndexByte(s, '/'); i >= 0 {
			s = s[i+1:]
		}
		want, werr := strconv.ParseUint(s, 16, 64)
		got, err := ParseID(key)
		if got != want || (err == nil) != (werr == nil) {
			t.Fatalf("ParseID(%q) = %d, %v; strconv: %d, %v", key, got, err, want, werr)
		}
	})
}

func TestParseIDRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 10_000; i++ {
		id := r.Uint64() >> r.IntN(64)
		for _, key := range [][]byte{EgroupKey(id), ExtentKey(id), []byte(strings.ToUpper(FormatID(id)))} {
			if got, err := ParseID(key); err != nil || got != id {
				t.Fatalf("ParseID(%q) = %d, %v; want %d", key, got, err, id)
			}
		}
	}
}

// TestRecordDecoderDecodesAsDecode: a RecordDecoder, which carves replica
// lists from shared blocks and copies lists it decoded before, decodes
// every record exactly as Decode does — also records cut short or
// otherwise bad, which fail both — and the records it returns do not
// share memory: changing or appending to one leaves the others alone.
func TestRecordDecoderDecodesAsDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var rd RecordDecoder
	var kept []*Egroup
	var want []Egroup
	for i := range 5000 {
		rec := randomRecord(rng)
		b, _ := encodeBinary(rec)
		if rng.IntN(10) == 0 {
			b = b[:rng.IntN(len(b))] // cut short
		}
		plain := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		got := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
		perr, gerr := Decode(b, plain), rd.Decode(b, got)
		if (perr == nil) != (gerr == nil) {
			t.Fatalf("record %d: Decode: %v, RecordDecoder: %v", i, perr, gerr)
		}
		if perr != nil {
			continue
		}
		if !reflect.DeepEqual(plain, got) {
			t.Fatalf("record %d:\nRecordDecoder %+v\nDecode        %+v", i, got, plain)
		}
		if eg, ok := got.(*Egroup); ok {
			kept = append(kept, eg)
			want = append(want, *plain.(*Egroup))
		}
	}
	if len(kept) < 100 {
		t.Fatalf("only %d egroups decoded", len(kept))
	}
	for _, eg := range kept {
		if len(eg.Replicas) > 0 {
			eg.Replicas[0].Bad = !eg.Replicas[0].Bad
			eg.Replicas = append(eg.Replicas, EgroupReplica{Device: "x"})
		}
	}
	for i, eg := range kept {
		if len(eg.Replicas) == 0 {
			continue
		}
		if eg.Replicas[0].Bad == want[i].Replicas[0].Bad || eg.Replicas[len(eg.Replicas)-1].Device != "x" ||
			!reflect.DeepEqual(eg.Replicas[1:len(eg.Replicas)-1], want[i].Replicas[1:]) {
			t.Fatalf("egroup %d: replicas %+v after changing every record once; decoded %+v", i, eg.Replicas, want[i].Replicas)
		}
	}
	// A list decoded after the changes is as encoded.
	again := Egroup{Replicas: want[0].Replicas, Vector: want[0].Vector}
	b, _ := encodeBinary(&again)
	var got Egroup
	if err := rd.Decode(b, &got); err != nil || !reflect.DeepEqual(got.Replicas, want[0].Replicas) {
		t.Fatalf("replicas %+v, %v; want %+v", got.Replicas, err, want[0].Replicas)
	}
}
