package decide

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

func TestDedupChoosesOneCopy(t *testing.T) {
	sealed := func(id uint64) Egroup {
		return Egroup{ID: id, ModRev: int64(id) * 10, Replicas: []Replica{{Replica: model.Replica{Device: "d1"}}}}
	}
	egs := map[uint64]Egroup{1: sealed(1), 2: sealed(2), 3: sealed(3)}
	open := sealed(4)
	open.Open = true
	egs[4] = open
	up := func(Replica) bool { return true }
	groups := []DedupGroup{
		// Three copies, two already share egroup 2's location: it stays.
		{FP: "a", Extents: []DedupExtent{{ID: 10, ModRev: 1, Egroup: 1, Off: 0, Len: 100}, {ID: 11, ModRev: 2, Egroup: 2, Off: 50, Len: 100}, {ID: 12, ModRev: 3, Egroup: 2, Off: 50, Len: 100}}},
		// One location only: nothing to do.
		{FP: "b", Extents: []DedupExtent{{ID: 20, Egroup: 1, Off: 500}, {ID: 21, Egroup: 1, Off: 500}}},
		// The only other copy is in an open egroup: it cannot be canonical,
		// but it can be switched to the sealed one.
		{FP: "c", Extents: []DedupExtent{{ID: 30, Egroup: 4, Off: 0, Len: 7}, {ID: 31, Egroup: 3, Off: 0, Len: 7}}},
	}
	ts := Dedup(groups, egs, nil, up)
	if len(ts) != 2 {
		t.Fatalf("tasks %v, want 2", ts)
	}
	if ts[0].Canon != 11 || ts[0].Egroup != 2 || len(ts[0].Extents) != 1 || ts[0].Extents[0] != 10 || ts[0].ExtentRevs[0] != 1 || ts[0].Bytes != 100 {
		t.Errorf("group a: %+v", ts[0])
	}
	if ts[1].Canon != 31 || ts[1].Egroup != 3 || len(ts[1].Extents) != 1 || ts[1].Extents[0] != 30 {
		t.Errorf("group c: %+v", ts[1])
	}
	// An egroup busy with another task of the job is not canonical.
	ts = Dedup(groups[:1], egs, []Task{{Kind: KindCompact, Egroup: 2}}, up)
	if len(ts) != 1 || ts[0].Egroup != 1 || len(ts[0].Extents) != 2 {
		t.Errorf("egroup 2 busy: %+v", ts)
	}
}
