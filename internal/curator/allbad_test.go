package curator

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
)

// flipAt flips one byte at the given fraction of the egroup's first size
// bytes in replica dev's file.
func flipAt(t *testing.T, e *env, eg uint64, dev model.DeviceID, size int64, frac float64) {
	st, _ := e.local.Store(dev)
	p := filepath.Join(st.Device().Spec().Path, extent.FileName(eg))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[int(float64(size)*frac)] ^= 0x5a
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAllBadEgroupRelocated: both replicas of an egroup have one corrupt
// slice each, in different extents, and both are marked bad. A read
// returns every byte (it falls back across replicas). A move copies only from a good
// replica, so recovery relocates the live extents instead, each read from
// whichever replica verifies, and the object ends on replicas that are
// whole.
func TestAllBadEgroupRelocated(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	want := data(31, 400_000)
	e.put("k", want, "hdd=2")
	e.l.SealIdle(ctx, -1)
	loc, err := e.l.Locate(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	id := loc.Extents[0].Egroup
	eg, _, _ := e.l.Egroup(ctx, id)
	flipAt(t, e, id, eg.Replicas[0].Device, eg.Size, 0.15)
	flipAt(t, e, id, eg.Replicas[1].Device, eg.Size, 0.85)
	for _, r := range eg.Replicas {
		if err := e.l.VerifyReplica(ctx, r.Replica(), id, eg.Size); err == nil {
			t.Fatalf("replica %s verifies after the flip", r.Device)
		}
	}
	// Reads (and scrub) mark a replica bad for one slice; here both are.
	for _, r := range eg.Replicas {
		e.l.MarkReplicaBad(ctx, id, r.Device)
	}
	e.check("k", want)   // every byte still readable: extents fall back across replicas
	rec := e.run("full") // relocation needs the live extents, which full scans list
	if rec.Done[string(decide.KindCompact)] != 1 {
		t.Fatalf("full scan did %v planned %v stale %d (errors %v), want the all-bad egroup's extents relocated", rec.Done, rec.Planned, rec.Stale, rec.Errors)
	}
	e.check("k", want)
	loc, err = e.l.Locate(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range loc.Extents {
		if x.Egroup == id {
			t.Fatalf("extent %d still in the all-bad egroup", x.Extent)
		}
		neg, _, err := e.l.Egroup(ctx, x.Egroup)
		if err != nil {
			t.Fatal(err)
		}
		good := 0
		for _, r := range neg.Replicas {
			if !r.Bad {
				good++
			}
		}
		if good != 2 {
			t.Fatalf("new egroup %d has %d good replicas: %+v", x.Egroup, good, neg.Replicas)
		}
	}
	e.run("full") // data removal reclaims the emptied egroup
	e.run("full")
	if _, _, err := e.l.Egroup(ctx, id); err == nil {
		t.Logf("the emptied egroup is still recorded after two full scans (garbage grace)")
	}
	e.check("k", want)
}
