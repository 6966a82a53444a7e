package scanbench

import (
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator"
)

func TestValidate(t *testing.T) {
	ok := Options{Binary: "terrace", Dir: "/tmp/x"}
	ok.EnsureDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mod := range map[string]func(*Options){
		"no binary":        func(o *Options) { o.Binary = "" },
		"no egroups":       func(o *Options) { o.Egroups = -1 },
		"fraction > 1":     func(o *Options) { o.AccessFraction = 1.5 },
		"zero runs":        func(o *Options) { o.Runs = -2 },
		"a 0-node size":    func(o *Options) { o.Sizes = []int{3, 0} },
		"10 nodes":         func(o *Options) { o.Sizes = []int{10} },
		"extents, partial": func(o *Options) { o.Extents = 2 },
		"17 extents":       func(o *Options) { o.Full, o.Extents = true, 17 },
	} {
		o := ok
		mod(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSpreadOverAndTable(t *testing.T) {
	parts := map[string]string{"egroups/0": "n1", "egroups/1": "n2", "extents/0": "n3", "extents/1": "n1 (n2 failed: refused)"}
	if !spreadOver(parts, 3) || spreadOver(parts, 4) || spreadOver(map[string]string{"egroups/0": "n1"}, 1) {
		t.Fatal("spreadOver")
	}
	if spreadOver(map[string]string{"egroups/0": "n1", "egroups/1": "n1 (n2 failed: x)"}, 2) {
		t.Fatal("a fallback counted as the failed node's work")
	}
	tab := Table(&Result{Egroups: 10, Rows: []Row{{Nodes: 3, Mode: "spread", Median: 1.5, EgroupsPerSec: 6.7, MasterCPU: 0.5, TotalCPU: 1.2,
		PerNode: []curator.NodeScan{{Node: "n1", Records: 4, RecordsPerS: 2}}}}})
	if !strings.Contains(tab, "| 3 | spread | 1.50 | 7 |") || !strings.Contains(tab, "0.50 / 1.20") || !strings.Contains(tab, "n1 4 @ 2/s") {
		t.Fatalf("table:\n%s", tab)
	}
	if full := Table(&Result{Egroups: 10, Full: true, Extents: 4}); !strings.Contains(full, "full scan of 10 egroup records (+ access records, 40 extent and 40 object records)") {
		t.Fatalf("full-scan table:\n%s", full)
	}
	if median([]float64{3, 1, 2}) != 2 || median([]float64{5}) != 5 {
		t.Fatal("median")
	}
}
