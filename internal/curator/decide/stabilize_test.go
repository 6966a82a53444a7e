package decide

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// A node that is down for less than NodeDownAfter is waited for; past it,
// its replicas are re-created elsewhere.
func TestRecoveryWaitsForStabilisation(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var nodes []model.Node
	var devs []model.Device
	for _, n := range []model.NodeID{"n1", "n2", "n3", "n4"} {
		nodes = append(nodes, model.Node{ID: n, Rack: "r1", Up: n != "n3"})
		devs = append(devs, model.Device{ID: model.DeviceID(n + "/hdd0"), Node: n, Rack: "r1", Tier: model.TierHDD,
			CapacityBytes: 1 << 40, ReadBps: 1e8, WriteBps: 1e8})
	}
	s := model.NewSnapshot(now, nodes, devs)
	eg := Egroup{ID: 7, ModRev: 3, Size: 1 << 20, Vector: model.MustParseVector("hdd=3")}
	for _, n := range []string{"n1", "n2", "n3"} {
		eg.Replicas = append(eg.Replicas, Replica{Replica: model.Replica{Device: model.DeviceID(n + "/hdd0"), Node: model.NodeID(n), Tier: model.TierHDD}})
	}
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	o := Options{}
	o.EnsureDefaults()
	rng := rand.New(rand.NewPCG(1, 1))

	down := map[model.NodeID]time.Time{"n3": now.Add(-time.Minute)}
	tasks, err := Recovery(Health(s, down, o), eg, pol, rng)
	if err != nil || len(tasks) != 0 {
		t.Fatalf("node down 1 min (< %s): tasks %v, err %v; want none", o.NodeDownAfter, tasks, err)
	}
	down["n3"] = now.Add(-o.NodeDownAfter - time.Second)
	tasks, err = Recovery(Health(s, down, o), eg, pol, rng)
	if err != nil || len(tasks) != 1 || len(tasks[0].Add) != 1 || tasks[0].Add[0].Node != "n4" {
		t.Fatalf("node down past %s: tasks %v, err %v; want one add on n4", o.NodeDownAfter, tasks, err)
	}
}
