package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/terrace-storage/terrace/internal/model"
)

// startEtcd starts a single real etcd member and returns a fresh client
// factory for it.
func startEtcd(t *testing.T) func() *clientv3.Client {
	t.Helper()
	ports := freePorts(t, 2)
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e, err := StartMember(MemberConfig{Name: "m1", DataDir: t.TempDir(), PeerURL: peer, ClientURL: client, InitialCluster: "m1=" + peer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return func() *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func devs(node string) func() []model.Device {
	return func() []model.Device {
		return []model.Device{{ID: model.DeviceID(node + "/d0"), Node: model.NodeID(node), Tier: "ssd", State: model.DeviceUp, CapacityBytes: 1 << 30}}
	}
}

// slowLease makes Grant wait (an etcd that is electing a leader, or a
// slow link) until its context ends.
type slowLease struct{ clientv3.Lease }

func (l slowLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestNodeStoppedDuringStartLeavesNoHeartbeat: a node that stops (or
// dies) while its heartbeat lease is still being granted must leave no
// heartbeat behind. The first heartbeat used to be written without a
// lease; such a key never expires and every node saw the dead node up for
// good (its data never re-protected).
func TestNodeStoppedDuringStartLeavesNoHeartbeat(t *testing.T) {
	newClient := startEtcd(t)
	c := newClient()
	c.Lease = slowLease{c.Lease} // the lease grant does not finish before the node stops
	m := NewMembership(c, NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:1"}, devs("n1"), quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel) // stopped during start-up
	if err := m.Start(ctx); err == nil {
		cancel()
		m.Wait()
		t.Fatal("Start succeeded without a heartbeat lease")
	}
	resp, err := newClient().Get(context.Background(), prefixHeartbeat+"n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("n1 stopped during start-up; its heartbeat key is there with lease %x (0: never expires)", resp.Kvs[0].Lease)
	}
	// Another node does not see it up.
	o := NewMembership(newClient(), NodeInfo{ID: "n2", RPCAddress: "127.0.0.1:2"}, devs("n2"), quietLog())
	octx, ocancel := context.WithCancel(context.Background())
	defer func() { ocancel(); o.Wait() }()
	if err := o.Start(octx); err != nil {
		t.Fatal(err)
	}
	for _, v := range o.Nodes() {
		if v.ID == "n1" && v.Up {
			t.Fatal("n1 stopped during start-up and is up in n2's view")
		}
	}
}

// breakableWatcher hands out watch channels that the test can close (a
// watch cancelled by compaction closes its channel).
type breakableWatcher struct {
	clientv3.Watcher
	mu     sync.Mutex
	cancel []context.CancelFunc
}

func (w *breakableWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancel = append(w.cancel, cancel)
	w.mu.Unlock()
	return w.Watcher.Watch(ctx, key, opts...)
}

func (w *breakableWatcher) breakAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.cancel {
		c()
	}
	w.cancel = nil
}

// flakyKV fails prefix Gets while fail is set (etcd briefly unreachable
// as the watch broke).
type flakyKV struct {
	clientv3.KV
	fail atomic.Bool
	gets atomic.Int64
}

func (k *flakyKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.gets.Add(1)
	if k.fail.Load() {
		return nil, errors.New("etcdserver: request timed out")
	}
	return k.KV.Get(ctx, key, opts...)
}

// TestViewRecoversAfterFailedReload: when the watch breaks and the reload
// fails too, the view must still be reloaded before the watch resumes (it
// resumed at the current revision without one: a node whose lease expired
// in between stayed up in this node's view for good).
func TestViewRecoversAfterFailedReload(t *testing.T) {
	newClient := startEtcd(t)

	// n1: the node that will die.
	c1 := newClient()
	m1 := NewMembership(c1, NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:1"}, devs("n1"), quietLog())
	ctx1, cancel1 := context.WithCancel(context.Background())
	if err := m1.Start(ctx1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // its heartbeat is under a lease now

	// n2: the observer, with a watch we can break and a Get we can fail.
	c2 := newClient()
	w := &breakableWatcher{Watcher: c2.Watcher}
	kv := &flakyKV{KV: c2.KV}
	c2.Watcher, c2.KV = w, kv
	m2 := NewMembership(c2, NodeInfo{ID: "n2", RPCAddress: "127.0.0.1:2"}, devs("n2"), quietLog())
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer func() { cancel2(); m2.Wait() }()
	if err := m2.Start(ctx2); err != nil {
		t.Fatal(err)
	}
	up := func() bool {
		for _, v := range m2.Nodes() {
			if v.ID == "n1" {
				return v.Up
			}
		}
		return false
	}
	if !up() {
		t.Fatal("n1 not up in n2's view")
	}

	// The watch breaks while etcd does not answer n2's reload.
	kv.fail.Store(true)
	w.breakAll()
	deadline := time.Now().Add(5 * time.Second)
	for kv.gets.Load() < 2 && time.Now().Before(deadline) { // Start's Get + the failed reload
		time.Sleep(10 * time.Millisecond)
	}
	// n1 dies meanwhile (clean stop: its heartbeat key is deleted).
	cancel1()
	m1.Wait()
	time.Sleep(200 * time.Millisecond)
	kv.fail.Store(false)

	// n2 should learn within a few heartbeat intervals that n1 is down.
	time.Sleep(DefaultHeartbeatTTL + 2*time.Second)
	if got, err := newClient().Get(context.Background(), prefixHeartbeat+"n1"); err == nil && len(got.Kvs) != 0 {
		t.Fatalf("test setup: n1's heartbeat key is still present")
	}
	if up() {
		t.Fatalf("n1 stopped %s ago, its heartbeat key is gone, and n2's view still shows it up (watch resumed without a reload)", DefaultHeartbeatTTL+2*time.Second)
	}
}

// TestReloadShowsNoPartialView: a view reloaded after a broken watch is
// swapped in whole. It was cleared and refilled key by key with the lock
// released in between, so a Snapshot (the Curator's, placement's) or
// Nodes (the orphan sweep's "whom to ask") taken then missed registered
// nodes: Recovery takes a replica on an unknown device for lost, and the
// sweep asked nobody before deleting files.
func TestReloadShowsNoPartialView(t *testing.T) {
	newClient := startEtcd(t)
	c := newClient()
	// Many registered nodes (the view's size makes the refill take long
	// enough to observe).
	const extra = 3000
	for i := range extra {
		b := fmt.Sprintf(`{"id":"x%04d","rack":"r","rpc":"127.0.0.1:1","devices":[{"id":"x%04d/d0","tier":"ssd","cap":1073741824}]}`, i, i)
		if _, err := c.Put(context.Background(), prefixNode+fmt.Sprintf("x%04d", i), b); err != nil {
			t.Fatal(err)
		}
	}
	w := &breakableWatcher{Watcher: c.Watcher}
	c.Watcher = w
	m := NewMembership(c, NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:1"}, devs("n1"), quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := extra + 1
	if n := len(m.Snapshot().Nodes); n != want {
		t.Fatalf("view has %d nodes, want %d", n, want)
	}
	stop := make(chan struct{})
	minSeen := atomic.Int64{}
	minSeen.Store(int64(want))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(len(m.Nodes())); n < minSeen.Load() {
				minSeen.Store(n)
			}
		}
	}()
	for range 5 {
		w.breakAll()
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := minSeen.Load(); n < int64(want) {
		t.Fatalf("during a view reload a reader saw %d of %d registered nodes", n, want)
	}
}

// TestStopRightAfterStartLeavesNoHeartbeat: the server's own path — Open
// fails right after startMembership (e.g. openLog) and closes the cluster
// parts at once — must not leave the node's heartbeat behind.
func TestStopRightAfterStartLeavesNoHeartbeat(t *testing.T) {
	newClient := startEtcd(t)
	m := NewMembership(newClient(), NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:1"}, devs("n1"), quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	m.Wait()
	resp, err := newClient().Get(context.Background(), prefixHeartbeat+"n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("n1 stopped; its heartbeat key is still there with lease %x (0: never expires)", resp.Kvs[0].Lease)
	}
}

// TestDuplicateNodeIDRefused: a second process started with a live node's
// ID is refused before it writes anything (it would overwrite the node's
// registered address and share its heartbeat key); a restart after a
// crash, whose previous heartbeat has not expired yet, is not.
func TestDuplicateNodeIDRefused(t *testing.T) {
	newClient := startEtcd(t)
	first := NewMembership(newClient(), NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:1"}, devs("n1"), quietLog())
	first.interval = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var started []*Membership
	defer func() {
		cancel()
		for _, m := range started {
			m.Wait()
		}
	}()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started = append(started, first)
	dup := NewMembership(newClient(), NodeInfo{ID: "n1", RPCAddress: "127.0.0.1:9"}, devs("n1"), quietLog())
	dup.interval = 200 * time.Millisecond
	err := dup.Start(ctx)
	if !errors.Is(err, ErrNodeIDInUse) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("a second process with a live node's ID: %v, want ErrNodeIDInUse naming the live node's address", err)
	}
	if n, ok := first.Node("n1"); !ok || n.RPCAddress != "127.0.0.1:1" {
		t.Fatalf("the refused duplicate changed the live node's registration: %+v", n)
	}

	// A crashed instance: its heartbeat is there under a lease nobody
	// keeps alive. A restart waits a little, then takes the ID over.
	c := newClient()
	g, err := c.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(context.Background(), prefixHeartbeat+"n2", `{"t":1}`, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	restarted := NewMembership(newClient(), NodeInfo{ID: "n2", RPCAddress: "127.0.0.1:2"}, devs("n2"), quietLog())
	restarted.interval = 200 * time.Millisecond
	if err := restarted.Start(ctx); err != nil {
		t.Fatalf("a restart over a crashed instance's heartbeat: %v", err)
	}
	started = append(started, restarted)
	resp, err := c.Get(context.Background(), prefixHeartbeat+"n2")
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) == g.ID {
		t.Fatalf("the restarted node's heartbeat: %v %+v, want it under its own lease", err, resp)
	}
}
