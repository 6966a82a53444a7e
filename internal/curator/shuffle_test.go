package curator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
)

// shuffleBalancer is streamingBalancer whose nodes take part in shuffles:
// every node has its own ShuffleStore, streams and chunks go through
// their real encodings. A node in fail is unreachable for maps; a node in
// pushFail refuses pushes; a node in reduceFail cannot be reached for its
// reduces; a node in restart loses its store just before its first
// reduce; a node in cut has its owner streams cut after it pushed.
type shuffleBalancer struct {
	*streamingBalancer
	stores     map[model.NodeID]*ShuffleStore
	pushFail   map[model.NodeID]bool
	reduceFail map[model.NodeID]bool
	restart    map[model.NodeID]bool
	cutOwners  map[model.NodeID]bool
	mu         sync.Mutex
	pushed     map[model.NodeID]int // chunks received
	reduced    atomic.Int64         // reduces run on a peer
}

func newShuffleBalancer(fb *fakeBalancer, nodes ...model.NodeID) *shuffleBalancer {
	sb := &shuffleBalancer{streamingBalancer: &streamingBalancer{fakeBalancer: fb}, stores: map[model.NodeID]*ShuffleStore{},
		pushed: map[model.NodeID]int{}}
	for _, n := range nodes {
		sb.stores[n] = NewShuffleStore("", -1, nil)
	}
	return sb
}

func (s *shuffleBalancer) PushShuffle(_ context.Context, node model.NodeID, c ShuffleChunk) error {
	if s.pushFail[node] {
		return errors.New("connection refused")
	}
	var buf bytes.Buffer
	if err := WriteShuffleChunk(&buf, c); err != nil {
		return err
	}
	got, err := ReadShuffleChunk(&buf, c.ID, c.Dst, c.Src, c.Mapper)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pushed[node]++
	s.mu.Unlock()
	return s.stores[node].Receive(got)
}

func (s *shuffleBalancer) MapPartitionTo(ctx context.Context, node model.NodeID, part Partition, emit func(MapRecord)) (int, error) {
	m, _ := ParsePartition(part.Name)
	if s.fail[node] || m == "extents" && part.Shuffle != nil && s.reduceFail[node] {
		return 0, errors.New("peer unreachable")
	}
	if m == "extents" && part.Shuffle != nil {
		s.mu.Lock()
		if s.restart[node] {
			s.stores[node] = NewShuffleStore("", -1, nil)
			delete(s.restart, node)
		}
		s.mu.Unlock()
		s.reduced.Add(1)
	}
	var buf bytes.Buffer
	env := ShuffleEnv{Self: node, Store: s.stores[node], Push: s.PushShuffle}
	if err := WriteShuffleMapStream(ctx, &buf, s.kv, part, env); err != nil {
		return 0, err
	}
	if isOwnerMap(m) && s.cutOwners[node] {
		buf.Truncate(buf.Len() - 1)
	}
	return ReadMapStreamTo(&buf, part, emit)
}

