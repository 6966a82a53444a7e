package object

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func TestLocationCacheIsBounded(t *testing.T) {
	c := newLocationCache(3, 0, nil)
	for i := uint64(1); i <= 3; i++ {
		c.putExtent(i, meta.Extent{Egroup: i * 10})
	}
	c.extent(1) // touch: 2 is now the least recently used
	c.putExtent(4, meta.Extent{Egroup: 40})
	c.putEgroup(5, meta.Egroup{Size: 5})
	if n := c.len(); n != 3 {
		t.Fatalf("len %d, want 3", n)
	}
	for _, id := range []uint64{2, 3} {
		if _, ok := c.extent(id); ok {
			t.Errorf("extent %d should have been evicted", id)
		}
	}
	if x, ok := c.extent(1); !ok || x.Egroup != 10 {
		t.Errorf("recently used extent 1 evicted or wrong: %+v %v", x, ok)
	}
	if eg, ok := c.egroup(5); !ok || eg.Size != 5 {
		t.Errorf("egroup 5: %+v %v", eg, ok)
	}
	// Extents and egroups with the same id are different entries.
	if _, ok := c.egroup(1); ok {
		t.Error("egroup 1 found, only extent 1 was put")
	}
	c.forgetEgroup(5)
	if _, ok := c.egroup(5); ok {
		t.Error("forgotten egroup still cached")
	}
	var off *locationCache = newLocationCache(-1, 0, nil)
	off.putExtent(1, meta.Extent{})
	if _, ok := off.extent(1); ok {
		t.Error("a disabled cache returned an entry")
	}
}

func TestLocationCacheCopiesReplicas(t *testing.T) {
	c := newLocationCache(4, 0, nil)
	reps := []meta.EgroupReplica{{Device: "n1/hdd0"}}
	c.putEgroup(7, meta.Egroup{Replicas: reps})
	reps[0].Device = "changed"
	if eg, _ := c.egroup(7); eg.Replicas[0].Device != "n1/hdd0" {
		t.Fatalf("cache shares the caller's slice: %v", eg.Replicas)
	}
}

// Reads go through cached locations, and a cached location that a move
// made wrong (egroup moved to another device, source deleted; extent
// repacked into a new egroup, old one deleted) is corrected on the next
// read, which still returns the right bytes.
func TestLocationCacheFollowsMoves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.l
	data := payload(21, 100<<10)
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(ctx, "bkt", "k", bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: model.MustParseVector("hdd=1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	read := func(what string) {
		t.Helper()
		_, rc, err := l.Get(ctx, "bkt", "k", 0, -1)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: err %v, equal %v", what, err, bytes.Equal(got, data))
		}
	}
	read("first read")
	info, _ := l.Head(ctx, "bkt", "k")
	id := info.Extents[0].ID
	x, ok := l.locs.extent(id)
	if !ok {
		t.Fatal("a read did not cache its extent record")
	}
	cachedEg, ok := l.locs.egroup(x.Egroup)
	if !ok || len(cachedEg.Replicas) != 1 {
		t.Fatalf("egroup record not cached: %+v", cachedEg)
	}
	src := cachedEg.Replicas[0]

	// Move the egroup's only replica to the other hdd, as tiering and
	// balancing do: copy, switch the record, delete the source.
	dst := model.Replica{Node: "n1", Device: "n1/hdd1", Tier: "hdd"}
	if src.Device == dst.Device {
		dst.Device = "n1/hdd0"
	}
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, e.kv, meta.EgroupKey(x.Egroup), &eg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CopyReplica(ctx, x.Egroup, eg.Size, src.Replica(), dst); err != nil {
		t.Fatal(err)
	}
	eg.Replicas = []meta.EgroupReplica{{Device: dst.Device, Node: dst.Node, Tier: dst.Tier}}
	var sw meta.Txn
	sw.If(meta.EgroupKey(x.Egroup), rev)
	sw.Put(meta.EgroupKey(x.Egroup), meta.Encode(eg))
	if _, err := e.kv.Commit(ctx, &sw); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Remove(ctx, src.Replica(), x.Egroup); err != nil {
		t.Fatal(err)
	}
	if eg, _ := l.locs.egroup(x.Egroup); eg.Replicas[0].Device != src.Device {
		t.Fatal("test premise: the cache should still hold the old location")
	}
	read("read after the egroup moved")
	if eg, ok := l.locs.egroup(x.Egroup); !ok || eg.Replicas[0].Device != dst.Device {
		t.Fatalf("cache not refreshed after the failed read: %+v", eg)
	}

	// Repack the extent into a new egroup (GC) and delete the old one.
	xItem, err := e.kv.Get(ctx, meta.ExtentKey(id))
	if err != nil {
		t.Fatal(err)
	}
	repackAndDelete(t, e, l, id, xItem.ModRev, x, []model.Replica{dst})
	read("read after the extent was repacked")
	if nx, _ := l.locs.extent(id); nx.Egroup == x.Egroup {
		t.Fatal("extent record in the cache still names the deleted egroup")
	}

	// Marking a replica bad drops the egroup from the cache, so reads do
	// not keep trying a replica this node knows is bad.
	nx, _ := l.locs.extent(id)
	ceg, _ := l.locs.egroup(nx.Egroup)
	l.MarkReplicaBad(ctx, nx.Egroup, ceg.Replicas[0].Device)
	if _, ok := l.locs.egroup(nx.Egroup); ok {
		t.Fatal("egroup still cached after a replica was marked bad")
	}
	read("read after a bad mark (bad replicas are the last resort)")
}

