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
	promoted, refusedTotal := 0, 0
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
		got, refused := Promotions(s, egs, pol, o, rand.New(rand.NewPCG(seed, 1)))
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
		checkRefused(t, seed, s, egs, o, len(got), refused)
		refusedTotal += refused
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
	if refusedTotal < 50 {
		t.Fatalf("only %d refusals over 300 seeds: the refusal property is nearly vacuous", refusedTotal)
	}
}

// checkRefused states what Promotions' refusal count means on an
// ssd+hdd cluster: hot egroups on hdd are either promoted or refused or
// failed placement; all of them are refused when the ssd starts at or
// above f; none is when the ssd has room for all of them below f.
func checkRefused(t *testing.T, seed uint64, s *model.Snapshot, egs []Egroup, o TierOptions, promoted, refused int) {
	t.Helper()
	var used, capacity, hotBytes int64
	for _, d := range s.Devices {
		if d.Tier == model.TierSSD {
			used += d.UsedBytes
			capacity += d.CapacityBytes
		}
	}
	hot := 0
	for _, eg := range egs {
		if eg.Reads >= o.PromoteReads && s.Now.Sub(eg.Atime) <= o.HotWindow && eg.Replicas[0].Tier == model.TierHDD {
			hot++
			hotBytes += eg.Size
		}
	}
	switch u := float64(used) / float64(capacity); {
	case refused < 0 || promoted+refused > hot:
		t.Fatalf("seed %d: %d promoted + %d refused of %d hot egroups on hdd", seed, promoted, refused, hot)
	case u >= o.DownAbove && (promoted != 0 || refused != hot):
		t.Fatalf("seed %d: ssd at %.2f ≥ f=%.2f: want all %d hot egroups refused, got %d promoted, %d refused", seed, u, o.DownAbove, hot, promoted, refused)
	case float64(used+hotBytes) < o.DownAbove*float64(capacity) && refused != 0:
		t.Fatalf("seed %d: ssd at %.2f has room below f for every hot egroup (%d bytes), yet %d refused", seed, u, hotBytes, refused)
	}
}
