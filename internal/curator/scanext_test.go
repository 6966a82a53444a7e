package curator

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

var updateFullScanGolden = flag.Bool("update-fullscan", false, "rewrite testdata/fullscan/*.golden from the current scan")

// loadRandomFull writes seeded random metadata for a full scan: buckets
// with and without transform settings, egroups (a few IDs skipped: their
// extents are dangling), extents old and young, compressed or not, some
// with fingerprints shared by several extents and some sharing a location
// (dedup), and objects, tombstones, versions and upload parts referencing
// extents — most of them, some twice, some that do not exist.
func loadRandomFull(t testing.TB, kv meta.KV, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	now := time.Now().UnixNano()
	var txn meta.Txn
	flush := func() {
		if len(txn.Ops) > 0 {
			if _, err := kv.Commit(ctx, &txn); err != nil {
				t.Fatal(err)
			}
			txn = meta.Txn{}
		}
	}
	put := func(k []byte, v []byte) {
		txn.Put(k, v)
		if len(txn.Ops) >= 100 {
			flush()
		}
	}
	buckets := []string{"b0", "b1", "b2", "b3"}
	put(meta.BucketKey("b0"), meta.Encode(meta.Bucket{Name: "b0"}))
	put(meta.BucketKey("b1"), meta.Encode(meta.Bucket{Name: "b1", Transform: &meta.BucketTransform{Compress: "zstd", ColdAfter: int64(time.Hour)}}))
	put(meta.BucketKey("b2"), meta.Encode(meta.Bucket{Name: "b2", Transform: &meta.BucketTransform{Compress: "zstd", EC: "4+2", ColdAfter: int64(2 * time.Hour)}}))
	put(meta.BucketKey("b3"), meta.Encode(meta.Bucket{Name: "b3", Transform: &meta.BucketTransform{EC: "4+2"}}))
	const egroups, extents = 300, 2000
	reps := []meta.EgroupReplica{{Device: "n1/hdd0", Node: "n1", Tier: "hdd"}, {Device: "n1/hdd1", Node: "n1", Tier: "hdd"}}
	v := model.MustParseVector("hdd=2")
	for id := uint64(1); id <= egroups; id++ {
		if rng.IntN(40) == 0 {
			continue // its extents reference a missing egroup
		}
		put(meta.EgroupKey(id), meta.Encode(meta.Egroup{Replicas: reps, State: meta.EgroupSealed, Size: 1 << 20, Vector: v, Mtime: now - int64(3*time.Hour)}))
	}
	fps := [][]byte{[]byte("fp-a"), []byte("fp-b"), []byte("fp-c"), []byte("fp-d")}
	for id := uint64(1); id <= extents; id++ {
		if rng.IntN(20) == 0 {
			continue // references to it are dangling
		}
		// Extents at one location share its bytes: the length and codec
		// are the location's.
		x := meta.Extent{Egroup: 1 + rng.Uint64N(egroups+5), Off: rng.Int64N(64) * 8200, Ctime: now - int64(2*time.Hour)}
		loc := rand.New(rand.NewPCG(x.Egroup, uint64(x.Off)))
		x.Len = 1 + loc.Int64N(8192)
		if loc.IntN(4) == 0 {
			x.Codec, x.Stored = "zstd", 1+x.Len/2
		}
		if rng.IntN(5) == 0 {
			x.Ctime = now // young: not garbage yet
		}
		if rng.IntN(6) == 0 {
			x.FP = fps[rng.IntN(len(fps))]
		}
		put(meta.ExtentKey(id), meta.Encode(x))
	}
	refs := func() []meta.ExtentRef {
		var xs []meta.ExtentRef
		for range 1 + rng.IntN(3) {
			xs = append(xs, meta.ExtentRef{ID: 1 + rng.Uint64N(extents+20), Len: 1})
		}
		return xs
	}
	for i := range 1200 {
		b := buckets[rng.IntN(len(buckets))]
		k := fmt.Sprintf("k%05d", i)
		o := meta.Object{Size: 1, ETag: "x", Vector: v, Extents: refs()}
		if rng.IntN(15) == 0 {
			o = meta.Object{DeleteMarker: true}
		}
		put(meta.ObjectKey(b, k), meta.Encode(o))
		for s := range rng.IntN(3) {
			put(meta.VersionKey(b, k, uint64(s+1)), meta.Encode(meta.Version{Object: meta.Object{Size: 1, ETag: "x", VersionID: fmt.Sprintf("v%d", s), Vector: v, Extents: refs()}, S3: rng.IntN(2) == 0}))
		}
	}
	for i := range 40 {
		b := buckets[rng.IntN(len(buckets))]
		put(meta.PartKey(b, fmt.Sprintf("up%d", i), 1), meta.Encode(meta.Part{Size: 1, ETag: "x", Extents: refs()}))
	}
	flush()
}