// Cached egroup records expire after the TTL (extent records do not:
// they change only by moves this node makes or reads that fail).
func TestLocationCacheEgroupTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newLocationCache(8, 10*time.Second, func() time.Time { return now })
	c.putEgroup(1, meta.Egroup{Size: 1})
	c.putExtent(1, meta.Extent{Egroup: 1})
	now = now.Add(10 * time.Second)
	if _, ok := c.egroup(1); !ok {
		t.Fatal("egroup record expired at the TTL, not after it")
	}
	now = now.Add(time.Millisecond)
	if _, ok := c.egroup(1); ok {
		t.Fatal("egroup record used past its TTL")
	}
	if _, ok := c.extent(1); !ok {
		t.Fatal("extent record expired")
	}
	if n := c.len(); n != 1 {
		t.Fatalf("expired entry still counted: len %d", n)
	}
	c.putEgroup(1, meta.Egroup{Size: 2}) // re-read: a fresh TTL
	if eg, ok := c.egroup(1); !ok || eg.Size != 2 {
		t.Fatalf("re-cached record: %+v %v", eg, ok)
	}
}

// A move that adds a replica and keeps the old one leaves cached reads
// working, so nothing corrects them: only the TTL makes reads see the new
// replica (a node that joined and received a copy).
func TestLocationCacheSeesAddedReplica(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.l
	now := time.Unix(5000, 0)
	l.locs.now = func() time.Time { return now }
	data := payload(22, 80<<10)
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(ctx, "bkt", "k", bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: model.MustParseVector("hdd=1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	read := func() {
		t.Helper()
		_, rc, err := l.Get(ctx, "bkt", "k", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read: err %v, equal %v", err, bytes.Equal(got, data))
		}
	}
	read()
	info, _ := l.Head(ctx, "bkt", "k")
	x, _ := l.locs.extent(info.Extents[0].ID)
	cached, ok := l.locs.egroup(x.Egroup)
	if !ok || len(cached.Replicas) != 1 {
		t.Fatalf("egroup record not cached: %+v", cached)
	}
	src := cached.Replicas[0]
	dst := model.Replica{Node: "n1", Device: "n1/hdd1", Tier: "hdd"}
	if src.Device == dst.Device {
		dst.Device = "n1/hdd0"
	}
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, e.kv, meta.EgroupKey(x.Egroup), &eg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CopyReplica(ctx, x.Egroup, eg.Size, src.Replica(), dst); err != nil {
		t.Fatal(err)
	}
	eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: dst.Device, Node: dst.Node, Tier: dst.Tier})
	var sw meta.Txn
	sw.If(meta.EgroupKey(x.Egroup), rev)
	sw.Put(meta.EgroupKey(x.Egroup), meta.Encode(eg))
	if _, err := e.kv.Commit(ctx, &sw); err != nil {
		t.Fatal(err)
	}
	read()
	if c, _ := l.locs.egroup(x.Egroup); len(c.Replicas) != 1 {
		t.Fatalf("within the TTL the cached record should be the old one: %+v", c)
	}
	now = now.Add(l.opts.LocationCacheEgroupTTL + time.Second)
	read()
	if c, ok := l.locs.egroup(x.Egroup); !ok || len(c.Replicas) != 2 {
		t.Fatalf("after the TTL a read still uses the old replica list: %+v", c)
	}
}
