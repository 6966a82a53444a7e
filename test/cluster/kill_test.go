package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadResult summarises a write load.
type loadResult struct {
	attempts, failures int64
	firstErrs          []string
}

// runWriters runs w writers that put objects key(0..count-1) with
// deterministic content through the given admin endpoints (writer i
// starts at targets[i%len]) until every key is acknowledged or has failed
// `tries` times, or ctx ends. Acknowledged keys go to acks. A failed put
// is retried through the next endpoint after a short pause.
func runWriters(ctx context.Context, w, count, tries int, targets []string, bucket string, seed uint64,
	key func(int) string, minSize, maxSize int, acks *ackSet) *loadResult {
	var next atomic.Int64
	var attempts, failures atomic.Int64
	var mu sync.Mutex
	res := &loadResult{}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ti := i
			for ctx.Err() == nil {
				idx := int(next.Add(1) - 1)
				if idx >= count {
					return
				}
				k := key(idx)
				data := content(seed, bucket+"/"+k, minSize, maxSize)
				for try := 0; try < tries && ctx.Err() == nil; try++ {
					attempts.Add(1)
					pctx, cancel := context.WithTimeout(ctx, 45*time.Second)
					err := putObject(pctx, targets[ti%len(targets)], bucket, k, data)
					cancel()
					if err == nil {
						acks.add(k)
						break
					}
					failures.Add(1)
					mu.Lock()
					if len(res.firstErrs) < 8 {
						res.firstErrs = append(res.firstErrs, fmt.Sprintf("%s via %s: %v", k, targets[ti%len(targets)], err))
					}
					mu.Unlock()
					ti++
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	res.attempts, res.failures = attempts.Load(), failures.Load()
	return res
}

// verifyAll reads every key through the endpoints (round robin, 8 at a
// time) and returns the lost (unreadable) and corrupt (wrong bytes) keys.
func verifyAll(t *testing.T, keys []string, targets []string, bucket string, expect func(key string) []byte) (lost, corrupt []string, bytesRead int64) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			want := expect(k)
			var got []byte
			var err error
			for try := 0; try < 3; try++ { // a transport hiccup is not a loss
				ctx, cancel := ctxT(60 * time.Second)
				got, err = getObject(ctx, targets[(i+try)%len(targets)], bucket, k)
				cancel()
				if err == nil {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				lost = append(lost, fmt.Sprintf("%s: %v", k, err))
			case !bytes.Equal(got, want):
				corrupt = append(corrupt, fmt.Sprintf("%s: %s", k, firstDiff(got, want)))
			default:
				bytesRead += int64(len(got))
			}
		}()
	}
	wg.Wait()
	sort.Strings(lost)
	sort.Strings(corrupt)
	return lost, corrupt, bytesRead
}

