package decide

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// fourNodes is four nodes with one hdd each; down nodes are given.
func fourNodes(now time.Time, down ...model.NodeID) *model.Snapshot {
	var nodes []model.Node
	var devs []model.Device
	for _, n := range []model.NodeID{"n1", "n2", "n3", "n4"} {
		up := true
		for _, d := range down {
			up = up && d != n
		}
		nodes = append(nodes, model.Node{ID: n, Rack: "r1", Up: up})
		devs = append(devs, model.Device{ID: model.DeviceID(n + "/hdd0"), Node: n, Rack: "r1", Tier: model.TierHDD,
			CapacityBytes: 1 << 40, ReadBps: 1e8, WriteBps: 1e8})
	}
	return model.NewSnapshot(now, nodes, devs)
}

func hddEgroup(bad string, on ...string) Egroup {
	eg := Egroup{ID: 7, ModRev: 3, Size: 1 << 20, Vector: model.MustParseVector("hdd=3")}
	for _, n := range on {
		eg.Replicas = append(eg.Replicas, Replica{Replica: model.Replica{Device: model.DeviceID(n + "/hdd0"), Node: model.NodeID(n), Tier: model.TierHDD}, Bad: n == bad})
	}
	return eg
}

// TestParkedReplicaDoesNotBlockRepair: hdd=3 on n1, n2, n3; n2's replica
// is bad and n3 has been down for a minute (less than NodeDownAfter). The
// bad replica is replaced now (on n4, not on the down node), and the
// parked one is kept and counted: waiting for n3 would leave one good
// copy for as long as n3 flaps.
func TestParkedReplicaDoesNotBlockRepair(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	o := Options{}
	o.EnsureDefaults()
	down := map[model.NodeID]time.Time{"n3": now.Add(-time.Minute)}
	s := Health(fourNodes(now, "n3"), down, o)
	tasks, err := Recovery(s, hddEgroup("n2", "n1", "n2", "n3"), pol, rand.New(rand.NewPCG(1, 1)))
	if err != nil || len(tasks) != 1 {
		t.Fatalf("one good, one bad, one parked: tasks %v, err %v; want the bad one replaced", tasks, err)
	}
	tk := tasks[0]
	if len(tk.Add) != 1 || tk.Add[0].Node != "n4" || len(tk.Remove) != 1 || tk.Remove[0].Node != "n2" {
		t.Fatalf("task %v: want n2's bad replica replaced on n4, n3's kept", tk)
	}
	// Without a bad or lost replica the parked one is simply waited for.
	if tasks, err := Recovery(s, hddEgroup("", "n1", "n2", "n3"), pol, rand.New(rand.NewPCG(1, 1))); err != nil || len(tasks) != 0 {
		t.Fatalf("healthy but for a parked replica: %v %v, want nothing until NodeDownAfter", tasks, err)
	}
}

// TestBadReplicaNotOverwrittenInPlace: a bad replica's file may still hold
// the only good copy of some slices, and a copy onto its device would
// overwrite it before the new copy is verified. Another device is used
// whenever there is one; only when none is left does the repair go there.
func TestBadReplicaNotOverwrittenInPlace(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	eg := hddEgroup("n2", "n1", "n2")
	eg.Vector = model.MustParseVector("hdd=2")
	for seed := uint64(0); seed < 20; seed++ {
		tasks, err := Recovery(fourNodes(now), eg, pol, rand.New(rand.NewPCG(seed, 1)))
		if err != nil || len(tasks) != 1 || len(tasks[0].Add) != 1 {
			t.Fatalf("seed %d: %v %v", seed, tasks, err)
		}
		if tasks[0].Add[0].Device == "n2/hdd0" {
			t.Fatalf("seed %d: placed onto the bad replica's device with n3 and n4 free: %v", seed, tasks[0])
		}
	}
	// Two nodes only: the bad replica's device is the one left.
	two := model.NewSnapshot(now, fourNodes(now).Nodes[:2], fourNodes(now).Devices[:2])
	tasks, err := Recovery(two, eg, pol, rand.New(rand.NewPCG(1, 1)))
	if err != nil || len(tasks) != 1 || len(tasks[0].Add) != 1 || tasks[0].Add[0].Device != "n2/hdd0" {
		t.Fatalf("no other device: %v %v, want the repair in place", tasks, err)
	}
}
