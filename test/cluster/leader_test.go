package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestEtcdLeaderKill kills -9 the node whose embedded etcd member leads
// the metadata cluster while writers are running: the two remaining
// members elect a new leader and writes through the surviving nodes
// succeed again within a bounded time; objects written before and after
// read back intact; the node restarts and its member rejoins.
func TestEtcdLeaderKill(t *testing.T) {
	const (
		seed      = 3
		bucket    = "leaderkill"
		resumeMax = 20 * time.Second // bound on "service resumes"
	)
	c := startCluster(t, 3, 27300, "")
	createBucket(t, c.Nodes[0].Admin, bucket, "any=2")
	ctx, cancel := ctxT(10 * time.Second)
	leader, err := etcdLeader(ctx, c.Nodes[0].Admin)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	victim := c.node(leader)
	var survivors []string
	for _, n := range c.Nodes {
		if n != victim {
			survivors = append(survivors, n.Admin)
		}
	}
	t.Logf("etcd leader is %s; killing it", leader)

	// Writers through the survivors, before, during and after the kill:
	// each records acknowledged keys and the gaps in service it sees.
	acks := newAckSet()
	var mu sync.Mutex
	var lastOKBeforeKill, firstOKAfterKill time.Time
	var killedAt time.Time
	var failed int
	lctx, lcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; lctx.Err() == nil; i++ {
				k := fmt.Sprintf("w%d-%05d", w, i)
				began := time.Now()
				pctx, cancel := context.WithTimeout(lctx, 10*time.Second)
				err := putObject(pctx, survivors[(w+i)%2], bucket, k, content(seed, bucket+"/"+k, 1<<10, 256<<10))
				cancel()
				now := time.Now()
				mu.Lock()
				if err == nil {
					acks.add(k)
					if killedAt.IsZero() {
						lastOKBeforeKill = now
					} else if firstOKAfterKill.IsZero() && began.After(killedAt) {
						// Begun after the kill: it needed the new leader.
						firstOKAfterKill = now
					}
				} else if lctx.Err() == nil {
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	for acks.len() < 100 {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.Kill(victim)
	// Wait for a new leader among the survivors and for writes to resume.
	var newLeader string
	deadline := time.Now().Add(resumeMax)
	for time.Now().Before(deadline) {
		ctx, cancel := ctxT(3 * time.Second)
		l, err := etcdLeader(ctx, survivors[0])
		cancel()
		if err == nil && l != leader {
			newLeader = l
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	electedIn := time.Since(killedAt)
	for time.Now().Before(deadline) {
		mu.Lock()
		ok := !firstOKAfterKill.IsZero()
		mu.Unlock()
		if ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // keep writing a little on the new leader
	lcancel()
	wg.Wait()
	if newLeader == "" {
		t.Fatalf("no new etcd leader among the survivors within %s", resumeMax)
	}
	if firstOKAfterKill.IsZero() {
		t.Fatalf("no write succeeded within %s of killing the etcd leader", resumeMax)
	}
	// Every survivor's status reports the metadata cluster as it is: the
	// dead member unhealthy, the other two healthy, one leader. (A dead
	// member once made every member listed after it look unhealthy.)
	for _, a := range survivors {
		ctx, cancel := ctxT(10 * time.Second)
		st, err := nodeStatus(ctx, a)
		cancel()
		if err != nil || st.Cluster == nil {
			t.Fatalf("status of %s: %v", a, err)
		}
		healthy, leaders := 0, 0
		for _, m := range st.Cluster.Members {
			if m.Healthy {
				healthy++
			}
			if m.Leader {
				leaders++
			}
			if m.Name == victim.ID && m.Healthy {
				t.Errorf("%s: killed member %s reported healthy", a, m.Name)
			}
		}
		if healthy != 2 || leaders != 1 {
			t.Errorf("%s: metadata members %+v: want 2 healthy and 1 leader", a, st.Cluster.Members)
		}
	}
	gap := firstOKAfterKill.Sub(killedAt)
	t.Logf("new etcd leader %s seen after %s; first write begun after the kill acknowledged %s after it (last before it %s earlier); %d failed puts during the failover",
		newLeader, electedIn.Round(time.Millisecond), gap.Round(time.Millisecond), killedAt.Sub(lastOKBeforeKill).Round(time.Millisecond), failed)

	// Both survivors take writes and serve every acknowledged object.
	for _, a := range survivors {
		ctx, cancel := ctxT(15 * time.Second)
		err := putObject(ctx, a, bucket, "after-"+a, []byte("ok"))
		cancel()
		if err != nil {
			t.Errorf("write through %s after the failover: %v", a, err)
		}
	}
	keys := acks.list()
	get := func(k string, minSize, maxSize int) error {
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		got, err := getObject(ctx, survivors[len(k)%2], bucket, k)
		if err != nil {
			return err
		}
		if want := content(seed, bucket+"/"+k, minSize, maxSize); !bytes.Equal(got, want) {
			return fmt.Errorf("%s", firstDiff(got, want))
		}
		return nil
	}
	bad := 0
	for _, k := range keys {
		if err := get(k, 1<<10, 256<<10); err != nil {
			bad++
			t.Errorf("read %s: %v", k, err)
		}
	}
	t.Logf("%d acknowledged objects read back: %d lost or corrupt", len(keys), bad)

	// The killed node restarts; its etcd member rejoins as a follower.
	rctx, rcancel := ctxT(2 * time.Minute)
	defer rcancel()
	if err := c.Restart(rctx, victim); err != nil {
		t.Fatalf("restart %s: %v", victim.ID, err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := ctxT(5 * time.Second)
		st, err := nodeStatus(ctx, victim.Admin)
		cancel()
		healthy := 0
		if err == nil && st.Cluster != nil {
			for _, m := range st.Cluster.Members {
				if m.Healthy {
					healthy++
				}
			}
		}
		if healthy == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd members after restart: %+v (err %v)", st.Cluster, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitNodeState(t, survivors[0], victim.ID, true, 30*time.Second)
	ctx, cancel = ctxT(15 * time.Second)
	defer cancel()
	if err := putObject(ctx, victim.Admin, bucket, "after-restart", []byte("ok")); err != nil {
		t.Errorf("write through the restarted node: %v", err)
	}
}
