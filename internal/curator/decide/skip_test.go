package decide

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Tiering with TierOptions.Skip decides exactly what Tiering decides over
// the egroups without the skipped ones (seeded property: random egroups,
// reads and skip sets, with the ssd tier over f so that it demotes).
func TestTieringSkipIsFiltering(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	devs := []model.Device{
		{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD, CapacityBytes: 10000, UsedBytes: 9000},
		{ID: "n2/ssd0", Node: "n2", Tier: model.TierSSD, CapacityBytes: 10000, UsedBytes: 8000},
		{ID: "n1/hdd0", Node: "n1", Tier: model.TierHDD, CapacityBytes: 100000, UsedBytes: 1000},
		{ID: "n2/hdd0", Node: "n2", Tier: model.TierHDD, CapacityBytes: 100000, UsedBytes: 1000},
	}
	s := model.NewSnapshot(now, []model.Node{{ID: "n1", Up: true}, {ID: "n2", Up: true}}, devs)
	pol, _ := placement.New(placement.Config{Name: placement.NameFitness})
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 5))
		var egs []Egroup
		skip := map[uint64]bool{}
		for i := range 200 {
			d := devs[rng.IntN(len(devs))]
			eg := Egroup{ID: uint64(i + 1), Size: 10 + rng.Int64N(90), Vector: model.MustParseVector("any=1"), Open: rng.IntN(20) == 0,
				Mtime: now.Add(-time.Duration(rng.IntN(1000)) * time.Minute), Atime: now.Add(-time.Duration(rng.IntN(100)) * time.Minute), Reads: rng.Int64N(6),
				Replicas: []Replica{{Replica: model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}}}}
			egs = append(egs, eg)
			if rng.IntN(4) == 0 {
				skip[eg.ID] = true
			}
		}
		var kept []Egroup
		for _, eg := range egs {
			if !skip[eg.ID] {
				kept = append(kept, eg)
			}
		}
		want := Tiering(s, kept, pol, TierOptions{}, rand.New(rand.NewPCG(seed, 9)))
		got := Tiering(s, egs, pol, TierOptions{Skip: skip}, rand.New(rand.NewPCG(seed, 9)))
		if len(want) == 0 {
			t.Fatalf("seed %d: no tiering tasks: the property is not exercised", seed)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: with Skip\n%v\nwant (filtered)\n%v", seed, got, want)
		}
		for _, tk := range got {
			if skip[tk.Egroup] {
				t.Fatalf("seed %d: skipped egroup %d moved: %v", seed, tk.Egroup, tk)
			}
		}
	}
}

// A scan keeps one Egroup per egroup: its booleans stay packed together
// (each one alone between 8-byte fields would pad to 8 bytes).
func TestEgroupSize(t *testing.T) {
	if n := unsafe.Sizeof(Egroup{}); n > 256 {
		t.Fatalf("Egroup is %d bytes, want at most 256", n)
	}
}
