package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// logText is compressible data: JSON log lines with varying fields.
func logText(seed uint64, n int) []byte {
	var b bytes.Buffer
	r := payload(seed, 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"level":"info","path":"/api/v1/items/%d","status":%d,"bytes":%d}`+"\n",
			1700000000+i, int(r[i%64])*i, 200+int(r[(i+1)%64]%3)*100, i*int(r[(i+2)%64]))
	}
	return b.Bytes()[:n]
}

type extentRec struct {
	id  uint64
	rev int64
	x   meta.Extent
}

// extentsIn lists the extent records that point into egroup id.
func (e *env) extentsIn(id uint64) []extentRec {
	e.t.Helper()
	p := []byte(meta.PrefixExtent)
	items, err := e.kv.Scan(context.Background(), p, meta.PrefixEnd(p), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []extentRec
	for _, it := range items {
		var x meta.Extent
		if err := meta.Decode(it.Value, &x); err != nil {
			e.t.Fatal(err)
		}
		if x.Egroup == id {
			xid, _ := meta.ParseID(it.Key)
			out = append(out, extentRec{xid, it.ModRev, x})
		}
	}
	return out
}

// egroupOf returns the egroup of an object's first extent.
func (e *env) egroupOf(bucket, key string) uint64 {
	e.t.Helper()
	loc, err := e.l.Locate(context.Background(), bucket, key)
	if err != nil || len(loc.Extents) == 0 {
		e.t.Fatalf("locate %s/%s: %v", bucket, key, err)
	}
	return loc.Extents[0].Egroup
}

func (e *env) source(id uint64) RewriteSource {
	e.t.Helper()
	_, rev, err := e.l.Egroup(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	src := RewriteSource{Egroup: id, ModRev: rev}
	for _, x := range e.extentsIn(id) {
		src.Extents = append(src.Extents, ExtentMove{ID: x.id, ModRev: x.rev, Len: x.x.Len})
	}
	return src
}

func (e *env) mustRead(bucket, key string, want []byte) {
	e.t.Helper()
	got, err := e.get(bucket, key, 0, -1)
	if err != nil || !bytes.Equal(got, want) {
		e.t.Fatalf("read %s/%s: %d bytes, err %v (want %d bytes)", bucket, key, len(got), err, len(want))
	}
	for _, rg := range [][2]int64{{0, 1}, {int64(len(want)) / 3, int64(len(want)) / 2}, {int64(len(want)) - 7, 7}} {
		if rg[0] < 0 || rg[0]+rg[1] > int64(len(want)) || rg[1] <= 0 {
			continue
		}
		got, err := e.get(bucket, key, rg[0], rg[1])
		if err != nil || !bytes.Equal(got, want[rg[0]:rg[0]+rg[1]]) {
			e.t.Fatalf("read %s/%s range %v: err %v", bucket, key, rg, err)
		}
	}
}

func TestRewriteCompressesAndReadsBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "logs", "", model.Vector{})
	objs := map[string][]byte{}
	for i, n := range []int{1000, 70_000, 300_000, 700_000} {
		k := fmt.Sprintf("log-%d", i)
		objs[k] = logText(uint64(i), n)
		e.put("logs", k, objs[k], "ssd=1,hdd=1")
	}
	// Incompressible data in an egroup of its own (another vector).
	random := payload(9, 400_000)
	e.put("logs", "media", random, "hdd=2")
	if _, err := e.l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	textEgs := map[uint64]bool{}
	for k := range objs {
		loc, _ := e.l.Locate(ctx, "logs", k)
		for _, x := range loc.Extents {
			textEgs[x.Egroup] = true
		}
	}
	mediaEg := e.egroupOf("logs", "media")
	var srcs []RewriteSource
	var before int64
	for id := range textEgs {
		srcs = append(srcs, e.source(id))
		eg, _, _ := e.l.Egroup(ctx, id)
		before += eg.Size
	}
	srcs = append(srcs, e.source(mediaEg))
	mediaBefore, mediaRev, _ := e.l.Egroup(ctx, mediaEg)
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("ssd=1,hdd=1"), Codec: "zstd", Label: "compress", Sources: srcs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrite: %+v (text egroups held %d bytes)", res, before)
	if res.Stale != 0 || res.Moved == 0 {
		t.Fatalf("rewrite %+v: want every text extent moved, none stale", res)
	}
	if len(res.Incompressible) != 1 || res.Incompressible[0] != mediaEg {
		t.Fatalf("incompressible %v, want [%x]", res.Incompressible, mediaEg)
	}
	if res.Stored*3 > res.Logical {
		t.Errorf("JSON logs stored in %d of %d bytes; want at least 3x smaller", res.Stored, res.Logical)
	}
	// The incompressible egroup is remembered and otherwise untouched.
	mediaAfter, rev, _ := e.l.Egroup(ctx, mediaEg)
	if !mediaAfter.Incompressible || mediaAfter.Size != mediaBefore.Size || rev == mediaRev {
		t.Errorf("media egroup after: incompressible=%v size %d (was %d)", mediaAfter.Incompressible, mediaAfter.Size, mediaBefore.Size)
	}
	for k, want := range objs {
		loc, _ := e.l.Locate(ctx, "logs", k)
		for _, x := range loc.Extents {
			eg, _, _ := e.l.Egroup(ctx, x.Egroup)
			if eg.Codec != "zstd" || eg.State != meta.EgroupSealed || eg.Logical <= eg.Size {
				t.Errorf("%s: egroup %x codec %q state %d logical %d size %d", k, x.Egroup, eg.Codec, eg.State, eg.Logical, eg.Size)
			}
		}
		e.mustRead("logs", k, want)
	}
	e.mustRead("logs", "media", random)
	// Compressed data survives a restart (recovery sees compressed
	// egroups as ordinary replicas of their stored size).
	e.restart()
	for k, want := range objs {
		e.mustRead("logs", k, want)
	}
	// A flipped byte in a stored frame is caught by the slice checksum on
	// the first replica; the read falls back and the replica is marked bad.
	k := "log-3"
	loc, _ := e.l.Locate(ctx, "logs", k)
	x := loc.Extents[0]
	var xr meta.Extent
	meta.GetRecord(ctx, e.kv, meta.ExtentKey(x.Extent), &xr)
	if xr.Codec != "zstd" {
		t.Fatalf("extent codec %q", xr.Codec)
	}
	var ssd meta.EgroupReplica
	for _, r := range x.Replicas {
		if r.Tier == model.TierSSD {
			ssd = r
		}
	}
	dir := e.specs[0].Path
	flip(t, filepath.Join(dir, extent.FileName(x.Egroup)), xr.Off+extent.HeaderSize+3)
	e.restart() // drop cached file handles and locations
	e.mustRead("logs", k, objs[k])
	eg, _, _ := e.l.Egroup(ctx, x.Egroup)
	for _, r := range eg.Replicas {
		if r.Device == ssd.Device && !r.Bad {
			t.Errorf("corrupt ssd replica of compressed egroup not marked bad")
		}
	}

	// Hot again: decompress back into plain egroups.
	var back []RewriteSource
	for _, x := range loc.Extents {
		back = append(back, e.source(x.Egroup))
	}
	res, err = e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("ssd=1,hdd=1"), Label: "decompress", Sources: back})
	if err != nil || res.Moved == 0 {
		t.Fatalf("decompress: %+v %v", res, err)
	}
	loc, _ = e.l.Locate(ctx, "logs", k)
	for _, x := range loc.Extents {
		var xr meta.Extent
		meta.GetRecord(ctx, e.kv, meta.ExtentKey(x.Extent), &xr)
		eg, _, _ := e.l.Egroup(ctx, x.Egroup)
		if xr.Codec != "" || eg.Codec != "" {
			t.Errorf("after decompress: extent codec %q egroup codec %q", xr.Codec, eg.Codec)
		}
	}
	e.mustRead("logs", k, objs[k])
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestRewriteStaleExtentIsLeftAlone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	a, b := logText(1, 200_000), logText(2, 200_000)
	e.put("bkt", "a", a, "hdd=2")
	e.put("bkt", "b", b, "hdd=2")
	e.l.SealIdle(ctx, 0)
	src := e.source(e.egroupOf("bkt", "a"))
	// "b" is overwritten after the decision: its extent record is not
	// touched (its old extent is now dead, its record revision unchanged),
	// but an extent whose record changed must not switch. Simulate a
	// concurrent move by bumping one record's revision.
	x := src.Extents[0]
	var rec meta.Extent
	meta.GetRecord(ctx, e.kv, meta.ExtentKey(x.ID), &rec)
	var txn meta.Txn
	txn.Put(meta.ExtentKey(x.ID), meta.Encode(rec))
	if _, err := e.kv.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), Codec: "zstd", Sources: []RewriteSource{src}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stale != 1 || res.Moved != len(src.Extents)-1 {
		t.Fatalf("rewrite %+v: want exactly the bumped extent stale", res)
	}
	var now meta.Extent
	meta.GetRecord(ctx, e.kv, meta.ExtentKey(x.ID), &now)
	if !reflect.DeepEqual(now, rec) {
		t.Fatalf("stale extent record changed: %+v → %+v", rec, now)
	}
	e.mustRead("bkt", "a", a)
	e.mustRead("bkt", "b", b)
}

func TestTruncateEgroupDeadTail(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	a, b, c := payload(1, 100_000), payload(2, 150_000), payload(3, 300_000)
	e.put("bkt", "a", a, "ssd=1,hdd=1")
	e.put("bkt", "b", b, "ssd=1,hdd=1")
	e.put("bkt", "c", c, "ssd=1,hdd=1")
	id := e.egroupOf("bkt", "a")
	if e.egroupOf("bkt", "c") != id {
		t.Skip("objects landed in different egroups")
	}
	e.l.SealIdle(ctx, 0)
	if err := e.l.Delete(ctx, "bkt", "c"); err != nil {
		t.Fatal(err)
	}
	// Data removal's first stage deletes c's extent records.
	locC := map[uint64]bool{}
	var keep int64
	var dead []ExtentRev
	for _, x := range e.extentsIn(id) {
		end := x.x.Off + extent.EncodedLen(x.x.StoredLen())
		if x.x.Off >= extent.EncodedLen(int64(len(a)))+extent.EncodedLen(int64(len(b))) {
			dead = append(dead, ExtentRev{ID: x.id, ModRev: x.rev})
			locC[x.id] = true
			continue
		}
		keep = max(keep, end)
	}
	if removed, _, err := e.l.RemoveExtents(ctx, dead); err != nil || removed != len(dead) {
		t.Fatalf("remove extents: %d %v", removed, err)
	}
	eg, rev, _ := e.l.Egroup(ctx, id)
	if _, err := e.l.TruncateEgroup(ctx, id, rev-1, keep); !errors.Is(err, ErrStale) {
		t.Fatalf("truncate at an old revision: %v, want ErrStale", err)
	}
	if _, err := e.l.TruncateEgroup(ctx, id, rev, keep-5); err == nil {
		t.Fatalf("truncate into the middle of a slice accepted")
	}
	freed, err := e.l.TruncateEgroup(ctx, id, rev, keep)
	if err != nil {
		t.Fatal(err)
	}
	if want := (eg.Size - keep) * int64(len(eg.Replicas)); freed != want {
		t.Errorf("freed %d, want %d", freed, want)
	}
	after, _, _ := e.l.Egroup(ctx, id)
	if after.Size != keep {
		t.Errorf("committed size %d, want %d", after.Size, keep)
	}
	for _, r := range after.Replicas {
		st, _ := e.local.Store(r.Device)
		if sz, _ := st.Size(id); sz != keep {
			t.Errorf("replica on %s is %d bytes, want %d", r.Device, sz, keep)
		}
	}
	e.mustRead("bkt", "a", a)
	e.mustRead("bkt", "b", b)
	e.restart()
	e.mustRead("bkt", "a", a)
	e.mustRead("bkt", "b", b)
}

// TestTruncateCrashBetweenSwitchAndCut: the committed size switched but
// the files were not cut yet (a crash): recovery cuts them at start-up.
func TestTruncateCrashBetweenSwitchAndCut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	a := payload(1, 100_000)
	e.put("bkt", "a", a, "hdd=2")
	e.put("bkt", "z", payload(2, 100_000), "hdd=2")
	id := e.egroupOf("bkt", "a")
	e.l.SealIdle(ctx, 0)
	eg, rev, _ := e.l.Egroup(ctx, id)
	keep := extent.EncodedLen(int64(len(a)))
	old := eg.Size
	eg.Size = keep
	if err := e.l.SwitchEgroup(ctx, id, rev, eg); err != nil {
		t.Fatal(err)
	}
	e.restart()
	for _, r := range eg.Replicas {
		st, _ := e.local.Store(r.Device)
		if sz, _ := st.Size(id); sz != keep {
			t.Errorf("after recovery replica on %s is %d bytes (was %d), want %d", r.Device, sz, old, keep)
		}
	}
	e.mustRead("bkt", "a", a)
}

// TestRewriteMixedEgroupMovesWhatCompresses: writers of different buckets
// share egroups, so one egroup can hold mostly incompressible media and
// some JSON logs. Compressing it as a whole does not pay; the log extents
// still move, compressed, and the media stays where it is, with the
// egroup remembered as incompressible.
func TestRewriteMixedEgroupMovesWhatCompresses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "mixed", "", model.Vector{})
	media := payload(3, 700_000)
	logs := logText(4, 30_000)
	e.put("mixed", "media", media, "hdd=1")
	e.put("mixed", "log", logs, "hdd=1")
	if _, err := e.l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	id := e.egroupOf("mixed", "media")
	if e.egroupOf("mixed", "log") != id {
		t.Fatal("the two objects are not in one egroup; the test needs them together")
	}
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=1"), Codec: "zstd", Label: "compress", Sources: []RewriteSource{e.source(id)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Incompressible) != 1 || res.Incompressible[0] != id {
		t.Fatalf("incompressible %v, want [%x]", res.Incompressible, id)
	}
	if res.Moved == 0 || res.Logical != int64(len(logs)) || res.Stored*3 > res.Logical {
		t.Fatalf("rewrite %+v: want only the %d log bytes moved, compressed", res, len(logs))
	}
	if e.egroupOf("mixed", "media") != id {
		t.Fatal("incompressible media moved")
	}
	if lid := e.egroupOf("mixed", "log"); lid == id {
		t.Fatal("log extents stayed in the incompressible egroup")
	} else if eg, _, _ := e.l.Egroup(ctx, lid); eg.Codec != "zstd" {
		t.Fatalf("log egroup codec %q, want zstd", eg.Codec)
	}
	if eg, _, _ := e.l.Egroup(ctx, id); !eg.Incompressible {
		t.Fatal("mixed egroup not marked incompressible")
	}
	e.mustRead("mixed", "media", media)
	e.mustRead("mixed", "log", logs)
}

// TestWritersShareEgroupsOnlyWithinATransformClass: objects of a bucket
// that compresses and of one that does not, written alternately with the
// same vector, land in different egroups, so the Curator never finds an
// egroup whose buckets disagree about compressing it.
func TestWritersShareEgroupsOnlyWithinATransformClass(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, b := range []string{"logs", "plain"} {
		if err := e.l.CreateBucket(ctx, b, "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.l.UpdateBucket(ctx, "logs", func(b *meta.Bucket) error {
		b.Transform = &meta.BucketTransform{Compress: "zstd"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		e.put("logs", fmt.Sprint(i), logText(uint64(i), 5_000), "hdd=1")
		e.put("plain", fmt.Sprint(i), payload(uint64(i), 5_000), "hdd=1")
	}
	egs := map[string]map[uint64]bool{"logs": {}, "plain": {}}
	for b := range egs {
		for i := range 6 {
			egs[b][e.egroupOf(b, fmt.Sprint(i))] = true
		}
	}
	if len(egs["logs"]) != 1 || len(egs["plain"]) != 1 {
		t.Fatalf("egroups %v: want one per bucket (small writes share a pooled egroup)", egs)
	}
	for id := range egs["logs"] {
		if egs["plain"][id] {
			t.Fatalf("egroup %x holds objects of both buckets", id)
		}
	}
}
