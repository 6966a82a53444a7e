package object

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// reopenOver replaces e's layer with one over kv (a wrapper of e.kv that
// injects a fault or a concurrent change) and returns it; e's cleanup
// closes it.
func (e *env) reopenOver(kv meta.KV) *Layer {
	e.t.Helper()
	l, err := New(kv, e.local, e.local, Options{StatsInterval: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	e.l.Close()
	e.l = l
	return l
}

// TestCollectVersionsRacesAnOverwrite: version collection reads a key's
// current record, then its history. An overwrite landing between the two
// reads moves the record it read as current into the history; judged with
// the stale current record's start as its end, that record looked
// valid for no snapshot and was collected, and a snapshot that should
// see it showed an older generation or nothing (the e2e history crash
// test caught it under load). The collection must fail its compare on
// the current record instead.
func TestCollectVersionsRacesAnOverwrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &scanHookKV{Pebble: e.kv, prefix: meta.VersionPrefix("photos", "a"), before: true}
	l := e.reopenOver(hkv)
	if err := l.CreateBucket(ctx, "photos", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("photos", "a", "a1")
	snap, err := l.CreateSnapshot(ctx, "photos", "monday")
	if err != nil {
		t.Fatal(err)
	}
	hkv.hook = func() {
		// Unversioned writes read no history, so this does not recurse.
		if _, err := l.Put(ctx, "photos", "a", strings.NewReader("a2"), PutOptions{Size: 2}); err != nil {
			t.Errorf("racing overwrite: %v", err)
		}
	}
	if _, err := l.CollectVersions(ctx, "photos", "a"); err != nil {
		t.Fatal(err)
	}
	if hkv.hook != nil {
		t.Fatal("the overwrite did not race the collection")
	}
	if got := e.read(snap.Served, "a", ""); got != "a1" {
		t.Fatalf("snapshot reads a as %q after a collection raced an overwrite, want a1", got)
	}
	if got := e.read("photos", "a", ""); got != "a2" {
		t.Fatalf("live bucket reads a as %q, want a2", got)
	}
	// Decided again without the race, the kept record stays: the
	// snapshot still needs it.
	if n, err := l.CollectVersions(ctx, "photos", "a"); err != nil || n != 0 {
		t.Fatalf("second collection removed %d records (%v), want 0", n, err)
	}
	if got := e.read(snap.Served, "a", ""); got != "a1" {
		t.Fatalf("snapshot reads a as %q after a second collection, want a1", got)
	}
}

// TestInPlaceRewritesKeepSnapshots: changing an object's replicas
// (SetReplication) or its storage class (Transition, with and without new
// replicas) rewrites its record in place. The record must keep its place
// in time: a snapshot taken before must still see the key (it is the same
// version, the bytes are the same), and a versioned bucket's version
// must read the same bytes. Before, the rewrite started the record's
// history anew and the snapshot lost the key.
func TestInPlaceRewritesKeepSnapshots(t *testing.T) {
	for _, versioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unversioned", true: "versioned"}[versioned], func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if err := e.l.CreateBucket(ctx, "photos", "", model.MustParseVector("ssd=1,hdd=1")); err != nil {
				t.Fatal(err)
			}
			if versioned {
				if err := e.l.SetVersioning(ctx, "photos", VersioningEnabled); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{"replicas", "class", "class-and-replicas"} {
				e.putS("photos", k, k+"-v1")
			}
			snap, err := e.l.CreateSnapshot(ctx, "photos", "monday")
			if err != nil {
				t.Fatal(err)
			}
			wait := func(what string, done <-chan error, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if err := <-done; err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			done, err := e.l.SetReplication(ctx, "photos", "replicas", model.MustParseVector("hdd=2"))
			wait("set replication", done, err)
			// ssd=1,hdd=1 is no class's vector: EXPRESS_ONEZONE moves the
			// bytes; then STANDARD_IA -> GLACIER_IR (both hdd=2) only
			// changes the class.
			done, started, err := e.l.Transition(ctx, "photos", "class-and-replicas", "EXPRESS_ONEZONE", func(ObjectInfo) bool { return true })
			if !started {
				t.Fatal("transition to EXPRESS_ONEZONE did nothing")
			}
			wait("transition", done, err)
			done, _, err = e.l.Transition(ctx, "photos", "class", "STANDARD_IA", func(ObjectInfo) bool { return true })
			wait("transition to STANDARD_IA", done, err)
			done, started, err = e.l.Transition(ctx, "photos", "class", "GLACIER_IR", func(ObjectInfo) bool { return true })
			if !started {
				t.Fatal("class-only transition did nothing")
			}
			wait("transition to GLACIER_IR", done, err)
			for _, k := range []string{"replicas", "class", "class-and-replicas"} {
				if got := e.read(snap.Served, k, ""); got != k+"-v1" {
					t.Errorf("snapshot reads %s as %q after it was rewritten in place", k, got)
				}
				if got := e.read("photos", k, ""); got != k+"-v1" {
					t.Errorf("live bucket reads %s as %q", k, got)
				}
				if versioned {
					info, err := e.l.Head(ctx, "photos", k)
					if err != nil {
						t.Fatal(err)
					}
					if got := e.read("photos", k, info.VersionID); got != k+"-v1" {
						t.Errorf("version %s of %s reads %q", info.VersionID, k, got)
					}
				}
			}
			// Nothing of the rewritten records is history to collect
			// while the snapshot stands, and the snapshot still reads.
			for _, k := range []string{"replicas", "class", "class-and-replicas"} {
				if _, err := e.l.CollectVersions(ctx, "photos", k); err != nil {
					t.Fatal(err)
				}
				if got := e.read(snap.Served, k, ""); got != k+"-v1" {
					t.Errorf("snapshot reads %s as %q after a collection", k, got)
				}
			}
		})
	}
}

