package decide

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// referenceColder is the demotion order as it was first written: the
// read count, last touch and rank hook evaluated inside every
// comparison. tierable now computes them once per egroup and must give
// exactly this order.
func referenceColder(now time.Time, o TierOptions, a, b *Egroup) bool {
	if o.Rank != nil {
		if ka, kb := o.Rank(*a), o.Rank(*b); ka != kb {
			return ka < kb
		}
	}
	ra, rb := windowReads(now, o, a), windowReads(now, o, b)
	if ra != rb {
		return ra < rb
	}
	return lastTouchOf(a).Before(lastTouchOf(b))
}

// TestTierableOrderMatchesReference: for seeded random scans — many ties
// in reads and times, egroups never read (zero atime), reads outside the
// hot window, with and without a rank hook — tierable returns the same
// egroups in the same order as a stable sort with the per-comparison
// reference.
func TestTierableOrderMatchesReference(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := model.NewSnapshot(now, nil, nil)
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := rng.IntN(300)
		egs := make([]Egroup, n)
		for i := range egs {
			eg := Egroup{ID: uint64(i + 1), Size: int64(1 + rng.IntN(3)), Mtime: now.Add(-time.Duration(rng.IntN(5)) * time.Hour)}
			switch rng.IntN(4) {
			case 0: // never read
			case 1: // read long ago: outside the window
				eg.Atime, eg.Reads = now.Add(-48*time.Hour), int64(rng.IntN(4))
			default:
				eg.Atime, eg.Reads = now.Add(-time.Duration(rng.IntN(3))*time.Minute), int64(rng.IntN(4))
			}
			if rng.IntN(20) == 0 {
				eg.Open = true
			}
			if rng.IntN(10) == 0 {
				eg.Mtime = time.Time{} // a view without times: sorts first
			}
			egs[i] = eg
		}
		o := TierOptions{}
		o.EnsureDefaults()
		switch seed % 3 {
		case 1:
			o.Rank = func(eg Egroup) float64 { return float64(eg.ID % 3) }
		case 2:
			o.Rank = func(eg Egroup) float64 {
				if eg.ID%11 == 0 {
					return math.Inf(1)
				}
				return -float64(eg.Size)
			}
		}
		got := tierable(s, egs, o)
		var want []*Egroup
		for i := range egs {
			if eg := &egs[i]; !eg.Open && eg.Size > 0 && eg.EC.K == 0 {
				want = append(want, eg)
			}
		}
		sort.SliceStable(want, func(i, j int) bool { return referenceColder(now, o, want[i], want[j]) })
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d tierable egroups, want %d", seed, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d: position %d is egroup %d, want %d", seed, i, got[i].ID, want[i].ID)
			}
		}
	}
}

// TestTierableCallsRankOncePerEgroup: a rank hook (a policy, possibly
// Lua) runs once per tierable egroup, not in every comparison.
func TestTierableCallsRankOncePerEgroup(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	egs := make([]Egroup, 1000)
	for i := range egs {
		egs[i] = Egroup{ID: uint64(i + 1), Size: 1, Mtime: now.Add(-time.Duration(i) * time.Second)}
	}
	calls := 0
	o := TierOptions{Rank: func(eg Egroup) float64 { calls++; return float64(eg.ID % 7) }}
	o.EnsureDefaults()
	tierable(model.NewSnapshot(now, nil, nil), egs, o)
	if calls != len(egs) {
		t.Fatalf("rank hook ran %d times for %d egroups", calls, len(egs))
	}
}

// BenchmarkTierable orders 200,000 egroups for demotion, with the keys
// computed once per egroup (tierable) and, for comparison, inside every
// comparison (the reference).
func BenchmarkTierable(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	s := model.NewSnapshot(now, nil, nil)
	rng := rand.New(rand.NewPCG(1, 1))
	egs := make([]Egroup, 200_000)
	for i := range egs {
		egs[i] = Egroup{ID: uint64(i + 1), Size: 1 << 20, Mtime: now.Add(-time.Duration(rng.IntN(1e6)) * time.Second)}
		if rng.IntN(5) < 3 {
			egs[i].Atime, egs[i].Reads = now.Add(-time.Duration(rng.IntN(7200))*time.Second), int64(rng.IntN(50))
		}
	}
	o := TierOptions{}
	o.EnsureDefaults()
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			tierable(s, egs, o)
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			sealed := make([]*Egroup, 0, len(egs))
			for i := range egs {
				sealed = append(sealed, &egs[i])
			}
			sort.SliceStable(sealed, func(i, j int) bool { return referenceColder(now, o, sealed[i], sealed[j]) })
		}
	})
}