// dumpFullScan spells out everything a full scan hands the decisions and
// the executor, in a canonical order: per egroup the live and dead counts,
// live bytes, tail end, transform policy and bucket, and its live extents
// in offset order; garbage; dangling references; dedup groups; history.
func dumpFullScan(res *scanResult) string { return dumpFullScanListed(res, res) }

// dumpFullScanListed is dumpFullScan with the live extents of only the
// egroups whose lists listed knows (a shuffled scan lists some).
func dumpFullScanListed(res, listed *scanResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "records %d egroups %d\n", res.records0, len(res.egroups))
	for _, eg := range res.egroups {
		fmt.Fprintf(&b, "eg %d live %d/%d dead %d tail %d,%v policy %+v bucket %q\n", eg.ID, eg.LiveExtents, eg.LiveBytes, eg.DeadExtents, eg.TailEnd, eg.TailKnown, eg.Policy, res.bucketOf[eg.ID])
		if _, ok := listed.liveOf(eg.ID); !ok {
			fmt.Fprintln(&b, "  (live extents not listed)")
			continue
		}
		xs := liveExtentsOf(res, eg.ID)
		slices.SortFunc(xs, func(a, b [3]int64) int {
			if a[0] != b[0] {
				return int(a[0] - b[0])
			}
			return int(a[1] - b[1])
		})
		for _, x := range xs {
			fmt.Fprintf(&b, "  live off %d id %d len %d\n", x[0], x[1], x[2])
		}
	}
	var buckets []string
	for id, bk := range res.bucketOf {
		buckets = append(buckets, fmt.Sprintf("bucketOf %d %q", id, bk))
	}
	slices.Sort(buckets)
	for _, s := range buckets {
		fmt.Fprintln(&b, s)
	}
	for _, x := range res.deadExtents {
		fmt.Fprintf(&b, "dead %d egroup %d\n", x.id, x.rec.Egroup)
	}
	for _, d := range res.dangling {
		fmt.Fprintf(&b, "dangling %s\n", d)
	}
	for _, g := range res.dedup {
		xs := slices.Clone(g.Extents)
		slices.SortFunc(xs, func(a, b decide.DedupExtent) int { return int(a.ID) - int(b.ID) })
		fmt.Fprintf(&b, "dedup %s:", g.FP)
		for _, x := range xs {
			fmt.Fprintf(&b, " %d@%d/%d+%d", x.ID, x.Egroup, x.Off, x.Len)
		}
		fmt.Fprintln(&b)
	}
	for _, h := range res.history {
		fmt.Fprintf(&b, "history %s/%s\n", h[0], h[1])
	}
	return b.String()
}

// TestFullScanMatchesGolden pins a full scan's results on seeded random
// metadata to what the map-based reduce (before the compact extent side)
// produced: the same live and dead extents, garbage, dangling references,
// tail ends, transform policies, buckets and dedup groups.
func TestFullScanMatchesGolden(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			_, _, res := seededFullScan(t, seed)
			got := dumpFullScan(res)
			path := filepath.Join("testdata", "fullscan", fmt.Sprintf("seed%d.golden", seed))
			if *updateFullScanGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("got %d lines, want %d", len(gl), len(wl))
			}
			if len(res.dangling) == 0 || len(res.deadExtents) == 0 || len(res.dedup) == 0 {
				t.Fatalf("the metadata exercises too little: %d dangling, %d dead, %d dedup groups", len(res.dangling), len(res.deadExtents), len(res.dedup))
			}
		})
	}
}

