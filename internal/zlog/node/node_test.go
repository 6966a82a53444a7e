package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

var secret = []byte("test-secret-0123456789")

// single is a one-node log service in this process: real devices
// (directories), real Pebble metadata, real gRPC on loopback.
type single struct {
	t    *testing.T
	dir  string
	addr string
	kv   *meta.Pebble
	devs []*device.Device
	g    *grpc.Server
	svc  *Service
	opts Options
	// devices as given to startSingleOn (kept for restart)
	devices []string
	// wrapKV, when set, wraps the metadata store the service sees (kept
	// for restart).
	wrapKV func(meta.KV) meta.KV
}

func startSingle(t *testing.T, dir, addr string, opts Options) *single {
	t.Helper()
	return startSingleOn(t, dir, addr, opts, "n1/ssd0:ssd", "n1/hdd0:hdd")
}

// startSingleOn is startSingle with the given devices ("ID:TIER").
func startSingleOn(t *testing.T, dir, addr string, opts Options, devices ...string) *single {
	t.Helper()
	return startSingleWrapped(t, dir, addr, opts, nil, devices...)
}

// startSingleWrapped is startSingleOn with the service's metadata store
// wrapped by wrap (nil: the store itself).
func startSingleWrapped(t *testing.T, dir, addr string, opts Options, wrap func(meta.KV) meta.KV, devices ...string) *single {
	t.Helper()
	n := &single{t: t, dir: dir, opts: opts, devices: devices, wrapKV: wrap}
	for _, spec := range devices {
		id, tier, _ := strings.Cut(spec, ":")
		d := struct{ id, tier string }{id, tier}
		dev, err := device.Open(modelDev(d.id), device.Spec{Tier: modelTier(d.tier), Path: filepath.Join(dir, d.id), Capacity: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		n.devs = append(n.devs, dev)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	n.kv = kv
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	for i := 0; i < 50; i++ { // the old listener's port may linger briefly
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	n.g = cluster.NewGRPCServer(secret, nil)
	n.svc = New()
	n.svc.Register(n.g)
	go n.g.Serve(ln)
	pc, err := placement.ParseConfig("fitness")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := placement.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	local := object.NewLocal("n1", "r1", n.devs)
	var svcKV meta.KV = kv
	if wrap != nil {
		svcKV = wrap(kv)
	}
	err = n.svc.Start(Config{Self: "n1", SelfAddress: n.addr, Devices: n.devs, KV: svcKV, Secret: secret, Policy: pol,
		Snapshot: local.Snapshot, Address: func(id string) (string, bool) { return n.addr, id == "n1" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.stop)
	return n
}

func (n *single) stop() {
	if n.svc == nil {
		return
	}
	n.svc.Close()
	n.g.Stop()
	n.kv.Close()
	n.svc = nil
}

// restart stops the node and starts it again on the same directory and
// address (like a process restart: the in-memory sequencer is gone).
func (n *single) restart() *single {
	n.stop()
	n2 := startSingleWrapped(n.t, n.dir, n.addr, n.opts, n.wrapKV, n.devices...)
	// Wait for the sequencer's recovery (Tail answers once it is done).
	c := n2.client(n.t)
	for _, name := range n2.svc.cache.names() {
		if _, err := c.Open(name, client.LogOptions{}).Tail(ctxT(n.t)); err != nil {
			n.t.Fatalf("log %s after restart: %v", name, err)
		}
	}
	return n2
}

func (n *single) client(t *testing.T) *client.Client {
	c, err := client.New(client.Config{Endpoints: []string{n.addr}, NodeID: "test", Secret: secret, RetryTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (n *single) raw(t *testing.T) zlogpb.LogClient {
	cc, err := cluster.DialPeer(n.addr, "test-raw", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return zlogpb.NewLogClient(cc)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAppendReadAcrossRestart(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "orders", client.CreateOptions{Stripes: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "orders", client.CreateOptions{}); !errors.Is(err, client.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if _, err := c.Create(ctx, "Bad Name", client.CreateOptions{}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("bad name: %v, want ErrInvalid", err)
	}
	l := c.Open("orders", client.LogOptions{})
	got := map[uint64]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				v := fmt.Sprintf("w%d-%d", w, i)
				p, err := l.Append(ctx, []byte(v))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if old, dup := got[p]; dup {
					t.Errorf("position %d given to %q and %q", p, old, v)
				}
				got[p] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 200 {
		t.Fatalf("%d positions for 200 appends", len(got))
	}
	check := func(l *client.Log) {
		for p := uint64(0); p < 200; p++ {
			e, err := l.Read(ctx, p)
			if err != nil || string(e.Data) != got[p] {
				t.Fatalf("read %d: %q %v, want %q", p, e.Data, err, got[p])
			}
		}
	}
	check(l)
	if _, err := l.Read(ctx, 500); !errors.Is(err, client.ErrNotWritten) {
		t.Fatalf("read beyond the tail: %v", err)
	}
	// Restart: the sequencer is rebuilt by recovery (epoch bump, seal).
	n = n.restart()
	c2 := n.client(t)
	l2 := c2.Open("orders", client.LogOptions{})
	check(l2)
	p, err := l2.Append(ctx, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if p != 200 {
		t.Fatalf("first append after restart at %d, want 200 (the recovered tail)", p)
	}
	info, err := c2.Info(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if info.Layout.Epoch != 2 || len(info.Layout.Segments) != 2 || info.Tail != 201 || info.Host != "n1" {
		t.Fatalf("after restart: epoch %d, %d segments, tail %d, host %q", info.Layout.Epoch, len(info.Layout.Segments), info.Tail, info.Host)
	}
	// The old client (stale epoch) retries through the new layout.
	if p, err := l.Append(ctx, []byte("stale client")); err != nil || p != 201 {
		t.Fatalf("stale client append: %d %v", p, err)
	}
}

// TestSettleCopiesPartialEntry: an entry that reached only one replica
// (its writer died before the primary acknowledged) is copied to the other
// by recovery's settle, so every replica of the sealed segment agrees and
// the tail is past it; a hole below it is filled.
func TestSettleCopiesPartialEntry(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "partial", client.CreateOptions{Stripes: 1}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("partial", client.LogOptions{})
	if _, err := l.Append(ctx, []byte("zero")); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, "partial")
	if err != nil {
		t.Fatal(err)
	}
	lay := client.LayoutFromProto(info.Layout)
	seg := lay.Segments[0]
	backup := seg.Stripes[0][1]
	// Position 2 written on the backup only (as a forward would), 1 nowhere.
	tok := bytes.Repeat([]byte{7}, 16)
	resp, err := n.raw(t).Replicate(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{{Ref: &zlogpb.StripeRef{Log: info.Record.Id, Segment: seg.ID, Stripe: 0},
		Pos: 2, Kind: zlogpb.Kind_KIND_DATA, Token: tok, Data: []byte("partial"), Device: backup.Device, Epoch: lay.Epoch}}})
	if err != nil || resp.Results[0].Status != zlogpb.Status_STATUS_OK {
		t.Fatalf("replicate: %v %v", err, resp)
	}
	// Not visible yet: reads of the active segment go to the primary.
	if _, err := l.Read(ctx, 2); !errors.Is(err, client.ErrNotWritten) {
		t.Fatalf("partial entry visible before recovery: %v", err)
	}
	n = n.restart()
	c2 := n.client(t)
	l2 := c2.Open("partial", client.LogOptions{})
	e, err := l2.Read(ctx, 2)
	if err != nil || string(e.Data) != "partial" {
		t.Fatalf("settled entry: %q %v", e.Data, err)
	}
	if e, err := l2.Read(ctx, 1); err != nil || e.Kind != client.KindFill {
		t.Fatalf("hole below the tail: %+v %v, want filled", e, err)
	}
	// Every replica of the sealed segment holds the same entries.
	for _, rep := range seg.Stripes[0] {
		for pos, want := range map[uint64]string{0: "zero", 2: "partial"} {
			r := n.svc.store.ReadAny(rep.Device, keyOf(&zlogpb.StripeRef{Log: info.Record.Id, Segment: seg.ID}), pos)
			if string(r.Data) != want {
				t.Fatalf("replica %s position %d: %+v", rep.Device, pos, r)
			}
		}
	}
	if tail, err := l2.Tail(ctx); err != nil || tail != 3 {
		t.Fatalf("tail %d %v, want 3", tail, err)
	}
}

// TestExpiredLeaseFilled: a client that leases positions and dies leaves
// holes; the host fills them after the hold time and a grace, so a
// subscriber moves on.
func TestExpiredLeaseFilled(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{LeaseGrace: 100 * time.Millisecond})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "leased", client.CreateOptions{Stripes: 2, MaxLeasePositions: 100, MaxLeaseHold: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("leased", client.LogOptions{})
	if _, err := l.Tail(ctx); err != nil {
		t.Fatal(err)
	}
	// A "client" that takes a lease of 5 and vanishes.
	r, err := n.raw(t).Next(ctx, &zlogpb.NextRequest{Name: "leased", Count: 5, HoldMs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 5 || r.LeaseId == 0 || r.HoldMs != 200 {
		t.Fatalf("lease: %+v, want 5 positions held 200ms (the policy's cap)", r)
	}
	p, err := l.Append(ctx, []byte("after the lease"))
	if err != nil || p != 5 {
		t.Fatalf("append after the lease: %d %v", p, err)
	}
	var seen []string
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = c.Open("leased-sub", client.LogOptions{}).Subscribe(sctx, 0, func(client.Entry) error { return nil })
	if !errors.Is(err, client.ErrNoSuchLog) {
		t.Fatalf("subscribe to a missing log: %v", err)
	}
	err = l.Subscribe(sctx, 0, func(e client.Entry) error {
		seen = append(seen, e.Kind.String()+":"+string(e.Data))
		if e.Pos == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	want := "[filled: filled: filled: filled: filled: data:after the lease]"
	if fmt.Sprint(seen) != want {
		t.Fatalf("subscriber saw %v, want %s", seen, want)
	}
}

// TestLeasedAppends: a client with leased batching appends at positions
// from its leases; Close fills the unused rest.
func TestLeasedAppends(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "batched", client.CreateOptions{Stripes: 2, MaxLeasePositions: 64, MaxLeaseHold: time.Second}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("batched", client.LogOptions{LeasePositions: 64, LeaseHold: time.Second})
	var ps []uint64
	for i := 0; i < 20; i++ {
		p, err := l.Append(ctx, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i, p := range ps {
		if p != uint64(i) {
			t.Fatalf("positions %v: one client with leases appends in order", ps)
		}
	}
	l.Close()
	tail, err := c.Open("batched-reader", client.LogOptions{}).Tail(ctx)
	if err == nil {
		t.Fatalf("tail of a missing log: %d", tail)
	}
	r := c.Open("batched", client.LogOptions{})
	tail, err = r.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := uint64(20); p < tail; p++ {
		if e, err := r.Read(ctx, p); err != nil || e.Kind != client.KindFill {
			t.Fatalf("unused leased position %d: %+v %v, want filled", p, e, err)
		}
	}
}

func TestTrim(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "trimmed", client.CreateOptions{Stripes: 2}); err != nil {
		t.Fatal(err)
	}
	l := c.Open("trimmed", client.LogOptions{})
	for i := 0; i < 10; i++ {
		if _, err := l.Append(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Trim(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ctx, 7); !errors.Is(err, client.ErrTrimmed) {
		t.Fatalf("trimmed position: %v", err)
	}
	if err := l.TrimPrefix(ctx, 5); err != nil {
		t.Fatal(err)
	}
	for p := uint64(0); p < 10; p++ {
		_, err := l.Read(ctx, p)
		switch {
		case p < 5 || p == 7:
			if !errors.Is(err, client.ErrTrimmed) {
				t.Fatalf("position %d: %v, want trimmed", p, err)
			}
		default:
			if err != nil {
				t.Fatalf("position %d: %v", p, err)
			}
		}
	}
	if err := l.TrimPrefix(ctx, 1000); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("trim beyond the tail: %v, want ErrInvalid", err)
	}
	// Entries survive a restart, trims too (prefix from metadata).
	n = n.restart()
	l2 := n.client(t).Open("trimmed", client.LogOptions{})
	if _, err := l2.Read(ctx, 3); !errors.Is(err, client.ErrTrimmed) {
		t.Fatalf("after restart: %v", err)
	}
	if e, err := l2.Read(ctx, 9); err != nil || !bytes.Equal(e.Data, []byte{9}) {
		t.Fatalf("after restart: %+v %v", e, err)
	}
}

func TestDelete(t *testing.T) {
	// The watch that keeps the node's log cache current is slowed down:
	// a create and a delete must still be visible at once to the node that
	// made them (ListLogs and GetLog answer from the cache).
	n := startSingleWrapped(t, t.TempDir(), "", Options{}, func(kv meta.KV) meta.KV { return slowWatchKV{kv, 300 * time.Millisecond} },
		"n1/ssd0:ssd", "n1/hdd0:hdd")
	ctx := ctxT(t)
	c := n.client(t)
	if _, err := c.Create(ctx, "gone", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if logs, err := c.List(ctx); err != nil || len(logs) != 1 {
		t.Fatalf("list after create: %v %v", logs, err)
	}
	if _, err := c.Open("gone", client.LogOptions{}).Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Info(ctx, "gone"); !errors.Is(err, client.ErrNoSuchLog) {
		t.Fatalf("info after delete: %v", err)
	}
	if err := c.Delete(ctx, "gone"); !errors.Is(err, client.ErrNoSuchLog) {
		t.Fatalf("second delete: %v", err)
	}
	logs, err := c.List(ctx)
	if err != nil || len(logs) != 0 {
		t.Fatalf("list after delete: %v %v", logs, err)
	}
}

// TestBadRequests: malformed storage requests get clear errors.
func TestBadRequests(t *testing.T) {
	n := startSingle(t, t.TempDir(), "", Options{})
	ctx := ctxT(t)
	raw := n.raw(t)
	ref := &zlogpb.StripeRef{Log: 1}
	resp, err := raw.Write(ctx, &zlogpb.WriteRequest{Ops: []*zlogpb.Op{
		{Ref: ref, Device: "n1/ssd0", Kind: zlogpb.Kind_KIND_DATA, Token: []byte("short")},
		{Device: "n1/ssd0", Kind: zlogpb.Kind_KIND_DATA, Token: make([]byte, 16)},
		{Ref: ref, Device: "n1/ssd0", Kind: zlogpb.Kind(9), Token: make([]byte, 16)},
		{Ref: ref, Device: "n1/ssd0", Kind: zlogpb.Kind_KIND_FILL, Token: make([]byte, 16), Data: []byte("x")},
		{Ref: ref, Device: "n9/ssd0", Kind: zlogpb.Kind_KIND_DATA, Token: make([]byte, 16)},
		{Ref: ref, Device: "n1/ssd0", Kind: zlogpb.Kind_KIND_DATA, Token: make([]byte, 16), Data: make([]byte, layout.MaxEntryBytes+1)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []zlogpb.Status{zlogpb.Status_STATUS_INVALID, zlogpb.Status_STATUS_INVALID, zlogpb.Status_STATUS_INVALID,
		zlogpb.Status_STATUS_INVALID, zlogpb.Status_STATUS_ERROR, zlogpb.Status_STATUS_INVALID}
	for i, r := range resp.Results {
		if r.Status != want[i] || r.Message == "" {
			t.Errorf("op %d: %v %q, want %v with a message", i, r.Status, r.Message, want[i])
		}
	}
	if _, err := raw.Seal(ctx, &zlogpb.SealRequest{Ref: ref, Device: "n1/ssd0"}); err == nil {
		t.Errorf("seal without epoch and width accepted")
	}
	if _, err := raw.Next(ctx, &zlogpb.NextRequest{Name: "nope", Count: 1}); err == nil {
		t.Errorf("next on a missing log accepted")
	}
	if _, err := raw.GetLog(ctx, &zlogpb.GetLogRequest{Name: "../etc"}); err == nil {
		t.Errorf("bad name accepted")
	}
	c := n.client(t)
	if _, err := c.Create(ctx, "x", client.CreateOptions{Vector: "ssd=9"}); err == nil {
		t.Errorf("unplaceable vector accepted")
	}
	if _, err := c.Create(ctx, "y", client.CreateOptions{MaxLeasePositions: 10}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("lease without hold: %v", err)
	}
	if _, err := c.Open("x", client.LogOptions{}).Append(ctx, make([]byte, layout.MaxEntryBytes+1)); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("oversized append: %v", err)
	}
}

func modelDev(s string) model.DeviceID { return model.DeviceID(s) }
func modelTier(s string) model.Tier    { return model.Tier(s) }

// slowWatchKV delivers watch events late, like a loaded etcd.
type slowWatchKV struct {
	meta.KV
	delay time.Duration
}

func (k slowWatchKV) Watch(ctx context.Context, prefix []byte) <-chan meta.Event {
	in := k.KV.Watch(ctx, prefix)
	out := make(chan meta.Event, 1024)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case <-time.After(k.delay):
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
