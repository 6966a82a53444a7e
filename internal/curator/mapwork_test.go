package curator

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func TestParsePartition(t *testing.T) {
	for _, ok := range []string{"egroups/0", "egroups/f", "extents/a", "objects/1", "versions/f", "uploads/0"} {
		if _, err := ParsePartition(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "egroups", "egroups/", "egroups/g", "egroups/A", "egroups/00", "owners/1", "buckets/0", "../x/1", "egroups/1/2"} {
		if _, err := ParsePartition(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := (Partition{Name: "egroups/1", Lo: 5, Hi: 4}).Check(); err == nil {
		t.Error("an empty range accepted")
	}
	if err := (Partition{Name: "egroups/1", Lo: 1, Hi: 4, From: "a"}).Check(); err == nil {
		t.Error("an ID partition with bucket bounds accepted")
	}
	if err := (Partition{Name: "objects/1", From: "b", To: "a"}).Check(); err == nil {
		t.Error("an empty bucket range accepted")
	}
	if err := (Partition{Name: "objects/1", From: "b", To: "b"}).Check(); err == nil {
		t.Error("an empty bucket range accepted")
	}
	if err := (Partition{Name: "objects/1", From: "b"}).Check(); err != nil {
		t.Errorf("an open-ended bucket range refused: %v", err)
	}
}

// TestOwnerPartitionsTileTheMap: for any set of buckets (with names that
// are prefixes of others, and buckets created after the split) and any
// cut points sampled by a last scan, the owner partitions of a map are at
// most 16, every key of the map falls in exactly one of them, a record's
// bucket passes the partition's check, and all versions of one key fall
// in the same partition.
func TestOwnerPartitionsTileTheMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	alphabet := "ab-.0"
	name := func() string {
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for round := range 400 {
		var buckets []string
		for range rng.IntN(40) {
			buckets = append(buckets, name())
		}
		var cuts []string
		if round%2 == 1 {
			for range rng.IntN(200) {
				cuts = append(cuts, name()+"\x00"+name())
			}
			slices.Sort(cuts) // a scan's cuts are in key order
		}
		m := ownerMaps[round%len(ownerMaps)]
		parts := ownerPartitions(m, buckets, cuts)
		if len(parts) < 1 || len(parts) > 16 {
			t.Fatalf("%d partitions for %d buckets, %d cuts", len(parts), len(buckets), len(cuts))
		}
		if len(cuts) >= 64 && len(parts) < 8 {
			t.Fatalf("%d cuts gave only %d partitions", len(cuts), len(parts))
		}
		for _, p := range parts {
			if err := p.Check(); err != nil {
				t.Fatalf("buckets %q: %v", buckets, err)
			}
		}
		prefix := ownerPrefix(m)
		keys := []string{prefix, prefix + "\x00", prefix + "\xff\xff"}
		for range 50 {
			keys = append(keys, prefix+name()+"\x00"+name()) // existing or new buckets
		}
		for _, b := range buckets {
			keys = append(keys, prefix+b+"\x00", prefix+b+"\x00\xff")
		}
		for _, c := range cuts {
			keys = append(keys, prefix+c, prefix+c+"\x00")
		}
		where := func(k string) int {
			at, in := -1, 0
			for i, p := range parts {
				s, e := p.keyRange(prefix)
				if k >= string(s) && k < string(e) {
					at, in = i, in+1
				}
			}
			if in != 1 {
				t.Fatalf("buckets %q cuts %q: key %q is in %d partitions", buckets, cuts, k, in)
			}
			return at
		}
		for _, k := range keys {
			p := parts[where(k)]
			if b, _, ok := strings.Cut(strings.TrimPrefix(k, prefix), "\x00"); ok && !p.holdsBucket(b) {
				t.Fatalf("key %q of bucket %q is in %s [%q, %q), which refuses the bucket", k, b, p.Name, p.From, p.To)
			}
		}
		if m == "versions" {
			for range 30 {
				key := prefix + name() + "\x00" + name() + "\x00"
				first := where(key + "0000000000000000")
				for _, seq := range []string{"00000000000000ff", "7fffffffffffffff", "ffffffffffffffff"} {
					if where(key+seq) != first {
						t.Fatalf("versions of %q split across partitions (cuts %q)", key, cuts)
					}
				}
			}
		}
	}
}

// TestPartitionsCoverTheIDSpace: the 16 partitions of a map tile the IDs
// with no gap or overlap, whatever the sequence's value, and IDs handed
// out by the sequence spread over all of them.
func TestPartitionsCoverTheIDSpace(t *testing.T) {
	for _, maxID := range []uint64{0, 1, 15, 16, 17, 1000, 1 << 40, 1<<64 - 1} {
		ps := partitionsOf("egroups", maxID/3, maxID)
		if ps[0].Lo != 0 || ps[15].Hi != 1<<64-1 {
			t.Fatalf("max %d: ends %d..%d", maxID, ps[0].Lo, ps[15].Hi)
		}
		for i := 1; i < 16; i++ {
			if ps[i].Lo != ps[i-1].Hi+1 || ps[i].Lo > ps[i].Hi {
				t.Fatalf("max %d: partition %d [%d, %d] after [%d, %d]", maxID, i, ps[i].Lo, ps[i].Hi, ps[i-1].Lo, ps[i-1].Hi)
			}
		}
		// Keys: each partition's key range holds exactly its IDs.
		for _, id := range []uint64{0, 1, maxID / 2, maxID, maxID + 1} {
			key := string(meta.EgroupKey(id))
			in := 0
			for _, p := range ps {
				s, e := p.keyRange(meta.PrefixEgroup)
				if key >= string(s) && key < string(e) {
					in++
					if id < p.Lo || id > p.Hi {
						t.Fatalf("max %d: id %d in the key range of %+v", maxID, id, p)
					}
				}
			}
			if in != 1 {
				t.Fatalf("max %d: id %d in %d partitions' key ranges", maxID, id, in)
			}
		}
	}
	ps := partitionsOf("extents", 5000, 21_000)
	for i, p := range ps[1:15] {
		if n := p.Hi - p.Lo + 1; n != 1001 {
			t.Fatalf("partition %d holds %d IDs, want 1001", i+1, n)
		}
	}
	if ps[1].Lo != 5000+1001 {
		t.Fatalf("partition 1 starts at %d", ps[1].Lo)
	}
}

// TestIDBounds finds the lowest and highest ID of a map in a real store.
func TestIDBounds(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB")
	ctx := context.Background()
	if lo, hi, err := idBounds(ctx, e.kv, "zz/"); err != nil || lo != 0 || hi != 0 {
		t.Fatalf("empty map: %d, %d, %v", lo, hi, err)
	}
	for _, ids := range [][]uint64{{7}, {3, 9, 1 << 33}, {1, 2, 3, 1<<64 - 1}, {0, 5}} {
		prefix := fmt.Sprintf("zz%d/", len(ids))
		var txn meta.Txn
		for _, id := range ids {
			txn.Put([]byte(prefix+meta.FormatID(id)), []byte("x"))
		}
		txn.Put([]byte(prefix+"not-an-id"), []byte("x")) // outside every partition
		if _, err := e.kv.Commit(ctx, &txn); err != nil {
			t.Fatal(err)
		}
		lo, hi, err := idBounds(ctx, e.kv, prefix)
		if err != nil || lo != ids[0] || hi != ids[len(ids)-1] {
			t.Fatalf("%v: bounds %d, %d (%v)", ids, lo, hi, err)
		}
	}
}

// TestMapStreamRoundTrip: a partition's output read back from the stream
// is the output MapPartition gives in-process, record for record.
func TestMapStreamRoundTrip(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB")
	for i := 0; i < 60; i++ {
		e.put(fmt.Sprintf("k%02d", i), data(uint64(i), 20<<10), "any=1")
	}
	ctx := context.Background()
	total := 0
	for _, m := range []string{"egroups", "extents"} {
		lo, hi, err := idBounds(ctx, e.kv, map[string]string{"egroups": meta.PrefixEgroup, "extents": meta.PrefixExtent}[m])
		if err != nil || hi == 0 {
			t.Fatalf("%s bounds: %d, %d, %v", m, lo, hi, err)
		}
		parts := partitionsOf(m, lo, hi)
		nonEmpty := 0
		for i, part := range parts {
			var direct []MapRecord
			read, err := MapPartition(ctx, e.kv, part, func(r MapRecord) error {
				direct = append(direct, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteMapStream(ctx, &buf, e.kv, part); err != nil {
				t.Fatal(err)
			}
			out, err := ReadMapStream(&buf, part)
			if err != nil {
				t.Fatalf("%s: %v", part.Name, err)
			}
			if out.Read != read || fmt.Sprintf("%+v", deref(out.Records)) != fmt.Sprintf("%+v", deref(direct)) {
				t.Fatalf("%s: stream gave %d records (read %d), direct %d (read %d)", part.Name, len(out.Records), out.Read, len(direct), read)
			}
			total += len(direct)
			if len(direct) > 0 {
				nonEmpty++
				// The stream is meant for one partition only.
				var again bytes.Buffer
				_ = WriteMapStream(ctx, &again, e.kv, part)
				if _, err := ReadMapStream(&again, parts[(i+1)%16]); err == nil {
					t.Fatalf("%s's stream accepted as %s", part.Name, parts[(i+1)%16].Name)
				}
			}
		}
		if want := min(int(hi-lo+1), 8); nonEmpty < want {
			t.Fatalf("%s: IDs %d..%d in only %d of 16 partitions: the split does not follow the IDs", m, lo, hi, nonEmpty)
		}
	}
	if total == 0 {
		t.Fatal("no records mapped")
	}
}

// deref renders records by value (pointers would print as addresses).
func deref(rs []MapRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%d@%d", r.ID, r.Rev)
		if r.Egroup != nil {
			out[i] += fmt.Sprintf(" %+v", *r.Egroup)
		}
		if r.Access != nil {
			out[i] += fmt.Sprintf(" %+v", *r.Access)
		}
		if r.Extent != nil {
			out[i] += fmt.Sprintf(" %+v", *r.Extent)
		}
	}
	return out
}

// TestReadMapStreamRefusesBadStreams: a stream is used whole or not at all.
func TestReadMapStreamRefusesBadStreams(t *testing.T) {
	eg := &meta.Egroup{Size: 10}
	frames := func(fs ...mapFrame) *bytes.Buffer {
		var b bytes.Buffer
		enc := gob.NewEncoder(&b)
		for _, f := range fs {
			if err := enc.Encode(f); err != nil {
				t.Fatal(err)
			}
		}
		return &b
	}
	id := func(hex string) uint64 {
		var v uint64
		fmt.Sscanf(hex, "%x", &v)
		return v
	}
	a1, a2 := id("a000000000000001"), id("a000000000000002")
	cases := map[string]*bytes.Buffer{
		"empty":          {},
		"no end frame":   frames(mapFrame{Recs: []MapRecord{{ID: a1, Egroup: eg}}}),
		"worker error":   frames(mapFrame{End: true, Err: "pebble: closed"}),
		"count mismatch": frames(mapFrame{Recs: []MapRecord{{ID: a1, Egroup: eg}}}, mapFrame{End: true, N: 2}),
		"out of order":   frames(mapFrame{Recs: []MapRecord{{ID: a2, Egroup: eg}, {ID: a1, Egroup: eg}}}, mapFrame{End: true, N: 2}),
		"duplicate":      frames(mapFrame{Recs: []MapRecord{{ID: a1, Egroup: eg}, {ID: a1, Egroup: eg}}}, mapFrame{End: true, N: 2}),
		"wrong digit":    frames(mapFrame{Recs: []MapRecord{{ID: 1, Egroup: eg}}}, mapFrame{End: true, N: 1}),
		"wrong kind":     frames(mapFrame{Recs: []MapRecord{{ID: a1, Extent: &meta.Extent{}}}}, mapFrame{End: true, N: 1}),
		"negative read":  frames(mapFrame{End: true, Read: -1}),
		"garbage":        bytes.NewBufferString("\x03\xff\x00garbage"),
		// Compact streams (WriteCompactMapStream).
		"shape not sent": frames(mapFrame{Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a1, Shape: 1}}}, mapFrame{End: true, N: 1}),
		"compact out of order": frames(mapFrame{Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a2}, {ID: a1}}},
			mapFrame{End: true, N: 2}),
		"compact outside":  frames(mapFrame{Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: 1}}}, mapFrame{End: true, N: 1}),
		"compact and recs": frames(mapFrame{Recs: []MapRecord{{ID: a1, Egroup: eg}}, Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a2}}}, mapFrame{End: true, N: 2}),
		"compact count":    frames(mapFrame{Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a1}}}, mapFrame{End: true, N: 2}),
		"egs in the end":   frames(mapFrame{End: true, N: 1, Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a1}}}),
	}
	pa := Partition{Name: "egroups/a", Lo: a1, Hi: a2}
	for name, b := range cases {
		if _, err := ReadMapStream(b, pa); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := frames(mapFrame{Recs: []MapRecord{{ID: a1, Egroup: eg}, {ID: a2, Egroup: eg}}}, mapFrame{End: true, N: 2, Read: 3})
	if out, err := ReadMapStream(good, pa); err != nil || len(out.Records) != 2 || out.Read != 3 {
		t.Fatalf("good stream: %+v %v", out, err)
	}
	// Compact egroups are refused for a partition of another map.
	px := Partition{Name: "extents/a", Lo: a1, Hi: a2}
	if _, err := ReadMapStream(frames(mapFrame{Shapes: []mapShape{{Egroup: *eg}}, Egs: []mapEgroup{{ID: a1}}}, mapFrame{End: true, N: 1}), px); err == nil {
		t.Error("compact egroups accepted as an extent partition's output")
	}
}