// versionsOf lists key's S3 versions as "id=body", newest first.
func (e *env) versionsOf(bucket, key string) string {
	e.t.Helper()
	res, err := e.l.ListVersions(context.Background(), bucket, VersionListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, v := range res.Versions {
		if v.Key == key {
			out = append(out, v.VersionID+"="+e.read(bucket, key, v.VersionID))
		}
	}
	return strings.Join(out, ",")
}

// TestExpiryKeepsHistory: a lifecycle expiration (DeleteIf) is a delete
// like any other. In a bucket with a snapshot the snapshot still sees
// the object; in a versioned bucket a delete marker becomes current and
// every version stays listed and readable. Before, it removed the object
// record bare: the snapshot lost the key, and a versioned key vanished
// from listings while its versions' records stayed forever.
func TestExpiryKeepsHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	always := func(ObjectInfo) bool { return true }
	e.l.CreateBucket(ctx, "snapped", "", model.Vector{})
	e.putS("snapped", "k", "k1")
	s, err := e.l.CreateSnapshot(ctx, "snapped", "s")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.l.DeleteIf(ctx, "snapped", "k", always); !ok || err != nil {
		t.Fatalf("expire: %v %v", ok, err)
	}
	if got := e.read("snapped", "k", ""); got != "<absent>" {
		t.Fatalf("live bucket after expiry: %q", got)
	}
	if got := e.read(s.Served, "k", ""); got != "k1" {
		t.Fatalf("snapshot after expiry: %q, want k1", got)
	}

	e.l.CreateBucket(ctx, "versioned", "", model.Vector{})
	if err := e.l.SetVersioning(ctx, "versioned", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	a1 := e.putS("versioned", "k", "a1")
	a2 := e.putS("versioned", "k", "a2")
	if ok, err := e.l.DeleteIf(ctx, "versioned", "k", always); !ok || err != nil {
		t.Fatalf("expire: %v %v", ok, err)
	}
	if got := e.read("versioned", "k", ""); got != "<marker>" {
		t.Fatalf("versioned key after expiry: %q, want a delete marker", got)
	}
	want := a2.VersionID + "=a2," + a1.VersionID + "=a1"
	if got := e.versionsOf("versioned", "k"); !strings.HasSuffix(got, want) || strings.Count(got, ",") != 2 {
		t.Fatalf("versions after expiry: %q, want a marker then %q", got, want)
	}
	// A delete marker is not expired again; a false condition deletes nothing.
	if ok, err := e.l.DeleteIf(ctx, "versioned", "k", always); ok || err != nil {
		t.Fatalf("expiring a delete marker: %v %v", ok, err)
	}
	e.putS("snapped", "j", "j1")
	if ok, err := e.l.DeleteIf(ctx, "snapped", "j", func(ObjectInfo) bool { return false }); ok || err != nil {
		t.Fatalf("false condition: %v %v", ok, err)
	}
	if got := e.read("snapped", "j", ""); got != "j1" {
		t.Fatalf("false condition deleted: %q", got)
	}
}

// TestVersioningOnABucketWithSnapshots: records written while a bucket
// with snapshots was unversioned carry sequence numbers. Turning
// versioning on must still make the current one the "null" version, and
// a later write must keep it: before, it was dropped (the snapshot that
// saw it read nothing, and version "null" was gone).
func TestVersioningOnABucketWithSnapshots(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	if _, err := e.l.CreateSnapshot(ctx, "bkt", "s0"); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "k1")
	s1, err := e.l.CreateSnapshot(ctx, "bkt", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.versionsOf("bkt", "k"); got != "null=k1" {
		t.Fatalf("versions of an unversioned bucket with snapshots: %q, want null=k1", got)
	}
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	k2 := e.putS("bkt", "k", "k2")
	if got := e.read(s1.Served, "k", ""); got != "k1" {
		t.Fatalf("snapshot after a versioned write: %q, want k1", got)
	}
	if got := e.read("bkt", "k", NullVersion); got != "k1" {
		t.Fatalf("null version: %q, want k1", got)
	}
	if got, want := e.versionsOf("bkt", "k"), k2.VersionID+"=k2,null=k1"; got != want {
		t.Fatalf("versions: %q, want %q", got, want)
	}
}

// TestTombstoneThenVersionedWrite: deleting a bucket's null version for
// good leaves a tombstone when a snapshot needs the history; a snapshot
// taken after sees the key absent, and must still after the next write.
func TestTombstoneThenVersionedWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v := e.putS("bkt", "k", "v")
	if _, err := e.l.CreateSnapshot(ctx, "bkt", "s0"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.DeleteObject(ctx, "bkt", "k", v.VersionID); err != nil {
		t.Fatal(err)
	}
	s1, err := e.l.CreateSnapshot(ctx, "bkt", "s1")
	if err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "x")
	if got := e.read(s1.Served, "k", ""); got != "<absent>" {
		t.Fatalf("snapshot taken after the version was deleted reads %q", got)
	}
	if got := e.read("bkt--snap-s0", "k", ""); got != "v" {
		t.Fatalf("snapshot taken before reads %q, want v", got)
	}
}

