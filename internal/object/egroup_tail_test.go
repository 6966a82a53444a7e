package object

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// checkTails asserts what sealing relies on: every extent record lies
// within its egroup's stated Size, or, while the egroup is open, has an
// ID in the record's tail range (where a sealer looks for it).
func checkTails(t *testing.T, kv meta.KV) {
	t.Helper()
	egs := map[uint64]meta.Egroup{}
	scanAll(t, kv, meta.PrefixEgroup, func(key, val []byte) {
		id, err := meta.ParseID(key)
		if err != nil {
			t.Fatal(err)
		}
		var eg meta.Egroup
		if err := meta.Decode(val, &eg); err != nil {
			t.Fatal(err)
		}
		if eg.State == meta.EgroupSealed && eg.TailTo != 0 {
			t.Errorf("sealed egroup %s keeps a tail range", meta.FormatID(id))
		}
		egs[id] = eg
	})
	scanAll(t, kv, meta.PrefixExtent, func(key, val []byte) {
		id, err := meta.ParseID(key)
		if err != nil {
			t.Fatal(err)
		}
		var x meta.Extent
		if err := meta.Decode(val, &x); err != nil {
			t.Fatal(err)
		}
		eg, ok := egs[x.Egroup]
		if !ok {
			return // garbage the Curator removes
		}
		end := x.Off + extent.EncodedLen(x.StoredLen())
		inTail := eg.State == meta.EgroupOpen && id >= eg.TailFrom && id < eg.TailTo
		if end > eg.Size && !inTail {
			t.Errorf("extent %s ends at %d in %s egroup %s of size %d, tail [%d, %d)",
				meta.FormatID(id), end, map[meta.EgroupState]string{meta.EgroupOpen: "open", meta.EgroupSealed: "sealed"}[eg.State],
				meta.FormatID(x.Egroup), eg.Size, eg.TailFrom, eg.TailTo)
		}
	})
}

func scanAll(t *testing.T, kv meta.KV, prefix string, fn func(key, val []byte)) {
	t.Helper()
	start := []byte(prefix)
	end := meta.PrefixEnd(start)
	for {
		items, err := kv.Scan(context.Background(), start, end, 512)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			fn(it.Key, it.Value)
		}
		if len(items) < 512 {
			return
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

func egroupRecord(t *testing.T, kv meta.KV, id uint64) (meta.Egroup, int64) {
	t.Helper()
	var eg meta.Egroup
	rev, err := meta.GetRecord(context.Background(), kv, meta.EgroupKey(id), &eg)
	if err != nil {
		t.Fatal(err)
	}
	return eg, rev
}

// TestSmallPutsLeaveTheEgroupRecordAlone: a small PUT into an open
// egroup commits its object and extent records only, until the appended
// bytes pass EgroupRecordLag; the record then states the new length. A
// writer of an egroup of its own rewrites the record in its commit, so it
// states the PUT's bytes too; a batch's appender rewrites it before the
// batch's append, so it states the bytes before them (a record never
// states bytes that are not yet written).
func TestSmallPutsLeaveTheEgroupRecordAlone(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%t", batched), func(t *testing.T) {
			testSmallPutsLeaveTheEgroupRecordAlone(t, batched)
		})
	}
}

func testSmallPutsLeaveTheEgroupRecordAlone(t *testing.T, batched bool) {
	e := newEnv(t)
	e.tweak = func(o *Options) {
		o.EgroupRecordLag = 64 << 10
		if !batched {
			o.BatchMaxBytes = -1
		}
	}
	e.restart()
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.put("bkt", "k0", payload(0, 4096), "ssd=1,hdd=1")
	loc, err := e.l.Locate(ctx, "bkt", "k0")
	if err != nil {
		t.Fatal(err)
	}
	id := loc.Extents[0].Egroup
	eg0, rev0 := egroupRecord(t, e.kv, id)
	if eg0.TailTo == 0 || eg0.State != meta.EgroupOpen {
		t.Fatalf("first record: state %v tail [%d, %d), want open with a tail range", eg0.State, eg0.TailFrom, eg0.TailTo)
	}
	perPut := extent.EncodedLen(4096)
	rewrites := 0
	last := rev0
	for i := 1; i < 40; i++ {
		e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 4096), "ssd=1,hdd=1")
		eg, rev := egroupRecord(t, e.kv, id)
		if rev != last {
			rewrites++
			last = rev
			want := int64(i+1) * perPut
			if batched {
				want = int64(i) * perPut
			}
			if eg.Size != want {
				t.Fatalf("rewritten record after %d PUTs states %d bytes, want %d", i+1, eg.Size, want)
			}
		}
		checkTails(t, e.kv)
	}
	// 40 PUTs of ~4 KiB with a 64 KiB lag: a rewrite every 16 or so.
	if rewrites < 1 || rewrites > 3 {
		t.Fatalf("egroup record rewritten %d times over 39 small PUTs, want 1-3", rewrites)
	}
	for i := 0; i < 40; i++ {
		if got, err := e.get("bkt", fmt.Sprintf("k%d", i), 0, -1); err != nil || !bytes.Equal(got, payload(uint64(i), 4096)) {
			t.Fatalf("k%d: %v", i, err)
		}
	}
}

