package scansim

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
)

// count counts the records under prefix in the store Run left in dir.
func count(t *testing.T, dir string, prefixes ...string) int {
	t.Helper()
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	n := 0
	for _, p := range prefixes {
		items, err := kv.Scan(context.Background(), []byte(p), meta.PrefixEnd([]byte(p)), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		n += len(items)
	}
	return n
}

// A partial and a full scan over small synthetic maps read every record
// loaded, see every egroup, and report a time, a rate and a peak.
func TestRun(t *testing.T) {
	for _, full := range []bool{false, true} {
		dir := t.TempDir()
		o := Options{Egroups: 3000, Nodes: 4, Full: full, Extents: 3, Dir: dir}
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		want := count(t, dir, meta.PrefixEgroup, meta.PrefixAccess)
		if full {
			want += count(t, dir, meta.PrefixExtent, meta.PrefixObject)
		}
		if n := count(t, dir, meta.PrefixEgroup); n != o.Egroups {
			t.Fatalf("loaded %d egroups, want %d", n, o.Egroups)
		}
		if r.Records != want {
			t.Fatalf("full=%v: the scan read %d records, the store holds %d", full, r.Records, want)
		}
		if r.ScanSecs <= 0 || r.RecordsPerSec <= 0 || r.PeakRSS == 0 || r.PeakHeap == 0 || r.ScanRSS == 0 || r.ScanHeap == 0 {
			t.Fatalf("full=%v: nothing measured: %+v", full, r)
		}
		// One egroup in a thousand has a bad replica or is open (its
		// writer up): 3000 egroups give recoveries to plan.
		if r.Tasks == 0 {
			t.Fatalf("full=%v: no tasks decided: %+v", full, r)
		}
	}
}

func TestRunRejects(t *testing.T) {
	if _, err := Run(context.Background(), Options{Nodes: 1}); err == nil {
		t.Fatal("one node accepted")
	}
	if _, err := Run(context.Background(), Options{Extents: 64}); err == nil {
		t.Fatal("64 extents per egroup accepted")
	}
}