// TestVersionCurrentAgain: deleting the current version by ID makes the
// previous one current again, a second stretch of time for it. Snapshots
// taken during either stretch must see it, through later writes and tag
// changes: before, the second stretch was not kept (a snapshot showed the
// deleted version) and a tag change moved the first stretch's start (a
// snapshot lost the key).
func TestVersionCurrentAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "w")
	sw, _ := e.l.CreateSnapshot(ctx, "bkt", "sw")
	v := e.putS("bkt", "k", "v")
	sv, _ := e.l.CreateSnapshot(ctx, "bkt", "sv")
	if _, err := e.l.DeleteObject(ctx, "bkt", "k", v.VersionID); err != nil {
		t.Fatal(err)
	}
	sw2, _ := e.l.CreateSnapshot(ctx, "bkt", "sw2")
	if err := e.l.UpdateObject(ctx, "bkt", "k", func(o *meta.Object) error { o.Tags = map[string]string{"t": "1"}; return nil }); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for snap, want := range map[string]string{sw.Served: "w", sv.Served: "v", sw2.Served: "w"} {
			if got := e.read(snap, "k", ""); got != want {
				t.Errorf("%s: %s reads %q, want %q", when, snap, got, want)
			}
		}
	}
	check("after the tag change")
	e.putS("bkt", "k", "x")
	check("after the next write")
	for _, k := range []string{"k"} {
		if _, err := e.l.CollectVersions(ctx, "bkt", k); err != nil {
			t.Fatal(err)
		}
	}
	check("after a collection")

	// Deleting the version current again by ID keeps its second stretch too.
	e.putS("bkt", "j", "w")
	jv := e.putS("bkt", "j", "v")
	if _, err := e.l.DeleteObject(ctx, "bkt", "j", jv.VersionID); err != nil {
		t.Fatal(err)
	}
	s3, _ := e.l.CreateSnapshot(ctx, "bkt", "s3")
	jw, _ := e.l.Head(ctx, "bkt", "j")
	if _, err := e.l.DeleteObject(ctx, "bkt", "j", jw.VersionID); err != nil {
		t.Fatal(err)
	}
	if got := e.read(s3.Served, "j", ""); got != "w" {
		t.Fatalf("snapshot of a version current again, after it was deleted by ID: %q, want w", got)
	}
}

