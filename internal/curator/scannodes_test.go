package curator

import (
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// TestScanNodes folds partition loads and queued tasks into one row per
// node: partitions and records summed, records/s over the node's wall
// time (first start to last end, partitions overlap), tasks queued for
// nodes that scanned nothing included, the unnamed queue left out.
func TestScanNodes(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	loads := []PartitionLoad{
		{Name: "g/0", Node: "n1", Records: 300, Start: t0, End: t0.Add(2 * time.Second)},
		{Name: "g/1", Node: "n1", Records: 100, Start: t0.Add(time.Second), End: t0.Add(4 * time.Second)},
		{Name: "g/2", Node: "n2", Records: 50, Start: t0, End: t0.Add(time.Second)},
		{Name: "x/0", Node: "n2"}, // never scanned: no start
	}
	got := scanNodes(loads, map[model.NodeID]int{"n2": 3, "n3": 7, "": 2})
	want := []NodeScan{
		{Node: "n1", Partitions: 2, Records: 400, RecordsPerS: 100},
		{Node: "n2", Partitions: 1, Records: 50, RecordsPerS: 50, TasksQueued: 3},
		{Node: "n3", TasksQueued: 7},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
