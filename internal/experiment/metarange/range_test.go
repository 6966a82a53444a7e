package metarange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/terrace-storage/terrace/internal/meta"
)

// testRange is n members on loopback, each with its own directory.
type testRange struct {
	t       *testing.T
	members map[uint64]string
	dirs    map[uint64]string
	r       map[uint64]*Range
}

func startRange(t testing.TB, n int, tick time.Duration) *testRange {
	tt, _ := t.(*testing.T)
	tr := &testRange{t: tt, members: map[uint64]string{}, dirs: map[uint64]string{}, r: map[uint64]*Range{}}
	lns := map[uint64]net.Listener{}
	for id := uint64(1); id <= uint64(n); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		tr.members[id] = ln.Addr().String()
		tr.dirs[id] = t.TempDir()
	}
	for id, ln := range lns {
		r, err := Open(Config{ID: id, Members: tr.members, Listener: ln, Dir: tr.dirs[id], Tick: tick})
		if err != nil {
			t.Fatal(err)
		}
		tr.r[id] = r
	}
	t.Cleanup(func() {
		for _, r := range tr.r {
			r.Close()
		}
	})
	tr.waitLeader(t)
	return tr
}

// waitLeader returns the leader every running member agrees on.
func (tr *testRange) waitLeader(t testing.TB) uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var lead uint64
		agree := true
		for _, r := range tr.r {
			l := r.Leader()
			if l == 0 || (lead != 0 && l != lead) {
				agree = false
				break
			}
			lead = l
		}
		if agree && lead != 0 && tr.r[lead] != nil {
			return lead
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the members did not agree on a leader within 20 s")
	return 0
}

func (tr *testRange) follower(t testing.TB) uint64 {
	lead := tr.waitLeader(t)
	for id := range tr.r {
		if id != lead {
			return id
		}
	}
	t.Fatal("no follower")
	return 0
}

func (tr *testRange) stopMember(id uint64) {
	tr.r[id].Close()
	delete(tr.r, id)
}

func (tr *testRange) restart(t testing.TB, id uint64, tick time.Duration) {
	t.Helper()
	r, err := Open(Config{ID: id, Members: tr.members, Dir: tr.dirs[id], Tick: tick})
	if err != nil {
		t.Fatal(err)
	}
	tr.r[id] = r
}

func put(ctx context.Context, kv meta.KV, key, value string, cmp ...meta.Cmp) (int64, error) {
	t := meta.Txn{Cmps: cmp}
	t.Put([]byte(key), []byte(value))
	return kv.Commit(ctx, &t)
}

const testTick = 20 * time.Millisecond

// TestCommitIsSeenByEveryMember: a commit through a follower and one
// through the leader are read back, linearizably, on every member, with
// the revision the commit returned.
func TestCommitIsSeenByEveryMember(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	lead, fol := tr.waitLeader(t), tr.follower(t)
	revF, err := put(ctx, tr.r[fol], "obj/a", "from follower")
	if err != nil {
		t.Fatal(err)
	}
	revL, err := put(ctx, tr.r[lead], "obj/b", "from leader")
	if err != nil {
		t.Fatal(err)
	}
	if revL <= revF {
		t.Fatalf("revisions %d then %d: want increasing", revF, revL)
	}
	for id, r := range tr.r {
		for key, want := range map[string]struct {
			v   string
			rev int64
		}{"obj/a": {"from follower", revF}, "obj/b": {"from leader", revL}} {
			it, err := r.Get(ctx, []byte(key))
			if err != nil {
				t.Fatalf("member %d get %s: %v", id, key, err)
			}
			if string(it.Value) != want.v || it.ModRev != want.rev {
				t.Fatalf("member %d %s = %q@%d, want %q@%d", id, key, it.Value, it.ModRev, want.v, want.rev)
			}
		}
	}
	if _, err := tr.r[fol].Get(ctx, []byte("obj/none")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("get of a missing key: %v, want ErrNotFound", err)
	}
}