// seededFullScan loads seeded random metadata (loadRandomFull) into a
// fresh node and returns its Curator (garbage grace one hour), its store
// and the master's own full scan of it.
func seededFullScan(t *testing.T, seed uint64) (*Curator, meta.KV, *scanResult) {
	t.Helper()
	kv, local, pol, l := benchNode(t)
	loadRandomFull(t, kv, seed)
	c := New(l, kv, local, pol, nil, nil, Options{Decide: decide.Options{GarbageGrace: time.Hour}})
	res, err := c.scan(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return c, kv, res
}

// liveExtentsOf lists an egroup's live extents as (offset, ID, length).
func liveExtentsOf(res *scanResult, id uint64) [][3]int64 {
	var out [][3]int64
	xs, _ := res.liveOf(id)
	for _, x := range xs {
		out = append(out, [3]int64{x.off, int64(x.id), x.len})
	}
	return out
}

// TestJoinExtentPartsSortsAndRenumbersFingerprints: partitions' extents
// join into one slice in ID order even if a partition's are not (the
// guard), and each extent keeps its own fingerprint once the partitions'
// fingerprint lists are concatenated.
func TestJoinExtentPartsSortsAndRenumbersFingerprints(t *testing.T) {
	for _, budget := range []int64{-1, 1, 300 << 10} { // never, always, part way spilled
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			s := newSpill(t.TempDir(), budget, nil)
			defer s.release()
			testJoinExtentParts(t, s)
			if budget == 1 && s.mappedBytes() == 0 {
				t.Fatal("a 1-byte budget spilled nothing")
			}
			if budget < 0 && s.mappedBytes() != 0 {
				t.Fatal("no budget, yet spilled")
			}
		})
	}
}

func testJoinExtentParts(t *testing.T, s *spill) {
	parts := make([]extentRecs, 3)
	for i := range parts {
		parts[i].run.s = s
	}
	add := func(p int, id uint64, fp string) {
		x := meta.Extent{Egroup: id / 10, Off: int64(id), Len: 1}
		if fp != "" {
			x.FP = []byte(fp)
		}
		parts[p].add(MapRecord{ID: id, Rev: int64(id), Extent: &x})
	}
	for i := range uint64(heapChunkRecords + 10) { // two chunks
		add(0, 1000+i, fmt.Sprintf("a%d", i%3))
	}
	add(2, 30, "c")
	add(2, 20, "") // out of order
	add(1, 25, "b")
	xs, fps := joinExtentParts(s, parts)
	if len(xs) != heapChunkRecords+13 {
		t.Fatalf("%d extents", len(xs))
	}
	if !slices.IsSortedFunc(xs, func(a, b extentRec) int { return int(a.id) - int(b.id) }) {
		t.Fatal("not in ID order")
	}
	for _, x := range xs {
		var want string
		switch {
		case x.id >= 1000:
			want = fmt.Sprintf("a%d", (x.id-1000)%3)
		case x.id == 25:
			want = "b"
		case x.id == 30:
			want = "c"
		}
		got := ""
		if x.fp != 0 {
			got = string(fps[x.fp-1])
		}
		if got != want || x.modRev != int64(x.id) || x.egroup != x.id/10 {
			t.Fatalf("extent %d: fp %q, rev %d, egroup %d; want fp %q", x.id, got, x.modRev, x.egroup, want)
		}
	}
	for i, p := range parts {
		if p.run.len() != 0 || p.run.chunks != nil {
			t.Fatalf("partition %d not released", i)
		}
	}
	freeSlice(s, xs)
	if s.heap != 0 || len(s.maps) != 0 {
		t.Fatalf("after freeing everything: %d heap bytes counted, %d mappings", s.heap, len(s.maps))
	}
}

