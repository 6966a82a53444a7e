package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTest(t testing.TB) (*Pebble, string) {
	t.Helper()
	dir := t.TempDir()
	kv, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv, dir
}

func put(t testing.TB, kv KV, key, val string) int64 {
	t.Helper()
	var tx Txn
	tx.Put([]byte(key), []byte(val))
	rev, err := kv.Commit(context.Background(), &tx)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return rev
}

func TestGetPutDelete(t *testing.T) {
	ctx := context.Background()
	kv, _ := openTest(t)
	if _, err := kv.Get(ctx, []byte("o/missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	r1 := put(t, kv, "o/a", "1")
	it, err := kv.Get(ctx, []byte("o/a"))
	if err != nil || string(it.Value) != "1" || it.ModRev != r1 || string(it.Key) != "o/a" {
		t.Fatalf("get: %+v %v (rev %d)", it, err, r1)
	}
	r2 := put(t, kv, "o/a", "2")
	if r2 != r1+1 {
		t.Fatalf("revisions %d then %d, want consecutive", r1, r2)
	}
	if it, _ := kv.Get(ctx, []byte("o/a")); string(it.Value) != "2" || it.ModRev != r2 {
		t.Fatalf("after overwrite: %+v", it)
	}
	// Values returned are copies: mutating them does not change the store.
	it, _ = kv.Get(ctx, []byte("o/a"))
	it.Value[0] = 'x'
	if it2, _ := kv.Get(ctx, []byte("o/a")); string(it2.Value) != "2" {
		t.Fatal("Get returned a value aliasing the store")
	}
	var del Txn
	del.Del([]byte("o/a"))
	if _, err := kv.Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, []byte("o/a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	// Empty values are values.
	put(t, kv, "o/empty", "")
	if it, err := kv.Get(ctx, []byte("o/empty")); err != nil || len(it.Value) != 0 {
		t.Fatalf("empty value: %+v %v", it, err)
	}
}

func TestCommitValidation(t *testing.T) {
	ctx := context.Background()
	kv, _ := openTest(t)
	big := Txn{}
	for i := 0; i <= MaxTxnOps; i++ {
		big.Put([]byte(fmt.Sprintf("o/%d", i)), nil)
	}
	cases := map[string]*Txn{
		"empty":      {},
		"too many":   &big,
		"empty key":  {Ops: []Op{{Key: nil, Value: []byte("v")}}},
		"0xff key":   {Ops: []Op{{Key: []byte("\xffx"), Value: []byte("v")}}},
		"rev key":    {Ops: []Op{{Key: revKey, Value: []byte("v")}}},
		"huge value": {Ops: []Op{{Key: []byte("o/x"), Value: make([]byte, MaxValueBytes+1)}}},
	}
	for name, tx := range cases {
		if _, err := kv.Commit(ctx, tx); err == nil || errors.Is(err, ErrConflict) {
			t.Errorf("%s: commit returned %v, want a validation error", name, err)
		}
	}
	// Nothing was applied and the revision did not move.
	if kv.Rev() != 0 {
		t.Fatalf("rev %d after rejected txns", kv.Rev())
	}
	items, _ := kv.Scan(ctx, nil, nil, 0)
	if len(items) != 0 {
		t.Fatalf("rejected txns left %d keys", len(items))
	}
	ok := Txn{}
	for i := 0; i < MaxTxnOps; i++ {
		ok.Put([]byte(fmt.Sprintf("o/%03d", i)), make([]byte, 100))
	}
	ok.Ops[0].Value = make([]byte, MaxValueBytes)
	if _, err := kv.Commit(ctx, &ok); err != nil {
		t.Fatalf("txn at the limits: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var tx Txn
	tx.Put([]byte("o/c"), nil)
	if _, err := kv.Commit(cctx, &tx); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with cancelled ctx: %v", err)
	}
}

func TestCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	kv, _ := openTest(t)
	// ModRev 0: create only if absent.
	var create Txn
	create.If([]byte("b/x"), 0)
	create.Put([]byte("b/x"), []byte("1"))
	rev, err := kv.Commit(ctx, &create)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Commit(ctx, &create); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want conflict", err)
	}
	// Stale revision loses; current one wins; all-or-nothing across keys.
	put(t, kv, "b/y", "y1")
	yit, _ := kv.Get(ctx, []byte("b/y"))
	var stale Txn
	stale.If([]byte("b/x"), rev-1)
	stale.If([]byte("b/y"), yit.ModRev)
	stale.Put([]byte("b/x"), []byte("2"))
	stale.Put([]byte("b/y"), []byte("y2"))
	if _, err := kv.Commit(ctx, &stale); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale compare: %v", err)
	}
	if it, _ := kv.Get(ctx, []byte("b/y")); string(it.Value) != "y1" {
		t.Fatalf("a failed txn applied part of its ops: b/y=%q", it.Value)
	}
	stale.Cmps[0].ModRev = rev
	if _, err := kv.Commit(ctx, &stale); err != nil {
		t.Fatalf("current compare: %v", err)
	}
	// A compare on a key the txn does not write still guards it.
	var guarded Txn
	guarded.If([]byte("b/missing"), 0)
	guarded.Put([]byte("b/z"), []byte("z"))
	if _, err := kv.Commit(ctx, &guarded); err != nil {
		t.Fatal(err)
	}
	// Concurrent increments with CAS never lose an update.
	put(t, kv, "s/ctr", "0")
	var wg sync.WaitGroup
	const workers, each = 8, 25
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				it, err := kv.Get(ctx, []byte("s/ctr"))
				if err != nil {
					t.Error(err)
					return
				}
				var n int
				fmt.Sscan(string(it.Value), &n)
				var tx Txn
				tx.If(it.Key, it.ModRev)
				tx.Put(it.Key, []byte(fmt.Sprint(n+1)))
				if _, err := kv.Commit(ctx, &tx); errors.Is(err, ErrConflict) {
					continue
				} else if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	if it, _ := kv.Get(ctx, []byte("s/ctr")); string(it.Value) != fmt.Sprint(workers*each) {
		t.Fatalf("counter %s after %d CAS increments", it.Value, workers*each)
	}
}

func TestScan(t *testing.T) {
	ctx := context.Background()
	kv, _ := openTest(t)
	for _, k := range []string{"o/b", "o/a", "o/c/1", "o/c/2", "x/1", "b/1"} {
		put(t, kv, k, "v"+k)
	}
	keys := func(items []Item) string {
		var s []string
		for _, it := range items {
			s = append(s, string(it.Key))
			if string(it.Value) != "v"+string(it.Key) || it.ModRev == 0 {
				t.Errorf("scan item %+v", it)
			}
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		start, end string
		nilEnd     bool
		limit      int
		want       string
	}{
		{"o/", "o0", false, 0, "o/a,o/b,o/c/1,o/c/2"},
		{"o/", "o0", false, 2, "o/a,o/b"},
		{"o/b", "o/c/2", false, 0, "o/b,o/c/1"},
		{"o/c/", string(PrefixEnd([]byte("o/c/"))), false, 0, "o/c/1,o/c/2"},
		{"", "", true, 0, "b/1,o/a,o/b,o/c/1,o/c/2,x/1"},
		{"p", "", true, -1, "x/1"},
		{"o/z", "o/a", false, 0, ""}, // start after end
		{"y", "", true, 0, ""},
	} {
		var end []byte
		if !c.nilEnd {
			end = []byte(c.end)
		}
		items, err := kv.Scan(ctx, []byte(c.start), end, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(items); got != c.want {
			t.Errorf("scan [%q,%q) limit %d: %q, want %q", c.start, c.end, c.limit, got, c.want)
		}
	}
	// The internal revision record never leaks into scans.
	items, _ := kv.Scan(ctx, []byte("\xfe"), nil, 0)
	if len(items) != 0 {
		t.Fatalf("scan past user keys returned %d items", len(items))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := kv.Get(cctx, []byte("o/a")); err == nil {
		t.Fatal("get with a cancelled ctx succeeded")
	}
}

func TestReopenPersists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kv, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	put(t, kv, "o/a", "1")
	put(t, kv, "o/b", "2")
	var del Txn
	del.Del([]byte("o/a"))
	last, err := kv.Commit(ctx, &del)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("double close: %v", err)
	}
	// Calls after Close fail cleanly instead of panicking inside Pebble.
	if _, err := kv.Get(ctx, []byte("o/b")); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	if _, err := kv.Scan(ctx, nil, nil, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("scan after close: %v", err)
	}
	var tx Txn
	tx.Put([]byte("o/c"), nil)
	if _, err := kv.Commit(ctx, &tx); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}

	kv, err = OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if kv.Rev() != last {
		t.Fatalf("reopened at rev %d, want %d", kv.Rev(), last)
	}
	if _, err := kv.Get(ctx, []byte("o/a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key after reopen: %v", err)
	}
	it, err := kv.Get(ctx, []byte("o/b"))
	if err != nil || string(it.Value) != "2" || it.ModRev != last-1 {
		t.Fatalf("o/b after reopen: %+v %v", it, err)
	}
	// Revisions continue; an old ModRev still guards correctly.
	if r := put(t, kv, "o/c", "3"); r != last+1 {
		t.Fatalf("first commit after reopen at rev %d, want %d", r, last+1)
	}
	var cas Txn
	cas.If([]byte("o/b"), it.ModRev)
	cas.Put([]byte("o/b"), []byte("3"))
	if _, err := kv.Commit(ctx, &cas); err != nil {
		t.Fatalf("CAS with a revision read before the restart: %v", err)
	}
}

func TestWatch(t *testing.T) {
	ctx := context.Background()
	kv, _ := openTest(t)
	wctx, cancel := context.WithCancel(ctx)
	ch := kv.Watch(wctx, []byte("p/"))
	put(t, kv, "o/ignored", "x")
	r1 := put(t, kv, "p/a", "1")
	var tx Txn
	tx.Put([]byte("p/b"), []byte("2"))
	tx.Del([]byte("p/a"))
	tx.Put([]byte("o/other"), []byte("3"))
	r2, err := kv.Commit(ctx, &tx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{EventPut, Item{Key: []byte("p/a"), Value: []byte("1"), ModRev: r1}},
		{EventPut, Item{Key: []byte("p/b"), Value: []byte("2"), ModRev: r2}},
		{EventDelete, Item{Key: []byte("p/a"), ModRev: r2}},
	}
	for i, w := range want {
		select {
		case ev := <-ch:
			if ev.Type != w.Type || !bytes.Equal(ev.Item.Key, w.Item.Key) || ev.Item.ModRev != w.Item.ModRev ||
				(w.Type == EventPut && !bytes.Equal(ev.Item.Value, w.Item.Value)) {
				t.Fatalf("event %d: %+v, want %+v", i, ev, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
	// A conflicting txn produces no events.
	var bad Txn
	bad.If([]byte("p/b"), 1)
	bad.Put([]byte("p/b"), []byte("x"))
	if _, err := kv.Commit(ctx, &bad); !errors.Is(err, ErrConflict) {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		t.Fatalf("event from a failed txn: %+v", ev)
	default:
	}
	cancel()
	if !drained(ch) {
		t.Fatal("watch channel not closed after its context ended")
	}

	// A watcher that falls more than the buffer behind is dropped: its
	// channel closes (so it re-reads) and commits never block.
	slow := kv.Watch(ctx, []byte("q/"))
	done := make(chan struct{})
	go func() {
		for i := 0; i < watchBuffer+10; i++ {
			put(t, kv, fmt.Sprintf("q/%05d", i), "v")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("commits blocked on a slow watcher")
	}
	if !drained(slow) {
		t.Fatal("slow watcher was not dropped")
	}
	// Close ends every watch.
	w := kv.Watch(ctx, nil)
	kv.Close()
	if !drained(w) {
		t.Fatal("Close left a watch open")
	}
}

// drained reads ch until it closes (true) or stalls for 5 s (false).
func drained(ch <-chan Event) bool {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-time.After(5 * time.Second):
			return false
		}
	}
}

func TestSequence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kv, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Two sequences on the same counter (two nodes, or a restart while an
	// old one lives) never hand out the same ID, also concurrently.
	a, b := NewSequence(kv, "egroup", 7), NewSequence(kv, "egroup", 5)
	seen := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if g%2 == 1 {
				s = b
			}
			for i := 0; i < 50; i++ {
				id, err := s.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if id == 0 || seen[id] {
					t.Errorf("sequence returned %d twice (or 0)", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var maxID uint64
	for id := range seen {
		maxID = max(maxID, id)
	}
	kv.Close()
	kv, err = OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	c := NewSequence(kv, "egroup", 0)
	id, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id <= maxID {
		t.Fatalf("after reopen the sequence returned %d, not above %d", id, maxID)
	}
	// An independent name starts at 1.
	if id, _ := NewSequence(kv, "other", 0).Next(ctx); id != 1 {
		t.Fatalf("fresh sequence starts at %d", id)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := NewSequence(kv, "third", 0).Next(cctx); err == nil {
		t.Fatal("Next with a cancelled ctx succeeded")
	}
	// A corrupt counter is an error, not a silent restart from zero.
	put(t, kv, PrefixSeq+"broken", "not-a-number")
	if _, err := NewSequence(kv, "broken", 0).Next(ctx); err == nil {
		t.Fatal("corrupt sequence counter accepted")
	}
}

func TestKeysAndRecords(t *testing.T) {
	if got := PrefixEnd([]byte("o/a")); string(got) != "o/b" {
		t.Errorf("PrefixEnd(o/a) = %q", got)
	}
	if got := PrefixEnd([]byte("a\xff\xff")); string(got) != "b" {
		t.Errorf("PrefixEnd(a\\xff\\xff) = %q", got)
	}
	if got := PrefixEnd([]byte("\xff\xff")); got != nil {
		t.Errorf("PrefixEnd(all 0xff) = %q, want nil (no bound)", got)
	}
	if got := PrefixEnd(nil); got != nil {
		t.Errorf("PrefixEnd(nil) = %q", got)
	}
	b, k, ok := SplitObjectKey(ObjectKey("bkt", "a/b\x01c"))
	if !ok || b != "bkt" || k != "a/b\x01c" {
		t.Errorf("SplitObjectKey: %q %q %v", b, k, ok)
	}
	// Objects of one bucket sort together and by key; a bucket whose name
	// extends another's does not interleave.
	if !(bytes.Compare(ObjectKey("ab", "zzz"), ObjectKey("abc", "a")) < 0) {
		t.Error("object keys of bucket ab sort after those of abc")
	}
	if !bytes.HasPrefix(ObjectKey("b", "photos/1"), ObjectPrefix("b", "photos/")) {
		t.Error("ObjectPrefix is not a prefix of the object key")
	}
	for _, id := range []uint64{0, 1, 0xff, 1 << 40, ^uint64(0)} {
		for _, key := range [][]byte{ExtentKey(id), EgroupKey(id), AccessKey(id)} {
			got, err := ParseID(key)
			if err != nil || got != id {
				t.Errorf("ParseID(%q) = %d, %v", key, got, err)
			}
		}
	}
	if bytes.Compare(EgroupKey(9), EgroupKey(10)) >= 0 || bytes.Compare(EgroupKey(0xff), EgroupKey(0x100)) >= 0 {
		t.Error("egroup keys do not sort numerically")
	}
	if bytes.Compare(PartKey("b", "u", 9), PartKey("b", "u", 10)) >= 0 {
		t.Error("part keys do not sort numerically")
	}
	eg := Egroup{Replicas: []EgroupReplica{{Device: "n1/ssd0", Node: "n1", Tier: "ssd", Bad: true}}, State: EgroupSealed, Size: 123, Mtime: 9}
	var back Egroup
	if err := Decode(Encode(eg), &back); err != nil || back.Size != 123 || !back.Replicas[0].Bad || back.State != EgroupSealed {
		t.Errorf("egroup round trip: %+v %v", back, err)
	}
	if err := Decode([]byte("{not json"), &back); err == nil {
		t.Error("Decode accepted garbage")
	}
	ctx := context.Background()
	kv, _ := openTest(t)
	if _, err := GetRecord(ctx, kv, EgroupKey(1), &back); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRecord missing: %v", err)
	}
	var tx Txn
	tx.Put(EgroupKey(1), Encode(eg))
	rev, _ := kv.Commit(ctx, &tx)
	if got, err := GetRecord(ctx, kv, EgroupKey(1), &back); err != nil || got != rev || back.Size != 123 {
		t.Errorf("GetRecord: rev %d (want %d) %+v %v", got, rev, back, err)
	}
}

func TestPebbleBlockCacheOption(t *testing.T) {
	if _, err := OpenPebbleWith(t.TempDir(), PebbleOptions{BlockCacheBytes: -1}); err == nil || !strings.Contains(err.Error(), "must not be negative") {
		t.Fatalf("negative cache: %v", err)
	}
	p, err := OpenPebbleWith(t.TempDir(), PebbleOptions{BlockCacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	var txn Txn
	txn.Put([]byte("b/x"), []byte("v"))
	if _, err := p.Commit(ctx, &txn); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, []byte("b/x")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Scan(ctx, []byte("b/"), []byte("b0"), 0); err != nil {
		t.Fatal(err)
	}
	if s := p.KVStats(); s.Reads != 2 || s.Commits != 1 || s.BackendTxns != 1 {
		t.Errorf("stats %+v, want 2 reads, 1 commit, 1 txn", s)
	}
}

func TestPebbleSnapshots(t *testing.T) {
	kv, _ := openTest(t)
	ctx := context.Background()
	if err := CheckSnapshots(ctx, kv); err != nil {
		t.Fatal(err)
	}
	// A revision no open snapshot holds cannot be read: the store keeps
	// no past revisions.
	if _, err := kv.SnapshotAt(ctx, 1); err == nil {
		t.Fatal("SnapshotAt a revision without an open snapshot succeeded")
	}
	// Closing twice, and after the store, is harmless.
	s, err := kv.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPebbleCursor: a cursor walks exactly what Scan returns for the
// range — keys, values and revisions, bounds respected — on the store and
// on a snapshot (which does not see later writes), stops on a cancelled
// context with its error, and Close is idempotent and lets the store
// close.
func TestPebbleCursor(t *testing.T) {
	kv, _ := openTest(t)
	ctx := context.Background()
	for i := range 2000 {
		put(t, kv, fmt.Sprintf("g/%016x", i), fmt.Sprintf("v%d", i*7))
	}
	put(t, kv, "h/after", "x")
	snap, err := kv.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	put(t, kv, "g/0000000000000005", "changed") // after the snapshot
	walk := func(cs CursorStore, start string, end []byte) []Item {
		t.Helper()
		cur, err := cs.Cursor(ctx, []byte(start), end)
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close()
		var out []Item
		for {
			k, v, rev, ok := cur.Next()
			if !ok {
				if err := cur.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			out = append(out, Item{Key: bytes.Clone(k), Value: bytes.Clone(v), ModRev: rev})
		}
	}
	for _, r := range [][2]string{{"g/", "g0"}, {"g/0000000000000100", "g/0000000000000200"}, {"", ""}, {"z", ""}} {
		end := []byte(r[1])
		if r[1] == "" {
			end = nil
		}
		for name, store := range map[string]interface {
			CursorStore
			Scan(context.Context, []byte, []byte, int) ([]Item, error)
		}{"store": kv, "snapshot": snap.(*pebbleSnapshot)} {
			want, err := store.Scan(ctx, []byte(r[0]), end, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := walk(store, r[0], end)
			if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s [%q, %q): cursor read %d records, Scan %d", name, r[0], r[1], len(got), len(want))
			}
		}
	}
	if got := walk(snap.(*pebbleSnapshot), "g/0000000000000005", []byte("g/0000000000000006")); len(got) != 1 || string(got[0].Value) != "v35" {
		t.Fatalf("snapshot cursor read %+v, want the value before the later write", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	cur, err := kv.Cursor(cctx, []byte("g/"), []byte("g0"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, _, _, ok := cur.Next(); !ok {
			break
		}
		n++
	}
	if !errors.Is(cur.Err(), context.Canceled) || n >= 2000 {
		t.Fatalf("cancelled cursor read %d records, err %v", n, cur.Err())
	}
	if err := cur.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cur.Close(); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	if err := kv.Close(); err != nil {
		t.Fatalf("close after the cursors: %v", err)
	}
}