// TestCompareAndSwap: compares hold against per-key revisions, in log
// order, on whichever member the commit enters.
func TestCompareAndSwap(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	fol := tr.follower(t)
	kv := tr.r[fol]
	rev, err := put(ctx, kv, "k", "v1", meta.Cmp{Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, kv, "k", "again", meta.Cmp{Key: []byte("k")}); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	rev2, err := put(ctx, kv, "k", "v2", meta.Cmp{Key: []byte("k"), ModRev: rev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, tr.r[tr.waitLeader(t)], "k", "stale", meta.Cmp{Key: []byte("k"), ModRev: rev}); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("swap on a stale revision: %v, want ErrConflict", err)
	}
	var del meta.Txn
	del.If([]byte("k"), rev2)
	del.Del([]byte("k"))
	if _, err := kv.Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, []byte("k")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
	if _, err := kv.Commit(ctx, &meta.Txn{}); err == nil {
		t.Fatal("an empty transaction was accepted")
	}
}

// TestConcurrentCreatesOneWins: creates of one key race from every
// member; exactly one succeeds and the key holds its value.
func TestConcurrentCreatesOneWins(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for id, r := range tr.r {
		for j := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := fmt.Sprintf("m%d-%d", id, j)
				_, err := put(ctx, r, "race", v, meta.Cmp{Key: []byte("race")})
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, v)
					mu.Unlock()
				case !errors.Is(err, meta.ErrConflict):
					t.Errorf("create: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d creates succeeded (%v), want 1", len(winners), winners)
	}
	for id, r := range tr.r {
		it, err := r.Get(ctx, []byte("race"))
		if err != nil || string(it.Value) != winners[0] {
			t.Fatalf("member %d: %q, %v; want %q", id, it.Value, err, winners[0])
		}
	}
}

