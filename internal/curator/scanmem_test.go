package curator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// randomEgroup draws an egroup record from a small set of values per
// field, so that shapes repeat (and are shared) and also differ in every
// field a shape holds.
func randomEgroup(rng *rand.Rand) meta.Egroup {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	eg := meta.Egroup{State: meta.EgroupState(rng.IntN(2)), Size: rng.Int64N(1 << 24), Mtime: rng.Int64N(1 << 50),
		Writer: model.NodeID(pick("", "n1", "n2")), Codec: pick("", "zstd"), Incompressible: rng.IntN(4) == 0}
	if eg.Codec != "" {
		eg.Logical = eg.Size * 2
	}
	switch rng.IntN(4) {
	case 0:
		eg.Vector = model.MustParseVector("hdd=2")
	case 1:
		eg.Vector = model.MustParseVector("ssd=1,hdd=1")
	case 2:
		eg.Vector = model.Vector{Counts: map[model.Tier]int{"hdd": 2, "ssd": 0}} // a zero count is not "hdd=2"
	}
	for range rng.IntN(4) {
		n := pick("n1", "n2", "n3")
		t := model.Tier(pick("hdd", "ssd"))
		eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: model.DeviceID(n + "/" + string(t) + "0"), Node: model.NodeID(n), Tier: t, Bad: rng.IntN(5) == 0})
	}
	if rng.IntN(5) == 0 {
		eg.EC = &meta.ECLayout{K: 2 + rng.IntN(2), M: 1, StripLen: rng.Int64N(1 << 20)}
	}
	return eg
}

// The compact form a scan keeps per egroup gives back exactly the view
// egroupView builds from the record, and egroups that look alike share
// their replica slices and vector maps.
func TestCompactEgroupView(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	in := newShapeInterner()
	for i := range 5000 {
		eg := randomEgroup(rng)
		var a *meta.Access
		if rng.IntN(3) > 0 {
			a = &meta.Access{Atime: rng.Int64N(1 << 50), Reads: rng.Int64N(100), WinReads: rng.Int64N(10)}
		}
		id, rev := uint64(i+1), rng.Int64N(1<<40)
		want := egroupView(id, rev, eg, a)
		x := in.rec(MapRecord{ID: id, Rev: rev, Egroup: &eg, Access: a})
		if got := x.view(); !reflect.DeepEqual(got, want) {
			t.Fatalf("egroup %d: compact view\n%+v\nwant\n%+v", id, got, want)
		}
	}
	// The same record again, with other sizes, times and counts, shares
	// the first one's shape.
	for range 200 {
		eg := randomEgroup(rng)
		x := in.rec(MapRecord{ID: 1, Egroup: &eg})
		eg2 := eg
		eg2.Size, eg2.Mtime, eg2.Logical = eg.Size+1, eg.Mtime+1, eg.Logical+1
		y := in.rec(MapRecord{ID: 2, Egroup: &eg2})
		if x.shape != y.shape {
			t.Fatalf("two records of one shape are not shared: %+v", eg)
		}
		eg2.Replicas = append([]meta.EgroupReplica{{Device: "n9/hdd0", Node: "n9", Tier: "hdd"}}, eg.Replicas...)
		if z := in.rec(MapRecord{ID: 3, Egroup: &eg2}); z.shape == x.shape {
			t.Fatalf("records with other replicas share a shape: %+v", eg)
		}
	}
	// Shared replica slices are full: appending to a view's replicas
	// copies instead of writing into the next egroup's.
	for _, s := range in.shapes {
		if len(s.replicas) != cap(s.replicas) {
			t.Fatalf("shape replicas len %d cap %d", len(s.replicas), cap(s.replicas))
		}
	}
}

