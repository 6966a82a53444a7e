package object

import (
	"context"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

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
	l, err := New(hkv, e.local, e.local, Options{StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e.l.Close()
	e.l = l
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
