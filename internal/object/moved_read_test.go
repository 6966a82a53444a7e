package object

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestReadAtAMovedLocationMarksNothing: node B caches y's extent
// locations. Node A moves y's extents out of E (a compression that moves
// only the extents that paid, dedup, a partial pack) and truncates E's
// now-unreferenced tail. B's next GET of y reads at its cached location
// past E's new end, which the extent store answers as corrupt ("ends
// at"): that must not mark E's healthy replicas bad (recovery would then
// have no source it accepts), only send B to the extent's new location.
func TestReadAtAMovedLocationMarksNothing(t *testing.T) {
	e := newEnv(t, "hdd:h0:1GiB", "hdd:h1:1GiB", "hdd:h2:1GiB")
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	x, y := payload(1, 300_000), payload(2, 300_000)
	e.put("bkt", "x", x, "hdd=2")
	e.put("bkt", "y", y, "hdd=2")
	e.l.SealIdle(ctx, 0)
	E := e.egroupOf("bkt", "x")
	if e.egroupOf("bkt", "y") != E {
		t.Fatal("x and y in different egroups: the test needs them together")
	}
	nodeB, err := New(e.kv, e.local, e.local, Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeB.Close()
	readB := func() ([]byte, error) {
		_, rc, err := nodeB.Get(ctx, "bkt", "y", 0, -1)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	if got, err := readB(); err != nil || !bytes.Equal(got, y) {
		t.Fatalf("B read: %v", err)
	}
	// Node A: move y's extents out of E, then cut E's dead tail.
	var ymoves []ExtentMove
	var keepEnd int64
	yloc, _ := e.l.Locate(ctx, "bkt", "y")
	yids := map[uint64]bool{}
	for _, x := range yloc.Extents {
		yids[x.Extent] = true
	}
	for _, xr := range e.extentsIn(E) {
		if yids[xr.id] {
			ymoves = append(ymoves, ExtentMove{ID: xr.id, ModRev: xr.rev, Len: xr.x.Len})
		} else {
			keepEnd = max(keepEnd, xr.x.Off+extent.EncodedLen(xr.x.StoredLen()))
		}
	}
	if _, err := e.l.Relocate(ctx, model.MustParseVector("hdd=2"), model.Vector{}, ymoves); err != nil {
		t.Fatal(err)
	}
	_, rev, _ := e.l.Egroup(ctx, E)
	if _, err := e.l.TruncateEgroup(ctx, E, rev, keepEnd); err != nil {
		t.Fatal(err)
	}
	// Node B reads y again.
	if got, err := readB(); err != nil || !bytes.Equal(got, y) {
		t.Fatalf("B read after: %v", err)
	}
	eg, _, _ := e.l.Egroup(ctx, E)
	for _, r := range eg.Replicas {
		if r.Bad {
			t.Errorf("healthy replica of %x on %s marked bad by a read at a stale location", E, r.Device)
		}
	}
	e.mustRead("bkt", "x", x)
	t.Logf("egroup %x replicas now: %+v", E, eg.Replicas)
}