// TestCompactMapStreamGivesTheSameViews: an egroup partition sent in the
// compact form (the worker interns the shapes, the master re-interns
// each once) yields exactly the decision views the records would, over
// egroups of many shapes — open, sealed, erasure coded, compressed, with
// bad replicas, several vectors and writers, with and without access
// records, JSON and binary — across several frames.
func TestCompactMapStreamGivesTheSameViews(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	vectors := []string{"hdd=2", "ssd=1,hdd=1", "any=3"}
	b := &batchPut{t: t, kv: e.kv}
	for id := uint64(1); id <= 3000; id++ {
		eg := meta.Egroup{State: meta.EgroupState(rng.IntN(2)), Size: rng.Int64N(16 << 20), Mtime: rng.Int64(),
			Vector: model.MustParseVector(vectors[rng.IntN(len(vectors))]), Writer: model.NodeID(fmt.Sprintf("n%d", rng.IntN(3)))}
		for r := range 1 + rng.IntN(3) {
			eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: model.DeviceID(fmt.Sprintf("n%d/hdd%d", r, rng.IntN(2))),
				Node: model.NodeID(fmt.Sprintf("n%d", r)), Tier: "hdd", Bad: rng.IntN(20) == 0})
		}
		switch rng.IntN(10) {
		case 0:
			eg.Codec, eg.Logical = "zstd", eg.Size*2
		case 1:
			eg.EC = &meta.ECLayout{K: 4, M: 2, StripLen: 1 << 20}
		case 2:
			eg.Incompressible = true
		}
		enc := meta.Encode(eg)
		if rng.IntN(4) == 0 {
			enc = jsonOf(t, eg)
		}
		b.put(meta.EgroupKey(id), enc)
		if rng.IntN(2) == 0 {
			b.put(meta.AccessKey(id), meta.Encode(meta.Access{Atime: rng.Int64(), Reads: 3, WinReads: rng.Int64N(9)}))
		}
	}
	b.flush()
	part := Partition{Name: "egroups/0", Lo: 0, Hi: math.MaxUint64}
	var want []decide.Egroup
	in := newShapeInterner()
	wantRead, err := MapPartition(ctx, e.kv, part, func(r MapRecord) error {
		x := in.rec(r)
		want = append(want, x.view())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCompactMapStream(ctx, &buf, e.kv, part); err != nil {
		t.Fatal(err)
	}
	compactBytes := buf.Len()
	var got []decide.Egroup
	read, err := ReadMapStreamTo(&buf, part, func(r MapRecord) {
		if r.compact.shape == nil || r.Egroup != nil {
			t.Fatalf("egroup %d came as a record, not compact", r.ID)
		}
		got = append(got, r.compact.view())
	})
	if err != nil {
		t.Fatal(err)
	}
	if read != wantRead || len(got) != 3000 || !reflect.DeepEqual(got, want) {
		t.Fatalf("compact stream: %d views (read %d); records: %d (read %d); equal %v", len(got), read, len(want), wantRead, reflect.DeepEqual(got, want))
	}
	buf.Reset()
	if err := WriteMapStream(ctx, &buf, e.kv, part); err != nil {
		t.Fatal(err)
	}
	t.Logf("stream of 3000 egroups: %d bytes compact, %d as records", compactBytes, buf.Len())
}

// TestCompactExtentStreamGivesTheSameRecords: an extent partition sent in
// the compact form yields exactly the records (and fingerprints) the
// master keeps from decoded extent records.
func TestCompactExtentStreamGivesTheSameRecords(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	b := &batchPut{t: t, kv: e.kv}
	for id := uint64(1); id <= 2000; id++ {
		x := meta.Extent{Egroup: rng.Uint64N(100), Off: rng.Int64N(1 << 24), Len: rng.Int64N(4 << 20), Ctime: rng.Int64()}
		switch rng.IntN(4) {
		case 0:
			x.Codec, x.Stored, x.Sum = "zstd", x.Len/3, rng.Uint32()
		case 1:
			x.FP = []byte(fmt.Sprintf("fp-%d", rng.IntN(50)))
		case 2:
			x.Shares = rng.Uint64N(2000)
		}
		enc := meta.Encode(x)
		if rng.IntN(4) == 0 {
			enc = jsonOf(t, x)
		}
		b.put(meta.ExtentKey(id), enc)
	}
	b.flush()
	part := Partition{Name: "extents/0", Lo: 0, Hi: math.MaxUint64}
	var want extentRecs
	wantRead, err := MapPartition(ctx, e.kv, part, func(r MapRecord) error {
		want.add(r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCompactMapStream(ctx, &buf, e.kv, part); err != nil {
		t.Fatal(err)
	}
	var got extentRecs
	read, err := ReadMapStreamTo(&buf, part, func(r MapRecord) {
		if !r.isExtent || r.Extent != nil {
			t.Fatalf("extent %d came as a record, not compact", r.ID)
		}
		got.add(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	all := func(rs *extentRecs) (out []extentRec) {
		rs.run.drain(func(x *extentRec) { out = append(out, *x) })
		return out
	}
	gx, wx := all(&got), all(&want)
	if read != wantRead || len(gx) != 2000 || !reflect.DeepEqual(gx, wx) || !reflect.DeepEqual(got.fps, want.fps) {
		t.Fatalf("compact stream: %d extents (read %d), %d fingerprints; records: %d (read %d), %d; equal %v, %v",
			len(gx), read, len(got.fps), len(wx), wantRead, len(want.fps), reflect.DeepEqual(gx, wx), reflect.DeepEqual(got.fps, want.fps))
	}
	// Compact extents are refused for an egroup partition.
	var again bytes.Buffer
	_ = WriteCompactMapStream(ctx, &again, e.kv, part)
	if _, err := ReadMapStream(&again, Partition{Name: "egroups/0", Lo: 0, Hi: math.MaxUint64}); err == nil {
		t.Fatal("compact extents accepted as an egroup partition's output")
	}
}

// FuzzReadMapStream: arbitrary bytes from a peer give an output or an
// error, never a panic or a hang.
func FuzzReadMapStream(f *testing.F) {
	var b bytes.Buffer
	enc := gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Recs: []MapRecord{{ID: 0xa000000000000001, Egroup: &meta.Egroup{Size: 1}}}})
	_ = enc.Encode(mapFrame{End: true, N: 1})
	f.Add(b.Bytes())
	b.Reset()
	enc = gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Recs: []MapRecord{{ID: 1, Owner: &OwnerRecord{Bucket: "c", Extents: []uint64{7}}}, {ID: 2, Owner: &OwnerRecord{Bucket: "d", History: true, Key: "k"}}}})
	_ = enc.Encode(mapFrame{End: true, N: 2, Read: 5})
	f.Add(b.Bytes())
	b.Reset()
	enc = gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Shapes: []mapShape{{Egroup: meta.Egroup{Size: 1, Replicas: []meta.EgroupReplica{{Device: "n1/hdd0"}}}, Accessed: true}},
		Egs: []mapEgroup{{ID: 0xa000000000000001, Size: 1}, {ID: 0xa000000000000002, Size: 2}}})
	_ = enc.Encode(mapFrame{End: true, N: 2, Read: 4})
	f.Add(b.Bytes())
	b.Reset()
	enc = gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Xs: []mapExtent{{ID: 0xa000000000000001, Egroup: 3, Len: 10, FP: []byte("f")}}})
	_ = enc.Encode(mapFrame{End: true, N: 1, Read: 1})
	f.Add(b.Bytes())
	// A reduced egroup partition (the shuffle): aggregates, the extents
	// sent to the master, and the end frame naming the reducer.
	b.Reset()
	enc = gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Names: []string{"b1"}, Aggs: []mapAgg{{Egroup: 0xa000000000000001, LiveN: 1, LiveBytes: 9, TailEnd: 9, FirstSeq: 5, FirstBucket: 1, Buckets: []uint32{1}, Listed: true}},
		Xs: []mapExtent{{ID: 7, Egroup: 0xa000000000000001, Len: 9, Stored: 9, Live: true}}})
	_ = enc.Encode(mapFrame{End: true, N: 2, Read: 1, Mapper: "n2"})
	f.Add(b.Bytes())
	// A reduced extent partition: dangling references, then what went on.
	b.Reset()
	enc = gob.NewEncoder(&b)
	_ = enc.Encode(mapFrame{Refs: []mapRef{{ID: 0xa000000000000003, Seq: math.MaxUint32}}})
	_ = enc.Encode(mapFrame{End: true, N: 1, Read: 4, Mapper: "n2", Shuffled: []ShuffleCount{{Dst: "egroups/0", Count: 4}}})
	f.Add(b.Bytes())
	f.Add([]byte{})
	routes := func(m string) []ShuffleRoute {
		var out []ShuffleRoute
		for _, p := range partitionsOf(m, 0, 0) {
			out = append(out, ShuffleRoute{Part: p.Name, Lo: p.Lo, Hi: p.Hi, Node: "n2"})
		}
		return out
	}
	reducedEgroups := Partition{Name: "egroups/a", Lo: 0xa000000000000000, Hi: 0xafffffffffffffff,
		Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "extents/1", Mapper: "n2", Count: 1}}}}
	reducedExtents := Partition{Name: "extents/a", Lo: 0xa000000000000000, Hi: 0xafffffffffffffff,
		Shuffle: &ShuffleSpec{ID: "s", Routes: routes("egroups"), Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n2", Count: 1}}}}
	f.Fuzz(func(t *testing.T, in []byte) {
		if out, err := ReadMapStream(bytes.NewReader(in), reducedEgroups); err == nil {
			for _, r := range out.Records {
				switch {
				case r.agg != nil:
					if r.agg.egroup < reducedEgroups.Lo || r.agg.egroup > reducedEgroups.Hi || r.agg.firstBucket > uint32(len(r.agg.names)) {
						t.Fatalf("accepted an aggregate outside the partition or naming an unsent bucket: %+v", r.agg)
					}
				case r.isExtent:
					if x := r.compactExtent; x.egroup < reducedEgroups.Lo || x.egroup > reducedEgroups.Hi {
						t.Fatalf("accepted an extent of another partition's egroup: %+v", x)
					}
				}
			}
		}
		if out, err := ReadMapStream(bytes.NewReader(in), reducedExtents); err == nil {
			for _, r := range out.Records {
				if r.isRef && (r.ID < reducedExtents.Lo || r.ID > reducedExtents.Hi) {
					t.Fatalf("accepted a dangling reference outside the partition: %d", r.ID)
				}
			}
		}
		out, err := ReadMapStream(bytes.NewReader(in), Partition{Name: "egroups/a", Lo: 0xa000000000000000, Hi: 0xafffffffffffffff})
		if err == nil {
			for _, r := range out.Records {
				if (r.Egroup == nil) == (r.compact.shape == nil) || r.Owner != nil || r.ID < 0xa000000000000000 || r.ID > 0xafffffffffffffff {
					t.Fatalf("accepted a record without its egroup: %+v", r)
				}
			}
		}
		out, err = ReadMapStream(bytes.NewReader(in), Partition{Name: "objects/2", From: "b", To: "e"})
		if err == nil {
			for _, r := range out.Records {
				if r.Owner == nil || r.Egroup != nil || r.Extent != nil || r.Owner.Bucket < "b" || r.Owner.Bucket >= "e" {
					t.Fatalf("accepted a record that is not one of the partition's owners: %+v", r)
				}
			}
		}
	})
}

// TestSpreadPartitions: every partition goes to an up node, the split is
// as even as the partitions allow, and the same input gives the same
// assignment.
func TestSpreadPartitions(t *testing.T) {
	snap := func(up ...bool) *model.Snapshot {
		var nodes []model.Node
		for i, u := range up {
			nodes = append(nodes, model.Node{ID: model.NodeID(fmt.Sprintf("n%d", i+1)), Up: u})
		}
		return model.NewSnapshot(time.Time{}, nodes, nil)
	}
	parts := func(rng *rand.Rand) []PartitionLoad {
		var ps []PartitionLoad
		for _, n := range partitionNames() {
			ps = append(ps, PartitionLoad{Name: n, Records: rng.IntN(5000)})
		}
		return ps
	}
	if a := SpreadPartitions(snap(true), parts(rand.New(rand.NewPCG(1, 1)))); a != nil {
		t.Fatalf("one node: %v, want nil (the master maps everything)", a)
	}
	if a := SpreadPartitions(snap(true, false, false), parts(rand.New(rand.NewPCG(1, 1)))); a != nil {
		t.Fatalf("one node up: %v, want nil", a)
	}
	// First scan: no loads known, every partition counts one.
	fresh := make([]PartitionLoad, 0, 32)
	for _, n := range partitionNames() {
		fresh = append(fresh, PartitionLoad{Name: n})
	}
	got := map[model.NodeID]int{}
	for _, n := range SpreadPartitions(snap(true, true, true), fresh) {
		got[n]++
	}
	if got["n1"] < 10 || got["n2"] < 10 || got["n3"] < 10 {
		t.Fatalf("first scan split %v, want 32 partitions about evenly over 3 nodes", got)
	}
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := snap(true, rng.IntN(4) > 0, true, rng.IntN(2) == 0)
		ps := parts(rng)
		a := SpreadPartitions(s, ps)
		if b := SpreadPartitions(s, ps); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
		load := map[model.NodeID]int{}
		biggest := 0
		for _, p := range ps {
			n, ok := a[p.Name]
			if !ok || !s.NodeUp(n) {
				t.Fatalf("seed %d: %s assigned to %q", seed, p.Name, n)
			}
			load[n] += max(p.Records, 1)
			biggest = max(biggest, max(p.Records, 1))
		}
		lo, hi := int(^uint(0)>>1), 0
		for _, n := range s.Nodes {
			if n.Up {
				lo, hi = min(lo, load[n.ID]), max(hi, load[n.ID])
			}
		}
		// Greedy biggest-first: no node ends more than one partition
		// above the least loaded.
		if hi-lo > biggest {
			t.Fatalf("seed %d: loads %v spread %d > biggest partition %d", seed, load, hi-lo, biggest)
		}
	}
}