// TestConcurrentVersionDeletes: deleting the current version by ID makes
// the next newer one current; a delete of that one by ID landing between
// the read of the history and the commit must not be undone (the deleted
// version made current again).
func TestConcurrentVersionDeletes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &scanHookKV{Pebble: e.kv, prefix: meta.VersionPrefix("bkt", "k")}
	l := e.reopenOver(hkv)
	l.CreateBucket(ctx, "bkt", "", model.Vector{})
	if err := l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	u := e.putS("bkt", "k", "u")
	w := e.putS("bkt", "k", "w")
	v := e.putS("bkt", "k", "v")
	hkv.hook = func() {
		if _, err := l.DeleteObject(ctx, "bkt", "k", w.VersionID); err != nil {
			t.Errorf("racing delete: %v", err)
		}
	}
	if _, err := l.DeleteObject(ctx, "bkt", "k", v.VersionID); err != nil {
		t.Fatal(err)
	}
	if hkv.hook != nil {
		t.Fatal("the deletes did not race")
	}
	if got := e.read("bkt", "k", ""); got != "u" {
		t.Fatalf("current after both deletes: %q, want u", got)
	}
	if got, want := e.versionsOf("bkt", "k"), u.VersionID+"=u"; got != want {
		t.Fatalf("versions: %q, want %q", got, want)
	}
}

// TestReductionKeepsWhatCloneSnapshotsSee: a snapshot of a clone taken
// before the clone wrote or deleted a key saw the parent's record through
// the parent. Reduction unlinks the parent, so it must keep that record
// as the clone's history: before, the snapshot then read nothing.
func TestReductionKeepsWhatCloneSnapshotsSee(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "par", "", model.Vector{})
	e.putS("par", "k", "p1")
	e.putS("par", "d", "d1")
	e.putS("par", "u", "u1")
	if _, err := e.l.Clone(ctx, "par", "", "cln"); err != nil {
		t.Fatal(err)
	}
	s, err := e.l.CreateSnapshot(ctx, "cln", "s")
	if err != nil {
		t.Fatal(err)
	}
	e.putS("cln", "k", "c1")
	e.putS("cln", "k", "c2")
	if err := e.l.Delete(ctx, "cln", "d"); err != nil {
		t.Fatal(err)
	}
	want := "d=d1 k=p1 u=u1"
	if got := e.listKeys(s.Served); got != want {
		t.Fatalf("clone snapshot before reduction: %s, want %s", got, want)
	}
	// Interrupted after one record, then finished: the same outcome.
	if _, _, err := e.l.ReduceClone(ctx, "cln", 1); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	if _, done, err := e.l.ReduceClone(ctx, "cln", 100); err != nil || !done {
		t.Fatalf("second pass: done %v, %v", done, err)
	}
	if got := e.listKeys(s.Served); got != want {
		t.Fatalf("clone snapshot after reduction: %s, want %s", got, want)
	}
	if got := e.listKeys("cln"); got != "k=c2 u=u1" {
		t.Fatalf("clone after reduction: %s", got)
	}
	for _, k := range []string{"k", "d", "u"} {
		if _, err := e.l.CollectVersions(ctx, "cln", k); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.listKeys(s.Served); got != want {
		t.Fatalf("clone snapshot after a collection: %s, want %s", got, want)
	}
	// With the snapshot gone, the history goes too.
	if err := e.l.DeleteSnapshot(ctx, "cln", "s"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k", "d", "u"} {
		if _, err := e.l.CollectVersions(ctx, "cln", k); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.countPrefix(string(meta.VersionPrefix("cln", ""))); n != 0 {
		t.Fatalf("%d history records left in the clone without snapshots", n)
	}
}

// TestOverlappingReductions: a reduction that read the clone while it
// still had its parent must not copy a key back after another reduction
// unlinked the clone and the key was then deleted in it.
func TestOverlappingReductions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &scanHookKV{Pebble: e.kv, prefix: []byte(meta.PrefixObject)}
	l := e.reopenOver(hkv)
	l.CreateBucket(ctx, "par", "", model.Vector{})
	e.putS("par", "k", "p1")
	if _, err := l.Clone(ctx, "par", "", "cln"); err != nil {
		t.Fatal(err)
	}
	hkv.hook = func() {
		// The first reduction lists the parent; meanwhile another one
		// runs to the end and the key is deleted in the now plain clone.
		if _, done, err := l.ReduceClone(ctx, "cln", 100); err != nil || !done {
			t.Errorf("overlapping reduction: %v %v", done, err)
		}
		if err := l.Delete(ctx, "cln", "k"); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if _, _, err := l.ReduceClone(ctx, "cln", 100); err != nil {
		t.Fatal(err)
	}
	if hkv.hook != nil {
		t.Fatal("the reductions did not overlap")
	}
	if got := e.read("cln", "k", ""); got != "<absent>" {
		t.Fatalf("a key deleted in the clone came back: %q", got)
	}
}

// TestCloneAmbiguousCommitKeepsPin: a clone whose creation commit landed
// but answered with a lost connection exists; the pin it holds on its
// parent must stay, or a collection removes history the clone reads.
func TestCloneAmbiguousCommitKeepsPin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	akv := &ambiguousKV{Pebble: e.kv, prefix: meta.BucketKey("cln")}
	l := e.reopenOver(akv)
	l.CreateBucket(ctx, "par", "", model.Vector{})
	e.putS("par", "k", "p1")
	akv.failNext.Store(true)
	if _, err := l.Clone(ctx, "par", "", "cln"); err == nil {
		t.Fatal("the ambiguous commit reported success")
	}
	e.putS("par", "k", "p2")
	if _, err := l.CollectVersions(ctx, "par", "k"); err != nil {
		t.Fatal(err)
	}
	if got := e.read("cln", "k", ""); got != "p1" {
		t.Fatalf("clone created by an ambiguous commit reads %q, want p1", got)
	}
}

