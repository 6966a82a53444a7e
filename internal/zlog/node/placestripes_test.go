package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
)

// TestPlaceStripesSpreadsPrimaries: for many seeds, a 4-stripe any=2 log
// on three equal nodes has its stripes' replicas on distinct nodes and
// its primaries (each stripe's first replica) on at least two nodes, no
// node primary of more than two stripes.
func TestPlaceStripesSpreadsPrimaries(t *testing.T) {
	var nodes []model.Node
	var devs []model.Device
	for n := 1; n <= 3; n++ {
		id := model.NodeID(fmt.Sprintf("n%d", n))
		nodes = append(nodes, model.Node{ID: id, Up: true})
		for d := range 2 {
			devs = append(devs, model.Device{ID: model.DeviceID(fmt.Sprintf("%s/hdd%d", id, d)), Node: id, Tier: model.TierHDD,
				State: model.DeviceUp, CapacityBytes: 1 << 40, ReadBps: 100e6, WriteBps: 100e6})
		}
	}
	snap := model.NewSnapshot(time.Unix(1_800_000_000, 0), nodes, devs)
	pol, err := placement.New(placement.Config{Name: "moop"})
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 200; seed++ {
		s := &Service{cfg: Config{Policy: pol, Snapshot: func() *model.Snapshot { return snap }}, rng: rand.New(rand.NewPCG(seed, 1))}
		stripes, err := s.placeStripes(layout.Record{Name: "l", Vector: "any=2", Stripes: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		primaries := map[string]int{}
		for _, st := range stripes {
			if len(st) != 2 || st[0].Node == st[1].Node {
				t.Fatalf("seed %d: stripe %v", seed, st)
			}
			primaries[st[0].Node]++
		}
		for n, k := range primaries {
			if k > 2 {
				t.Fatalf("seed %d: %s is primary of %d of 4 stripes: %v", seed, n, k, stripes)
			}
		}
	}
}
