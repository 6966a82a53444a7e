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
		checkRefused(t, seed, s, egs, o, got, refused)
		refusedTotal += len(refused)
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
func checkRefused(t *testing.T, seed uint64, s *model.Snapshot, egs []Egroup, o TierOptions, tasks []Task, ids []uint64) {
	t.Helper()
	promoted, refused := len(tasks), len(ids)
	isHotOnHDD := map[uint64]bool{}
	for _, eg := range egs {
		if eg.Reads >= o.PromoteReads && s.Now.Sub(eg.Atime) <= o.HotWindow && eg.Replicas[0].Tier == model.TierHDD {
			isHotOnHDD[eg.ID] = true
		}
	}
	seen := map[uint64]bool{}
	for _, tk := range tasks {
		seen[tk.Egroup] = true
	}
	for _, id := range ids {
		if !isHotOnHDD[id] || seen[id] {
			t.Fatalf("seed %d: refused egroup %d is not a hot egroup on hdd left in place (or is listed twice)", seed, id)
		}
		seen[id] = true
	}
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
	case promoted+refused > hot:
		t.Fatalf("seed %d: %d promoted + %d refused of %d hot egroups on hdd", seed, promoted, refused, hot)
	case u >= o.DownAbove && (promoted != 0 || refused != hot):
		t.Fatalf("seed %d: ssd at %.2f ≥ f=%.2f: want all %d hot egroups refused, got %d promoted, %d refused", seed, u, o.DownAbove, hot, promoted, refused)
	case float64(used+hotBytes) < o.DownAbove*float64(capacity) && refused != 0:
		t.Fatalf("seed %d: ssd at %.2f has room below f for every hot egroup (%d bytes), yet %d refused", seed, u, hotBytes, refused)
	}
}

// StillStarved: an egroup refused promotion counts as starvation while its
// window reads reach StarveReads (default ten times PromoteReads) and it
// has no replica on the fastest local tier.
func TestStillStarved(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	devs := []model.Device{{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD, CapacityBytes: 100}, {ID: "n1/hdd0", Node: "n1", Tier: model.TierHDD, CapacityBytes: 1000}}
	s := model.NewSnapshot(now, []model.Node{{ID: "n1", Up: true}}, devs)
	on := func(tier model.Tier) []Replica {
		return []Replica{{Replica: model.Replica{Device: model.DeviceID("n1/" + string(tier) + "0"), Node: "n1", Tier: tier}}}
	}
	o := TierOptions{PromoteReads: 3, HotWindow: 10 * time.Minute}
	for _, c := range []struct {
		name string
		eg   Egroup
		o    TierOptions
		want bool
	}{
		{"hot on hdd", Egroup{Reads: 30, Atime: now, Replicas: on(model.TierHDD)}, o, true},
		{"lukewarm on hdd", Egroup{Reads: 29, Atime: now, Replicas: on(model.TierHDD)}, o, false},
		{"hot, window over", Egroup{Reads: 300, Atime: now.Add(-11 * time.Minute), Replicas: on(model.TierHDD)}, o, false},
		{"hot, promoted since", Egroup{Reads: 300, Atime: now, Replicas: on(model.TierSSD)}, o, false},
		{"explicit StarveReads", Egroup{Reads: 5, Atime: now, Replicas: on(model.TierHDD)}, TierOptions{PromoteReads: 3, StarveReads: 5}, true},
		{"promote reads scale the default", Egroup{Reads: 50, Atime: now, Replicas: on(model.TierHDD)}, TierOptions{PromoteReads: 10}, false},
		{"promote reads scale the default, hot", Egroup{Reads: 100, Atime: now, Replicas: on(model.TierHDD)}, TierOptions{PromoteReads: 10}, true},
	} {
		if got := StillStarved(s, c.eg, c.o); got != c.want {
			t.Errorf("%s: StillStarved = %v, want %v", c.name, got, c.want)
		}
	}
	// Without a faster tier there is nothing to starve for.
	hddOnly := model.NewSnapshot(now, []model.Node{{ID: "n1", Up: true}}, devs[1:])
	if StillStarved(hddOnly, Egroup{Reads: 300, Atime: now, Replicas: on(model.TierHDD)}, o) {
		t.Error("an egroup on the only tier counted as starved")
	}
}