// TestNoLagRewritesTheRecordEveryCommit: with EgroupRecordLag negative
// (a cluster some of whose nodes predate the tail range) every commit
// states the exact length and no tail range, as before.
func TestNoLagRewritesTheRecordEveryCommit(t *testing.T) {
	e := newEnv(t)
	e.tweak = func(o *Options) { o.EgroupRecordLag = -1 }
	e.restart()
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	var id uint64
	last := int64(-1)
	for i := 0; i < 10; i++ {
		e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 3000), "hdd=2")
		if i == 0 {
			loc, _ := e.l.Locate(ctx, "bkt", "k0")
			id = loc.Extents[0].Egroup
		}
		eg, rev := egroupRecord(t, e.kv, id)
		if rev == last || eg.Size != int64(i+1)*extent.EncodedLen(3000) || eg.TailTo != 0 {
			t.Fatalf("after PUT %d: record at rev %d (was %d), size %d, tail %d; want rewritten, exact, no tail", i, rev, last, eg.Size, eg.TailTo)
		}
		last = rev
	}
}

// TestRecoverySealsAtTheCommittedTail: a node that crashes with an open
// egroup whose record lags its commits must, on restart, seal it at the
// end of its last committed extent — truncating to the stale Size would
// destroy acknowledged writes — and still drop unacknowledged bytes.
func TestRecoverySealsAtTheCommittedTail(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := 0; i < n; i++ {
		e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 5000), "ssd=1,hdd=1")
	}
	loc, _ := e.l.Locate(ctx, "bkt", "k0")
	id := loc.Extents[0].Egroup
	eg, _ := egroupRecord(t, e.kv, id)
	want := int64(n) * extent.EncodedLen(5000)
	if eg.Size >= want {
		t.Fatalf("record states %d of %d bytes: the lag is not exercised", eg.Size, want)
	}
	local := e.local
	e.close() // no seal: as a crash leaves it
	e.local = local
	var paths []string
	for _, r := range loc.Extents[0].Replicas {
		st, _ := e.local.Store(r.Device)
		paths = append(paths, filepath.Join(st.Device().Spec().Path, extent.FileName(id)))
	}
	appendGarbage(t, paths)
	e.open()
	eg, _ = egroupRecord(t, e.kv, id)
	if eg.State != meta.EgroupSealed || eg.Size != want || eg.TailTo != 0 {
		t.Fatalf("after recovery: state %v size %d tail %d, want sealed at %d", eg.State, eg.Size, eg.TailTo, want)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() != want {
			t.Fatalf("%s after recovery: %v, want %d bytes", p, err, want)
		}
	}
	for i := 0; i < n; i++ {
		if got, err := e.get("bkt", fmt.Sprintf("k%d", i), 0, -1); err != nil || !bytes.Equal(got, payload(uint64(i), 5000)) {
			t.Fatalf("k%d after recovery: %v", i, err)
		}
	}
	checkTails(t, e.kv)
}