// skewedClock is a node clock a test sets: nodes' clocks differ (NTP
// keeps them within milliseconds, not nanoseconds), and sequence numbers
// must stay unique per key whatever they say.
type skewedClock struct{ ns atomic.Int64 }

func (c *skewedClock) now() time.Time    { return time.Unix(0, c.ns.Load()) }
func (c *skewedClock) set(t time.Time)   { c.ns.Store(t.UnixNano()) }
func newSkewed(t time.Time) *skewedClock { c := &skewedClock{}; c.set(t); return c }

// TestSeqAfterVersionCurrentAgainOnSlowClock: deleting the current
// version by ID makes an older one current again, keeping its old
// sequence number, while newer records stay in the version map (kept for
// a snapshot). The next record of the key was numbered from the current
// record alone (max(now, cur.Seq+1)), so a node whose clock was behind
// the key's newest number reused it and overwrote that record: the
// snapshot showed an older version and the overwritten record's extents
// lost their reference. New records are numbered after the newest one in
// the version map, and never overwrite one.
func TestSeqAfterVersionCurrentAgainOnSlowClock(t *testing.T) {
	for _, then := range []string{"write", "delete by ID"} {
		t.Run(then, func(t *testing.T) {
			e := newEnv(t)
			base := time.Now()
			clk := newSkewed(base.Add(time.Second)) // node A: 1 s ahead
			e.tweak = func(o *Options) { o.Now = clk.now }
			e.restart()
			ctx := context.Background()
			if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
				t.Fatal(err)
			}
			if err := e.l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
				t.Fatal(err)
			}
			e.putS("bkt", "k", "v1") // written by node A
			clk.set(base)            // the rest by node B, whose clock is right
			v2 := e.putS("bkt", "k", "v2")
			snap, err := e.l.CreateSnapshot(ctx, "bkt", "s")
			if err != nil {
				t.Fatal(err)
			}
			// Delete v2 for good: v1 is current again; the snapshot still
			// needs v2, kept as hidden history.
			if _, err := e.l.DeleteObject(ctx, "bkt", "k", v2.VersionID); err != nil {
				t.Fatal(err)
			}
			if got := e.read(snap.Served, "k", ""); got != "v2" {
				t.Fatalf("after deleting v2 by ID the snapshot reads %q, want v2", got)
			}
			want := map[string]string{snap.Served: "v2"}
			switch then {
			case "write":
				v3 := e.putS("bkt", "k", "v3")
				if v3.VersionID == v2.VersionID {
					t.Errorf("v3 reuses v2's version ID %s", v2.VersionID)
				}
				want["bkt"] = "v3"
			case "delete by ID":
				// A snapshot of v1's second stretch, then v1 deleted by ID:
				// that stretch is kept as hidden history too.
				s2, err := e.l.CreateSnapshot(ctx, "bkt", "s2")
				if err != nil {
					t.Fatal(err)
				}
				v1, err := e.l.Head(ctx, "bkt", "k")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.l.DeleteObject(ctx, "bkt", "k", v1.VersionID); err != nil {
					t.Fatal(err)
				}
				want[s2.Served] = "v1"
				want["bkt"] = "<absent>"
			}
			for b, w := range want {
				if got := e.read(b, "k", ""); got != w {
					t.Errorf("after the %s %s reads k as %q, want %q", then, b, got, w)
				}
			}
		})
	}
}

