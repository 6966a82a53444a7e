package decide

import (
	"testing"
	"time"
)

func TestPackForTarget(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	old := now.Add(-time.Hour)
	eg := func(id uint64, size, live int64) Egroup {
		return Egroup{ID: id, ModRev: int64(id), Size: size, LiveBytes: live, LiveExtents: 1, Mtime: old}
	}
	egs := []Egroup{
		eg(1, 100, 30),  // 70 % dead: cost-benefit compaction already planned
		eg(2, 100, 60),  // 40 % dead
		eg(3, 100, 55),  // 45 % dead
		eg(4, 100, 90),  // 10 % dead
		eg(5, 100, 100), // clean
	}
	open := eg(6, 100, 10)
	open.Open = true
	young := eg(7, 100, 10)
	young.Mtime = now
	egs = append(egs, open, young)
	var st Stats
	for _, e := range egs {
		st.LiveBytes += e.LiveBytes
		st.GarbageBytes += e.Size - e.LiveBytes
	}
	o := Options{GarbageGrace: time.Minute}
	o.EnsureDefaults()
	planned := Space(now, egs[0], o)
	if len(planned) != 1 || planned[0].Kind != KindCompact {
		t.Fatalf("cost-benefit plan for a 70%% dead egroup: %v", planned)
	}
	got := PackForTarget(now, egs, planned, st, o)
	// After egroup 1, 275 garbage bytes with 355 live; the open and the
	// young egroup (90 % dead each, 180 bytes) are never packed, so the
	// 5 % target is out of reach and every eligible egroup is packed, most
	// dead first: 3 (45 %), 2 (40 %), 4 (10 %).
	var ids []uint64
	for _, tk := range got {
		if tk.Kind != KindCompact || tk.Bytes != egs[tk.Egroup-1].LiveBytes {
			t.Errorf("task %v", tk)
		}
		ids = append(ids, tk.Egroup)
	}
	if len(ids) != 3 || ids[0] != 3 || ids[1] != 2 || ids[2] != 4 {
		t.Fatalf("packed %v, want [3 2 4] (most dead first, never open/young/clean/already planned)", ids)
	}

	// Without the unreachable garbage, and with a nearly clean egroup 8
	// (3 % dead): garbage 98 of 530 after egroup 1 is over 5 %; packing
	// stops at half the target (2.5 %), after 3, 2 and 4 (3 of 435 left),
	// and leaves egroup 8 alone.
	egs2 := append(append([]Egroup(nil), egs[:5]...), eg(8, 100, 97))
	st2 := Stats{LiveBytes: 432, GarbageBytes: 168}
	got = PackForTarget(now, egs2, planned, st2, o)
	ids = nil
	for _, tk := range got {
		ids = append(ids, tk.Egroup)
	}
	if len(ids) != 3 || ids[0] != 3 || ids[1] != 2 || ids[2] != 4 {
		t.Fatalf("packed %v, want [3 2 4] and not the 3 %% dead egroup 8", ids)
	}
	// Under the target: nothing. Disabled: nothing.
	if got := PackForTarget(now, egs[3:5], nil, Stats{LiveBytes: 190, GarbageBytes: 10}, o); got != nil {
		t.Fatalf("under target: %v", got)
	}
	o.GarbageTarget = -1
	if got := PackForTarget(now, egs, planned, st, o); got != nil {
		t.Fatalf("disabled: %v", got)
	}
}