// TestEgroupAccessMergeJoin: an egroup partition joins each egroup with
// its access record, over seeded maps in which egroups lack access
// records, access records outlive their egroups, records are JSON or
// binary, and junk sits among the access keys — more records than a scan
// page, so the join crosses pages on both sides; and it counts every
// record of both ranges.
func TestEgroupAccessMergeJoin(t *testing.T) {
	for seed := range uint64(4) {
		e := newEnv(t, "ssd:%s:1GiB")
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(seed, 99))
		want := map[uint64]*meta.Access{}
		var egroups []uint64
		records := 0
		var txn meta.Txn
		flush := func() {
			if len(txn.Ops) > 0 {
				if _, err := e.kv.Commit(ctx, &txn); err != nil {
					t.Fatal(err)
				}
				txn = meta.Txn{}
			}
		}
		enc := func(v any) []byte {
			if rng.IntN(2) == 0 {
				return jsonOf(t, v)
			}
			return meta.Encode(v)
		}
		for id := uint64(1); id < 5000; id++ {
			hasEgroup, hasAccess := rng.IntN(3) > 0, rng.IntN(2) == 0
			if hasEgroup {
				txn.Put(meta.EgroupKey(id), enc(meta.Egroup{Size: int64(id), State: meta.EgroupSealed}))
				egroups = append(egroups, id)
				records++
			}
			if hasAccess {
				a := meta.Access{Atime: int64(id), Reads: int64(rng.IntN(9))}
				if rng.IntN(4) == 0 {
					a.WinStart, a.WinReads = 5, 6
				}
				txn.Put(meta.AccessKey(id), enc(a))
				records++
				if hasEgroup {
					want[id] = &a
				}
			}
			if rng.IntN(200) == 0 {
				txn.Put([]byte(meta.PrefixAccess+meta.FormatID(id)+"x"), []byte("junk")) // in the range, not an ID: read, skipped
				txn.Put(meta.AccessKey(id+1_000_000), []byte("{bad"))                    // past the partition
				records++
			}
			if len(txn.Ops) > 100 {
				flush()
			}
		}
		flush()
		part := Partition{Name: "egroups/0", Lo: 0, Hi: 10_000}
		// Pebble walks cursors; a store without them (etcd) pages.
		for _, kv := range []PageScanner{e.kv, pagesOnly{e.kv}} {
			var got []MapRecord
			read, err := MapPartition(ctx, kv, part, func(r MapRecord) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if read != records {
				t.Fatalf("seed %d, %T: read %d records, the ranges hold %d", seed, kv, read, records)
			}
			if len(got) != len(egroups) {
				t.Fatalf("seed %d, %T: %d egroups out, %d in", seed, kv, len(got), len(egroups))
			}
			for i, r := range got {
				w := want[egroups[i]]
				switch {
				case r.ID != egroups[i] || r.Egroup.Size != int64(r.ID):
					t.Fatalf("seed %d, %T: record %d is egroup %d, want %d", seed, kv, i, r.ID, egroups[i])
				case (w == nil) != (r.Access == nil) || w != nil && *w != *r.Access:
					t.Fatalf("seed %d, %T: egroup %d joined access %+v, want %+v", seed, kv, r.ID, r.Access, w)
				}
			}
		}
	}
}

// pagesOnly hides a store's cursors: the map stage then reads it in Scan
// pages, as it reads etcd.
type pagesOnly struct{ kv PageScanner }

func (p pagesOnly) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	return p.kv.Scan(ctx, start, end, limit)
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	defer meta.SetBinaryRecords(true)
	meta.SetBinaryRecords(false)
	return meta.Encode(v)
}

// batchPut writes records a hundred to a transaction.
type batchPut struct {
	t   *testing.T
	kv  meta.KV
	txn meta.Txn
}

func (b *batchPut) put(key, val []byte) {
	b.txn.Put(key, val)
	if len(b.txn.Ops) >= 100 {
		b.flush()
	}
}

func (b *batchPut) flush() {
	b.t.Helper()
	if len(b.txn.Ops) == 0 {
		return
	}
	if _, err := b.kv.Commit(context.Background(), &b.txn); err != nil {
		b.t.Fatal(err)
	}
	b.txn = meta.Txn{}
}
