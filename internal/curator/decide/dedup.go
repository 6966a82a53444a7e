package decide

import (
	"fmt"
	"sort"
)

// KindDedup makes duplicate extents share one copy.
const KindDedup Kind = "dedup"

// DedupExtent is a live extent with a fingerprint, as the scan saw it.
type DedupExtent struct {
	ID     uint64
	ModRev int64
	Egroup uint64
	Off    int64
	Len    int64
}

// DedupGroup is the live extents that share one fingerprint.
type DedupGroup struct {
	FP      string
	Extents []DedupExtent
}

// Dedup decides, for every group of live extents with one fingerprint
// stored at more than one place (Curator §3.2.4), which copy stays — the
// location most extents already point at, then the lowest (egroup,
// offset) — and emits one task per group switching the others to it. The
// canonical copy must sit in a sealed, healthy egroup no other task of the
// job touches; the executor compares the bytes before sharing (a
// fingerprint is a hint, not a proof).
func Dedup(groups []DedupGroup, egs map[uint64]Egroup, planned []Task, up func(Replica) bool) []Task {
	busy := map[uint64]bool{}
	for _, t := range planned {
		busy[t.Egroup] = true
		for _, p := range t.Pack {
			busy[p.ID] = true
		}
	}
	type loc struct {
		eg  uint64
		off int64
	}
	var out []Task
	for _, g := range groups {
		count := map[loc]int{}
		for _, x := range g.Extents {
			count[loc{x.Egroup, x.Off}]++
		}
		if len(count) < 2 {
			continue
		}
		var cands []loc
		for l := range count {
			eg, ok := egs[l.eg]
			if !ok || eg.Open || busy[l.eg] || !healthy(eg, up) {
				continue
			}
			cands = append(cands, l)
		}
		if len(cands) == 0 {
			continue
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if count[a] != count[b] {
				return count[a] > count[b]
			}
			if a.eg != b.eg {
				return a.eg < b.eg
			}
			return a.off < b.off
		})
		canon := cands[0]
		t := Task{Kind: KindDedup, Egroup: canon.eg, ModRev: egs[canon.eg].ModRev}
		var canonX DedupExtent
		found := false
		xs := append([]DedupExtent(nil), g.Extents...)
		sort.Slice(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
		for _, x := range xs {
			if (loc{x.Egroup, x.Off}) == canon {
				if !found {
					canonX, found = x, true
				}
				continue
			}
			t.Extents = append(t.Extents, x.ID)
			t.ExtentRevs = append(t.ExtentRevs, x.ModRev)
			t.Bytes += x.Len
		}
		t.Canon, t.CanonRev = canonX.ID, canonX.ModRev
		t.Reason = fmt.Sprintf("%d copies of %d bytes at %d places", len(g.Extents), canonX.Len, len(count))
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Canon < out[j].Canon })
	return out
}