// TestMemberRestartCatchesUp: a member stopped while commits go on comes
// back from its directory with what it had, and catches up from the log.
func TestMemberRestartCatchesUp(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	lead := tr.waitLeader(t)
	for i := range 20 {
		if _, err := put(ctx, tr.r[lead], fmt.Sprintf("before/%02d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	down := tr.follower(t)
	tr.stopMember(down)
	for i := range 20 {
		if _, err := put(ctx, tr.r[lead], fmt.Sprintf("during/%02d", i), "y"); err != nil {
			t.Fatal(err)
		}
	}
	tr.restart(t, down, testTick)
	items, err := tr.r[down].Scan(ctx, []byte("before/"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 40 {
		t.Fatalf("restarted member scans %d keys, want 40", len(items))
	}
}

// TestLeaderLossKeepsCommitting: the leader stops; the two left elect one
// of themselves and commit; the old leader returns and reads everything.
func TestLeaderLossKeepsCommitting(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	old := tr.waitLeader(t)
	if _, err := put(ctx, tr.r[old], "a", "1"); err != nil {
		t.Fatal(err)
	}
	tr.stopMember(old)
	lead := tr.waitLeader(t)
	if lead == old {
		t.Fatalf("member %d still leads after stopping", old)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := put(cctx, tr.r[lead], "b", "2"); err != nil {
		t.Fatal(err)
	}
	tr.restart(t, old, testTick)
	for _, k := range []string{"a", "b"} {
		if _, err := tr.r[old].Get(cctx, []byte(k)); err != nil {
			t.Fatalf("returned member get %s: %v", k, err)
		}
	}
}

// TestLostApplyReplays: a member's apply batch is unsynced; a crash can
// lose it while the synced log survives. Rewinding the applied index and
// removing the applied data (what such a crash leaves) must be repaired
// from the log at restart, compares included.
func TestLostApplyReplays(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	lead := tr.waitLeader(t)
	rev, err := put(ctx, tr.r[lead], "k", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, tr.r[lead], "k", "v2", meta.Cmp{Key: []byte("k"), ModRev: rev}); err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, tr.r[lead], "k", "v3", meta.Cmp{Key: []byte("k"), ModRev: rev}); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("stale swap: %v", err)
	}
	victim := tr.follower(t)
	if _, err := tr.r[victim].Get(ctx, []byte("k")); err != nil { // applied there
		t.Fatal(err)
	}
	tr.stopMember(victim)
	db, err := pebble.Open(tr.dirs[victim], &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	var zero [8]byte
	zero[7] = 1 // only the first entry (a configuration change) "applied"
	if err := db.Set(appliedKey, zero[:], pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(dataKey([]byte("k")), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Stop the others too, so the victim's answer comes from its own replay.
	for id := range tr.r {
		tr.stopMember(id)
	}
	tr.restart(t, victim, testTick)
	deadline := time.Now().Add(10 * time.Second)
	for {
		it, err := tr.r[victim].GetStale(ctx, []byte("k"))
		if err == nil {
			if string(it.Value) != "v2" {
				t.Fatalf("replayed value %q, want v2 (the stale swap must conflict again)", it.Value)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key never came back from the log: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogHoleRefused: a member whose log lost an entry in the middle does
// not start (it would apply a different history).
func TestLogHoleRefused(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx := context.Background()
	for i := range 5 {
		if _, err := put(ctx, tr.r[tr.waitLeader(t)], fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	victim := tr.follower(t)
	tr.stopMember(victim)
	db, err := pebble.Open(tr.dirs[victim], &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(logKey(4), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(Config{ID: victim, Members: tr.members, Dir: tr.dirs[victim], Tick: testTick})
	if err == nil {
		t.Fatal("a member with a hole in its log started")
	}
	t.Logf("refused: %v", err)
}

// TestWatchSeesAppliedChanges: a watch on a follower streams puts and
// deletes under its prefix, with their revisions, and nothing else.
func TestWatchSeesAppliedChanges(t *testing.T) {
	tr := startRange(t, 3, testTick)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fol := tr.follower(t)
	ch := tr.r[fol].Watch(ctx, []byte("w/"))
	rev, err := put(ctx, tr.r[tr.waitLeader(t)], "w/1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, tr.r[fol], "other", "b"); err != nil {
		t.Fatal(err)
	}
	var del meta.Txn
	del.Del([]byte("w/1"))
	if _, err := tr.r[fol].Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	ev := <-ch
	if ev.Type != meta.EventPut || string(ev.Item.Key) != "w/1" || ev.Item.ModRev != rev {
		t.Fatalf("first event %+v", ev)
	}
	ev = <-ch
	if ev.Type != meta.EventDelete || string(ev.Item.Key) != "w/1" {
		t.Fatalf("second event %+v", ev)
	}
	cancel()
	for range ch { // closed once the context ends
	}
}

// TestSnapshotsUnsupportedIsNotSilent: the range does not claim
// meta.Snapshotter; callers that need snapshot reads see it at compile
// time rather than reading a moving state.
func TestSnapshotsUnsupportedIsNotSilent(t *testing.T) {
	var kv meta.KV = (*Range)(nil)
	if _, ok := kv.(meta.Snapshotter); ok {
		t.Fatal("Range claims snapshots it does not implement")
	}
}

// TestPersistReplacesADeposedTail: entries that start inside the stored
// log replace its tail (a deposed leader's uncommitted entries), in
// Pebble as in memory, so a restart loads the log raft decided.
func TestPersistReplacesADeposedTail(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &Range{db: db, ms: raft.NewMemoryStorage()}
	ents := func(term uint64, from, to uint64) []*pb.Entry {
		var out []*pb.Entry
		for i := from; i <= to; i++ {
			out = append(out, &pb.Entry{Term: proto.Uint64(term), Index: proto.Uint64(i), Data: []byte{byte(term)}})
		}
		return out
	}
	if err := r.persist(raft.Ready{Entries: ents(1, 1, 5), MustSync: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.persist(raft.Ready{Entries: ents(2, 3, 4), HardState: &pb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(2)}, MustSync: true}); err != nil {
		t.Fatal(err)
	}
	fresh := &Range{db: db, ms: raft.NewMemoryStorage()}
	if _, err := fresh.load(); err != nil {
		t.Fatal(err)
	}
	last, _ := fresh.ms.LastIndex()
	if last != 4 {
		t.Fatalf("reloaded log ends at %d, want 4", last)
	}
	for i, want := range map[uint64]uint64{1: 1, 2: 1, 3: 2, 4: 2} {
		if term, err := fresh.ms.Term(i); err != nil || term != want {
			t.Fatalf("entry %d term %d (%v), want %d", i, term, err, want)
		}
	}
}
