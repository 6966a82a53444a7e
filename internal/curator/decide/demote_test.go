package decide

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TierOptions.DemoteAbove moves one tier's demotion trigger: below f it
// sheds h from the current usage, above the tier's usage it keeps the
// data; other tiers keep f.
func TestDemoteAbove(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	mk := func(ssdUsed, hddUsed int64) (*model.Snapshot, []Egroup) {
		devs := []model.Device{
			{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD, CapacityBytes: 1000, UsedBytes: ssdUsed},
			{ID: "n1/hdd0", Node: "n1", Tier: model.TierHDD, CapacityBytes: 10000, UsedBytes: hddUsed},
			{ID: "n1/remote0", Node: "n1", Tier: model.TierRemote, CapacityBytes: 100000},
		}
		var egs []Egroup
		for i := range ssdUsed / 10 {
			egs = append(egs, Egroup{ID: uint64(1 + i), Size: 10, Vector: model.MustParseVector("any=1"), Mtime: now.Add(-time.Duration(i+1) * time.Hour),
				Replicas: []Replica{{Replica: model.Replica{Device: "n1/ssd0", Node: "n1", Tier: model.TierSSD}}}})
		}
		return model.NewSnapshot(now, []model.Node{{ID: "n1", Up: true}}, devs), egs
	}
	pol, _ := placement.New(placement.Config{Name: placement.NameFitness})
	demoted := func(tasks []Task) (n int64) {
		for _, tk := range tasks {
			if tk.Kind == KindTierDown && tk.Remove[0].Tier == model.TierSSD {
				n += tk.Bytes
			}
		}
		return n
	}
	rng := rand.New(rand.NewPCG(1, 1))
	// ssd at 50 %: f alone does nothing; a trigger just under 50 % sheds
	// h = 15 % of 1000 bytes.
	s, egs := mk(500, 1000)
	if n := demoted(Tiering(s, egs, pol, TierOptions{}, rng)); n != 0 {
		t.Fatalf("demoted %d bytes below f", n)
	}
	o := TierOptions{DemoteAbove: map[model.Tier]float64{model.TierSSD: 0.49}}
	if n := demoted(Tiering(s, egs, pol, o, rng)); n != 150 {
		t.Fatalf("demoted %d bytes with the trigger under the usage, want 150 (h)", n)
	}
	// ssd at 85 %: over f, but a trigger of 0.9 keeps the data.
	s, egs = mk(850, 1000)
	if n := demoted(Tiering(s, egs, pol, TierOptions{}, rng)); n != 150 {
		t.Fatalf("threshold rule over f demoted %d bytes, want 150", n)
	}
	o = TierOptions{DemoteAbove: map[model.Tier]float64{model.TierSSD: 0.9}}
	if n := demoted(Tiering(s, egs, pol, o, rng)); n != 0 {
		t.Fatalf("demoted %d bytes under a 0.9 trigger", n)
	}
	// The override names the ssd only: an hdd over f still demotes to
	// remote under f.
	s, egs = mk(100, 8000)
	egs = append(egs, Egroup{ID: 99, Size: 1000, Vector: model.MustParseVector("any=1"), Mtime: now.Add(-100 * time.Hour),
		Replicas: []Replica{{Replica: model.Replica{Device: "n1/hdd0", Node: "n1", Tier: model.TierHDD}}}})
	var toRemote int
	for _, tk := range Tiering(s, egs, pol, o, rng) {
		if tk.Kind == KindTierDown && tk.Add[0].Tier == model.TierRemote {
			toRemote++
		}
	}
	if toRemote != 1 {
		t.Fatalf("hdd at 80 %% with an ssd-only override: %d demotions to remote, want 1", toRemote)
	}
}
