package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TestPromotionsMatchTiering is a seeded property: on random clusters and
// access patterns, the event-driven Promotions decide exactly the tier-up
// tasks a scan's Tiering would (same thresholds, same order, same seed),
// so promoting between scans never decides differently from a scan; and
// every promotion is of an egroup read PromoteReads times in the window,
// to a faster tier whose usage is under DownAbove.
func TestPromotionsMatchTiering(t *testing.T) {
	pol, _ := placement.New(placement.Config{Name: placement.NameFitness})
	now := time.Unix(1_000_000, 0)
	promoted := 0
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		var devs []model.Device
		tiers := []model.Tier{model.TierSSD, model.TierHDD}
		nodes := 1 + r.IntN(3)
		var ns []model.Node
		for n := range nodes {
			node := model.NodeID(fmt.Sprintf("n%d", n+1))
			ns = append(ns, model.Node{ID: node, Up: true})
			for _, tier := range tiers {
				capacity := int64(1000 + r.IntN(4000))
				devs = append(devs, model.Device{ID: model.DeviceID(fmt.Sprintf("%s/%s0", node, tier)), Node: node, Tier: tier,
					CapacityBytes: capacity, UsedBytes: int64(r.Float64() * float64(capacity))})
			}
		}
		var egs []Egroup
		for i := range 5 + r.IntN(40) {
			d := devs[r.IntN(len(devs))]
			egs = append(egs, Egroup{ID: uint64(i + 1), ModRev: int64(i + 10), Size: int64(1 + r.IntN(100)), Vector: model.MustParseVector("any=1"),
				Mtime: now.Add(-time.Duration(r.IntN(100)) * time.Hour), Atime: now.Add(-time.Duration(r.IntN(120)) * time.Minute),
				Reads:    int64(r.IntN(8)),
				Replicas: []Replica{{Replica: model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}}}})
		}
		s := model.NewSnapshot(now, ns, devs)
		o := TierOptions{HotWindow: time.Hour, PromoteReads: int64(1 + r.IntN(5))}
		got := Promotions(s, egs, pol, o, rand.New(rand.NewPCG(seed, 1)))
		var want []Task
		for _, tk := range Tiering(s, egs, pol, o, rand.New(rand.NewPCG(seed, 1))) {
			if tk.Kind == KindTierUp {
				want = append(want, tk)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: Promotions %v, Tiering's promotions %v", seed, got, want)
		}
		promoted += len(got)
		o.EnsureDefaults()
		byID := map[uint64]Egroup{}
		for _, eg := range egs {
			byID[eg.ID] = eg
		}
		for _, tk := range got {
			eg := byID[tk.Egroup]
			if eg.Reads < o.PromoteReads || now.Sub(eg.Atime) > o.HotWindow {
				t.Fatalf("seed %d: promoted %v with %d reads, last %s ago", seed, tk, eg.Reads, now.Sub(eg.Atime))
			}
			if tk.Add[0].Tier.Rank() >= tk.Remove[0].Tier.Rank() {
				t.Fatalf("seed %d: %v is not a promotion", seed, tk)
			}
		}
	}
	if promoted < 50 {
		t.Fatalf("only %d promotions over 300 seeds: the property is nearly vacuous", promoted)
	}
}
