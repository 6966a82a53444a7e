package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func (e *env) putS(bucket, key, body string) ObjectInfo {
	e.t.Helper()
	info, err := e.l.Put(context.Background(), bucket, key, strings.NewReader(body), PutOptions{Size: int64(len(body))})
	if err != nil {
		e.t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return info
}

// read returns a key's body, or "<absent>" / "<marker>".
func (e *env) read(bucket, key, version string) string {
	e.t.Helper()
	_, rc, err := e.l.GetVersion(context.Background(), bucket, key, version, 0, -1)
	if errors.Is(err, ErrDeleteMarker) {
		return "<marker>"
	}
	if errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchVersion) {
		return "<absent>"
	}
	if err != nil {
		e.t.Fatalf("get %s/%s@%s: %v", bucket, key, version, err)
	}
	defer rc.Close()
	var b bytes.Buffer
	b.ReadFrom(rc)
	return b.String()
}

func (e *env) listKeys(bucket string) string {
	e.t.Helper()
	res, err := e.l.List(context.Background(), bucket, ListOptions{})
	if err != nil {
		e.t.Fatalf("list %s: %v", bucket, err)
	}
	var out []string
	for _, o := range res.Objects {
		out = append(out, o.Key+"="+e.read(bucket, o.Key, ""))
	}
	return strings.Join(out, " ")
}

