package curator

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// jsonLines is compressible data: log lines with varying numbers.
func jsonLines(seed uint64, n int) []byte {
	var b bytes.Buffer
	r := data(seed, 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"level":"info","req":"GET /v1/items/%d","status":200,"ms":%d}`+"\n", 1700000000+i, int(r[i%64])*i, r[(i+7)%64])
	}
	return b.Bytes()[:n]
}

// physical sums committed bytes over every replica of every egroup.
func (e *env) physical() (stored, logical int64, compressed int) {
	e.t.Helper()
	p := []byte(meta.PrefixEgroup)
	items, err := e.kv.Scan(context.Background(), p, meta.PrefixEnd(p), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, it := range items {
		var eg meta.Egroup
		meta.Decode(it.Value, &eg)
		stored += eg.Size * int64(len(eg.Replicas))
		if eg.Codec != "" {
			compressed++
		}
	}
	return stored, logical, compressed
}

func TestCuratorCompressesColdDataAndTruncates(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "logs", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := e.l.SetBucketTransform(ctx, "logs", meta.BucketTransform{Compress: "zstd", ColdAfter: int64(time.Nanosecond)}); err != nil {
		t.Fatal(err)
	}
	if err := e.l.SetBucketTransform(ctx, "logs", meta.BucketTransform{Compress: "lz4"}); err == nil {
		t.Fatal("unknown codec accepted")
	}
	put := func(bucket, key string, b []byte, v string) {
		if _, err := e.l.Put(ctx, bucket, key, bytes.NewReader(b), putOpts(b, v)); err != nil {
			t.Fatal(err)
		}
	}
	logs := map[string][]byte{}
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("app/%03d.json", i)
		logs[k] = jsonLines(uint64(i), 5000+i*4001)
		put("logs", k, logs[k], "hdd=2")
	}
	media := data(99, 300_000)
	put("logs", "media.bin", media, "any=2")
	// A bucket without a transform setting keeps its data plain.
	plain := jsonLines(7, 200_000)
	put("bkt", "plain.json", plain, "ssd=1,hdd=1")
	before, _, _ := e.physical()
	check := func(bucket, key string, want []byte) {
		t.Helper()
		_, rc, err := e.l.Get(ctx, bucket, key, 0, -1)
		if err != nil {
			t.Fatalf("get %s/%s: %v", bucket, key, err)
		}
		defer rc.Close()
		var got bytes.Buffer
		if _, err := got.ReadFrom(rc); err != nil || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("get %s/%s: %d bytes, err %v; want %d bytes", bucket, key, got.Len(), err, len(want))
		}
	}

	rec := e.run("full")
	t.Logf("job 1: planned %v done %v transformed %v", rec.Planned, rec.Done, rec.Transformed)
	if rec.Done["compress"] == 0 {
		t.Fatalf("no compression done: %v (errors %v)", rec.Done, rec.Errors)
	}
	tb := rec.Transformed["compress"]
	if tb.Stored*3 > tb.Logical {
		t.Errorf("compressed %d → %d bytes; JSON logs should shrink 3x", tb.Logical, tb.Stored)
	}
	for k, b := range logs {
		check("logs", k, b)
	}
	check("logs", "media.bin", media)
	// The emptied sources go at the next data removal.
	rec = e.run("full")
	t.Logf("job 2: planned %v done %v", rec.Planned, rec.Done)
	if rec.Planned["compress"] != 0 {
		t.Errorf("job 2 plans compression again: %v (incompressible data must be remembered)", rec.Planned)
	}
	after, _, compressed := e.physical()
	t.Logf("physical bytes %d → %d, %d compressed egroups", before, after, compressed)
	if after*2 > before || compressed == 0 {
		t.Errorf("physical bytes %d → %d: want less than half", before, after)
	}
	for k, b := range logs {
		check("logs", k, b)
	}
	check("logs", "media.bin", media)
	check("bkt", "plain.json", plain)
	loc, _ := e.l.Locate(ctx, "bkt", "plain.json")
	for _, x := range loc.Extents {
		if x.Transform != "" {
			t.Errorf("bucket without a setting: egroup transformed %q", x.Transform)
		}
	}
	loc, _ = e.l.Locate(ctx, "logs", "app/039.json")
	if loc.Extents[0].Transform == "" || loc.Extents[0].Transform[:4] != "zstd" {
		t.Errorf("locate shows transform %q, want zstd RATIO", loc.Extents[0].Transform)
	}
	loc, _ = e.l.Locate(ctx, "logs", "media.bin")
	if loc.Extents[0].Transform != "incompressible" {
		t.Errorf("locate of media shows %q, want incompressible", loc.Extents[0].Transform)
	}

	// Deleting an object at the end of a compressed egroup leaves a dead
	// tail: data removal drops its extent records, truncation the bytes.
	var tailKey string
	var tailOff int64 = -1
	for k := range logs {
		l, _ := e.l.Locate(ctx, "logs", k)
		if x := l.Extents[len(l.Extents)-1]; x.EgroupOff > tailOff {
			tailKey, tailOff = k, x.EgroupOff
		}
	}
	l, _ := e.l.Locate(ctx, "logs", tailKey)
	tailEg := l.Extents[len(l.Extents)-1].Egroup
	egBefore, _, _ := e.l.Egroup(ctx, tailEg)
	if err := e.l.Delete(ctx, "logs", tailKey); err != nil {
		t.Fatal(err)
	}
	delete(logs, tailKey)
	// Keep compaction's small-egroup packing and garbage target out of
	// the way (the test's egroups are small): the tail is truncation's.
	e.c.opts.Decide.PackBelowBytes, e.c.opts.Decide.GarbageTarget = 1, -1
	e.c.opts.Decide.Transform.TruncateMinBytes = 1
	// One job: data removal deletes the tail's extent records, then the
	// truncation planned without them cuts the bytes.
	rec = e.run("full")
	egAfter, _, err := e.l.Egroup(ctx, tailEg)
	t.Logf("truncation: done %v, egroup %x %d → %d bytes (err %v)", rec.Done, tailEg, egBefore.Size, egAfter.Size, err)
	if err != nil || egAfter.Size >= egBefore.Size || rec.Done["truncate"] != 1 {
		t.Errorf("dead tail of egroup %x not truncated (%d bytes)", tailEg, egAfter.Size)
	}
	for k, b := range logs {
		check("logs", k, b)
	}

	// Reads make compressed data hot: it is rewritten plain.
	for i := 0; i < 5; i++ {
		check("logs", "app/000.json", logs["app/000.json"])
	}
	e.l.FlushAccess(ctx)
	rec = e.run("full")
	t.Logf("job hot: planned %v done %v", rec.Planned, rec.Done)
	if rec.Done["decompress"] == 0 {
		t.Errorf("hot compressed egroup not decompressed: %v", rec.Done)
	}
	check("logs", "app/000.json", logs["app/000.json"])
}

func putOpts(b []byte, v string) object.PutOptions {
	return object.PutOptions{Size: int64(len(b)), Vector: model.MustParseVector(v)}
}

// TestTruncationDroppedWhenRemovalIncomplete: a truncation planned past
// dead extent records that this job's data removal then failed to delete
// must not run.
func TestTruncationDroppedWhenRemovalIncomplete(t *testing.T) {
	res := &scanResult{deadExtents: []extentInfo{{id: 7, rec: meta.Extent{Egroup: 1}}}}
	tasks := []decide.Task{{Kind: decide.KindTruncate, Egroup: 1}, {Kind: decide.KindTruncate, Egroup: 2}, {Kind: decide.KindCompact, Egroup: 1}}
	keep, dropped := safeTruncations(tasks, res)
	if len(keep) != 3 || len(dropped) != 0 {
		t.Fatalf("complete removal: kept %v dropped %v", keep, dropped)
	}
	res.removalIncomplete = true
	keep, dropped = safeTruncations(tasks, res)
	if len(dropped) != 1 || dropped[0].Egroup != 1 || len(keep) != 2 {
		t.Fatalf("incomplete removal: kept %v dropped %v", keep, dropped)
	}
}

// TestCuratorErasureCodesColdData: on one node with eight devices, a cold
// any=3 bucket set to ec=4+2 ends with about 1.5x instead of 3x raw space;
// losing any two strips' devices keeps every object readable and the
// Curator rebuilds the strips elsewhere; scrubbing checks strips and
// parity; hot erasure-coded data returns to replicas.
func TestCuratorErasureCodesColdData(t *testing.T) {
	e := newEnv(t, "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	e.l.CreateBucket(ctx, "archive", "", model.MustParseVector("any=3"))
	if err := e.l.SetBucketTransform(ctx, "archive", meta.BucketTransform{EC: "4+2", ColdAfter: 1}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := 0; i < 12; i++ {
		k := fmt.Sprintf("blob-%02d", i)
		want[k] = data(uint64(100+i), 50_000+i*37_000)
		if _, err := e.l.Put(ctx, "archive", k, bytes.NewReader(want[k]), putOpts(want[k], "any=3")); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for k, b := range want {
			_, rc, err := e.l.Get(ctx, "archive", k, 0, -1)
			if err != nil {
				t.Fatalf("%s: get %s: %v", when, k, err)
			}
			var got bytes.Buffer
			_, err = got.ReadFrom(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got.Bytes(), b) {
				t.Fatalf("%s: %s: %d bytes, err %v", when, k, got.Len(), err)
			}
		}
	}
	var logical int64
	for _, b := range want {
		logical += int64(len(b))
	}
	before, _, _ := e.physical()
	rec := e.run("full")
	t.Logf("job 1: done %v transformed %v errors %v", rec.Done, rec.Transformed, rec.Errors)
	if rec.Done["ec-encode"] == 0 {
		t.Fatalf("nothing erasure coded: %v %v", rec.Done, rec.Errors)
	}
	e.run("full") // removes the emptied replicated egroups
	after, _, _ := e.physical()
	ecPhys := int64(0)
	p := []byte(meta.PrefixEgroup)
	items, _ := e.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	for _, it := range items {
		var eg meta.Egroup
		meta.Decode(it.Value, &eg)
		if eg.EC == nil {
			t.Errorf("egroup %s left replicated: %+v", it.Key, eg)
			continue
		}
		ecPhys += object.FileSize(eg) * int64(len(eg.Replicas))
	}
	_ = after
	t.Logf("logical %d; replicated any=3 %d bytes (%.2fx); 4+2 %d bytes (%.2fx)", logical, before, float64(before)/float64(logical), ecPhys, float64(ecPhys)/float64(logical))
	if r := float64(ecPhys) / float64(logical); r < 1.45 || r > 1.65 {
		t.Errorf("4+2 stripes hold %.2fx the logical bytes, want about 1.5x", r)
	}
	check("encoded")
	loc, _ := e.l.Locate(ctx, "archive", "blob-00")
	if loc.Extents[0].Transform != "ec 4+2" {
		t.Errorf("locate shows %q, want ec 4+2", loc.Extents[0].Transform)
	}

	// Lose the devices of two strips of the first stripe.
	eg, _, _ := e.l.Egroup(ctx, loc.Extents[0].Egroup)
	var failed []model.DeviceID
	for _, i := range []int{1, 5} {
		for _, d := range e.devs {
			if d.ID() == eg.Replicas[i].Device {
				d.MarkFailed()
				failed = append(failed, d.ID())
			}
		}
	}
	check("two strip devices failed")
	rec = e.run("partial")
	t.Logf("recovery: planned %v done %v errors %v", rec.Planned, rec.Done, rec.Errors)
	if rec.Done["rebuild-strips"] == 0 {
		t.Fatalf("lost strips not rebuilt: %v %v", rec.Done, rec.Errors)
	}
	eg, _, _ = e.l.Egroup(ctx, loc.Extents[0].Egroup)
	for _, r := range eg.Replicas {
		for _, f := range failed {
			if r.Device == f {
				t.Errorf("strip still on failed device %s", f)
			}
		}
	}
	check("rebuilt")
	// Scrub verifies strips and parity of every stripe.
	rec = e.run("full")
	if rec.Scrubbed == 0 || rec.BadFound != 0 || len(rec.Errors) != 0 {
		t.Errorf("scrub after rebuild: scrubbed %d bad %d errors %v", rec.Scrubbed, rec.BadFound, rec.Errors)
	}
	// Hot again: back to replicas.
	for i := 0; i < 5; i++ {
		check("hot")
	}
	e.l.FlushAccess(ctx)
	rec = e.run("full")
	t.Logf("hot: done %v", rec.Done)
	if rec.Done["ec-decode"] == 0 {
		t.Fatalf("hot stripes not decoded: %v %v", rec.Done, rec.Errors)
	}
	loc, _ = e.l.Locate(ctx, "archive", "blob-00")
	if g, _, _ := e.l.Egroup(ctx, loc.Extents[0].Egroup); g.EC != nil || len(g.Replicas) != 3 {
		t.Errorf("hot data not back on 3 replicas: %+v", g)
	}
	check("decoded")
}

// TestCuratorDedup: identical data written to a dedup bucket ends sharing
// one copy after a full scan (bytes compared first); deleting one object
// leaves the others intact, and a clone of a snapshot keeps reading data
// whose objects were deleted from the bucket since.
func TestCuratorDedup(t *testing.T) {
	e := newEnv(t, "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	e.l.CreateBucket(ctx, "images", "", model.Vector{})
	if err := e.l.SetBucketTransform(ctx, "images", meta.BucketTransform{Dedup: true}); err != nil {
		t.Fatal(err)
	}
	// Extents are 64 KiB here: a "VM image" of 64 KiB blocks drawn from a
	// small pool, plus three identical copies of one object.
	pool := [][]byte{data(1, 64<<10), data(2, 64<<10), data(3, 64<<10)}
	want := map[string][]byte{}
	for i := 0; i < 4; i++ {
		var img []byte
		for j := 0; j < 8; j++ {
			img = append(img, pool[(i+j)%3]...)
		}
		want[fmt.Sprintf("vm%d.img", i)] = img
	}
	same := data(9, 200_000)
	for i := 0; i < 3; i++ {
		want[fmt.Sprintf("copy%d", i)] = same
	}
	for k, b := range want {
		if _, err := e.l.Put(ctx, "images", k, bytes.NewReader(b), putOpts(b, "hdd=2")); err != nil {
			t.Fatal(err)
		}
	}
	check := func(bucket, when string, keys map[string][]byte) {
		t.Helper()
		for k, b := range keys {
			_, rc, err := e.l.Get(ctx, bucket, k, 0, -1)
			if err != nil {
				t.Fatalf("%s: get %s/%s: %v", when, bucket, k, err)
			}
			var got bytes.Buffer
			_, err = got.ReadFrom(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got.Bytes(), b) {
				t.Fatalf("%s: %s/%s: %d bytes, err %v", when, bucket, k, got.Len(), err)
			}
		}
	}
	before, _, _ := e.physical()
	rec := e.run("full")
	t.Logf("dedup job: planned %v done %v transformed %v errors %v", rec.Planned, rec.Done, rec.Transformed, rec.Errors)
	if rec.Done["dedup"] == 0 {
		t.Fatalf("no dedup: %v", rec.Done)
	}
	check("images", "deduplicated", want)
	// Distinct stored locations of all extents now: the pool's 3 blocks,
	// the copies' 4 extents (3×64 KiB + a tail).
	locs := map[[2]int64]bool{}
	shared := 0
	for k := range want {
		loc, _ := e.l.Locate(ctx, "images", k)
		for _, x := range loc.Extents {
			locs[[2]int64{int64(x.Egroup), x.EgroupOff}] = true
			if x.Shares != 0 {
				shared++
			}
		}
	}
	t.Logf("%d distinct stored extents, %d extents share another's bytes", len(locs), shared)
	if len(locs) != 3+4 {
		t.Errorf("%d distinct stored extents, want 7", len(locs))
	}
	// GC reclaims the duplicates' bytes.
	for i := 0; i < 3; i++ {
		e.run("full")
	}
	after, _, _ := e.physical()
	t.Logf("physical %d → %d bytes", before, after)
	if after*3 > before {
		t.Errorf("physical %d → %d: duplicates not reclaimed", before, after)
	}
	check("images", "after GC", want)
	// A snapshot and a clone of it keep their data after the objects go.
	if _, err := e.l.CreateSnapshot(ctx, "images", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Clone(ctx, "images", "s1", "images-s1"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"copy0", "vm0.img", "vm1.img"} {
		if err := e.l.Delete(ctx, "images", k); err != nil {
			t.Fatal(err)
		}
	}
	left := map[string][]byte{}
	for k, b := range want {
		if k != "copy0" && k != "vm0.img" && k != "vm1.img" {
			left[k] = b
		}
	}
	for i := 0; i < 3; i++ {
		e.run("full")
	}
	check("images", "after deletes", left)
	check("images-s1", "clone of the snapshot", want)
}