// TestSealingFencesALaggingWriter: the Curator seals an open egroup (its
// writer looked down) at the committed tail; the writer, still alive,
// must not then commit an extent past the sealed size — its next commit
// fails the compare, and it seals the egroup at its own length instead.
func TestSealingFencesALaggingWriter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 3000), "hdd=2")
	}
	loc, _ := e.l.Locate(ctx, "bkt", "k0")
	id := loc.Extents[0].Egroup
	_, rev := egroupRecord(t, e.kv, id)
	if err := e.l.SealEgroup(ctx, id, rev); err != nil {
		t.Fatal(err)
	}
	eg, _ := egroupRecord(t, e.kv, id)
	if want := 5 * extent.EncodedLen(3000); eg.State != meta.EgroupSealed || eg.Size != want {
		t.Fatalf("sealed at %d (state %v), want %d", eg.Size, eg.State, want)
	}
	checkTails(t, e.kv)
	// The writer still holds the egroup in its pool.
	for i := 5; i < 8; i++ {
		e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 3000), "hdd=2")
		checkTails(t, e.kv)
	}
	e.restart() // recovery truncates every sealed egroup to its Size
	for i := 0; i < 8; i++ {
		if got, err := e.get("bkt", fmt.Sprintf("k%d", i), 0, -1); err != nil || !bytes.Equal(got, payload(uint64(i), 3000)) {
			t.Fatalf("k%d: %v", i, err)
		}
	}
	// A stale seal (the record moved on) is refused, not forced.
	if err := e.l.SealEgroup(ctx, id, rev); err == nil {
		t.Fatal("a seal at a stale revision succeeded")
	}
}

// TestEgroupTailUnderRandomOps interleaves small and large PUTs, deletes,
// Curator seals, idle seals and crashes (seeded), and after every step
// checks that each extent is where a sealer would find it; at the end
// every object that was acknowledged reads back.
func TestEgroupTailUnderRandomOps(t *testing.T) {
	// Small ID blocks: commits often number extents past the record's
	// tail range, which forces a rewrite.
	defer func(b uint64) { extentIDBlock = b }(extentIDBlock)
	extentIDBlock = 8
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := newEnv(t)
			e.tweak = func(o *Options) { o.EgroupRecordLag = 32 << 10 }
			e.restart()
			ctx := context.Background()
			if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 42))
			want := map[string][]byte{}
			for step := 0; step < 120; step++ {
				switch op := rng.IntN(20); {
				case op < 12:
					key := fmt.Sprintf("k%d", rng.IntN(40))
					n := 1 + rng.IntN(8000)
					if rng.IntN(8) == 0 {
						n = 100<<10 + rng.IntN(300<<10)
					}
					data := payload(rng.Uint64(), n)
					e.put("bkt", key, data, "ssd=1,hdd=1")
					want[key] = data
				case op < 14:
					for key := range want {
						if err := e.l.Delete(ctx, "bkt", key); err != nil {
							t.Fatal(err)
						}
						delete(want, key)
						break
					}
				case op < 16:
					// The Curator seals every open egroup (writer down).
					scanAll(t, e.kv, meta.PrefixEgroup, func(key, val []byte) {
						id, _ := meta.ParseID(key)
						var eg meta.Egroup
						if meta.Decode(val, &eg) == nil && eg.State == meta.EgroupOpen {
							_, rev := egroupRecord(t, e.kv, id)
							if err := e.l.SealEgroup(ctx, id, rev); err != nil {
								t.Fatal(err)
							}
						}
					})
				case op < 18:
					if _, err := e.l.SealIdle(ctx, 0); err != nil {
						t.Fatal(err)
					}
				default:
					e.restart()
				}
				checkTails(t, e.kv)
			}
			e.restart()
			for key, data := range want {
				if got, err := e.get("bkt", key, 0, -1); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s: %v", key, err)
				}
			}
		})
	}
}

// scanHookKV runs hook once, at the first scan starting under prefix
// (the extent map when nil): right after it has read, or right before
// when before is set. A commit lands between two reads of the code under
// test (a sealer reading an egroup's tail, a collection reading history).
type scanHookKV struct {
	*meta.Pebble
	prefix []byte
	before bool
	hook   func()
}

func (k *scanHookKV) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	p := k.prefix
	if p == nil {
		p = []byte(meta.PrefixExtent)
	}
	h := k.hook
	if h != nil && bytes.HasPrefix(start, p) {
		k.hook = nil
	} else {
		h = nil
	}
	if h != nil && k.before {
		h()
	}
	items, err := k.Pebble.Scan(ctx, start, end, limit)
	if h != nil && !k.before {
		h()
	}
	return items, err
}