// TestVersioningLifecycle walks S3 versioning: versions, reads by ID,
// delete markers, version listing, permanent deletes that restore the
// previous version, and the "null" version of pre-versioning objects.
func TestVersioningLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "vbk", "", model.Vector{})
	e.putS("vbk", "k", "before") // written before versioning: the null version
	if err := e.l.SetVersioning(ctx, "vbk", "Sometimes"); !errors.Is(err, ErrInvalidVersioning) {
		t.Fatalf("bad state: %v", err)
	}
	if err := e.l.SetVersioning(ctx, "vbk", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v1 := e.putS("vbk", "k", "one")
	v2 := e.putS("vbk", "k", "two")
	if v1.VersionID == "" || v1.VersionID == v2.VersionID || v1.VersionID == NullVersion {
		t.Fatalf("version IDs %q, %q", v1.VersionID, v2.VersionID)
	}
	if got := e.read("vbk", "k", ""); got != "two" {
		t.Fatalf("current: %q", got)
	}
	for id, want := range map[string]string{v1.VersionID: "one", v2.VersionID: "two", NullVersion: "before", "nope": "<absent>"} {
		if got := e.read("vbk", "k", id); got != want {
			t.Fatalf("version %s: %q, want %q", id, got, want)
		}
	}
	del, err := e.l.DeleteObject(ctx, "vbk", "k", "")
	if err != nil || !del.DeleteMarker || del.VersionID == "" {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	if _, err := e.l.Head(ctx, "vbk", "k"); !errors.Is(err, ErrDeleteMarker) {
		t.Fatalf("head after delete: %v", err)
	}
	if id, ok := DeleteMarkerOf(func() error { _, err := e.l.Head(ctx, "vbk", "k"); return err }()); !ok || id != del.VersionID {
		t.Fatalf("marker version %q", id)
	}
	if got := e.listKeys("vbk"); got != "" {
		t.Fatalf("listing shows deleted keys: %s", got)
	}
	lv, err := e.l.ListVersions(ctx, "vbk", VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range lv.Versions {
		s := v.VersionID
		if v.DeleteMarker {
			s = "marker"
		}
		if v.IsLatest {
			s += "*"
		}
		got = append(got, s)
	}
	want := []string{"marker*", v2.VersionID, v1.VersionID, NullVersion}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	// Paging through the versions one at a time gives the same list.
	var paged []string
	o := VersionListOptions{MaxKeys: 1}
	for {
		page, err := e.l.ListVersions(ctx, "vbk", o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			paged = append(paged, v.VersionID)
		}
		if !page.Truncated {
			break
		}
		o.KeyMarker, o.VersionMarker = page.NextKeyMarker, page.NextVersionMarker
	}
	if len(paged) != 4 || paged[1] != v2.VersionID || paged[3] != NullVersion {
		t.Fatalf("paged versions %v", paged)
	}
	// Removing the marker for good restores v2; removing v2 restores v1.
	if _, err := e.l.DeleteObject(ctx, "vbk", "k", del.VersionID); err != nil {
		t.Fatal(err)
	}
	if got := e.read("vbk", "k", ""); got != "two" {
		t.Fatalf("after removing the marker: %q", got)
	}
	if _, err := e.l.DeleteObject(ctx, "vbk", "k", v2.VersionID); err != nil {
		t.Fatal(err)
	}
	if got := e.read("vbk", "k", ""); got != "one" {
		t.Fatalf("after removing the current version: %q", got)
	}
	if got := e.read("vbk", "k", v2.VersionID); got != "<absent>" {
		t.Fatalf("removed version still readable: %q", got)
	}
	// A versioned bucket is not empty while versions remain.
	for _, id := range []string{v1.VersionID, NullVersion} {
		if _, err := e.l.DeleteObject(ctx, "vbk", "k", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.l.DeleteBucket(ctx, "vbk"); err != nil {
		t.Fatalf("delete the emptied bucket: %v", err)
	}
}

// TestVersioningSuspended: writes while suspended replace the one null
// version and keep the others.
func TestVersioningSuspended(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "sbk", "", model.Vector{})
	e.l.SetVersioning(ctx, "sbk", VersioningEnabled)
	a := e.putS("sbk", "k", "a")
	e.l.SetVersioning(ctx, "sbk", VersioningSuspended)
	n1 := e.putS("sbk", "k", "null-1")
	n2 := e.putS("sbk", "k", "null-2")
	if n1.VersionID != NullVersion || n2.VersionID != NullVersion {
		t.Fatalf("suspended writes: %q %q", n1.VersionID, n2.VersionID)
	}
	lv, _ := e.l.ListVersions(ctx, "sbk", VersionListOptions{})
	if len(lv.Versions) != 2 || lv.Versions[0].VersionID != NullVersion || lv.Versions[1].VersionID != a.VersionID {
		t.Fatalf("versions: %+v", lv.Versions)
	}
	if e.read("sbk", "k", NullVersion) != "null-2" || e.read("sbk", "k", a.VersionID) != "a" {
		t.Fatal("wrong version contents")
	}
}

// TestSnapshots: a snapshot is a frozen read-only view; the bucket moves
// on; deleting the snapshot lets the Curator's collection reclaim the
// history only it needed.
func TestSnapshots(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "photos", "", model.Vector{})
	e.putS("photos", "a", "a1")
	e.putS("photos", "b", "b1")
	before := e.countPrefix(meta.PrefixVersion)
	s1, err := e.l.CreateSnapshot(ctx, "photos", "monday")
	if err != nil {
		t.Fatal(err)
	}
	if after := e.countPrefix(meta.PrefixVersion); after != before {
		t.Fatalf("taking a snapshot wrote %d version records: it must be metadata only", after-before)
	}
	if _, err := e.l.CreateSnapshot(ctx, "photos", "monday"); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("duplicate snapshot: %v", err)
	}
	for _, bad := range []string{"Bad", "a--b", "", strings.Repeat("x", 60)} {
		if _, err := e.l.CreateSnapshot(ctx, "photos", bad); err == nil {
			t.Fatalf("snapshot name %q accepted", bad)
		}
	}
	e.putS("photos", "a", "a2")
	if err := e.l.Delete(ctx, "photos", "b"); err != nil {
		t.Fatal(err)
	}
	e.putS("photos", "c", "c2")
	if got := e.listKeys("photos"); got != "a=a2 c=c2" {
		t.Fatalf("live: %s", got)
	}
	if got := e.listKeys(s1.Served); got != "a=a1 b=b1" {
		t.Fatalf("snapshot %s: %s", s1.Served, got)
	}
	if _, err := e.l.Put(ctx, s1.Served, "x", strings.NewReader("x"), PutOptions{Size: 1}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to a snapshot: %v", err)
	}
	if err := e.l.Delete(ctx, s1.Served, "a"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("delete in a snapshot: %v", err)
	}
	if err := e.l.CreateBucket(ctx, "x--snap-y", "", model.Vector{}); !errors.Is(err, ErrInvalidBucketName) {
		t.Fatalf("reserved bucket name: %v", err)
	}
	if err := e.l.DeleteBucket(ctx, "photos"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("delete a bucket with snapshots: %v", err)
	}
	// A second snapshot, then more changes: each snapshot keeps its view.
	s2, _ := e.l.CreateSnapshot(ctx, "photos", "tuesday")
	e.putS("photos", "a", "a3")
	if got := e.listKeys(s2.Served); got != "a=a2 c=c2" {
		t.Fatalf("second snapshot: %s", got)
	}
	if got := e.listKeys(s1.Served); got != "a=a1 b=b1" {
		t.Fatalf("first snapshot after more writes: %s", got)
	}
	// Nothing is collectable while both snapshots stand.
	for _, k := range []string{"a", "b"} {
		if n, err := e.l.CollectVersions(ctx, "photos", k); err != nil || n != 0 {
			t.Fatalf("collect %s with snapshots: %d, %v", k, n, err)
		}
	}
	if err := e.l.DeleteSnapshot(ctx, "photos", "monday"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Head(ctx, s1.Served, "a"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("deleted snapshot still readable: %v", err)
	}
	// a1 and b's history were only for monday; a2 stays for tuesday.
	na, _ := e.l.CollectVersions(ctx, "photos", "a")
	nb, _ := e.l.CollectVersions(ctx, "photos", "b")
	if na != 1 || nb != 2 {
		t.Fatalf("collected %d of a's and %d of b's records, want 1 and 2", na, nb)
	}
	if got := e.listKeys(s2.Served); got != "a=a2 c=c2" {
		t.Fatalf("tuesday after collecting monday's history: %s", got)
	}
	e.l.DeleteSnapshot(ctx, "photos", "tuesday")
	if n, _ := e.l.CollectVersions(ctx, "photos", "a"); n != 1 {
		t.Fatalf("collect after the last snapshot: %d", n)
	}
	if n := e.countPrefix(meta.PrefixVersion); n != 0 {
		t.Fatalf("%d version records left with no snapshot", n)
	}
}

func (e *env) countPrefix(p string) int {
	e.t.Helper()
	items, err := e.kv.Scan(context.Background(), []byte(p), meta.PrefixEnd([]byte(p)), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(items)
}

// TestSnapshotSeesExactlyWhatCameBefore: interleaved writes and snapshots;
// each snapshot sees the value acknowledged last before it was taken.
func TestSnapshotSeesExactlyWhatCameBefore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "seq", "", model.Vector{})
	for i := range 12 {
		e.putS("seq", "k", fmt.Sprint("v", i))
		if _, err := e.l.CreateSnapshot(ctx, "seq", fmt.Sprint("s", i)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			e.l.Delete(ctx, "seq", "k")
		}
	}
	for i := range 12 {
		if got := e.read(fmt.Sprint("seq--snap-s", i), "k", ""); got != fmt.Sprint("v", i) {
			t.Fatalf("snapshot s%d sees %q", i, got)
		}
	}
}

// TestClones: a clone shares its source's objects and diverges from it
// both ways; deleting it releases its pin.
func TestClones(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "src", "", model.Vector{})
	e.putS("src", "a", "a1")
	e.putS("src", "b", "b1")
	if _, err := e.l.Clone(ctx, "src", "", "dev"); err != nil {
		t.Fatal(err)
	}
	if got := e.listKeys("dev"); got != "a=a1 b=b1" {
		t.Fatalf("fresh clone: %s", got)
	}
	e.putS("dev", "a", "a-dev")
	e.l.Delete(ctx, "dev", "b")
	e.putS("dev", "d", "d-dev")
	e.putS("src", "b", "b2")
	e.putS("src", "c", "c2")
	if got := e.listKeys("src"); got != "a=a1 b=b2 c=c2" {
		t.Fatalf("source after clone writes: %s", got)
	}
	if got := e.listKeys("dev"); got != "a=a-dev d=d-dev" {
		t.Fatalf("clone after source writes: %s", got)
	}
	// A clone of a snapshot of the clone.
	if _, err := e.l.CreateSnapshot(ctx, "dev", "v1"); err != nil {
		t.Fatal(err)
	}
	e.putS("dev", "e", "e-dev")
	if _, err := e.l.Clone(ctx, "dev", "v1", "dev2"); err != nil {
		t.Fatal(err)
	}
	if got := e.listKeys("dev2"); got != "a=a-dev d=d-dev" {
		t.Fatalf("clone of a clone's snapshot: %s", got)
	}
	if err := e.l.DeleteBucket(ctx, "src"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("delete a bucket a clone reads through: %v", err)
	}
	snaps, _ := e.l.Snapshots(ctx, "src")
	if len(snaps) != 1 || snaps[0].Clone != "dev" {
		t.Fatalf("source pins: %+v", snaps)
	}
	// Empty and delete the second-level clone: its pin on dev goes.
	for _, k := range []string{"a", "d"} {
		e.l.Delete(ctx, "dev2", k)
	}
	if err := e.l.DeleteBucket(ctx, "dev2"); err != nil {
		t.Fatal(err)
	}
	snaps, _ = e.l.Snapshots(ctx, "dev")
	if len(snaps) != 1 || snaps[0].Name != "v1" {
		t.Fatalf("dev's pins after deleting dev2: %+v", snaps)
	}
}