// A full scan whose references are shuffled to reducers on the nodes
// finds exactly what the master finds alone — the golden metadata's
// live and dead extents, buckets, policies, garbage, dangling references,
// dedup groups and history — and so does one where the shuffle breaks
// anywhere: a mapper's stream cut after it pushed (the master maps the
// partition again and the reducer must take the new attempt's
// references, not both), pushes refused, a reducer unreachable or
// restarted (its references gone: the master joins here).
func TestShuffledFullScanMatchesMasterAlone(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		kv, local, pol, l := benchNode(t)
		loadRandomFull(t, kv, seed)
		c := New(l, kv, local, pol, nil, nil, Options{Decide: decide.Options{GarbageGrace: time.Hour}})
		ctx := context.Background()
		alone, err := c.scan(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		want := dumpFullScan(alone)
		for _, mode := range []string{"shuffled", "mapper cut", "push refused", "reducer down", "reducer restarted"} {
			sb := newShuffleBalancer(&fakeBalancer{kv: kv}, "n1", "n2")
			switch mode {
			case "mapper cut":
				sb.cutOwners = map[model.NodeID]bool{"n2": true}
			case "push refused":
				sb.pushFail = map[model.NodeID]bool{"n2": true}
			case "reducer down":
				sb.reduceFail = map[model.NodeID]bool{"n2": true}
			case "reducer restarted":
				sb.restart = map[model.NodeID]bool{"n2": true}
			}
			c.opts.Balancer, c.opts.Self, c.opts.Shuffle = sb, "n1", sb.stores["n1"]
			c.mu.Lock()
			c.mapFailed = map[model.NodeID]time.Time{}
			c.mu.Unlock()
			res, err := c.scan(ctx, true)
			if err != nil {
				t.Fatalf("seed %d %s: %v", seed, mode, err)
			}
			if got := dumpFullScan(res); got != want {
				gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("seed %d %s: line %d:\n got %s\nwant %s", seed, mode, i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("seed %d %s: got %d lines, want %d", seed, mode, len(gl), len(wl))
			}
			shuffled := mode == "shuffled" || mode == "mapper cut"
			if shuffled != (res.shuffle != "") || shuffled == (res.shuffleErr != "") {
				t.Fatalf("seed %d %s: shuffle %q, error %q", seed, mode, res.shuffle, res.shuffleErr)
			}
			if shuffled && (sb.pushed["n2"] == 0 || sb.pushed["n1"] == 0 || sb.reduced.Load() == 0) {
				t.Fatalf("seed %d %s: chunks pushed %v, %d reduces on the peer: the shuffle did not cross nodes", seed, mode, sb.pushed, sb.reduced.Load())
			}
			if mode == "mapper cut" && !strings.Contains(res.partitions["objects/0"], "cut short") {
				t.Fatalf("seed %d: objects/0 by %q, want n2's stream cut short", seed, res.partitions["objects/0"])
			}
			// Every reduce took and forgot its references; a shuffle the
			// master gave up on is dropped here and expires on the peers.
			if n := sb.stores["n1"].Shuffles(); n != 0 {
				t.Fatalf("seed %d %s: the master still holds %d shuffles", seed, mode, n)
			}
			if n := sb.stores["n2"].Shuffles(); shuffled && n != 0 {
				t.Fatalf("seed %d %s: the peer still holds %d shuffles", seed, mode, n)
			}
			res.release()
		}
	}
}

func testChunk() ShuffleChunk {
	seq, _ := shuffleSeq("objects/2", 7)
	return ShuffleChunk{ID: "n1-1", Dst: Partition{Name: "extents/3", Lo: 100, Hi: 199}, Src: "objects/2", Mapper: "n2",
		Names: []string{"b1"}, Refs: []ShuffleRef{{ID: 150, Seq: seq, Bucket: 1}}}
}

// A store refuses chunks that do not belong where they claim to: a
// reference outside the reducer's range, a position not of the source
// partition, a bucket the chunk does not name, a bucket on an upload
// part, a destination that is not an extent partition.
func TestShuffleStoreRefusesBadChunks(t *testing.T) {
	s := NewShuffleStore("", -1, nil)
	if err := s.Receive(testChunk()); err != nil {
		t.Fatalf("good chunk: %v", err)
	}
	upSeq, _ := shuffleSeq("uploads/0", 1)
	for name, mutate := range map[string]func(*ShuffleChunk){
		"outside range":     func(c *ShuffleChunk) { c.Refs[0].ID = 200 },
		"other partition":   func(c *ShuffleChunk) { c.Refs[0].Seq, _ = shuffleSeq("objects/3", 7) },
		"position zero":     func(c *ShuffleChunk) { c.Refs[0].Seq &^= 1<<seqPosBits - 1 },
		"bucket not named":  func(c *ShuffleChunk) { c.Refs[0].Bucket = 2 },
		"no bucket":         func(c *ShuffleChunk) { c.Refs[0].Bucket = 0 },
		"upload bucket":     func(c *ShuffleChunk) { c.Src, c.Refs[0].Seq = "uploads/0", upSeq },
		"not extents":       func(c *ShuffleChunk) { c.Dst.Name = "egroups/3" },
		"source not owner":  func(c *ShuffleChunk) { c.Src = "extents/1" },
		"no mapper":         func(c *ShuffleChunk) { c.Mapper = "" },
		"no shuffle":        func(c *ShuffleChunk) { c.ID = "" },
		"empty destination": func(c *ShuffleChunk) { c.Dst.Lo, c.Dst.Hi = 5, 4 },
	} {
		c := testChunk()
		mutate(&c)
		if err := s.Receive(c); err == nil {
			t.Errorf("%s: chunk accepted", name)
		}
	}
	// What was accepted is what a reduce takes; an attempt it is not
	// told about (n3's) is ignored and forgotten with it.
	stale := testChunk()
	stale.Mapper = "n3"
	stale.Refs = append(stale.Refs, stale.Refs[0])
	if err := s.Receive(stale); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.take("n1-1", "extents/3", []ShuffleSource{{Src: "objects/2", Mapper: "n2", Refs: 2}}); err == nil {
		t.Fatal("a reduce took 1 reference where 2 were expected")
	}
	if _, _, _, err := s.take("n1-1", "extents/3", []ShuffleSource{{Src: "objects/1", Mapper: "n2", Refs: 1}}); err == nil {
		t.Fatal("a reduce took references from a source that sent none")
	}
	refs, names, free, err := s.take("n1-1", "extents/3", []ShuffleSource{{Src: "objects/2", Mapper: "n2", Refs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].ID != 150 || names[refs[0].Bucket-1] != "b1" {
		t.Fatalf("took %+v %v", refs, names)
	}
	free()
	if n := s.Shuffles(); n != 0 {
		t.Fatalf("%d shuffles held after the only reduce", n)
	}
}

// A shuffle nobody reduces (its master died or fell back) is dropped
// after shuffleTTL, and a node holds at most maxShuffles at once.
func TestShuffleStoreExpires(t *testing.T) {
	s := NewShuffleStore("", -1, nil)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	for i := range maxShuffles {
		c := testChunk()
		c.ID = fmt.Sprintf("n1-%d", i)
		if err := s.Receive(c); err != nil {
			t.Fatal(err)
		}
	}
	c := testChunk()
	c.ID = "one-too-many"
	if err := s.Receive(c); err == nil {
		t.Fatalf("a %dth shuffle accepted", maxShuffles+1)
	}
	now = now.Add(shuffleTTL + time.Second)
	if err := s.Receive(c); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
	if n := s.Shuffles(); n != 1 {
		t.Fatalf("%d shuffles held, want the new one", n)
	}
}

// Partition specs from a master are checked: routes must tile the ID
// space to extent partitions, a reduce names owner partitions once each.
func TestCheckShuffleSpec(t *testing.T) {
	routes := func() []ShuffleRoute {
		var out []ShuffleRoute
		for _, p := range partitionsOf("extents", 1, 1000) {
			out = append(out, ShuffleRoute{Part: p.Name, Lo: p.Lo, Hi: p.Hi, Node: "n2"})
		}
		return out
	}
	good := []Partition{
		{Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routes()}},
		{Name: "extents/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1", Refs: 3}}}},
		{Name: "extents/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s"}},
	}
	for _, p := range good {
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	gap := routes()
	gap[3].Lo++
	short := routes()[:15]
	bad := map[string]Partition{
		"egroups":         {Name: "egroups/1", Shuffle: &ShuffleSpec{ID: "s"}},
		"no ID":           {Name: "objects/1", Shuffle: &ShuffleSpec{Routes: routes()}},
		"gap":             {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: gap}},
		"short":           {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: short}},
		"no routes":       {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s"}},
		"route to owner":  {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: []ShuffleRoute{{Part: "objects/0", Hi: math.MaxUint64, Node: "n1"}}}},
		"twice":           {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1", Refs: 3}, {Src: "objects/1", Mapper: "n2", Refs: 3}}}},
		"no refs":         {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1"}}}},
		"source extents":  {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "extents/2", Mapper: "n1", Refs: 1}}}},
		"reduce w routes": {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routes()}},
	}
	for name, p := range bad {
		if err := p.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzReadShuffleChunk: whatever a peer pushes, the reader returns a
// checked chunk or an error, never a panic, and a store takes what it
// accepted.
func FuzzReadShuffleChunk(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteShuffleChunk(&buf, testChunk()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()/2])
	f.Add([]byte{})
	dst := testChunk().Dst
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadShuffleChunk(bytes.NewReader(b), "s", dst, "objects/2", "n2")
		if err != nil {
			return
		}
		s := NewShuffleStore("", -1, nil)
		if err := s.Receive(c); err != nil {
			t.Fatalf("a checked chunk refused: %v", err)
		}
		refs, _, free, err := s.take("s", dst.Name, []ShuffleSource{{Src: "objects/2", Mapper: "n2", Refs: len(c.Refs)}})
		if len(c.Refs) == 0 {
			if err == nil {
				free()
			}
			return
		}
		if err != nil || len(refs) != len(c.Refs) {
			t.Fatalf("took %d of %d: %v", len(refs), len(c.Refs), err)
		}
		free()
	})
}