// bucketUpdateHookKV runs hook (once) before the first commit that
// writes the bucket record of bucket; with noGuard, only one that leaves
// the bucket's guard alone (UpdateBucket: the second commit of a
// snapshot's creation).
type bucketUpdateHookKV struct {
	*meta.Pebble
	bucket  string
	noGuard bool
	hook    func()
}

func (k *bucketUpdateHookKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if h := k.hook; h != nil {
		rec, guard := false, false
		for _, op := range t.Ops {
			rec = rec || bytes.Equal(op.Key, meta.BucketKey(k.bucket))
			guard = guard || bytes.Equal(op.Key, meta.BucketGuardKey(k.bucket))
		}
		if rec && !(k.noGuard && guard) {
			k.hook = nil
			h()
		}
	}
	return k.Pebble.Commit(ctx, t)
}

// TestSnapshotCreatorStalledPastPinRepair: a snapshot's creator that
// stalls between its two commits for longer than the Curator's pin repair
// age (a GC pause, a partition from the metadata store) finds its pin
// finished by RepairPins at a later revision, and version collection has
// dropped what only the pending pin kept. Its second commit set the
// revision back to its first commit's unconditionally, and the snapshot
// showed a revision whose history was gone (here: no object at all). The
// repaired revision must stay, and be the one returned; a snapshot
// deleted while being created must not be reported created.
func TestSnapshotCreatorStalledPastPinRepair(t *testing.T) {
	t.Run("repaired", func(t *testing.T) {
		e := newEnv(t)
		hkv := &bucketUpdateHookKV{Pebble: e.kv, bucket: "bkt", noGuard: true}
		l := e.reopenOver(hkv)
		ctx := context.Background()
		if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
		e.putS("bkt", "k", "a1")
		hkv.hook = func() {
			// The creator stalls here, after its first commit. Meanwhile:
			e.putS("bkt", "k", "a2") // keeps a1 for the pending pin
			// Any change of the bucket record since (a setting, another
			// snapshot) moves the revision the repair takes.
			if err := l.UpdateBucket(ctx, "bkt", func(b *meta.Bucket) error { return nil }); err != nil {
				t.Error(err)
			}
			if fin, _, err := l.RepairPins(ctx, "bkt", 0); err != nil || fin != 1 {
				t.Errorf("repair pins: finished %d, %v", fin, err)
			}
			if n, err := l.CollectVersions(ctx, "bkt", "k"); err != nil || n != 1 {
				t.Errorf("collect: %d records, %v; want 1 (a1, needed by no revision the repaired pin sees)", n, err)
			}
		}
		snap, err := l.CreateSnapshot(ctx, "bkt", "s")
		if err != nil {
			t.Fatal(err)
		}
		if hkv.hook != nil {
			t.Fatal("the hook did not run")
		}
		infos, err := l.Snapshots(ctx, "bkt")
		if err != nil || len(infos) != 1 || infos[0].Rev != snap.Rev {
			t.Fatalf("snapshots %+v (%v); CreateSnapshot returned revision %d", infos, err, snap.Rev)
		}
		if got := e.read(snap.Served, "k", ""); got != "a2" {
			t.Fatalf("snapshot (revision %d) reads k as %q, want a2 (current at the repaired revision)", snap.Rev, got)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		e := newEnv(t)
		hkv := &bucketUpdateHookKV{Pebble: e.kv, bucket: "bkt", noGuard: true}
		l := e.reopenOver(hkv)
		ctx := context.Background()
		if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
		hkv.hook = func() {
			if err := l.DeleteSnapshot(ctx, "bkt", "s"); err != nil {
				t.Error(err)
			}
		}
		if _, err := l.CreateSnapshot(ctx, "bkt", "s"); !errors.Is(err, ErrNoSuchSnapshot) {
			t.Fatalf("a snapshot deleted while being created: %v, want ErrNoSuchSnapshot", err)
		}
		if infos, _ := l.Snapshots(ctx, "bkt"); len(infos) != 0 {
			t.Fatalf("snapshots %+v, want none", infos)
		}
	})
}

// TestCloneCreatedAfterItsPinWasDropped: Clone adds its pin on the
// source, then creates the clone bucket in a second commit that checked
// nothing about the pin. A creator stalled between the two for longer
// than the pin repair age found its pin dropped by RepairPins (the clone
// bucket did not exist yet) and still created the clone, reading through
// to a revision of the source nothing pinned: version collection then
// removed what the clone read. The creation compares the source's record
// with the pin in it, and pins again when the pin is gone.
func TestCloneCreatedAfterItsPinWasDropped(t *testing.T) {
	for _, c := range []struct {
		name, from string
		stall      *bucketUpdateHookKV // where the creator stalls
	}{
		{"now", "", &bucketUpdateHookKV{bucket: "cln"}},
		{"from a snapshot", "s", &bucketUpdateHookKV{bucket: "cln"}},
		// Before the pin's own second commit (fixing its revision).
		{"pending pin", "", &bucketUpdateHookKV{bucket: "src", noGuard: true}},
	} {
		from := c.from
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			hkv := c.stall
			hkv.Pebble = e.kv
			l := e.reopenOver(hkv)
			ctx := context.Background()
			if err := l.CreateBucket(ctx, "src", "", model.Vector{}); err != nil {
				t.Fatal(err)
			}
			e.putS("src", "k", "a1")
			if from != "" {
				if _, err := l.CreateSnapshot(ctx, "src", from); err != nil {
					t.Fatal(err)
				}
			}
			hkv.hook = func() {
				// The creator stalls before creating the clone bucket.
				if _, dropped, err := l.RepairPins(ctx, "src", 0); err != nil || dropped != 1 {
					t.Errorf("repair pins: dropped %d, %v", dropped, err)
				}
			}
			if _, err := l.Clone(ctx, "src", from, "cln"); err != nil {
				t.Fatalf("clone: %v", err)
			}
			if hkv.hook != nil {
				t.Fatal("the hook did not run")
			}
			cb, _, err := l.GetBucket(ctx, "cln")
			if err != nil || cb.Parent == nil {
				t.Fatalf("clone bucket %+v, %v", cb, err)
			}
			pins, _ := l.Snapshots(ctx, "src")
			held := false
			for _, p := range pins {
				held = held || p.Clone == "cln" && p.Name == cb.Parent.Snapshot && p.Rev == cb.Parent.Rev
			}
			if !held {
				t.Fatalf("clone's parent %+v is not pinned in its source (pins %+v)", *cb.Parent, pins)
			}
			if got := e.read("cln", "k", ""); got != "a1" {
				t.Fatalf("clone reads k as %q, want a1", got)
			}
			if from != "" {
				if err := l.DeleteSnapshot(ctx, "src", from); err != nil {
					t.Fatal(err)
				}
			}
			e.putS("src", "k", "a2")
			if _, err := l.CollectVersions(ctx, "src", "k"); err != nil {
				t.Fatal(err)
			}
			if got := e.read("cln", "k", ""); got != "a1" {
				pins, _ := l.Snapshots(ctx, "src")
				t.Fatalf("clone reads k as %q after an overwrite in its source and a collection, want a1 (source pins: %+v)", got, pins)
			}
		})
	}
}

