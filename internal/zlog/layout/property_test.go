package layout

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestSettleProperty: for random seal results, applying the settle plan
// leaves every live replica of every stripe holding every position of
// [start, K), each copy reads from a replica that holds the entry and
// writes only to live replicas that lack it, fills touch only positions no
// live replica holds, and K is one past the highest position held.
func TestSettleProperty(t *testing.T) {
	for iter := 0; iter < 2000; iter++ {
		seed := uint64(iter)
		rng := rand.New(rand.NewPCG(seed, 7))
		w := 1 + rng.IntN(5)
		reps := 1 + rng.IntN(3)
		start := uint64(rng.IntN(50))
		sealed := make([]SealedStripe, w)
		held := make([][]map[uint64]bool, w)
		fills := make([][]map[uint64]bool, w)
		anyLive := true
		for s := 0; s < w; s++ {
			lo, _ := LocalRange(start, start+1, s, w)
			held[s] = make([]map[uint64]bool, reps)
			liveCount := 0
			for r := 0; r < reps; r++ {
				live := rng.IntN(4) != 0
				sealed[s].Live = append(sealed[s].Live, live)
				m := map[uint64]bool{}
				var ls []uint64
				for l := lo; l < lo+uint64(rng.IntN(30)); l++ {
					if rng.IntN(5) != 0 {
						m[l] = true
						ls = append(ls, l)
					}
				}
				sealed[s].Runs = append(sealed[s].Runs, Runs(ls))
				// Some replicas hold fills among their entries (an
				// earlier settle attempt's), which may disagree with
				// what another replica holds there.
				var fs []uint64
				if rng.IntN(3) == 0 {
					for _, l := range ls {
						if rng.IntN(4) == 0 {
							fs = append(fs, l)
						}
					}
				}
				sealed[s].Fills = append(sealed[s].Fills, Runs(fs))
				fill := map[uint64]bool{}
				for _, l := range fs {
					fill[l] = true
				}
				fills[s] = append(fills[s], fill)
				held[s][r] = m
				if live {
					liveCount++
				}
			}
			if liveCount == 0 {
				anyLive = false
			}
		}
		k := Tail(start, w, sealed)
		plan, err := PlanSettle(start, k, w, sealed)
		if !anyLive {
			if err == nil {
				t.Fatalf("seed %d: a stripe without live replicas was settled", seed)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// K is one past the highest held position (or start).
		want := start
		for s := 0; s < w; s++ {
			for r := 0; r < reps; r++ {
				if !sealed[s].Live[r] {
					continue
				}
				for l := range held[s][r] {
					want = max(want, Position(l, s, w)+1)
				}
			}
		}
		if k != want {
			t.Fatalf("seed %d: K %d, want %d", seed, k, want)
		}
		for _, ss := range plan {
			s := ss.Stripe
			// Dropped replicas were live; the survivors agree on every
			// position both hold (fill or not), and some survive.
			for _, r := range ss.Stale {
				if !sealed[s].Live[r] {
					t.Fatalf("seed %d: stripe %d dropped dead replica %d", seed, s, r)
				}
				sealed[s].Live[r] = false
			}
			survivors := 0
			for r := 0; r < reps; r++ {
				if !sealed[s].Live[r] {
					continue
				}
				survivors++
				for o := 0; o < reps; o++ {
					if !sealed[s].Live[o] {
						continue
					}
					for l := range held[s][r] {
						if held[s][o][l] && fills[s][r][l] != fills[s][o][l] {
							t.Fatalf("seed %d: stripe %d survivors %d and %d disagree at local %d", seed, s, r, o, l)
						}
					}
				}
			}
			if survivors == 0 {
				t.Fatalf("seed %d: stripe %d: every replica dropped", seed, s)
			}
			lo, hi := LocalRange(start, k, s, w)
			after := make([]map[uint64]bool, reps)
			for r := range after {
				after[r] = map[uint64]bool{}
				for l := range held[s][r] {
					after[r][l] = true
				}
			}
			for _, c := range ss.Copies {
				l := Local(c.Pos, w)
				if StripeOf(c.Pos, w) != s || !sealed[s].Live[c.From] || !held[s][c.From][l] {
					t.Fatalf("seed %d: stripe %d copy %+v from a replica without the entry", seed, s, c)
				}
				for _, to := range c.To {
					if !sealed[s].Live[to] || held[s][to][l] {
						t.Fatalf("seed %d: stripe %d copy %+v to a dead replica or one that has it", seed, s, c)
					}
					after[to][l] = true
				}
			}
			for _, f := range ss.Fills {
				for l := f.Start; l < f.End; l++ {
					for r := 0; r < reps; r++ {
						if sealed[s].Live[r] && held[s][r][l] {
							t.Fatalf("seed %d: stripe %d fills local %d held by replica %d", seed, s, l, r)
						}
						after[r][l] = true
					}
				}
			}
			for r := 0; r < reps; r++ {
				if !sealed[s].Live[r] {
					continue
				}
				for l := lo; l < hi; l++ {
					if !after[r][l] {
						t.Fatalf("seed %d: stripe %d replica %d lacks local %d after settle", seed, s, r, l)
					}
				}
			}
		}
	}
}

// TestRunsRoundTrip: Runs, FormatRuns and ParseRuns agree.
func TestRunsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		m := map[uint64]bool{}
		for j := 0; j < rng.IntN(40); j++ {
			m[uint64(rng.IntN(60))] = true
		}
		var ls []uint64
		for l := range m {
			ls = append(ls, l)
		}
		sort.Slice(ls, func(a, b int) bool { return ls[a] < ls[b] })
		runs := Runs(ls)
		back, err := ParseRuns(FormatRuns(runs))
		if err != nil {
			t.Fatal(err)
		}
		if FormatRuns(back) != FormatRuns(runs) {
			t.Fatalf("round trip %s -> %s", FormatRuns(runs), FormatRuns(back))
		}
	}
}

// FuzzParse: the layout parser never panics, and what it accepts prints
// and parses back to the same text.
func FuzzParse(f *testing.F) {
	f.Add("epoch 2 next 2\nsegment 0 [0, 40) epoch 1: 0=n1/ssd0,n2/ssd0(stale) 1=n2/ssd0,n3/ssd0\nsegment 1 [40, open) epoch 2: 0=n1/a,n3/a 1=n3/a,n1/a")
	f.Add("epoch 0 next 0")
	f.Add("epoch 1 next 1\nsegment 0 [0, x) epoch 1: 0=a")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := Parse(text)
		if err != nil {
			return
		}
		_ = l.Validate(2)
		l2, err := Parse(l.String())
		if err != nil {
			t.Fatalf("printed layout does not parse: %v\n%s", err, l.String())
		}
		if l2.String() != l.String() {
			t.Fatalf("round trip changed the layout:\n%s\n%s", l.String(), l2.String())
		}
	})
}
