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

	dto "github.com/prometheus/client_model/go"

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
	old        map[model.NodeID]bool // maps egroup partitions as a version without shuffles does
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
	st := s.stores[node] // replaced under mu by a simulated restart
	s.mu.Unlock()
	return st.Receive(got)
}

func (s *shuffleBalancer) MapPartitionTo(ctx context.Context, node model.NodeID, part Partition, emit func(MapRecord)) (int, error) {
	m, _ := ParsePartition(part.Name)
	if s.fail[node] || !isOwnerMap(m) && part.Shuffle != nil && s.reduceFail[node] {
		return 0, errors.New("peer unreachable")
	}
	if !isOwnerMap(m) && part.Shuffle != nil {
		s.mu.Lock()
		if s.restart[node] {
			s.stores[node] = NewShuffleStore("", -1, nil)
			delete(s.restart, node)
		}
		s.mu.Unlock()
		s.reduced.Add(1)
	}
	var buf bytes.Buffer
	s.mu.Lock()
	st := s.stores[node]
	s.mu.Unlock()
	env := ShuffleEnv{Self: node, Store: st, Push: s.PushShuffle}
	if m == "egroups" && s.old[node] {
		// The shuffle parameter is unknown there: a plain compact map.
		plain := part
		plain.Shuffle = nil
		if err := WriteCompactMapStream(ctx, &buf, s.kv, plain); err != nil {
			return 0, err
		}
	} else if err := WriteShuffleMapStream(ctx, &buf, s.kv, part, env); err != nil {
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
// restarted (its references gone: the master joins here), a reducer of
// a version without shuffles (its egroups arrive without aggregates,
// which must not pass for egroups without extents).
func TestShuffledFullScanMatchesMasterAlone(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		c, kv, alone := seededFullScan(t, seed)
		ctx := context.Background()
		for _, mode := range []string{"shuffled", "mapper cut", "push refused", "reducer down", "reducer restarted", "reducer of an older version"} {
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
			case "reducer of an older version":
				sb.old = map[model.NodeID]bool{"n2": true}
			}
			c.opts.Balancer, c.opts.Self, c.opts.Shuffle = sb, "n1", sb.stores["n1"]
			c.mu.Lock()
			c.mapFailed = map[model.NodeID]time.Time{}
			c.mu.Unlock()
			res, err := c.scan(ctx, true)
			if err != nil {
				t.Fatalf("seed %d %s: %v", seed, mode, err)
			}
			// The same, but for the live-extent lists of egroups the
			// shuffled scan did not list (no rewrite can need them).
			if got, want := dumpFullScan(res), dumpFullScanListed(alone, res); got != want {
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
		count := func(outcome string) float64 {
			var m dto.Metric
			if err := c.m.shuffles.WithLabelValues(outcome).Write(&m); err != nil {
				t.Fatal(err)
			}
			return m.GetCounter().GetValue()
		}
		if done, abandoned := count("done"), count("abandoned"); done != 2 || abandoned != 4 {
			t.Fatalf("seed %d: shuffles_total done %v abandoned %v, want 2 and 4", seed, done, abandoned)
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
	if _, err := s.take("n1-1", testChunk().Dst, []ShuffleSource{{Src: "objects/2", Mapper: "n2", Count: 2}}); err == nil {
		t.Fatal("a reduce took 1 reference where 2 were expected")
	}
	if _, err := s.take("n1-1", testChunk().Dst, []ShuffleSource{{Src: "objects/1", Mapper: "n2", Count: 1}}); err == nil {
		t.Fatal("a reduce took references from a source that sent none")
	}
	tk, err := s.take("n1-1", testChunk().Dst, []ShuffleSource{{Src: "objects/2", Mapper: "n2", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.refs) != 1 || tk.refs[0].ID != 150 || tk.names[tk.refs[0].Bucket-1] != "b1" {
		t.Fatalf("took %+v %v", tk.refs, tk.names)
	}
	tk.free()
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
	// A shuffle still being pushed to or reduced is never the one swept:
	// its earlier contributions survive a push that comes late.
	now = now.Add(shuffleTTL + time.Second)
	late := testChunk()
	late.ID, late.Src = "one-too-many", "objects/3"
	late.Refs[0].Seq, _ = shuffleSeq("objects/3", 1)
	if err := s.Receive(late); err != nil {
		t.Fatal(err)
	}
	if _, err := s.take("one-too-many", c.Dst, []ShuffleSource{{Src: "objects/2", Mapper: "n2", Count: 1}, {Src: "objects/3", Mapper: "n2", Count: 1}}); err != nil {
		t.Fatalf("a late push swept its own shuffle: %v", err)
	}
	s.Sweep()
}

// Partition specs from a master are checked: routes must tile the ID
// space to extent partitions, a reduce names owner partitions once each.
func TestCheckShuffleSpec(t *testing.T) {
	routesTo := func(m string) []ShuffleRoute {
		var out []ShuffleRoute
		for _, p := range partitionsOf(m, 1, 1000) {
			out = append(out, ShuffleRoute{Part: p.Name, Lo: p.Lo, Hi: p.Hi, Node: "n2"})
		}
		return out
	}
	routes := func() []ShuffleRoute { return routesTo("extents") }
	good := []Partition{
		{Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routes()}},
		{Name: "extents/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups"), Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1", Count: 3}}}},
		{Name: "extents/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups")}},
		{Name: "egroups/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "extents/1", Mapper: "n1", Count: 3}}, GarbageBefore: 5, PolicyBuckets: []string{"b"}}},
		{Name: "egroups/1", Lo: 1, Hi: 9, Shuffle: &ShuffleSpec{ID: "s"}},
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
		"egroups routed":  {Name: "egroups/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("extents")}},
		"egroups owners":  {Name: "egroups/1", Shuffle: &ShuffleSpec{ID: "s", Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1", Count: 3}}}},
		"extents garbage": {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups"), GarbageBefore: 5}},
		"extents to ext":  {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routes()}},
		"no ID":           {Name: "objects/1", Shuffle: &ShuffleSpec{Routes: routes()}},
		"gap":             {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: gap}},
		"short":           {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: short}},
		"no routes":       {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s"}},
		"route to owner":  {Name: "objects/1", Shuffle: &ShuffleSpec{ID: "s", Routes: []ShuffleRoute{{Part: "objects/0", Hi: math.MaxUint64, Node: "n1"}}}},
		"twice":           {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups"), Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1", Count: 3}, {Src: "objects/1", Mapper: "n2", Count: 3}}}},
		"no records":      {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups"), Expect: []ShuffleSource{{Src: "objects/1", Mapper: "n1"}}}},
		"source extents":  {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s", Routes: routesTo("egroups"), Expect: []ShuffleSource{{Src: "extents/2", Mapper: "n1", Count: 1}}}},
		"no onward route": {Name: "extents/1", Shuffle: &ShuffleSpec{ID: "s"}},
	}
	for name, p := range bad {
		if err := p.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzReadShuffleChunk: whatever a peer pushes, to an extent reducer or
// an egroup reducer, the reader returns a checked chunk or an error,
// never a panic, and a store takes exactly what it accepted.
func FuzzReadShuffleChunk(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteShuffleChunk(&buf, testChunk()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()/2])
	f.Add([]byte{})
	buf.Reset()
	eg := testExtentChunk()
	if err := WriteShuffleChunk(&buf, eg); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	targets := []ShuffleChunk{testChunk(), eg}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, want := range targets {
			c, err := ReadShuffleChunk(bytes.NewReader(b), "s", want.Dst, want.Src, "n2")
			if err != nil {
				continue
			}
			s := NewShuffleStore("", -1, nil)
			if err := s.Receive(c); err != nil {
				t.Fatalf("a checked chunk refused: %v", err)
			}
			tk, err := s.take("s", want.Dst, []ShuffleSource{{Src: want.Src, Mapper: "n2", Count: c.count()}})
			if c.count() == 0 {
				if err == nil {
					tk.free()
				}
				continue
			}
			if err != nil || len(tk.refs) != len(c.Refs) || len(tk.xs) != len(c.Extents) {
				t.Fatalf("took %d references and %d extents of %d and %d: %v", len(tk.refs), len(tk.xs), len(c.Refs), len(c.Extents), err)
			}
			tk.free()
		}
	})
}

// testExtentChunk is a good chunk of extents for an egroup reducer.
func testExtentChunk() ShuffleChunk {
	return ShuffleChunk{ID: "n1-1", Dst: Partition{Name: "egroups/1", Lo: 10, Hi: 19}, Src: "extents/4", Mapper: "n2",
		Names: []string{"b1"}, Refs: []ShuffleRef{{ID: 400, Seq: 5, Bucket: 1}},
		Extents: []ShuffleExtent{{ID: 400, Egroup: 12, Len: 10, Stored: 10, Live: true}, {ID: 401, Egroup: 19, Len: 3, Stored: 3}}}
}

// A store refuses an egroup reducer's chunk whose extents are of other
// egroups, out of order or negative, or whose references name no extent
// of the chunk or a dead one.
func TestShuffleStoreRefusesBadExtentChunks(t *testing.T) {
	s := NewShuffleStore("", -1, nil)
	if err := s.Receive(testExtentChunk()); err != nil {
		t.Fatalf("good chunk: %v", err)
	}
	for name, mutate := range map[string]func(*ShuffleChunk){
		"other egroup":    func(c *ShuffleChunk) { c.Extents[1].Egroup = 20 },
		"out of order":    func(c *ShuffleChunk) { c.Extents[1].ID = 400 },
		"negative":        func(c *ShuffleChunk) { c.Extents[0].Len = -1 },
		"ref to nothing":  func(c *ShuffleChunk) { c.Refs[0].ID = 402 },
		"ref to dead":     func(c *ShuffleChunk) { c.Refs[0].ID = 401 },
		"bucket unnamed":  func(c *ShuffleChunk) { c.Refs[0].Bucket = 2 },
		"owner source":    func(c *ShuffleChunk) { c.Src = "objects/1" },
		"huge fp":         func(c *ShuffleChunk) { c.Extents[0].FP = make([]byte, 65) },
		"refs to extents": func(c *ShuffleChunk) { c.Dst.Name = "extents/1" },
	} {
		c := testExtentChunk()
		mutate(&c)
		if err := s.Receive(c); err == nil {
			t.Errorf("%s: chunk accepted", name)
		}
	}
}

// rewritesListed checks that every rewrite the decisions would plan from
// a shuffled scan's egroups — compaction, compression, erasure coding
// and their reverse — is of egroups whose live extents the scan listed.
func rewritesListed(t *testing.T, res *scanResult, o decide.Options) int {
	t.Helper()
	now := res.start.Add(24 * time.Hour)
	var tasks []decide.Task
	for _, eg := range res.egroups {
		tasks = append(tasks, decide.Space(now, eg, o)...)
	}
	tasks = append(tasks, decide.Transforms(now, res.egroups, nil, o, func(decide.Replica) bool { return true })...)
	n := 0
	for _, tk := range tasks {
		switch tk.Kind {
		case decide.KindCompact, decide.KindCompress, decide.KindDecompress, decide.KindECEncode, decide.KindECDecode:
		default:
			continue
		}
		ids := []uint64{tk.Egroup}
		for _, p := range tk.Pack {
			ids = append(ids, p.ID)
		}
		for _, id := range ids {
			if _, ok := res.liveOf(id); !ok {
				t.Fatalf("a %s of egroup %d was decided, and the scan did not list its live extents", tk.Kind, id)
			}
		}
		n++
	}
	return n
}

// The decisions' rewrites on the seeded metadata (dead data, codecs,
// buckets with compression and erasure-coding policies) only touch
// egroups a shuffled scan listed.
func TestShuffledScanListsWhatRewritesNeed(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		c, kv, alone := seededFullScan(t, seed)
		alone.release()
		o := c.opts.Decide
		sb := newShuffleBalancer(&fakeBalancer{kv: kv}, "n1", "n2")
		c.opts.Balancer, c.opts.Self, c.opts.Shuffle = sb, "n1", sb.stores["n1"]
		res, err := c.scan(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		if res.shuffle == "" {
			t.Fatalf("seed %d: not shuffled: %s", seed, res.shuffleErr)
		}
		o.EnsureDefaults()
		if n := rewritesListed(t, res, o); n == 0 {
			t.Fatalf("seed %d: no rewrites decided: the check checks nothing", seed)
		}
		res.release()
	}
}

// An egroup whose extents are all live and that no policy transforms is
// not listed by a shuffled scan (its extents stay on the reducer), and a
// rewrite of it — which would otherwise run with no live extents and
// lose them — is dropped as stale; the data stays readable.
func TestUnlistedRewriteIsDropped(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	for i := range 12 {
		e.put(fmt.Sprintf("k%02d", i), data(uint64(i), 100<<10), "ssd=1,hdd=1")
	}
	ctx := context.Background()
	if _, err := e.l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	sb := newShuffleBalancer(&fakeBalancer{kv: e.kv}, "n1", "n2")
	e.c.opts.Balancer, e.c.opts.Self, e.c.opts.Shuffle = sb, "n1", sb.stores["n1"]
	res, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer res.release()
	if res.shuffle == "" {
		t.Fatalf("not shuffled: %s", res.shuffleErr)
	}
	var eg *decide.Egroup
	for i := range res.egroups {
		if !res.listed[i] {
			eg = &res.egroups[i]
			break
		}
	}
	if eg == nil {
		t.Fatalf("every egroup of fully live data was listed: %v", res.listed)
	}
	if eg.LiveExtents == 0 || eg.LiveBytes == 0 {
		t.Fatalf("egroup %d: %d live extents, %d live bytes: the aggregate did not arrive", eg.ID, eg.LiveExtents, eg.LiveBytes)
	}
	rec := &JobRecord{ID: "test", Kind: "full", Planned: map[string]int{}, Done: map[string]int{}}
	e.c.execute(ctx, []decide.Task{{Kind: decide.KindCompact, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes}}, nil, res, rec, false)
	if rec.Stale != 1 || rec.Done[string(decide.KindCompact)] != 0 {
		t.Fatalf("compaction of an unlisted egroup: stale %d, done %v", rec.Stale, rec.Done)
	}
	for i := range 12 {
		e.check(fmt.Sprintf("k%02d", i), data(uint64(i), 100<<10))
	}
}

// A reducer's fingerprints stay on the heap, so they count against the
// shuffle's memory budget (its arrays spill sooner), and the charge is
// returned when the reduce is done with them or the shuffle is dropped.
func TestShuffleStoreChargesFingerprints(t *testing.T) {
	s := NewShuffleStore(t.TempDir(), 1<<20, nil)
	c := testExtentChunk()
	c.Extents[0].FP = make([]byte, 32)
	c.Extents[1].FP = make([]byte, 32)
	if err := s.Receive(c); err != nil {
		t.Fatal(err)
	}
	st := s.shuffles[c.ID]
	heap := func() int64 {
		st.spill.mu.Lock()
		defer st.spill.mu.Unlock()
		return st.spill.heap
	}
	want := int64(2 * (32 + fpOverhead))
	if got := heap(); got < want {
		t.Fatalf("heap charged %d bytes, want at least the fingerprints' %d", got, want)
	}
	tk, err := s.take(c.ID, c.Dst, []ShuffleSource{{Src: c.Src, Mapper: c.Mapper, Count: c.count()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.fps) != 2 {
		t.Fatalf("took %d fingerprints, want 2", len(tk.fps))
	}
	tk.free()
	if got := heap(); got != 0 {
		t.Fatalf("%d bytes still charged after the reduce freed what it took", got)
	}

	// A stale attempt's contribution is dropped with its charge.
	if err := s.Receive(c); err != nil {
		t.Fatal(err)
	}
	stale := c
	stale.Mapper = "n3"
	if err := s.Receive(stale); err != nil {
		t.Fatal(err)
	}
	st = s.shuffles[c.ID]
	tk, err = s.take(c.ID, c.Dst, []ShuffleSource{{Src: c.Src, Mapper: c.Mapper, Count: c.count()}})
	if err != nil {
		t.Fatal(err)
	}
	if got := heap(); got < want {
		t.Fatalf("heap charged %d bytes while the reduce holds %d of fingerprints", got, want)
	}
	tk.free()
	if got := heap(); got != 0 {
		t.Fatalf("%d bytes still charged after the stale contribution was dropped and the reduce freed", got)
	}
}