// TestSnapshotRefusesInPlaceRewrites: snapshots are read-only, but
// SetReplication (the admin "replicate" call) and Transition (lifecycle,
// the admin "class" call) did not check: a head through "bkt--snap-s"
// returns revision 0 (the record is not under the snapshot name's object
// key), so the in-place rewrite took it for a clone's first own record
// and committed a new object record under o/bkt--snap-s/ — a bucket that
// does not exist, which nothing lists, deletes or collects, and whose
// extents stayed referenced forever.
func TestSnapshotRefusesInPlaceRewrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.MustParseVector("ssd=1,hdd=1")); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "a1")
	snap, err := e.l.CreateSnapshot(ctx, "bkt", "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		do   func() (<-chan error, error)
	}{
		{"SetReplication", func() (<-chan error, error) {
			return e.l.SetReplication(ctx, snap.Served, "k", model.MustParseVector("hdd=2"))
		}},
		{"Transition (bytes move)", func() (<-chan error, error) {
			done, _, err := e.l.Transition(ctx, snap.Served, "k", "EXPRESS_ONEZONE", func(ObjectInfo) bool { return true })
			return done, err
		}},
		{"Transition (class only)", func() (<-chan error, error) {
			done, _, err := e.l.Transition(ctx, snap.Served, "k", "STANDARD", func(ObjectInfo) bool { return true })
			return done, err
		}},
	} {
		done, err := c.do()
		if err == nil && done != nil {
			err = <-done
		}
		if n := e.countPrefix(string(meta.ObjectPrefix(snap.Served, ""))); n != 0 {
			t.Fatalf("%s on read-only snapshot %s returned %v and wrote %d object record(s) under o/%s/", c.what, snap.Served, err, n, snap.Served)
		}
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a snapshot: %v, want ErrReadOnly", c.what, err)
		}
	}
	if got := e.read(snap.Served, "k", ""); got != "a1" {
		t.Fatalf("snapshot reads %q", got)
	}
}