// TestSnapshotTreeReduction: a chain of clones of snapshots 20 deep reads
// through every level; reduction makes each clone independent with the
// same contents, its own snapshots unchanged, and the pins released.
func TestSnapshotTreeReduction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "lvl00", "", model.Vector{})
	e.putS("lvl00", "root", "r")
	prev := "lvl00"
	for i := 1; i <= 20; i++ {
		name := fmt.Sprintf("lvl%02d", i)
		if _, err := e.l.CreateSnapshot(ctx, prev, "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.Clone(ctx, prev, "s", name); err != nil {
			t.Fatal(err)
		}
		e.putS(name, fmt.Sprint("k", i), fmt.Sprint("v", i))
		if i%5 == 0 {
			e.l.Delete(ctx, name, fmt.Sprint("k", i-1)) // a tombstone masking the parent
		}
		prev = name
	}
	leaf := "lvl20"
	want := e.listKeys(leaf)
	if !strings.Contains(want, "root=r") || strings.Contains(want, "k19=") || !strings.Contains(want, "k20=v20") {
		t.Fatalf("leaf before reduction: %s", want)
	}
	if _, err := e.l.CreateSnapshot(ctx, leaf, "pre"); err != nil {
		t.Fatal(err)
	}
	snapBefore := e.listKeys(leaf + "--snap-pre")
	copied, done, err := e.l.ReduceClone(ctx, leaf, 5)
	if err != nil || done || copied != 5 {
		t.Fatalf("partial reduction: %d copied, done %v, %v", copied, done, err)
	}
	if got := e.listKeys(leaf); got != want {
		t.Fatalf("leaf during reduction: %s", got)
	}
	if _, done, err = e.l.ReduceClone(ctx, leaf, 1000); err != nil || !done {
		t.Fatalf("full reduction: done %v, %v", done, err)
	}
	b, _, _ := e.l.GetBucket(ctx, leaf)
	if b.Parent != nil {
		t.Fatal("reduced clone still has a parent")
	}
	if got := e.listKeys(leaf); got != want {
		t.Fatalf("leaf after reduction: %s, want %s", got, want)
	}
	if got := e.listKeys(leaf + "--snap-pre"); got != snapBefore {
		t.Fatalf("leaf's snapshot after reduction: %s, want %s", got, snapBefore)
	}
	pins, _ := e.l.Snapshots(ctx, "lvl19")
	for _, p := range pins {
		if p.Clone == leaf {
			t.Fatalf("lvl19 still pinned by the reduced clone: %+v", pins)
		}
	}
	// The reduced leaf is a plain bucket: a write to its old parent is
	// invisible, and the lookup no longer walks the chain.
	e.putS("lvl19", "root", "changed")
	if got := e.read(leaf, "root", ""); got != "r" {
		t.Fatalf("reduced leaf sees its old parent's change: %q", got)
	}
}