// TestKillNodeUnderLoad kills -9 one node of three while 16 writers put
// objects (1 KiB–1 MiB, log-uniform, vector any=2) through the two other
// nodes. Writes must continue (re-placing replicas away from the dead
// node), every acknowledged object must read back intact from the
// survivors while the node is down, and the node must restart, rejoin and
// serve every object. It writes the scripted 2,000 objects (6,000
// with -long) and kills the node after a third are acknowledged.
func TestKillNodeUnderLoad(t *testing.T) {
	count := 2000 // the scripted run
	if *long {
		count = 6000
	}
	const (
		seed     = 2
		bucket   = "killload"
		writers  = 16
		minSize  = 1 << 10
		maxSize  = 1 << 20
		killFrac = 3 // kill after count/killFrac acknowledged
	)
	c := startCluster(t, 3, 27200, "")
	createBucket(t, c.Nodes[0].Admin, bucket, "any=2")

	// The victim: an etcd member that does not lead (TestEtcdLeaderKill
	// covers the leader), so this test isolates data-path failover.
	ctx, cancel := ctxT(10 * time.Second)
	leader, err := etcdLeader(ctx, c.Nodes[0].Admin)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Nodes[2]
	if victim.ID == leader {
		victim = c.Nodes[1]
	}
	var survivors []string
	for _, n := range c.Nodes {
		if n != victim {
			survivors = append(survivors, n.Admin)
		}
	}
	t.Logf("victim %s (etcd leader %s); writers use %v", victim.ID, leader, survivors)

	acks := newAckSet()
	key := func(i int) string { return fmt.Sprintf("obj-%05d", i) }
	expect := func(k string) []byte { return content(seed, bucket+"/"+k, minSize, maxSize) }
	lctx, lcancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer lcancel()
	start := time.Now()
	var killedAt time.Time
	var ackedAtKill int
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for lctx.Err() == nil && acks.len() < count/killFrac {
			time.Sleep(20 * time.Millisecond)
		}
		if lctx.Err() != nil {
			return
		}
		ackedAtKill = acks.len()
		killedAt = time.Now()
		c.Kill(victim)
	}()
	res := runWriters(lctx, writers, count, 5, survivors, bucket, seed, key, minSize, maxSize, acks)
	loadTook := time.Since(start)
	<-killed
	if killedAt.IsZero() {
		t.Fatalf("load ended before the kill: %d acknowledged, errors %v", acks.len(), res.firstErrs)
	}
	keys := acks.list()
	sort.Strings(keys)
	afterKill := 0
	for _, k := range keys {
		if acks.ackedAt(k).After(killedAt) {
			afterKill++
		}
	}
	t.Logf("load: %d/%d acknowledged in %s (%d attempts, %d failed attempts); killed %s at %d acknowledged, %d acknowledged after the kill",
		len(keys), count, loadTook.Round(time.Millisecond), res.attempts, res.failures, victim.ID, ackedAtKill, afterKill)
	for _, e := range res.firstErrs {
		t.Logf("  failed put: %s", e)
	}
	// Most objects are small enough to share batched appends
	// (docs/design/0012), so the kill cut batches in flight on the
	// writers' nodes; make sure batches of more than one write formed.
	var batched, batches float64
	for _, a := range survivors {
		batched += metricValue(t, a, "terrace_object_append_batch_writes_sum", "")
		batches += metricValue(t, a, "terrace_object_append_batch_writes_count", "")
	}
	t.Logf("batched appends on the survivors: %.0f writes in %.0f batches", batched, batches)
	if batched <= batches {
		t.Errorf("no batch of more than one write formed (%.0f writes in %.0f batches): the kill did not cut shared appends", batched, batches)
	}
	if afterKill < count/4 {
		t.Errorf("writes did not continue after the kill: %d acknowledged after it", afterKill)
	}
	if len(keys) < count*95/100 {
		t.Errorf("only %d of %d objects acknowledged", len(keys), count)
	}

	// Reads while the victim is down: every acknowledged object, from the
	// survivors only. Count how many had a replica on the victim.
	onVictim := 0
	lctx2, lcancel2 := ctxT(2 * time.Minute)
	for i, k := range keys {
		loc, err := locate(lctx2, survivors[i%2], bucket, k)
		if err != nil {
			t.Errorf("locate %s: %v", k, err)
			continue
		}
		hit := false
		for _, x := range loc.Extents {
			for _, r := range x.Replicas {
				if string(r.Node) == victim.ID {
					hit = true
				}
			}
		}
		if hit {
			onVictim++
		}
	}
	lcancel2()
	vstart := time.Now()
	lost, corrupt, n := verifyAll(t, keys, survivors, bucket, expect)
	t.Logf("victim down: %d acknowledged objects (%d with a replica on %s) read back from survivors in %s (%s): %d lost, %d corrupt",
		len(keys), onVictim, victim.ID, time.Since(vstart).Round(time.Millisecond), mib(n), len(lost), len(corrupt))
	if onVictim == 0 {
		t.Errorf("no acknowledged object had a replica on %s: the kill tested nothing", victim.ID)
	}
	for _, l := range append(lost, corrupt...) {
		t.Errorf("  %s", l)
	}

	// The survivors have noticed (lease expiry) before the node comes back.
	for _, a := range survivors {
		waitNodeState(t, a, victim.ID, false, 30*time.Second)
		t.Logf("%s sees %s down (%s after the kill)", a, victim.ID, time.Since(killedAt).Round(time.Millisecond))
	}

	// Restart: the node rejoins (every node sees it up) and serves every
	// object, including those written while it was down.
	rctx, rcancel := ctxT(2 * time.Minute)
	rstart := time.Now()
	if err := c.Restart(rctx, victim); err != nil {
		rcancel()
		t.Fatalf("restart %s: %v", victim.ID, err)
	}
	rcancel()
	for _, n := range c.Nodes {
		waitNodeState(t, n.Admin, victim.ID, true, 30*time.Second)
	}
	t.Logf("%s restarted and seen up by every node in %s", victim.ID, time.Since(rstart).Round(time.Millisecond))
	lost, corrupt, n = verifyAll(t, keys, []string{victim.Admin}, bucket, expect)
	t.Logf("after rejoin: %d objects read through %s (%s): %d lost, %d corrupt", len(keys), victim.ID, mib(n), len(lost), len(corrupt))
	for _, l := range append(lost, corrupt...) {
		t.Errorf("  %s", l)
	}
	// And it takes writes again.
	wctx, wcancel := ctxT(30 * time.Second)
	defer wcancel()
	if err := putObject(wctx, victim.Admin, bucket, "after-rejoin", []byte("back")); err != nil {
		t.Errorf("write through the rejoined node: %v", err)
	}
	t.Logf("RESULT kill -9 under %d writers: %d acknowledged objects, %d lost, %d corrupt", writers, len(keys), len(lost), len(corrupt))
}
