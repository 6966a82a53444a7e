package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/terrace-storage/terrace/internal/meta"
)

func freePort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)[0]
}

// freePorts returns n distinct free ports: every listener stays open
// until all are chosen (one after another, a port just closed can be
// handed out again, and two members given one URL refuse to start).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// newEtcdKV starts a real single-member etcd and an EtcdKV over it.
func newEtcdKV(t *testing.T, o EtcdOptions) *EtcdKV {
	t.Helper()
	ports := freePorts(t, 2)
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e, err := StartMember(MemberConfig{Name: "m1", DataDir: t.TempDir(), PeerURL: peer, ClientURL: client, InitialCluster: "m1=" + peer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kv := NewEtcdKVWith(c, o)
	t.Cleanup(func() { kv.Close() })
	return kv
}

// casCounters runs writers that each increment counters[(w+i)%counters]
// rounds times with compare-and-swap, plus a private key per successful
// round, and checks that no increment was lost or doubled. It returns how
// many increments won.
func casCounters(t *testing.T, kv *EtcdKV, writers, rounds, counters int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wins := make([]atomic.Int64, counters)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := []byte(fmt.Sprintf("counter/%d", (w+i)%counters))
				it, err := kv.Get(ctx, k)
				n, rev := 0, int64(0)
				if err == nil {
					n, _ = strconv.Atoi(string(it.Value))
					rev = it.ModRev
				} else if !errors.Is(err, meta.ErrNotFound) {
					t.Error(err)
					return
				}
				var tx meta.Txn
				tx.If(k, rev)
				tx.Put(k, []byte(strconv.Itoa(n+1)))
				tx.Put([]byte(fmt.Sprintf("private/%d/%d", w, i)), []byte("x")) // independent of everyone
				if _, err := kv.Commit(ctx, &tx); err == nil {
					wins[(w+i)%counters].Add(1)
				} else if !errors.Is(err, meta.ErrConflict) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for c := range counters {
		it, err := kv.Get(ctx, []byte(fmt.Sprintf("counter/%d", c)))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(string(it.Value)); int64(n) != wins[c].Load() {
			t.Fatalf("counter %d is %d after %d successful increments", c, n, wins[c].Load())
		}
		total += wins[c].Load()
	}
	return total
}

// TestGroupCommitKeepsCAS: many writers increment shared counters with
// compare-and-swap while others write private keys. With commits merged
// into shared etcd transactions, no increment may be lost or doubled, and
// merging must actually happen.
func TestGroupCommitKeepsCAS(t *testing.T) {
	kv := newEtcdKV(t, EtcdOptions{GroupCommit: true})
	casCounters(t, kv, 24, 40, 3)
	commits, txns := kv.Stats()
	t.Logf("%d commits in %d etcd transactions", commits, txns)
	if txns >= commits {
		t.Fatalf("no commit was merged (%d commits, %d transactions)", commits, txns)
	}
}

// TestGroupCommitNeverMergesDependentParts: one part writes a key that
// another part only compares (a bucket deletion marks the bucket's guard
// while uploads compare it). Merged, the second compare would be checked
// against the state before the first write and both would win. Submitted
// together over and over, exactly one may win each time.
func TestGroupCommitNeverMergesDependentParts(t *testing.T) {
	kv := newEtcdKV(t, EtcdOptions{GroupCommit: true, Committers: 1})
	ctx := context.Background()
	for round := range 60 {
		guard := []byte(fmt.Sprintf("guard/%d", round))
		var tx meta.Txn
		tx.Put(guard, []byte("v0"))
		rev, err := kv.Commit(ctx, &tx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ok atomic.Int64
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var tx meta.Txn
				tx.If(guard, rev)
				if w == 0 {
					tx.Put(guard, []byte("marked")) // the deleter
				} else {
					tx.Put([]byte(fmt.Sprintf("object/%d/%d", round, w)), []byte("x")) // uploads
				}
				if _, err := kv.Commit(ctx, &tx); err == nil && w == 0 {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		// If the deleter won, no upload that compared the old guard may
		// have committed after it in the same transaction.
		if ok.Load() == 1 {
			items, err := kv.Scan(ctx, []byte(fmt.Sprintf("object/%d/", round)), meta.PrefixEnd([]byte(fmt.Sprintf("object/%d/", round))), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if it.ModRev >= func() int64 { g, _ := kv.Get(ctx, guard); return g.ModRev }() {
					t.Fatalf("round %d: %s committed with the guard's marking (merged with a dependent part)", round, it.Key)
				}
			}
		}
	}
}

func TestEtcdSnapshots(t *testing.T) {
	kv := newEtcdKV(t, EtcdOptions{})
	ctx := context.Background()
	if err := meta.CheckSnapshots(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.SnapshotAt(ctx, 0); err == nil {
		t.Fatal("SnapshotAt(0) succeeded")
	}
	// A revision compacted away fails the read, clearly.
	s, err := kv.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tx meta.Txn
	tx.Put([]byte("snap/z"), []byte("1"))
	rev, err := kv.Commit(ctx, &tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Client().Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Scan(ctx, []byte("snap/"), []byte("snap0"), 10); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("scan of a compacted revision: %v", err)
	}
}