// TestSpreadFullScanMatchesMasterAlone: with the owner maps (objects,
// versions with hidden history, tombstones, upload parts, four buckets)
// and the ID maps mapped on a peer — streamed, failing, or cut off mid
// stream — a full scan finds exactly what the master finds alone: the
// same references in the same order (first-reference buckets), garbage,
// dangling references, history and record count.
func TestSpreadFullScanMatchesMasterAlone(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		c, kv, alone := seededFullScan(t, seed)
		ctx := context.Background()
		want := dumpFullScan(alone)
		for _, mode := range []string{"streamed", "failed", "cut"} {
			sb := &streamingBalancer{fakeBalancer: &fakeBalancer{kv: kv}}
			switch mode {
			case "failed":
				sb.fail = map[model.NodeID]bool{"n2": true}
			case "cut":
				sb.cut = map[model.NodeID]bool{"n2": true}
			}
			c.opts.Balancer, c.opts.Self = sb, "n1"
			c.mu.Lock()
			c.mapFailed = map[model.NodeID]time.Time{}
			c.mu.Unlock()
			spread, err := c.scan(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			owners := 0
			for name, who := range spread.partitions {
				if m, _ := ParsePartition(name); isOwnerMap(m) {
					owners++
					if mode == "streamed" && who != "n2" && who != "n1" {
						t.Fatalf("seed %d: %s mapped by %q", seed, name, who)
					}
				}
			}
			// Four buckets: four partitions of each owner map.
			if owners != 12 {
				t.Fatalf("seed %d %s: %d owner partitions, want 12: %v", seed, mode, owners, spread.partitions)
			}
			if mode == "streamed" && spread.partitions["objects/0"] != "n2" {
				t.Fatalf("seed %d: objects/0 mapped by %q, not the peer", seed, spread.partitions["objects/0"])
			}
			if got := dumpFullScan(spread); got != want {
				gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("seed %d %s: line %d:\n got %s\nwant %s", seed, mode, i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("seed %d %s: got %d lines, want %d", seed, mode, len(gl), len(wl))
			}
		}
	}
}

// TestOwnerCutsSplitBuckets: a full scan samples cut points, and the next
// full scan cuts the owner maps at their quantiles — more partitions than
// buckets, keys of one bucket spread over several — and finds exactly
// what the first found, here and with the partitions mapped by a peer.
func TestOwnerCutsSplitBuckets(t *testing.T) {
	defer func(n int) { ownerCutEvery = n }(ownerCutEvery)
	ownerCutEvery = 8
	kv, local, pol, l := benchNode(t)
	loadRandomFull(t, kv, 1)
	c := New(l, kv, local, pol, nil, nil, Options{Decide: decide.Options{GarbageGrace: time.Hour}})
	ctx := context.Background()
	first, err := c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	cuts := map[string]int{}
	for m, cs := range c.ownerCuts {
		cuts[m] = len(cs)
		if !slices.IsSorted(cs) {
			t.Fatalf("%s cut points out of order", m)
		}
	}
	c.mu.Unlock()
	// 1,200 objects and about as many versions, sampled every 8th.
	if cuts["objects"] < 100 || cuts["versions"] < 16 || cuts["uploads"] != 0 {
		t.Fatalf("cut points per map: %v", cuts)
	}
	sb := &streamingBalancer{fakeBalancer: &fakeBalancer{kv: kv}}
	for _, balanced := range []bool{false, true} {
		if balanced {
			c.opts.Balancer, c.opts.Self = sb, "n1"
		}
		again, err := c.scan(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := dumpFullScan(again), dumpFullScan(first); got != want {
			t.Fatalf("balanced=%v: the scan cut at sampled keys differs from the first", balanced)
		}
		c.mu.Lock()
		parts := ownerPartitions("objects", nil, c.ownerCuts["objects"])
		c.mu.Unlock()
		if len(parts) != 16 {
			t.Fatalf("objects cut into %d partitions, want 16", len(parts))
		}
		if balanced {
			n := 0
			for name := range again.partitions {
				if strings.HasPrefix(name, "objects/") {
					n++
				}
			}
			if n != 16 {
				t.Fatalf("%d object partitions mapped, want 16: %v", n, again.partitions)
			}
		}
	}
	// Objects of one bucket now span several partitions.
	spans := map[string]int{}
	for _, p := range ownerPartitions("objects", nil, c.ownerCuts["objects"]) {
		for _, b := range []string{"b0", "b1", "b2", "b3"} {
			if p.holdsBucket(b) {
				spans[b]++
			}
		}
	}
	if spans["b1"] < 2 {
		t.Fatalf("bucket b1 is in %d partitions", spans["b1"])
	}
}

// TestNewMasterCutsWhereTheLastOneSampled: the cut points a full scan
// sampled are stored, so a new master's first full scan cuts the owner
// maps at them (and finds what the old master found); a stored record
// that is not what a scan writes is ignored.
func TestNewMasterCutsWhereTheLastOneSampled(t *testing.T) {
	defer func(n int) { ownerCutEvery = n }(ownerCutEvery)
	ownerCutEvery = 8
	kv, local, pol, l := benchNode(t)
	loadRandomFull(t, kv, 2)
	ctx := context.Background()
	opts := Options{Decide: decide.Options{GarbageGrace: time.Hour}}
	old := New(l, kv, local, pol, nil, nil, opts)
	first, err := old.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer first.release()
	old.mu.Lock()
	want := slices.Clone(old.ownerCuts["objects"])
	old.mu.Unlock()
	if len(want) < 16 {
		t.Fatalf("%d object cut points sampled", len(want))
	}

	next := New(l, kv, local, pol, nil, nil, opts)
	if got := next.cutsFor(ctx, "objects"); !slices.Equal(got, want) {
		t.Fatalf("a new master reads %d cut points, the old one kept %d", len(got), len(want))
	}
	again, err := next.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer again.release()
	if dumpFullScan(again) != dumpFullScan(first) {
		t.Fatal("the new master's scan differs from the old master's")
	}
	if n := len(ownerPartitions("objects", nil, want)); n != 16 {
		t.Fatalf("stored cut points give %d object partitions, want 16", n)
	}

	for name, bad := range map[string][]string{
		"out of order": {"b2", "b1"},
		"empty":        {""},
		"too many":     slices.Repeat([]string{"b1"}, maxKeptCuts+1),
		"too long":     {strings.Repeat("k", maxCutBytes+1)},
	} {
		var tx meta.Txn
		tx.Put(ownerCutsKey("versions"), meta.Encode(storedCuts{Cuts: bad}))
		if _, err := kv.Commit(ctx, &tx); err != nil {
			t.Fatal(err)
		}
		fresh := New(l, kv, local, pol, nil, nil, opts)
		if got := fresh.cutsFor(ctx, "versions"); got != nil {
			t.Fatalf("%s: stored cut points used: %q", name, got)
		}
	}
}

// TestThinCutsKeepsPartitions: keeping 256 evenly spaced cut points cuts
// a map exactly where all of them would.
func TestThinCutsKeepsPartitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 300 {
		n := rng.IntN(5000)
		cuts := make([]string, n)
		for i := range cuts {
			cuts[i] = fmt.Sprintf("b%d\x00k%06d", rng.IntN(4), rng.IntN(1_000_000))
		}
		slices.Sort(cuts)
		thin := thinCuts(cuts)
		if len(thin) > maxKeptCuts {
			t.Fatalf("%d cut points kept", len(thin))
		}
		if got, want := ownerPartitions("objects", nil, thin), ownerPartitions("objects", nil, cuts); !slices.Equal(got, want) {
			t.Fatalf("%d cut points: thinned partitions %v, want %v", n, got, want)
		}
	}
}