// TestReductionUnlinkRacesAnUndelete: ReduceClone decides each key once,
// then unlinked the clone with a commit that compared nothing it decided
// on. In a versioned clone, removing the delete marker of an inherited
// key by version ID leaves the clone with no record of it, so the
// parent's object shows again; landing after the reduction skipped the
// key (it had the marker then) and before the unlink, the unlink made the
// object vanish from the clone. Such a delete now rewrites the clone's
// guard, which the unlink compares as read before the decisions, and the
// reduction decides again. Since the clone keeps the version it inherited
// as its own record when it deletes the key, removing the marker makes
// that record current instead: the key no longer reads through, and the
// reduction has only j to copy; either way k must survive the unlink.
func TestReductionUnlinkRacesAnUndelete(t *testing.T) {
	e := newEnv(t)
	hkv := &bucketUpdateHookKV{Pebble: e.kv, bucket: "cln"}
	l := e.reopenOver(hkv)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "p1")
	e.putS("bkt", "j", "p1")
	if _, err := l.Clone(ctx, "bkt", "", "cln"); err != nil {
		t.Fatal(err)
	}
	res, err := l.DeleteObject(ctx, "cln", "k", "")
	if err != nil || !res.DeleteMarker {
		t.Fatalf("delete: %+v %v", res, err)
	}
	hkv.hook = func() { // before the unlink's commit
		if _, err := l.DeleteObject(ctx, "cln", "k", res.VersionID); err != nil {
			t.Errorf("undelete: %v", err)
		}
		if got := e.read("cln", "k", ""); got != "p1" {
			t.Errorf("after removing the marker the clone reads %q, want p1", got)
		}
	}
	copied, done, err := l.ReduceClone(ctx, "cln", 100)
	if err != nil || !done {
		t.Fatalf("reduce: done %v, %v", done, err)
	}
	if hkv.hook != nil {
		t.Fatal("the hook did not run")
	}
	if copied != 1 {
		t.Errorf("reduction copied %d records, want 1 (j; k is the clone's own once the marker is gone)", copied)
	}
	if b, _, err := l.GetBucket(ctx, "cln"); err != nil || b.Parent != nil {
		t.Fatalf("clone %+v, %v: want unlinked", b, err)
	}
	for _, k := range []string{"k", "j"} {
		if got := e.read("cln", k, ""); got != "p1" {
			t.Fatalf("after the reduction the clone reads %s as %q, want p1 (it read p1 before the unlink)", k, got)
		}
	}
}
