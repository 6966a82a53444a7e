package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
)

// curatorLeader returns the node whose Curator is master.
func (c *testCluster) curatorLeader() string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			var st curator.Status
			ctx, cancel := ctxT(5 * time.Second)
			err := call(ctx, "GET", n.Admin, "/v1/curator/status", nil, &st)
			cancel()
			if err == nil && st.Leader {
				return n.ID
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatal("no Curator master elected")
	return ""
}

// TestCuratorReprotectsRemovedNode removes a node for good from a 4-node
// cluster holding RF3 data under a light write load (kill -9, never
// restarted). With node_down_after 3s and partial scans every 2s the
// Curator must bring every egroup back to three live replicas on up
// nodes. It reports the re-protection time and the bytes moved.
func TestCuratorReprotectsRemovedNode(t *testing.T) {
	const (
		seed    = 5
		bucket  = "reprotect"
		fillN   = 600
		minSize = 64 << 10
		maxSize = 2 << 20
		bound   = 3 * time.Minute
	)
	c := startCluster(t, 4, 27400, `curator:
  node_down_after: 3s
  partial_every: 2s
  full_every: 1h
  move_mbps: 1000
  scrub: false
`)
	createBucket(t, c.Nodes[0].Admin, bucket, "any=3")
	all := []string{}
	for _, n := range c.Nodes {
		all = append(all, n.Admin)
	}
	acks := newAckSet()
	fillKey := func(i int) string { return fmt.Sprintf("fill-%04d", i) }
	fctx, fcancel := ctxT(3 * time.Minute)
	fstart := time.Now()
	res := runWriters(fctx, 8, fillN, 3, all, bucket, seed, fillKey, minSize, maxSize, acks)
	fcancel()
	if acks.len() != fillN {
		t.Fatalf("fill: %d of %d acknowledged: %v", acks.len(), fillN, res.firstErrs)
	}
	var logical int64
	for i := 0; i < fillN; i++ {
		logical += int64(len(content(seed, bucket+"/"+fillKey(i), minSize, maxSize)))
	}
	t.Logf("fill: %d objects, %s logical (%s with RF3) in %s", fillN, mib(logical), mib(3*logical), time.Since(fstart).Round(time.Millisecond))

	// The victim: not the Curator master (its failover is the Elector's
	// business), so the measurement is recovery itself.
	master := c.curatorLeader()
	victim := c.Nodes[3]
	if victim.ID == master {
		victim = c.Nodes[2]
	}
	var survivors []string
	for _, n := range c.Nodes {
		if n != victim {
			survivors = append(survivors, n.Admin)
		}
	}
	t.Logf("Curator master %s; removing %s", master, victim.ID)

	// Light load through the survivors for the whole recovery: 2 writers,
	// 64 KiB objects, ~10 puts/s each.
	lctx, lcancel := context.WithCancel(context.Background())
	var lwg sync.WaitGroup
	var lightFailed int
	var lmu sync.Mutex
	for w := 0; w < 2; w++ {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			for i := 0; lctx.Err() == nil; i++ {
				k := fmt.Sprintf("light-%d-%05d", w, i)
				pctx, cancel := context.WithTimeout(lctx, 30*time.Second)
				err := putObject(pctx, survivors[(w+i)%len(survivors)], bucket, k, content(seed, bucket+"/"+k, 64<<10, 64<<10))
				cancel()
				if err == nil {
					acks.add(k)
				} else if lctx.Err() == nil {
					lmu.Lock()
					lightFailed++
					lmu.Unlock()
				}
				select {
				case <-lctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	stopLoad := func() {
		lcancel()
		lwg.Wait()
	}
	defer stopLoad()
	time.Sleep(time.Second)

	killedAt := time.Now()
	c.Kill(victim)

	// Follow the job history until a scan started after the node was seen
	// under-replicated reports nothing under-replicated and plans no
	// recovery.
	var sawUR, doneJob *curator.JobRecord
	seen := map[string]curator.JobRecord{}
	deadline := killedAt.Add(bound)
	for doneJob == nil {
		if time.Now().After(deadline) {
			t.Fatalf("not re-protected within %s of the kill; last jobs: %s", bound, summarize(seen, 5))
		}
		time.Sleep(time.Second)
		ctx, cancel := ctxT(10 * time.Second)
		h, err := curatorHistory(ctx, survivors[0], 100)
		cancel()
		if err != nil {
			t.Logf("history: %v", err)
			continue
		}
		sort.Slice(h, func(i, j int) bool { return h[i].Start.Before(h[j].Start) })
		for _, r := range h {
			if r.Start.Before(killedAt) {
				continue
			}
			seen[r.ID] = r
			if sawUR == nil && r.Stats.UnderReplicatedBytes > 0 {
				r := r
				sawUR = &r
				continue
			}
			if sawUR != nil && r.Start.After(sawUR.Start) && r.Stats.UnderReplicatedBytes == 0 &&
				r.Planned["recover"] == 0 && r.Planned["seal"] == 0 {
				r := r
				doneJob = &r
				break
			}
		}
	}
	stopLoad()

	// Recovery work: jobs after the kill up to the quiet one.
	var moved int64
	var work time.Duration
	var recovered, stale, failed int
	var firstWork, lastWork time.Time
	jobs := 0
	for _, r := range seen {
		if r.Start.After(doneJob.Start) {
			continue
		}
		jobs++
		moved += r.Moved
		recovered += r.Done["recover"]
		stale += r.Stale
		failed += r.Failed
		if r.Moved > 0 || r.Done["recover"] > 0 {
			work += r.End.Sub(r.Start)
			if firstWork.IsZero() || r.Start.Before(firstWork) {
				firstWork = r.Start
			}
			if r.End.After(lastWork) {
				lastWork = r.End
			}
		}
	}
	var timeline []curator.JobRecord
	for _, r := range seen {
		if !r.Start.After(doneJob.Start) {
			timeline = append(timeline, r)
		}
	}
	sort.Slice(timeline, func(i, j int) bool { return timeline[i].Start.Before(timeline[j].Start) })
	for _, r := range timeline {
		t.Logf("  job +%s %s (%s) took %s: UR %s in %d egroups; planned %v done %v moved %s stale %d failed %d",
			r.Start.Sub(killedAt).Round(time.Millisecond), r.Kind, r.Trigger, r.End.Sub(r.Start).Round(time.Millisecond),
			mib(r.Stats.UnderReplicatedBytes), r.Stats.UnderReplicated, r.Planned, r.Done, mib(r.Moved), r.Stale, r.Failed)
	}
	reprotect := lastWork.Sub(killedAt)
	rate := 0.0
	if work > 0 {
		rate = float64(moved) / work.Seconds() / 1e6
	}
	t.Logf("first under-replicated scan %s after the kill: %s under-replicated (%d egroups of %d)",
		sawUR.Start.Sub(killedAt).Round(time.Millisecond), mib(sawUR.Stats.UnderReplicatedBytes), sawUR.Stats.UnderReplicated, sawUR.Stats.Egroups)
	t.Logf("re-protected %s after the kill (last copy done; confirmed by the quiet scan at %s): %d jobs, %d recover tasks done (%d stale, %d failed), %s moved in %s of copying jobs → %.1f MB/s",
		reprotect.Round(time.Millisecond), doneJob.Start.Sub(killedAt).Round(time.Millisecond), jobs, recovered, stale, failed,
		mib(moved), work.Round(time.Millisecond), rate)
	t.Logf("light load: %d objects acknowledged in total, %d failed puts", acks.len(), lightFailed)
	if recovered == 0 || moved == 0 {
		t.Errorf("nothing was recovered (moved %d bytes)", moved)
	}
	if len(doneJob.Dangling) > 0 {
		t.Errorf("dangling references: %v", doneJob.Dangling)
	}

	// Every acknowledged object: 3 good replicas on 3 distinct up nodes,
	// none on the removed node, and intact bytes.
	keys := acks.list()
	sort.Strings(keys)
	badLoc := 0
	stillListed := map[uint64]bool{} // egroups still naming a replica on the victim
	ctx, cancel := ctxT(2 * time.Minute)
	defer cancel()
	for i, k := range keys {
		loc, err := locate(ctx, survivors[i%len(survivors)], bucket, k)
		if err != nil {
			t.Errorf("locate %s: %v", k, err)
			continue
		}
		for _, x := range loc.Extents {
			nodes := map[string]bool{}
			for _, r := range x.Replicas {
				if string(r.Node) == victim.ID {
					stillListed[x.Egroup] = true
				}
				if r.Bad || string(r.Node) == victim.ID {
					continue
				}
				nodes[string(r.Node)] = true
			}
			if len(nodes) < 3 {
				badLoc++
				if badLoc <= 10 {
					t.Errorf("%s egroup %d (%s): replicas %+v: want 3 good on 3 up nodes", k, x.Egroup, x.State, x.Replicas)
				}
			}
		}
	}
	expect := func(k string) []byte {
		if k[:5] == "light" {
			return content(seed, bucket+"/"+k, 64<<10, 64<<10)
		}
		return content(seed, bucket+"/"+k, minSize, maxSize)
	}
	lost, corrupt, _ := verifyAll(t, keys, survivors, bucket, expect)
	for _, l := range append(lost, corrupt...) {
		t.Errorf("  %s", l)
	}
	t.Logf("verified %d objects: %d extents under-replicated, %d lost, %d corrupt; %d egroups still list a (lost) replica on %s",
		len(keys), badLoc, len(lost), len(corrupt), len(stillListed), victim.ID)
	t.Logf("RESULT re-protection: %s moved, fully replicated %s after the kill (lease TTL 5s, node_down_after 3s, partial scans every 2s, move budget 1000 MB/s), %.1f MB/s while copying",
		mib(moved), reprotect.Round(100*time.Millisecond), rate)
}

func summarize(m map[string]curator.JobRecord, n int) string {
	var rs []curator.JobRecord
	for _, r := range m {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start.After(rs[j].Start) })
	s := ""
	for i, r := range rs {
		if i == n {
			break
		}
		s += fmt.Sprintf("\n  %s %s: UR %d bytes (%d egroups), planned %v done %v stale %d failed %d moved %d errors %v sample %v",
			r.Start.Format("15:04:05.000"), r.Kind, r.Stats.UnderReplicatedBytes, r.Stats.UnderReplicated, r.Planned, r.Done, r.Stale, r.Failed, r.Moved, r.Errors, r.Sample)
	}
	return s
}

// TestCuratorGCAfterDeletingHalf fills a 3-node cluster, deletes half of
// the objects, and runs full Curator scans until they are quiet: garbage
// (dead bytes in egroups, from the job record) must end below 5 % of the
// space in use and every remaining object must read back intact.
func TestCuratorGCAfterDeletingHalf(t *testing.T) {
	const (
		seed    = 6
		bucket  = "gchalf"
		fillN   = 600
		minSize = 64 << 10
		maxSize = 1 << 20
		bound   = 3 * time.Minute
	)
	c := startCluster(t, 3, 27500, `curator:
  garbage_grace: 1ns
  partial_every: 1h
  full_every: 1h
  seal_idle: 1ms
  move_mbps: 1000
`)
	createBucket(t, c.Nodes[0].Admin, bucket, "any=2")
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.Admin)
	}
	acks := newAckSet()
	key := func(i int) string { return fmt.Sprintf("obj-%04d", i) }
	expect := func(k string) []byte { return content(seed, bucket+"/"+k, minSize, maxSize) }
	fctx, fcancel := ctxT(3 * time.Minute)
	res := runWriters(fctx, 16, fillN, 3, all, bucket, seed, key, minSize, maxSize, acks)
	fcancel()
	if acks.len() != fillN {
		t.Fatalf("fill: %d of %d acknowledged: %v", acks.len(), fillN, res.firstErrs)
	}
	deleted := map[string]bool{}
	for i := 0; i < fillN; i++ {
		if keySeed(seed, key(i))%2 == 0 { // a pseudo-random half
			deleted[key(i)] = true
		}
	}
	ctx, cancel := ctxT(bound)
	defer cancel()
	var freedLogical int64
	for k := range deleted {
		if err := deleteObject(ctx, all[len(k)%3], bucket, k); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
		freedLogical += int64(len(expect(k)))
	}
	t.Logf("filled %d objects, deleted %d (%s)", fillN, len(deleted), mib(freedLogical))

	// Full scans, on every node in turn (each seals its own idle open
	// egroups first), until one plans nothing.
	var first, last curator.JobRecord
	var freed, moved int64
	start := time.Now()
	for i := 0; ; i++ {
		if time.Since(start) > bound {
			t.Fatalf("full scans not quiet within %s; last: %s", bound, summarize(map[string]curator.JobRecord{last.ID: last}, 1))
		}
		rec, err := curatorRun(ctx, all[i%3], "full")
		if err != nil {
			t.Fatalf("run full scan: %v", err)
		}
		if i == 0 {
			first = rec
		}
		last = rec
		freed += rec.Freed
		moved += rec.Moved
		planned := 0
		for _, n := range rec.Planned {
			planned += n
		}
		used := rec.Stats.LiveBytes + rec.Stats.GarbageBytes
		t.Logf("  full scan %d on %s: %d egroups, live %s, garbage %s (%.1f%% of used); planned %v done %v stale %d failed %d; moved %s freed %s; took %s",
			i+1, c.Nodes[i%3].ID, rec.Stats.Egroups, mib(rec.Stats.LiveBytes), mib(rec.Stats.GarbageBytes),
			100*float64(rec.Stats.GarbageBytes)/float64(max(used, 1)), rec.Planned, rec.Done, rec.Stale, rec.Failed,
			mib(rec.Moved), mib(rec.Freed), rec.End.Sub(rec.Start).Round(time.Millisecond))
		if len(rec.Dangling) > 0 {
			t.Fatalf("dangling references: %v", rec.Dangling)
		}
		if planned == 0 && i >= 2 {
			break
		}
	}
	used := last.Stats.LiveBytes + last.Stats.GarbageBytes
	ratio := float64(last.Stats.GarbageBytes) / float64(max(used, 1))
	t.Logf("RESULT GC: garbage %s → %s (%.2f%% of %s used) after %s of full scans; %s freed (replica bytes), %s moved by compaction",
		mib(first.Stats.GarbageBytes), mib(last.Stats.GarbageBytes), 100*ratio, mib(used), time.Since(start).Round(time.Millisecond), mib(freed), mib(moved))
	if ratio >= 0.05 {
		t.Errorf("garbage is %.1f%% of used space, want < 5%%", 100*ratio)
	}

	var keep, gone []string
	for i := 0; i < fillN; i++ {
		if deleted[key(i)] {
			gone = append(gone, key(i))
		} else {
			keep = append(keep, key(i))
		}
	}
	lost, corrupt, n := verifyAll(t, keep, all, bucket, expect)
	for _, l := range append(lost, corrupt...) {
		t.Errorf("  %s", l)
	}
	t.Logf("%d remaining objects read back (%s): %d lost, %d corrupt", len(keep), mib(n), len(lost), len(corrupt))
	for _, k := range gone[:10] {
		ctx, cancel := ctxT(10 * time.Second)
		_, err := getObject(ctx, all[0], bucket, k)
		cancel()
		if e, ok := err.(*apiErr); !ok || e.Status != 404 {
			t.Errorf("deleted %s: got %v, want 404", k, err)
		}
	}
}
