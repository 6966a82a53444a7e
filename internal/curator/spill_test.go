package curator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
)

// spillEnv is an env with objects written, overwritten and deleted, so a
// full scan has live, dead and shared extents, history and several
// egroups.
func spillEnv(t *testing.T) *env {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		e.put(fmt.Sprintf("k%02d", i), data(uint64(i), 150<<10), "ssd=1,hdd=1")
	}
	for i := 0; i < 30; i += 4 {
		e.put(fmt.Sprintf("k%02d", i), data(uint64(100+i), 90<<10), "ssd=1,hdd=1") // overwrite
	}
	for i := 1; i < 30; i += 5 {
		if err := e.l.Delete(ctx, "bkt", fmt.Sprintf("k%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// describeFull is everything a full scan hands the decisions: the
// summary, each egroup's live extents, the garbage and the history.
func describeFull(r *scanResult) string {
	var b strings.Builder
	b.WriteString(summarizeScan(r))
	for _, eg := range r.egroups {
		fmt.Fprintf(&b, "\n%d tail=%d live:", eg.ID, eg.TailEnd)
		xs, _ := r.liveOf(eg.ID)
		for _, x := range xs {
			fmt.Fprintf(&b, " %d@%d+%d", x.id, x.off, x.stored)
		}
	}
	for _, x := range r.deadExtents {
		fmt.Fprintf(&b, "\ndead %d@%d", x.id, x.modRev)
	}
	fmt.Fprintf(&b, "\nhistory %v dedup %d", r.history, len(r.dedup))
	return b.String()
}

// fullScanWith runs a full scan with the given spill budget and
// directory, released when the test ends.
func fullScanWith(t *testing.T, e *env, budget int64, dir string) *scanResult {
	t.Helper()
	e.c.opts.ScanMemoryBytes, e.c.opts.ScanSpillDir = budget, dir
	res, err := e.c.scan(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.release)
	return res
}

// spillMappings counts this process's mappings of spill files.
func spillMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(b), "terrace-scan-spill-")
}

// TestSpilledFullScanEqualsHeapScan: a full scan whose extent arrays are
// all spilled to mapped files (a 1-byte budget), or spilled part way,
// finds exactly what a scan holding them on the heap finds, and its
// mappings are gone once the result is released.
func TestSpilledFullScanEqualsHeapScan(t *testing.T) {
	e := spillEnv(t)
	ctx := context.Background()
	heap := fullScanWith(t, e, -1, "")
	if heap.spilled != 0 {
		t.Fatalf("no budget, yet %d bytes spilled", heap.spilled)
	}
	if len(heap.deadExtents) == 0 || len(heap.extents) == 0 {
		t.Fatalf("the scan saw %d extents, %d dead: nothing to compare", len(heap.extents), len(heap.deadExtents))
	}
	want := describeFull(heap)
	before := spillMappings(t)
	for _, budget := range []int64{1, int64(len(heap.extents)) * 64 / 2} {
		e.c.opts.ScanMemoryBytes, e.c.opts.ScanSpillDir = budget, t.TempDir()
		got, err := e.c.scan(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if got.spilled == 0 {
			t.Fatalf("budget %d: nothing spilled", budget)
		}
		if n := spillMappings(t); n <= before {
			t.Fatalf("budget %d: %d spill mappings, %d before: the arrays are not in mapped files", budget, n, before)
		}
		if d := describeFull(got); d != want {
			t.Fatalf("budget %d: the spilled scan differs:\n got %s\nwant %s", budget, d, want)
		}
		got.release()
		if n := spillMappings(t); n != before {
			t.Fatalf("budget %d: %d spill mappings after release, %d before", budget, n, before)
		}
		if ents, _ := os.ReadDir(e.c.opts.ScanSpillDir); len(ents) != 0 {
			t.Fatalf("budget %d: spill files left in the directory: %v", budget, ents)
		}
	}
}

// TestSpillFallsBackToHeap: a spill directory that cannot take files
// (missing, here; a full disk fails fallocate the same way) keeps the
// arrays on the heap: the scan is the same, only not bounded.
func TestSpillFallsBackToHeap(t *testing.T) {
	e := spillEnv(t)
	heap := fullScanWith(t, e, -1, "")
	got := fullScanWith(t, e, 1, filepath.Join(t.TempDir(), "missing"))
	if got.spilled != 0 {
		t.Fatalf("%d bytes spilled into a missing directory", got.spilled)
	}
	if d, w := describeFull(got), describeFull(heap); d != w {
		t.Fatalf("the scan differs:\n got %s\nwant %s", d, w)
	}
}

// TestJobWithSpilledScanRemovesGarbageOnly: a whole full job — scan,
// decide, execute — with every extent array spilled removes the garbage
// and keeps every object readable.
func TestJobWithSpilledScanRemovesGarbageOnly(t *testing.T) {
	e := spillEnv(t)
	e.c.opts.ScanMemoryBytes, e.c.opts.ScanSpillDir = 1, t.TempDir()
	before := spillMappings(t)
	rec := e.run("full")
	if rec.Done[string(decide.KindRemoveExtents)] == 0 {
		t.Fatalf("no garbage removed: %+v", rec.Done)
	}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("k%02d", i)
		switch {
		case i%5 == 1:
			continue // deleted
		case i%4 == 0:
			e.check(k, data(uint64(100+i), 90<<10))
		default:
			e.check(k, data(uint64(i), 150<<10))
		}
	}
	if n := spillMappings(t); n != before {
		t.Fatalf("%d spill mappings after the job, %d before", n, before)
	}
}
