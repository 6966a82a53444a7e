package object

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func TestFallbackTier(t *testing.T) {
	snap := model.NewSnapshot(time.Now(), []model.Node{{ID: "n1", Up: true}}, []model.Device{
		{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD, CapacityBytes: 1 << 30},
		{ID: "n1/hdd0", Node: "n1", Tier: model.TierHDD, CapacityBytes: 1 << 30},
		{ID: "n1/hdd1", Node: "n1", Tier: model.TierHDD, CapacityBytes: 1 << 30},
	})
	ssd := model.Replica{Node: "n1", Device: "n1/ssd0", Tier: model.TierSSD}
	hdd := model.Replica{Node: "n1", Device: "n1/hdd0", Tier: model.TierHDD}
	for _, c := range []struct {
		vector string
		reps   []model.Replica
		want   bool
	}{
		{"any=2", []model.Replica{ssd, {Node: "n1", Device: "n1/ssd1", Tier: model.TierSSD}}, false},
		{"any=2", []model.Replica{ssd, hdd}, true},
		{"hdd=1", []model.Replica{hdd}, false}, // asked for hdd
		{"ssd=1,hdd=1", []model.Replica{ssd, hdd}, false},
		{"ssd=1,any=1", []model.Replica{ssd, hdd}, true},
	} {
		if got := fallbackTier(snap, model.MustParseVector(c.vector), c.reps); got != c.want {
			t.Errorf("%s on %v: fallback %v, want %v", c.vector, c.reps, got, c.want)
		}
	}
}

// An egroup placed on hdd because the ssd was full stops taking writes
// after FallbackEgroupLifetime and is sealed, so later writes are placed
// afresh instead of filling a slow-tier egroup for as long as it is busy.
func TestFallbackEgroupRetires(t *testing.T) {
	e := newEnv(t, "ssd:ssd0:4MiB", "hdd:hdd0:1GiB")
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l, err := New(e.kv, e.local, e.local, Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1,
		Now: clock, FallbackEgroupLifetime: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	any1 := model.MustParseVector("any=1")
	put := func(key string, n int) ObjectInfo {
		t.Helper()
		data := payload(uint64(n), n)
		info, err := l.Put(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(n), Vector: any1})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	tierOf := func(info ObjectInfo) (uint64, model.Tier) {
		t.Helper()
		loc, err := l.Locate(ctx, "bkt", info.Key)
		if err != nil {
			t.Fatal(err)
		}
		x := loc.Extents[len(loc.Extents)-1]
		return x.Egroup, x.Replicas[0].Tier
	}
	// Fill the ssd until a write spills to hdd. Sealing after each write
	// empties the pool, so every write places a fresh egroup.
	put("fill", 3<<20)
	var eg uint64
	for i := 0; ; i++ {
		if _, err := l.SealIdle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		id, tier := tierOf(put(fmt.Sprintf("spill-%d", i), 64<<10))
		if tier == model.TierHDD {
			eg = id
			break
		}
		if i == 64 {
			t.Fatal("test premise: writes never spilled to hdd although the 4 MiB ssd is full")
		}
	}
	// Within the lifetime the spill egroup keeps taking writes.
	mu.Lock()
	now = now.Add(5 * time.Second)
	mu.Unlock()
	if eg2, _ := tierOf(put("spill2", 64<<10)); eg2 != eg {
		t.Fatalf("within its lifetime the fallback egroup should be reused: %s vs %s", meta.FormatID(eg2), meta.FormatID(eg))
	}
	// After it, the egroup is retired: sealed and no longer handed out.
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	if eg3, _ := tierOf(put("after", 64<<10)); eg3 == eg {
		t.Fatalf("a retired fallback egroup took a new write")
	}
	if _, err := l.SealIdle(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	var rec meta.Egroup
	if _, err := meta.GetRecord(ctx, e.kv, meta.EgroupKey(eg), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.State != meta.EgroupSealed {
		t.Fatalf("retired fallback egroup state %v, want sealed", rec.State)
	}
}
