package decide

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// BenchmarkRecoveryHealthy is Recovery's cost for an egroup that needs
// nothing, which is nearly every egroup of every scan: 10 nodes of one
// ssd and two hdds, vector any=2.
func BenchmarkRecoveryHealthy(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	var nodes []model.Node
	var devs []model.Device
	for n := 1; n <= 10; n++ {
		id := model.NodeID(fmt.Sprintf("n%d", n))
		nodes = append(nodes, model.Node{ID: id, Rack: "r1", Up: true})
		for i, t := range []model.Tier{model.TierSSD, model.TierHDD, model.TierHDD} {
			devs = append(devs, model.Device{ID: model.DeviceID(fmt.Sprintf("%s/d%d", id, i)), Node: id, Tier: t,
				State: model.DeviceUp, CapacityBytes: 1 << 40})
		}
	}
	s := model.NewSnapshot(now, nodes, devs)
	pol, err := placement.New(placement.Config{})
	if err != nil {
		b.Fatal(err)
	}
	eg := Egroup{ID: 1, Size: 16 << 20, Vector: model.MustParseVector("any=2"), Replicas: []Replica{
		{Replica: model.Replica{Device: devs[0].ID, Node: devs[0].Node, Tier: devs[0].Tier}},
		{Replica: model.Replica{Device: devs[4].ID, Node: devs[4].Node, Tier: devs[4].Tier}},
	}}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		tasks, err := Recovery(s, eg, pol, rng)
		if err != nil || len(tasks) != 0 {
			b.Fatalf("healthy egroup: %v %v", tasks, err)
		}
	}
}
