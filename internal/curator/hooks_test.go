package curator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// fakeBalancer assigns even-digit partitions to "n2" and maps n2's
// partitions over the same store (as a peer reading the shared metadata
// would), through the real map stream encoding. A node in fail is
// unreachable; a node in cut dies mid-stream (its stream is cut in half).
type fakeBalancer struct {
	kv    meta.KV
	fail  map[model.NodeID]bool
	cut   map[model.NodeID]bool
	pages atomic.Int64 // partitions are mapped in parallel
}

func (f *fakeBalancer) AssignPartitions(_ *model.Snapshot, self model.NodeID, parts []PartitionLoad) map[string]model.NodeID {
	out := map[string]model.NodeID{}
	for i, p := range parts {
		if i%2 == 0 {
			out[p.Name] = "n2"
		} else {
			out[p.Name] = self
		}
	}
	return out
}

func (f *fakeBalancer) MapPartition(ctx context.Context, node model.NodeID, part Partition) (MapOutput, error) {
	if f.fail[node] {
		return MapOutput{}, errors.New("peer unreachable")
	}
	f.pages.Add(1)
	var buf bytes.Buffer
	if err := WriteMapStream(ctx, &buf, f.kv, part); err != nil {
		return MapOutput{}, err
	}
	if f.cut[node] {
		buf.Truncate(buf.Len() / 2)
	}
	return ReadMapStream(&buf, part)
}

func TestBalancedScanReadsAssignedPartitionsRemotely(t *testing.T) {
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
	plain, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, eg := range plain.egroups {
		read += int(eg.Reads)
	}
	if read == 0 {
		t.Fatal("no egroup shows reads: the access join is not exercised")
	}
	if plain.partitions != nil {
		t.Fatalf("no balancer, yet partitions recorded: %v", plain.partitions)
	}

	fb := &fakeBalancer{kv: e.kv}
	e.c.opts.Balancer, e.c.opts.Self = fb, "n1"
	bal, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if fb.pages.Load() == 0 {
		t.Fatal("no page was read through the balancer")
	}
	if got, want := summarizeScan(bal), summarizeScan(plain); got != want {
		t.Fatalf("balanced scan differs:\n got %s\nwant %s", got, want)
	}
	// 16 + 16 ID partitions and, with one bucket, one partition of each
	// owner map.
	if len(bal.partitions) != 35 || bal.partitions["egroups/0"] != "n2" || bal.partitions["egroups/1"] != "n1" || bal.partitions["objects/0"] != "n2" {
		t.Fatalf("partitions: %v", bal.partitions)
	}
	if a := e.c.Assignment(); a["extents/2"] != "n2" {
		t.Fatalf("assignment: %v", a)
	}

	// A peer that fails: its partitions are scanned here, nothing is lost.
	fb.fail = map[model.NodeID]bool{"n2": true}
	failed, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarizeScan(failed), summarizeScan(plain); got != want {
		t.Fatalf("scan with a failed peer differs:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(failed.partitions["egroups/0"], "n2 failed") {
		t.Fatalf("fallback not recorded: %q", failed.partitions["egroups/0"])
	}

	// The failed peer is left out of the next assignments for a while.
	fb.fail = nil
	fb.pages.Store(0)
	skipped, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if fb.pages.Load() != 0 || skipped.partitions["egroups/0"] != "n1" {
		t.Fatalf("a peer that just failed was asked again (%d maps; egroups/0 by %q)", fb.pages.Load(), skipped.partitions["egroups/0"])
	}
	e.c.mu.Lock()
	e.c.mapFailed["n2"] = e.c.now().Add(-mapRetryAfter)
	e.c.mu.Unlock()

	// A peer that dies mid-stream: its partial output is dropped and the
	// partitions are mapped here, nothing lost or counted twice.
	fb.cut = map[model.NodeID]bool{"n2": true}
	cut, err := e.c.scan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarizeScan(cut), summarizeScan(plain); got != want {
		t.Fatalf("scan with a peer cut off differs:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(cut.partitions["egroups/0"], "cut short") {
		t.Fatalf("cut-off stream not recorded: %q", cut.partitions["egroups/0"])
	}
}

func summarizeScan(r *scanResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "records=%d egroups=%d dead=%d dangling=%d", r.records0, len(r.egroups), len(r.deadExtents), len(r.dangling))
	for _, eg := range r.egroups {
		fmt.Fprintf(&b, " %d@%d:%d/%d,%d,r%d,%v", eg.ID, eg.ModRev, eg.LiveBytes, eg.LiveExtents, eg.DeadExtents, eg.Reads, eg.Replicas)
	}
	return b.String()
}

// stopTiering is a TierTuner that turns tiering off and records calls.
type stopTiering struct{ calls int }

func (s *stopTiering) TuneTiering(_ *model.Snapshot, _ []decide.Egroup, base decide.TierOptions) (decide.TierOptions, bool) {
	s.calls++
	return base, false
}

func TestTierTunerCanSkipTiering(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	defer e.close()
	for i := 0; i < 10; i++ {
		e.put(fmt.Sprintf("k%d", i), data(uint64(i), 700<<10), "any=1")
	}
	ctx := context.Background()
	if _, err := e.l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	tasks, _, err := e.c.DryRun(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	down := 0
	for _, tk := range tasks {
		if tk.Kind == decide.KindTierDown {
			down++
		}
	}
	if down == 0 {
		t.Fatalf("the ssd is full but no tier-down was planned: %v", tasks)
	}
	st := &stopTiering{}
	e.c.opts.Tuner = st
	tasks, _, err = e.c.DryRun(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.Kind == decide.KindTierDown || tk.Kind == decide.KindTierUp || tk.Kind == decide.KindBalance {
			t.Fatalf("tuner said skip, yet planned %s", tk)
		}
	}
	if st.calls == 0 {
		t.Fatal("tuner never consulted")
	}
}
