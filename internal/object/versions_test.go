package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