// TestSealFenceStopsACommitDuringTheTailRead: a writer that commits while
// a sealer reads the tail must not land an extent past the size the seal
// then states. Without the fence (the record rewritten before the read)
// the writer's compare still passes and the seal cuts its PUT off.
func TestSealFenceStopsACommitDuringTheTailRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &scanHookKV{Pebble: e.kv}
	l, err := New(hkv, e.local, e.local, Options{StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v := model.MustParseVector("hdd=2")
	if err := l.CreateBucket(ctx, "bkt", "", v); err != nil {
		t.Fatal(err)
	}
	put := func(key string) error {
		data := payload(uint64(len(key)), 3000)
		_, err := l.Put(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: v})
		return err
	}
	for _, k := range []string{"a", "bb", "ccc"} {
		if err := put(k); err != nil {
			t.Fatal(err)
		}
	}
	loc, _ := l.Locate(ctx, "bkt", "a")
	id := loc.Extents[0].Egroup
	_, rev := egroupRecord(t, e.kv, id)
	var during error
	hkv.hook = func() { during = put("dddd") }
	sealErr := l.SealEgroup(ctx, id, rev)
	if during != nil {
		t.Fatalf("PUT during the seal: %v", during)
	}
	t.Logf("seal: %v", sealErr) // either wins; what matters is below
	checkTails(t, e.kv)
	l2 := restartLayer(t, e, l)
	for _, k := range []string{"a", "bb", "ccc", "dddd"} {
		if got, err := readAll(t, l2, k); err != nil || !bytes.Equal(got, payload(uint64(len(k)), 3000)) {
			t.Fatalf("%s after the seal and a restart: %v", k, err)
		}
	}
}

// TestSealKeepsTheLastWriteTime: an egroup sealed after its record lagged
// states the time of its last write, not of its last record rewrite nor
// of the seal: tiering ages data by it and the garbage grace runs from
// it. Sealed by the idle writer, by the Curator and by recovery.
func TestSealKeepsTheLastWriteTime(t *testing.T) {
	for _, how := range []string{"idle", "curator", "recovery"} {
		t.Run(how, func(t *testing.T) {
			clock := time.Unix(1_800_000_000, 0)
			e := newEnv(t)
			e.tweak = func(o *Options) {
				o.Now = func() time.Time { return clock }
				// The background loop's idle seal must not race the
				// seal under test on a slow machine.
				o.AccessFlushInterval = time.Hour
			}
			e.restart()
			ctx := context.Background()
			if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				e.put("bkt", fmt.Sprintf("k%d", i), payload(uint64(i), 2000), "hdd=2")
				clock = clock.Add(time.Minute)
			}
			last := clock.Add(-time.Minute)
			loc, _ := e.l.Locate(ctx, "bkt", "k0")
			id := loc.Extents[0].Egroup
			if eg, _ := egroupRecord(t, e.kv, id); eg.Mtime == last.UnixNano() {
				t.Fatal("the record was rewritten by the last PUT: the lag is not exercised")
			}
			clock = clock.Add(time.Hour)
			switch how {
			case "idle":
				if n, err := e.l.SealIdle(ctx, time.Minute); err != nil || n != 1 {
					t.Fatalf("SealIdle: %d sealed, %v", n, err)
				}
			case "curator":
				_, rev := egroupRecord(t, e.kv, id)
				if err := e.l.SealEgroup(ctx, id, rev); err != nil {
					t.Fatal(err)
				}
			case "recovery":
				e.restart()
			}
			eg, _ := egroupRecord(t, e.kv, id)
			if eg.State != meta.EgroupSealed || eg.Mtime != last.UnixNano() {
				t.Fatalf("sealed %v with mtime %v, want the last PUT's %v", eg.State == meta.EgroupSealed, time.Unix(0, eg.Mtime), last)
			}
		})
	}
}

// restartLayer closes l and returns a new layer over e's store and
// devices after start-up recovery, as a restarted node has; closed when
// the test ends.
func restartLayer(t *testing.T, e *env, l *Layer) *Layer {
	t.Helper()
	l.Close()
	l2, err := New(e.kv, e.local, e.local, Options{StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	if _, err := l2.Recover(context.Background(), e.local); err != nil {
		t.Fatal(err)
	}
	return l2
}

// appendGarbage appends a valid slice to each file, as an append that
// reached the replicas but was never committed leaves it.
func appendGarbage(t *testing.T, paths []string) {
	t.Helper()
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(extent.Encode(nil, []byte("unacknowledged"))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}