// A partial scan returns one view per egroup record, in ID order, equal
// to egroupView of the record and its access record read one by one.
func TestScanViewsMatchRecords(t *testing.T) {
	kv, local, pol, l := benchNode(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 9))
	type rec struct {
		eg meta.Egroup
		a  *meta.Access
	}
	recs := map[uint64]rec{}
	id := uint64(0)
	for range 40 {
		var tx meta.Txn
		for range 30 {
			id += 1 + uint64(rng.IntN(50)) // gaps: partitions of uneven sizes
			r := rec{eg: randomEgroup(rng)}
			tx.Put(meta.EgroupKey(id), meta.Encode(r.eg))
			if rng.IntN(2) == 0 {
				r.a = &meta.Access{Atime: rng.Int64N(1 << 50), WinReads: rng.Int64N(9)}
				tx.Put(meta.AccessKey(id), meta.Encode(*r.a))
			}
			recs[id] = r
		}
		// An access record without an egroup joins nothing.
		tx.Put(meta.AccessKey(id+1), meta.Encode(meta.Access{Atime: 1}))
		if _, err := kv.Commit(ctx, &tx); err != nil {
			t.Fatal(err)
		}
	}
	c := New(l, kv, local, pol, nil, nil, Options{})
	res, err := c.scan(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.egroups) != len(recs) {
		t.Fatalf("%d views, want %d", len(res.egroups), len(recs))
	}
	if !slices.IsSortedFunc(res.egroups, func(a, b decide.Egroup) int { return cmp.Compare(a.ID, b.ID) }) {
		t.Fatal("views not in ID order")
	}
	for _, d := range res.egroups {
		r := recs[d.ID]
		// The records as stored (a decoded vector has no zero counts).
		var eg meta.Egroup
		rev, err := meta.GetRecord(ctx, kv, meta.EgroupKey(d.ID), &eg)
		if err != nil {
			t.Fatal(err)
		}
		var a *meta.Access
		if r.a != nil {
			a = new(meta.Access)
			if _, err := meta.GetRecord(ctx, kv, meta.AccessKey(d.ID), a); err != nil {
				t.Fatal(err)
			}
		}
		want := egroupView(d.ID, rev, eg, a)
		want.LiveBytes, want.LiveExtents = want.Size, 1
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("egroup %d: scan view\n%+v\nwant\n%+v", d.ID, d, want)
		}
		if i, ok := res.egroupIndex(d.ID); !ok || res.egroups[i].ID != d.ID {
			t.Fatalf("egroupIndex(%d) = %d, %v", d.ID, i, ok)
		}
		if !reflect.DeepEqual(res.vectorOf(d.ID), eg.Vector) {
			t.Fatalf("vectorOf(%d) = %v, want %v", d.ID, res.vectorOf(d.ID), eg.Vector)
		}
	}
	if _, ok := res.egroupIndex(id + 1); ok {
		t.Fatal("egroupIndex found an egroup with only an access record")
	}
}

// streamingBalancer is fakeBalancer streaming each peer's output to the
// master record by record (StreamingScanBalancer); a cut stream loses
// its last byte, so it has emitted every record when it fails.
type streamingBalancer struct {
	*fakeBalancer
	emitted atomic.Int64
}

func (s *streamingBalancer) MapPartitionTo(ctx context.Context, node model.NodeID, part Partition, emit func(MapRecord)) (int, error) {
	if s.fail[node] {
		return 0, errors.New("peer unreachable")
	}
	s.pages.Add(1)
	var buf bytes.Buffer
	if err := WriteMapStream(ctx, &buf, s.kv, part); err != nil {
		return 0, err
	}
	if s.cut[node] {
		buf.Truncate(buf.Len() - 1)
	}
	return ReadMapStreamTo(&buf, part, func(r MapRecord) {
		s.emitted.Add(1)
		emit(r)
	})
}

// A balanced scan whose peers stream their output finds what a scan on
// one node finds, also when a peer's stream is cut after it emitted
// records: the master drops them and maps the partition itself.
func TestStreamingBalancedScan(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	for i := 0; i < 40; i++ {
		e.put(fmt.Sprintf("k%02d", i), data(uint64(i), 100<<10), "ssd=1,hdd=1")
	}
	ctx := context.Background()
	for i := 0; i < 40; i += 3 {
		e.check(fmt.Sprintf("k%02d", i), data(uint64(i), 100<<10))
	}
	if err := e.l.FlushAccess(ctx); err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		e.c.opts.Balancer = nil
		plain, err := e.c.scan(ctx, full)
		if err != nil {
			t.Fatal(err)
		}
		sb := &streamingBalancer{fakeBalancer: &fakeBalancer{kv: e.kv}}
		e.c.opts.Balancer, e.c.opts.Self = sb, "n1"
		e.c.mu.Lock()
		e.c.mapFailed = map[model.NodeID]time.Time{}
		e.c.mu.Unlock()
		bal, err := e.c.scan(ctx, full)
		if err != nil {
			t.Fatal(err)
		}
		if sb.emitted.Load() == 0 || bal.partitions["egroups/0"] != "n2" {
			t.Fatalf("full=%v: nothing streamed (%d records; egroups/0 by %q)", full, sb.emitted.Load(), bal.partitions["egroups/0"])
		}
		if got, want := summarizeScan(bal), summarizeScan(plain); got != want {
			t.Fatalf("full=%v: streamed scan differs:\n got %s\nwant %s", full, got, want)
		}
		e.c.mu.Lock()
		e.c.mapFailed = map[model.NodeID]time.Time{}
		e.c.mu.Unlock()
		sb.cut = map[model.NodeID]bool{"n2": true}
		sb.emitted.Store(0)
		cut, err := e.c.scan(ctx, full)
		if err != nil {
			t.Fatal(err)
		}
		if sb.emitted.Load() == 0 || !strings.Contains(cut.partitions["egroups/0"], "cut short") {
			t.Fatalf("full=%v: no partial stream (%d records emitted; egroups/0 by %q)", full, sb.emitted.Load(), cut.partitions["egroups/0"])
		}
		if got, want := summarizeScan(cut), summarizeScan(plain); got != want {
			t.Fatalf("full=%v: scan with streams cut differs:\n got %s\nwant %s", full, got, want)
		}
	}
}
