package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/raft/v3"

	"github.com/terrace-storage/terrace/internal/meta"
)

// startMembers starts an n-member etcd cluster and returns its members
// and a function that stops member i (each is stopped once, at the latest
// when the test ends).
func startMembers(t *testing.T, n int) ([]*embed.Etcd, func(i int)) {
	t.Helper()
	peers := make([]string, n)
	ports := freePorts(t, 2*n) // peer and client URLs, all distinct
	var initial []string
	for i := range n {
		peers[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[i])
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i]))
	}
	members := make([]*embed.Etcd, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members[i], errs[i] = StartMember(MemberConfig{Name: fmt.Sprintf("m%d", i), DataDir: t.TempDir(),
				PeerURL: peers[i], ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[n+i]),
				InitialCluster: strings.Join(initial, ",")})
		}()
	}
	wg.Wait()
	stops := make([]sync.Once, n)
	stop := func(i int) { stops[i].Do(members[i].Close) }
	for i := range members {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { stop(i) })
	}
	return members, stop
}

// waitLeader returns the index of the member every member agrees leads.
func waitLeader(t *testing.T, members []*embed.Etcd) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lead := members[0].Server.Leader()
		agree := lead != 0
		for _, m := range members[1:] {
			agree = agree && m.Server.Leader() == lead
		}
		if agree {
			for i, m := range members {
				if m.Server.MemberID() == lead {
					return i
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the members did not agree on a leader within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unreachableClient is an etcd client whose only endpoint refuses
// connections: anything sent through it fails.
func unreachableClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))},
		DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLocalWritesGoThroughTheMember: with WriteLocally, commits from a
// follower's node go into its own member (which forwards them to the
// leader), so they succeed although the network client reaches no member
// at all; compare-and-swap keeps its meaning through group commit.
func TestLocalWritesGoThroughTheMember(t *testing.T) {
	members, _ := startMembers(t, 3)
	// Pick a follower: its proposals must travel to the leader.
	leader := waitLeader(t, members)
	follower := members[(leader+1)%len(members)]
	kv := NewEtcdKVWith(unreachableClient(t), EtcdOptions{GroupCommit: true})
	t.Cleanup(func() { kv.Close() })
	kv.ReadLocally(v3client.New(follower.Server))
	kv.WriteLocally(func() bool { return follower.Server.Leader() != 0 })

	wins := casCounters(t, kv, 8, 25, 1)
	if wins == 0 {
		t.Fatal("no increment won")
	}
	ctx := context.Background()
	// The leader holds what the follower proposed.
	resp, err := v3client.New(members[waitLeader(t, members)].Server).Get(ctx, "private/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != wins {
		t.Fatalf("leader has %d private keys, want %d", resp.Count, wins)
	}
	if s := kv.KVStats(); s.LocalWriteFallbacks != 0 {
		t.Fatalf("stats %+v: want no fallbacks", s)
	}
}

// TestLocalWriteFallsBackWithoutLeader: a member that has lost its
// leader would hold a proposal until its request timeout and answer with
// an ambiguous timeout, so a commit from its node goes to the network
// client from the start (which here reaches nothing, so it fails).
func TestLocalWriteFallsBackWithoutLeader(t *testing.T) {
	members, stop := startMembers(t, 3)
	lone := members[0]
	stop(1)
	stop(2)
	deadline := time.Now().Add(30 * time.Second)
	for lone.Server.Leader() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lone member kept a leader for 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	kv := NewEtcdKVWith(unreachableClient(t), EtcdOptions{})
	t.Cleanup(func() { kv.Close() })
	kv.ReadLocally(v3client.New(lone.Server))
	kv.WriteLocally(func() bool { return lone.Server.Leader() != 0 })
	var tx meta.Txn
	tx.Put([]byte("k"), []byte("v"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := kv.Commit(ctx, &tx); err == nil {
		t.Fatal("commit succeeded with no leader and no reachable member")
	}
	if s := kv.KVStats(); s.LocalWriteFallbacks != 1 {
		t.Fatalf("local write fallbacks %d, want 1", s.LocalWriteFallbacks)
	}
}

// TestRefusedBeforeProposal: only errors raised before a proposal
// entered the raft log may send a transaction on to another member.
func TestRefusedBeforeProposal(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTooManyRequests, true},
		{raft.ErrProposalDropped, true},
		{fmt.Errorf("rpc error: code = Unknown desc = %v", raft.ErrProposalDropped), true},
		{context.DeadlineExceeded, false},
		{rpctypes.ErrTimeout, false},
		{rpctypes.ErrTimeoutDueToLeaderFail, false},
		{rpctypes.ErrStopped, false},
		{meta.ErrConflict, false},
	} {
		if got := refusedBeforeProposal(c.err); got != c.want {
			t.Errorf("refusedBeforeProposal(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