// BenchmarkDeepCloneHead measures a lookup through a 20-deep chain of
// clones, and after snapshot tree reduction.
func BenchmarkDeepCloneHead(b *testing.B) {
	for _, reduced := range []bool{false, true} {
		b.Run(fmt.Sprintf("reduced=%v", reduced), func(b *testing.B) {
			e := newEnv(b)
			ctx := context.Background()
			e.l.CreateBucket(ctx, "lvl00", "", model.Vector{})
			e.l.Put(ctx, "lvl00", "root", strings.NewReader("r"), PutOptions{Size: 1})
			prev := "lvl00"
			for i := 1; i <= 20; i++ {
				name := fmt.Sprintf("lvl%02d", i)
				e.l.CreateSnapshot(ctx, prev, "s")
				if _, err := e.l.Clone(ctx, prev, "s", name); err != nil {
					b.Fatal(err)
				}
				prev = name
			}
			if reduced {
				if _, done, err := e.l.ReduceClone(ctx, prev, 1000); err != nil || !done {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := e.l.Head(ctx, prev, "root"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSnapshotsDoNotFailWrites: snapshots taken and dropped as fast as
// they go change the bucket's guard under writers; no PUT or DELETE may
// fail for it (a delete used to retry on its stale view until it gave up
// with "too much contention").
func TestSnapshotsDoNotFailWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "busy", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var snaps atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprint("s", i)
			if _, err := e.l.CreateSnapshot(ctx, "busy", name); err != nil {
				t.Errorf("snapshot: %v", err)
				return
			}
			if i >= 3 {
				if err := e.l.DeleteSnapshot(ctx, "busy", fmt.Sprint("s", i-3)); err != nil {
					t.Errorf("drop snapshot: %v", err)
					return
				}
			}
			snaps.Add(1)
		}
	}()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				key := fmt.Sprintf("w%d/%d", w, i%5) // every key is written before it is deleted
				var err error
				if i%3 == 2 {
					_, err = e.l.DeleteObject(ctx, "busy", key, "")
				} else {
					data := payload(uint64(w*100+i), 2048)
					_, err = e.l.Put(ctx, "busy", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("%s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-done
	if failed.Load() != 0 {
		t.Fatalf("%d writes failed", failed.Load())
	}
	if snaps.Load() < 5 {
		t.Fatalf("only %d snapshots during the writes: the test proves nothing", snaps.Load())
	}
}

// TestRepairPins: a snapshot whose creation was cut between its two
// commits (revision pending) and a clone pin whose clone bucket was never
// made are what a crash leaves; RepairPins finishes the first as a
// complete point in time and drops the second, and leaves young pins to
// their creators.
func TestRepairPins(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "pins", "", model.Vector{})
	e.putS("pins", "k", "v1")
	old := e.l.opts.Now().Add(-time.Hour).UnixNano()
	// The first commit of CreateSnapshot and of Clone, then the crash.
	if _, err := e.l.changeBucket(ctx, "pins", func(b *meta.Bucket) error {
		b.Snapshots = append(b.Snapshots,
			meta.BucketSnapshot{Name: "cut", Created: old},
			meta.BucketSnapshot{Name: "clone-ghost", Created: old, Clone: "ghost"},
			meta.BucketSnapshot{Name: "young", Created: e.l.opts.Now().UnixNano()})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.putS("pins", "k", "v2") // kept for the pending pins
	finished, dropped, err := e.l.RepairPins(ctx, "pins", time.Minute)
	if err != nil || finished != 1 || dropped != 1 {
		t.Fatalf("repair: finished %d dropped %d, %v", finished, dropped, err)
	}
	snaps, _ := e.l.Snapshots(ctx, "pins")
	var names []string
	for _, s := range snaps {
		names = append(names, fmt.Sprintf("%s@%v", s.Name, s.Rev != 0))
	}
	if got := strings.Join(names, " "); got != "cut@true young@false" {
		t.Fatalf("pins after repair: %s", got)
	}
	// The finished snapshot is a point in time: the bucket record last
	// changed with the pins' commit, before v2.
	e.putS("pins", "k", "v3")
	if got := e.read("pins--snap-cut", "k", ""); got != "v1" {
		t.Fatalf("repaired snapshot reads %q", got)
	}
	if got := e.read("pins", "k", ""); got != "v3" {
		t.Fatalf("live bucket reads %q", got)
	}
	// Nothing left to do: a second repair changes nothing.
	if f, d, err := e.l.RepairPins(ctx, "pins", time.Minute); err != nil || f+d != 0 {
		t.Fatalf("second repair: %d %d %v", f, d, err)
	}
}

// BenchmarkCreateSnapshot: a snapshot is two commits to the bucket record
// whatever the bucket holds (10 or 10,000 objects); clones likewise.
func BenchmarkCreateSnapshot(b *testing.B) {
	for _, objects := range []int{10, 10000} {
		e := newEnv(b)
		ctx := context.Background()
		e.l.CreateBucket(ctx, "snap", "", model.Vector{})
		for i := range objects {
			if _, err := e.l.Put(ctx, "snap", fmt.Sprintf("k%05d", i), strings.NewReader("x"), PutOptions{Size: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("objects=%d/snapshot", objects), func(b *testing.B) {
			for i := range b.N {
				if _, err := e.l.CreateSnapshot(ctx, "snap", fmt.Sprint("s", i)); err != nil {
					b.Fatal(err)
				}
				if err := e.l.DeleteSnapshot(ctx, "snap", fmt.Sprint("s", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
		clones := 0
		b.Run(fmt.Sprintf("objects=%d/clone", objects), func(b *testing.B) {
			for range b.N {
				clones++
				if _, err := e.l.Clone(ctx, "snap", "", fmt.Sprint("clone-", clones)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestListVersionsDelimiterPages pins that ListVersions with a delimiter
// pages to the end: a page that ends on a common prefix continues after
// every key under it (its NextKeyMarker is the prefix), as List does,
// instead of listing the same prefix again forever.
func TestListVersionsDelimiterPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "vbk", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := e.l.SetVersioning(ctx, "vbk", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/1", "a/1", "a/2", "b", "c/x/y", "d"} {
		e.putS("vbk", k, "x")
	}
	for _, max := range []int{1, 2, 3, 1000} {
		var got []string
		o := VersionListOptions{Delimiter: "/", MaxKeys: max}
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("max-keys %d: no end after %d pages: %v", max, pages, got)
			}
			page, err := e.l.ListVersions(ctx, "vbk", o)
			if err != nil {
				t.Fatal(err)
			}
			// Within a page, prefixes and versions interleave in key order.
			got = append(got, page.CommonPrefixes...)
			for _, v := range page.Versions {
				got = append(got, v.Key)
			}
			if !page.Truncated {
				break
			}
			o.KeyMarker, o.VersionMarker = page.NextKeyMarker, page.NextVersionMarker
		}
		sort.Strings(got)
		if want := "[a/ b c/ d]"; fmt.Sprint(got) != want {
			t.Errorf("max-keys %d: %v, want %s", max, got, want)
		}
	}
	// A key marker inside a prefix continues after the prefix.
	page, err := e.l.ListVersions(ctx, "vbk", VersionListOptions{Delimiter: "/", KeyMarker: "a/1"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(page.CommonPrefixes) != "[c/]" || len(page.Versions) != 2 {
		t.Errorf("after key marker a/1: prefixes %v, %d versions", page.CommonPrefixes, len(page.Versions))
	}
}

// TestListSkipsDeletedOnly pins that a delimiter listing of a versioned
// bucket shows no common prefix whose keys are all delete markers (a
// listing of that prefix is empty), and that a page is truncated only
// when another entry follows, not when only delete markers do.
func TestListSkipsDeletedOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "vbk", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := e.l.SetVersioning(ctx, "vbk", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "dir/x", "dir/y", "live/x", "m", "z"} {
		e.putS("vbk", k, "x")
	}
	for _, k := range []string{"dir/x", "dir/y", "m", "z"} {
		if _, err := e.l.DeleteObject(ctx, "vbk", k, ""); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.l.List(ctx, "vbk", ListOptions{Delimiter: "/"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range res.Objects {
		keys = append(keys, o.Key)
	}
	if fmt.Sprint(keys) != "[a]" || fmt.Sprint(res.CommonPrefixes) != "[live/]" || res.Truncated {
		t.Fatalf("listing: objects %v prefixes %v truncated %v; want [a] [live/] false", keys, res.CommonPrefixes, res.Truncated)
	}
	// Pages of one: the last entry is followed by delete markers only, so
	// its page is not truncated (no empty page after it).
	for _, delim := range []string{"", "/"} {
		var got []string
		o := ListOptions{Delimiter: delim, MaxKeys: 1}
		for pages := 1; ; pages++ {
			page, err := e.l.List(ctx, "vbk", o)
			if err != nil {
				t.Fatal(err)
			}
			for _, ob := range page.Objects {
				got = append(got, ob.Key)
			}
			got = append(got, page.CommonPrefixes...)
			if len(page.Objects)+len(page.CommonPrefixes) == 0 {
				t.Fatalf("delimiter %q: page %d is empty (after %v)", delim, pages, got)
			}
			if !page.Truncated {
				break
			}
			if pages > 3 {
				t.Fatalf("delimiter %q: no end (%v)", delim, got)
			}
			o.After = page.NextAfter
		}
		want := "[a live/x]"
		if delim != "" {
			want = "[a live/]"
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("delimiter %q, pages of one: %v, want %s", delim, got, want)
		}
	}
}

// TestSnapshotVersionReadsAreItsPointInTime: a read by version ID through
// a snapshot name dropped the snapshot's revision, so a point-in-time
// snapshot served, by ID, a version written after it was taken. A
// snapshot serves by ID exactly the version current at its revision (the
// one a plain GET or HEAD of it shows, "null" for an object written while
// the bucket was unversioned), and lists that one version per key.
func TestSnapshotVersionReadsAreItsPointInTime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "n", "n0") // the null version
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v0 := e.putS("bkt", "k", "v0")
	v1 := e.putS("bkt", "k", "v1")
	m := e.putS("bkt", "m", "m1")
	mdel, err := e.l.DeleteObject(ctx, "bkt", "m", "")
	if err != nil || !mdel.DeleteMarker {
		t.Fatalf("delete m: %+v %v", mdel, err)
	}
	snap, err := e.l.CreateSnapshot(ctx, "bkt", "s")
	if err != nil {
		t.Fatal(err)
	}
	v2 := e.putS("bkt", "k", "v2")
	e.putS("bkt", "n", "n1")
	head, err := e.l.Head(ctx, snap.Served, "k")
	if err != nil || head.VersionID != v1.VersionID {
		t.Fatalf("snapshot HEAD k: version %q, %v; want %s", head.VersionID, err, v1.VersionID)
	}
	for _, c := range []struct{ key, version, want string }{
		{"k", v2.VersionID, "<absent>"}, // written after the snapshot
		{"k", v1.VersionID, "v1"},       // current at its revision
		{"k", v0.VersionID, "<absent>"}, // older: not part of the point in time
		{"n", NullVersion, "n0"},
		{"m", m.VersionID, "<absent>"},
		{"m", mdel.VersionID, "<marker>"},
		{"x", NullVersion, "<absent>"},
	} {
		if got := e.read(snap.Served, c.key, c.version); got != c.want {
			t.Errorf("snapshot %s serves %s version %s as %q, want %q", snap.Served, c.key, c.version, got, c.want)
		}
	}
	// The bucket itself still serves every version.
	if got := e.read("bkt", "k", v0.VersionID); got != "v0" {
		t.Errorf("bucket serves k version %s as %q", v0.VersionID, got)
	}
	lv, err := e.l.ListVersions(ctx, snap.Served, VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range lv.Versions {
		got = append(got, fmt.Sprintf("%s@%s/%v", v.Key, v.VersionID, v.IsLatest))
	}
	if want := []string{"k@" + v1.VersionID + "/true", "n@null/true"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("snapshot version listing %v, want %v", got, want)
	}
	// Paged one version at a time.
	var paged []string
	o := VersionListOptions{MaxKeys: 1}
	for range 5 {
		lv, err := e.l.ListVersions(ctx, snap.Served, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range lv.Versions {
			paged = append(paged, v.Key+"@"+v.VersionID)
		}
		if !lv.Truncated {
			break
		}
		o.KeyMarker, o.VersionMarker = lv.NextKeyMarker, lv.NextVersionMarker
	}
	if want := []string{"k@" + v1.VersionID, "n@null"}; fmt.Sprint(paged) != fmt.Sprint(want) {
		t.Errorf("paged snapshot version listing %v, want %v", paged, want)
	}
}

// TestCloneChainDepthIsBounded: reads follow at most maxCloneDepth
// parents, so a clone that would have more ancestors is refused
// (ErrCloneTooDeep) instead of created and then unreadable; every clone
// in the longest allowed chain reads through to the root's objects.
func TestCloneChainDepthIsBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cl-0", "", model.Vector{})
	e.putS("cl-0", "k", "root")
	for i := 1; i <= maxCloneDepth; i++ {
		if _, err := e.l.Clone(ctx, fmt.Sprint("cl-", i-1), "", fmt.Sprint("cl-", i)); err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
	}
	if got := e.read(fmt.Sprint("cl-", maxCloneDepth), "k", ""); got != "root" {
		t.Fatalf("deepest clone reads %q", got)
	}
	_, err := e.l.Clone(ctx, fmt.Sprint("cl-", maxCloneDepth), "", "too-deep")
	if !errors.Is(err, ErrCloneTooDeep) {
		t.Fatalf("clone %d deep: %v, want ErrCloneTooDeep", maxCloneDepth+1, err)
	}
	if _, _, err := e.l.GetBucket(ctx, "too-deep"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("refused clone exists: %v", err)
	}
}

// versionList renders a version listing as key@version/latest entries
// (markers with "<marker>"), and its common prefixes.
func (e *env) versionList(bucket string, o VersionListOptions) string {
	e.t.Helper()
	var out []string
	for range 100 {
		lv, err := e.l.ListVersions(context.Background(), bucket, o)
		if err != nil {
			e.t.Fatalf("list versions %s: %v", bucket, err)
		}
		for _, v := range lv.Versions {
			s := fmt.Sprintf("%s@%s/%v", v.Key, v.VersionID, v.IsLatest)
			if v.DeleteMarker {
				s += "<marker>"
			}
			out = append(out, s)
		}
		out = append(out, lv.CommonPrefixes...)
		if !lv.Truncated {
			break
		}
		o.KeyMarker, o.VersionMarker = lv.NextKeyMarker, lv.NextVersionMarker
	}
	return strings.Join(out, " ")
}

// TestCloneVersionReadsAreItsHistory: a read by version ID on a live
// clone looked at the clone's own records only, so the version it
// inherited from its parent (current there when the clone was made) was
// NoSuchVersion although a plain GET served it, and, once the clone
// overwrote the key, that version was gone from its history. A clone's
// history of a key is the inherited version followed by its own: reads
// by ID serve those (before and after reduction) and nothing else — not
// what the parent wrote after the clone point, nor the parent's older
// versions (as a snapshot's point in time).
func TestCloneVersionReadsAreItsHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "n", "n0") // the null version
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v0 := e.putS("bkt", "k", "v0")
	v1 := e.putS("bkt", "k", "v1")
	j1 := e.putS("bkt", "j", "j1")
	if _, err := e.l.Clone(ctx, "bkt", "", "cln"); err != nil {
		t.Fatal(err)
	}
	v2 := e.putS("bkt", "k", "v2")
	check := func(when string, cases []struct{ key, version, want string }) {
		t.Helper()
		for _, c := range cases {
			if got := e.read("cln", c.key, c.version); got != c.want {
				t.Errorf("%s: clone serves %s version %s as %q, want %q", when, c.key, c.version, got, c.want)
			}
		}
	}
	type rc = struct{ key, version, want string }
	check("fresh clone", []rc{
		{"k", v1.VersionID, "v1"},       // inherited, current in the clone
		{"k", v2.VersionID, "<absent>"}, // written to the parent after the clone point
		{"k", v0.VersionID, "<absent>"}, // older than the clone point
		{"n", NullVersion, "n0"},
		{"j", j1.VersionID, "j1"},
	})
	c1 := e.putS("cln", "k", "c1")
	check("after the clone overwrote k", []rc{
		{"k", "", "c1"},
		{"k", c1.VersionID, "c1"},
		{"k", v1.VersionID, "v1"}, // noncurrent now, still the clone's
		{"k", v2.VersionID, "<absent>"},
	})
	// Deleting the clone's own version makes the inherited one current
	// again, as in any versioned bucket.
	if _, err := e.l.DeleteObject(ctx, "cln", "k", c1.VersionID); err != nil {
		t.Fatal(err)
	}
	check("after deleting the clone's version", []rc{{"k", "", "v1"}, {"k", v1.VersionID, "v1"}})
	// Deleting an inherited version by ID removes it from the clone
	// (it was a silent no-op), and not from the parent.
	if _, err := e.l.DeleteObject(ctx, "cln", "j", j1.VersionID); err != nil {
		t.Fatal(err)
	}
	check("after deleting j's inherited version", []rc{{"j", "", "<absent>"}, {"j", j1.VersionID, "<absent>"}})
	if got := e.read("bkt", "j", j1.VersionID); got != "j1" {
		t.Errorf("the parent serves j version %s as %q after the clone deleted it", j1.VersionID, got)
	}
	e.putS("cln", "k", "c2")
	if _, done, err := e.l.ReduceClone(ctx, "cln", 1000); err != nil || !done {
		t.Fatalf("reduce: done %v, %v", done, err)
	}
	check("after reduction", []rc{
		{"k", v1.VersionID, "v1"},
		{"k", v2.VersionID, "<absent>"},
		{"n", NullVersion, "n0"},
		{"j", "", "<absent>"},
	})
	// The inherited version, deleted by ID as the clone's last version of
	// the key, does not show from the parent again.
	e.putS("bkt", "m", "m1")
	if _, err := e.l.Clone(ctx, "bkt", "", "cln2"); err != nil {
		t.Fatal(err)
	}
	d2 := e.putS("cln2", "m", "d2")
	mv, err := e.l.Head(ctx, "bkt", "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{d2.VersionID, mv.VersionID} {
		if _, err := e.l.DeleteObject(ctx, "cln2", "m", id); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.read("cln2", "m", ""); got != "<absent>" {
		t.Errorf("after deleting every version of m the clone reads %q", got)
	}
	// Likewise the null version an unversioned clone wrote over the one
	// it inherited (which that write replaced).
	if err := e.l.CreateBucket(ctx, "plain", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("plain", "p", "p0")
	if _, err := e.l.Clone(ctx, "plain", "", "cln3"); err != nil {
		t.Fatal(err)
	}
	check3 := func(when, version, want string) {
		t.Helper()
		if got := e.read("cln3", "p", version); got != want {
			t.Errorf("%s: unversioned clone serves p version %q as %q, want %q", when, version, got, want)
		}
	}
	check3("fresh", NullVersion, "p0")
	e.putS("cln3", "p", "p1")
	if err := e.l.SetVersioning(ctx, "cln3", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	check3("written over", NullVersion, "p1")
	if _, err := e.l.DeleteObject(ctx, "cln3", "p", NullVersion); err != nil {
		t.Fatal(err)
	}
	check3("null version deleted", "", "<absent>")
	if got := e.versionList("cln3", VersionListOptions{}); got != "" {
		t.Errorf("unversioned clone lists %q after its only version went", got)
	}
}

// TestCloneListVersionsInherits: ListVersions on a clone listed the
// clone's own records only: the versions it inherited from its parent were
// missing, while GET served them. It lists the clone's history: the
// inherited version of each key (as of the clone point) as the latest
// while the clone reads through to it, noncurrent once the clone wrote or
// deleted the key, and nothing the parent wrote after the clone point.
func TestCloneListVersionsInherits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "n", "n0")
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "a", "a0")
	a1 := e.putS("bkt", "a", "a1")
	b1 := e.putS("bkt", "b", "b1")
	d1 := e.putS("bkt", "d/x", "x1")
	e.putS("bkt", "gone", "g1")
	if _, err := e.l.DeleteObject(ctx, "bkt", "gone", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Clone(ctx, "bkt", "", "cln"); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "a", "a2")   // after the clone point
	e.putS("bkt", "new", "z1") // likewise
	want := fmt.Sprintf("a@%s/true b@%s/true d/x@%s/true n@null/true", a1.VersionID, b1.VersionID, d1.VersionID)
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Fatalf("fresh clone lists\n %s\nwant\n %s", got, want)
	}
	c1 := e.putS("cln", "a", "c1")
	del, err := e.l.DeleteObject(ctx, "cln", "b", "")
	if err != nil {
		t.Fatal(err)
	}
	own := e.putS("cln", "c", "own")
	want = fmt.Sprintf("a@%s/true a@%s/false b@%s/true<marker> b@%s/false c@%s/true d/x@%s/true n@null/true",
		c1.VersionID, a1.VersionID, del.VersionID, b1.VersionID, own.VersionID, d1.VersionID)
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Fatalf("clone after its writes lists\n %s\nwant\n %s", got, want)
	}
	// Paged one entry at a time, and rolled up by a delimiter.
	if got := e.versionList("cln", VersionListOptions{MaxKeys: 1}); got != want {
		t.Errorf("clone paged one at a time lists\n %s\nwant\n %s", got, want)
	}
	if got, w := e.versionList("cln", VersionListOptions{Delimiter: "/", Prefix: "d"}), "d/"; got != w {
		t.Errorf("clone with delimiter lists %q, want %q", got, w)
	}
	if _, done, err := e.l.ReduceClone(ctx, "cln", 1000); err != nil || !done {
		t.Fatalf("reduce: done %v, %v", done, err)
	}
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Fatalf("reduced clone lists\n %s\nwant\n %s", got, want)
	}
}

// TestCloneInPlaceChangeKeepsInheritedVersion: changing an inherited
// object of a versioned clone in place (tags, a storage class transition,
// replicas) made it the clone's own record without its S3 record: the
// version the clone inherited was missing from ListVersions and NoSuchVersion
// by ID, and a later delete or overwrite left nothing of it, so removing
// the delete marker (or the newer version) by ID ended the key with a
// tombstone instead of restoring it. It is kept as a write keeps it.
func TestCloneInPlaceChangeKeepsInheritedVersion(t *testing.T) {
	e, v1 := newVersionedClone(t)
	ctx := context.Background()
	tag := func(o *meta.Object) error {
		o.Tags = map[string]string{"t": "1"}
		return nil
	}
	if err := e.l.UpdateObject(ctx, "cln", "k", tag); err != nil {
		t.Fatal(err)
	}
	if got := e.read("cln", "k", v1.VersionID); got != "v1" {
		t.Errorf("tagged inherited version %s reads %q by ID, want v1", v1.VersionID, got)
	}
	want := fmt.Sprintf("k@%s/true", v1.VersionID)
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Errorf("clone lists %q after tagging, want %q", got, want)
	}
	del, err := e.l.DeleteObject(ctx, "cln", "k", "")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("k@%s/true<marker> k@%s/false", del.VersionID, v1.VersionID)
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Errorf("clone lists %q after the delete, want %q", got, want)
	}
	if _, err := e.l.DeleteObject(ctx, "cln", "k", del.VersionID); err != nil {
		t.Fatal(err)
	}
	if got := e.read("cln", "k", ""); got != "v1" {
		t.Errorf("after removing the marker the clone reads %q, want v1", got)
	}
	if info, err := e.l.Head(ctx, "cln", "k"); err != nil || info.Tags["t"] != "1" || info.VersionID != v1.VersionID {
		t.Errorf("restored %+v, %v: want version %s with its tags", info.Object, err, v1.VersionID)
	}
	c1 := e.putS("cln", "k", "c1")
	if _, done, err := e.l.ReduceClone(ctx, "cln", 1000); err != nil || !done {
		t.Fatalf("reduce: done %v, %v", done, err)
	}
	want = fmt.Sprintf("k@%s/true k@%s/false", c1.VersionID, v1.VersionID)
	if got := e.versionList("cln", VersionListOptions{}); got != want {
		t.Errorf("reduced clone lists %q, want %q", got, want)
	}
}

// DeleteNoncurrent (lifecycle's noncurrent expiry) never deletes the
// version a clone reads through to its parent: it is the clone's current
// version, although the clone has no record of the key.
func TestDeleteNoncurrentSparesCloneInheritedVersion(t *testing.T) {
	e, v1 := newVersionedClone(t)
	ctx := context.Background()
	deleted, err := e.l.DeleteNoncurrent(ctx, "cln", "k", v1.VersionID)
	if err != nil || deleted {
		t.Fatalf("DeleteNoncurrent of the inherited current version: deleted %v, %v", deleted, err)
	}
	if got := e.read("cln", "k", ""); got != "v1" {
		t.Fatalf("the clone reads k as %q after a noncurrent expiry, want v1", got)
	}
}

// A delimiter listing of versions lists a common prefix only if some key
// under it has a version: a prefix holding only the hidden tombstone that
// a snapshot keeps of a deleted unversioned object lists nothing.
func TestListVersionsSkipsPrefixOfTombstones(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "tbk", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("tbk", "a/1", "a")
	e.putS("tbk", "e/x", "x")
	e.putS("tbk", "z", "z")
	if _, err := e.l.CreateSnapshot(ctx, "tbk", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.DeleteObject(ctx, "tbk", "e/x", ""); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{0, 1, 2} {
		var prefixes, keys []string
		o := VersionListOptions{Delimiter: "/", MaxKeys: max}
		for pages := 0; ; pages++ {
			page, err := e.l.ListVersions(ctx, "tbk", o)
			if err != nil {
				t.Fatal(err)
			}
			prefixes = append(prefixes, page.CommonPrefixes...)
			for _, v := range page.Versions {
				keys = append(keys, v.Key)
			}
			if !page.Truncated || pages > 10 {
				break
			}
			o.KeyMarker, o.VersionMarker = page.NextKeyMarker, page.NextVersionMarker
		}
		if fmt.Sprint(prefixes) != "[a/]" || fmt.Sprint(keys) != "[z]" {
			t.Errorf("max-keys %d: prefixes %v, versions of %v; want [a/] and [z]", max, prefixes, keys)
		}
	}
	// The snapshot still lists the deleted key.
	snap, err := e.l.ListVersions(ctx, "tbk--snap-s1", VersionListOptions{Delimiter: "/"})
	if err != nil || fmt.Sprint(snap.CommonPrefixes) != "[a/ e/]" {
		t.Errorf("the snapshot's prefixes: %v, %v", snap.CommonPrefixes, err)
	}
}

// newVersionedClone returns an environment with a versioned bucket "bkt"
// holding k = "v1" (returned) and "cln", a clone of it made after.
func newVersionedClone(t *testing.T) (*env, ObjectInfo) {
	t.Helper()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v1 := e.putS("bkt", "k", "v1")
	if _, err := e.l.Clone(ctx, "bkt", "", "cln"); err != nil {
		t.Fatal(err)
	}
	return e, v1
}
