package decide

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// stripeCluster is 3 nodes with 3 hdd devices each.
func stripeCluster() *model.Snapshot {
	var nodes []model.Node
	var devs []model.Device
	for n := 1; n <= 3; n++ {
		id := model.NodeID("n" + string(rune('0'+n)))
		nodes = append(nodes, model.Node{ID: id, Rack: "r1", Up: true})
		for d := 0; d < 3; d++ {
			devs = append(devs, model.Device{ID: model.DeviceID(string(id) + "/hdd" + string(rune('0'+d))), Node: id, Tier: model.TierHDD,
				State: model.DeviceUp, CapacityBytes: 1 << 40, ReadBps: 100e6, WriteBps: 100e6})
		}
	}
	return model.NewSnapshot(t0, nodes, devs)
}

func stripeEgroup(devs ...string) Egroup {
	eg := Egroup{ID: 9, ModRev: 90, Size: 4 << 20, FileBytes: 1 << 20, EC: ECShape{4, 2}, Vector: model.MustParseVector("any=3")}
	for _, d := range devs {
		eg.Replicas = append(eg.Replicas, Replica{Replica: model.Replica{Device: model.DeviceID(d), Node: model.NodeID(d[:2]), Tier: model.TierHDD}})
	}
	return eg
}

func TestRecoverStripe(t *testing.T) {
	pol, _ := placement.New(placement.Config{Name: "moop"})
	rng := rand.New(rand.NewPCG(1, 2))
	s := stripeCluster()
	eg := stripeEgroup("n1/hdd0", "n2/hdd0", "n3/hdd0", "n1/hdd1", "n2/hdd1", "n3/hdd1")
	if ts, err := Recovery(s, eg, pol, rng); err != nil || len(ts) != 0 {
		t.Fatalf("healthy stripe: %v %v", ts, err)
	}
	// Two strips lost: one bad, one on a failed device.
	eg.Replicas[1].Bad = true
	devs := append([]model.Device(nil), s.Devices...)
	for i := range devs {
		if devs[i].ID == "n3/hdd1" {
			devs[i].State = model.DeviceFailed
		}
	}
	s2 := model.NewSnapshot(t0, s.Nodes, devs)
	ts, err := Recovery(s2, eg, pol, rng)
	if err != nil || len(ts) != 1 || ts[0].Kind != KindRebuild || len(ts[0].Add) != 2 || len(ts[0].Remove) != 2 {
		t.Fatalf("two lost strips: %v %v", ts, err)
	}
	used := map[model.DeviceID]bool{}
	for _, r := range eg.Replicas {
		used[r.Device] = true
	}
	for _, a := range ts[0].Add {
		if used[a.Device] {
			t.Errorf("new strip on %s, which already holds a strip of the egroup", a.Device)
		}
		used[a.Device] = true
	}
	// A strip on a node down for less than NodeDownAfter is waited for.
	nodes := append([]model.Node(nil), s.Nodes...)
	nodes[0].Up = false
	if ts, err := Recovery(model.NewSnapshot(t0, nodes, s.Devices), stripeEgroup("n1/hdd0", "n2/hdd0", "n3/hdd0", "n1/hdd1", "n2/hdd1", "n3/hdd1"), pol, rng); err != nil || len(ts) != 0 {
		t.Fatalf("node briefly down: %v %v", ts, err)
	}
	// Three of 4+2 lost: no task, an error.
	eg.Replicas[0].Bad, eg.Replicas[2].Bad = true, true
	if ts, err := Recovery(s2, eg, pol, rng); err == nil || len(ts) != 0 || !strings.Contains(err.Error(), "cannot rebuild") {
		t.Fatalf("three lost strips: %v %v", ts, err)
	}
}

// TestRecoverStripeReadsDrainingStrips: a 4+2 stripe on three nodes, one
// node draining (two strips) and one other strip bad. Only three strips
// are good off the draining node, but the two on it are still readable:
// the rebuild must be planned (five readable strips), not refused as data
// loss, or the drain never completes.
func TestRecoverStripeReadsDrainingStrips(t *testing.T) {
	pol, _ := placement.New(placement.Config{Name: "moop"})
	rng := rand.New(rand.NewPCG(1, 2))
	s := stripeCluster()
	devs := append([]model.Device(nil), s.Devices...)
	for i := range devs {
		if devs[i].Node == "n1" {
			devs[i].State = model.DeviceDraining
		}
	}
	// A fourth node takes the moved strips.
	nodes := append(append([]model.Node(nil), s.Nodes...), model.Node{ID: "n4", Rack: "r1", Up: true})
	for d := 0; d < 3; d++ {
		devs = append(devs, model.Device{ID: model.DeviceID("n4/hdd" + string(rune('0'+d))), Node: "n4", Tier: model.TierHDD,
			State: model.DeviceUp, CapacityBytes: 1 << 40, ReadBps: 100e6, WriteBps: 100e6})
	}
	eg := stripeEgroup("n1/hdd0", "n2/hdd0", "n3/hdd0", "n1/hdd1", "n2/hdd1", "n3/hdd1")
	eg.Replicas[2].Bad = true
	ts, err := Recovery(model.NewSnapshot(t0, nodes, devs), eg, pol, rng)
	if err != nil || len(ts) != 1 || ts[0].Kind != KindRebuild || len(ts[0].Remove) != 3 {
		t.Fatalf("drain with one bad strip: %v %v, want one rebuild of three strips", ts, err)
	}
	// Draining strips on a node that is down are not readable.
	nodes[0].Up = false
	if ts, err := Recovery(model.NewSnapshot(t0, nodes, devs), eg, pol, rng); len(ts) != 0 {
		t.Fatalf("draining node down: %v %v, want no task", ts, err)
	}
}
