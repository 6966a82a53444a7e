package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Cluster-map keys (under meta.PrefixCluster).
const (
	prefixNode      = meta.PrefixCluster + "n/" // static registration
	prefixHeartbeat = meta.PrefixCluster + "h/" // live stats under a lease
	prefixNodeState = meta.PrefixCluster + "s/" // operator state (drain)
)

// Defaults for failure detection. A node is declared down when its lease
// expires: HeartbeatTTL after its last heartbeat. 5 s tolerates GC pauses
// and a busy 2-core machine; Mirador's 15-minute stabilisation before
// repairing lives in the Curator, not here.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatTTL      = 5 * time.Second
)

// NodeInfo is a node's registration.
type NodeInfo struct {
	ID           model.NodeID `json:"id"`
	Rack         string       `json:"rack"`
	RPCAddress   string       `json:"rpc"`
	S3Address    string       `json:"s3"`
	AdminAddress string       `json:"admin"`
	Devices      []DeviceInfo `json:"devices"`
	Started      int64        `json:"started"`
	// NetBps is the node's network throughput (bytes/s), the NetThru of
	// read ordering (OctopusFS Eq. 12).
	NetBps float64 `json:"net,omitempty"`
}

// DeviceInfo is a device's static description.
type DeviceInfo struct {
	ID            model.DeviceID `json:"id"`
	Tier          model.Tier     `json:"tier"`
	CapacityBytes int64          `json:"cap"`
	ReadBps       float64        `json:"rbps"`
	WriteBps      float64        `json:"wbps"`
}

// Heartbeat carries a node's live device statistics.
type Heartbeat struct {
	// Time is when the node wrote it, by its own clock (for display:
	// clocks of different nodes are not compared).
	Time int64 `json:"t"`
	// Seen is when this node received it, by this node's clock (ns; not
	// published): what freshness is judged by, so a node whose clock is
	// off neither has its figures ignored nor kept for good.
	Seen    int64         `json:"-"`
	Conns   int           `json:"c"`
	Devices []DeviceStats `json:"d"`
	// LatRecent and LatBase are the node's recent client latency and its
	// quiet baseline (ns; 0: unknown), so a Curator master on another node
	// can back its moves off when clients anywhere suffer.
	LatRecent int64 `json:"lr,omitempty"`
	LatBase   int64 `json:"lb,omitempty"`
}

// DeviceStats are a device's live counters.
type DeviceStats struct {
	ID      model.DeviceID `json:"id"`
	Used    int64          `json:"u"`
	Queue   int            `json:"q"`
	Streams int            `json:"s"`
	Failed  bool           `json:"f,omitempty"`
}

// NodeState is an operator-set state.
type NodeState struct {
	Draining bool  `json:"draining"`
	Since    int64 `json:"since"`
}

// Event reports a membership change.
type Event struct {
	Node model.NodeID
	Up   bool
	Time time.Time
}

// Membership registers this node, heartbeats its device statistics under
// an etcd lease, and keeps a watched view of every node.
type Membership struct {
	c    *clientv3.Client
	self NodeInfo
	// local returns this node's devices with live counters.
	local func() []model.Device
	// conns returns this node's data connections in flight (the NrConn of
	// read ordering); nil: unknown.
	conns    func() int
	latency  func() (recent, baseline time.Duration)
	log      *slog.Logger
	interval time.Duration
	ttl      time.Duration
	gen      atomic.Uint64 // see Generation

	mu     sync.RWMutex
	nodes  map[model.NodeID]NodeInfo
	beats  map[model.NodeID]Heartbeat
	states map[model.NodeID]NodeState
	subs   []chan Event

	wg sync.WaitGroup
}

// NewMembership prepares membership for this node; local returns this
// node's devices with live counters (replica.Local's snapshot).
func NewMembership(c *clientv3.Client, self NodeInfo, local func() []model.Device, log *slog.Logger) *Membership {
	return &Membership{c: c, self: self, local: local, log: log,
		interval: DefaultHeartbeatInterval, ttl: DefaultHeartbeatTTL,
		nodes: map[model.NodeID]NodeInfo{}, beats: map[model.NodeID]Heartbeat{}, states: map[model.NodeID]NodeState{}}
}

// Start registers the node, loads the current view, and runs the
// heartbeat and watch loops until ctx ends.
func (m *Membership) Start(ctx context.Context) error {
	m.self.Started = time.Now().UnixNano()
	m.self.Devices = nil
	for _, d := range m.local() {
		m.self.Devices = append(m.self.Devices, DeviceInfo{ID: d.ID, Tier: d.Tier, CapacityBytes: d.CapacityBytes, ReadBps: d.ReadBps, WriteBps: d.WriteBps})
	}
	b, _ := json.Marshal(m.self)
	// Before anything is written: registering would overwrite a live
	// node's address, and two heartbeats under one key would each make
	// the node look up while the other is down.
	if err := m.refuseDuplicate(ctx); err != nil {
		return err
	}
	// Each step is idempotent (the same key and value again), and a node
	// starting while etcd elects a leader or while its connection to a
	// member drops must not exit for it: retry transient errors a while.
	if err := startRetry(ctx, func(ctx context.Context) error {
		_, err := m.c.Put(ctx, prefixNode+string(m.self.ID), string(b))
		return err
	}); err != nil {
		return fmt.Errorf("cluster: register node: %w", err)
	}
	// The heartbeat key is only ever written under a lease: a key without
	// one never expires, and a node that stopped or died before its
	// heartbeat loop re-wrote it would be seen up by every node for good
	// (its data never re-protected).
	var lease clientv3.LeaseID
	if err := startRetry(ctx, func(ctx context.Context) error {
		g, err := m.c.Grant(ctx, int64(m.ttl/time.Second))
		if err == nil {
			lease = g.ID
		}
		return err
	}); err != nil {
		return fmt.Errorf("cluster: heartbeat lease: %w", err)
	}
	if err := startRetry(ctx, func(ctx context.Context) error { return m.beat(ctx, lease) }); err != nil {
		m.revoke(lease)
		return fmt.Errorf("cluster: first heartbeat: %w", err)
	}
	var resp *clientv3.GetResponse
	if err := startRetry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = m.c.Get(ctx, meta.PrefixCluster, clientv3.WithPrefix())
		return err
	}); err != nil {
		m.revoke(lease)
		return fmt.Errorf("cluster: load view: %w", err)
	}
	for _, kv := range resp.Kvs {
		m.apply(string(kv.Key), kv.Value, false)
	}
	wc := m.c.Watch(ctx, meta.PrefixCluster, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	m.wg.Add(2)
	go m.heartbeatLoop(ctx, lease)
	go m.watchLoop(ctx, wc)
	return nil
}

// ErrNodeIDInUse: another live process heartbeats under this node's ID.
var ErrNodeIDInUse = errors.New("cluster: node ID in use by another live process")

// refuseDuplicate fails Start when another live process runs under this
// node's ID. A heartbeat under the ID is either a previous instance's
// (killed without revoking its lease; the key expires within the TTL) or
// another live process's, which rewrites it every interval: it watches
// the key for two and a half intervals, and a rewrite means a duplicate.
// A restart after a crash so waits that long; one after a clean stop (the
// lease revoked) does not wait. A live duplicate whose heartbeats stall
// longer than that (etcd unavailable) is not detected.
func (m *Membership) refuseDuplicate(ctx context.Context) error {
	key := prefixHeartbeat + string(m.self.ID)
	var resp *clientv3.GetResponse
	if err := startRetry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = m.c.Get(ctx, key)
		return err
	}); err != nil {
		return fmt.Errorf("cluster: check node ID %s: %w", m.self.ID, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	m.log.Info("a heartbeat under this node's ID exists: waiting to see whether another process uses the ID",
		"node", m.self.ID, "for", 5*m.interval/2)
	wctx, cancel := context.WithTimeout(ctx, 5*m.interval/2)
	defer cancel()
	for wr := range m.c.Watch(wctx, key, clientv3.WithRev(resp.Kvs[0].ModRevision+1)) {
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut {
				return nil // the previous instance's lease expired
			}
			var other NodeInfo
			if r, err := m.c.Get(ctx, prefixNode+string(m.self.ID)); err == nil && len(r.Kvs) > 0 {
				_ = json.Unmarshal(r.Kvs[0].Value, &other)
			}
			return fmt.Errorf("%w: %s (registered with RPC address %q, started %s); give every node its own node_id",
				ErrNodeIDInUse, m.self.ID, other.RPCAddress, time.Unix(0, other.Started).UTC().Format(time.RFC3339))
		}
		if wr.Err() != nil {
			break
		}
	}
	return ctx.Err()
}

// revoke ends a heartbeat lease (a clean stop is seen as down at once).
func (m *Membership) revoke(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	m.c.Revoke(rctx, lease)
	cancel()
}

// startRetryFor bounds how long start-up retries a transient etcd error.
const startRetryFor = 30 * time.Second

// startRetry runs step until it succeeds, fails with an error that is not
// transient (etcd unavailable or slow to answer), or startRetryFor passes.
func startRetry(ctx context.Context, step func(context.Context) error) error {
	deadline := time.Now().Add(startRetryFor)
	wait := 100 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := step(sctx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// SetConns gives the membership the count of this node's data
// connections in flight, published with every heartbeat.
func (m *Membership) SetConns(f func() int) { m.conns = f }

// SetLatency gives the membership this node's client latency (recent and
// baseline), published with every heartbeat.
func (m *Membership) SetLatency(f func() (recent, baseline time.Duration)) { m.latency = f }

// ClusterLatency returns the recent client latency and baseline of the node
// whose clients suffer most now (the highest recent/baseline ratio), from
// this node's own figures and the other nodes' heartbeats received within
// the last three intervals (by this node's clock: see Heartbeat.Seen): the
// actuator's back-off signal, since clients may enter at any node while
// the Curator master moves data from another.
func (m *Membership) ClusterLatency() (recent, baseline time.Duration) {
	worst := 0.0
	consider := func(r, b time.Duration) {
		if b <= 0 || r <= 0 {
			return
		}
		if ratio := float64(r) / float64(b); ratio > worst {
			worst, recent, baseline = ratio, r, b
		}
	}
	if m.latency != nil {
		consider(m.latency())
	}
	stale := time.Now().Add(-3 * m.interval).UnixNano()
	m.mu.RLock()
	for id, hb := range m.beats {
		if id != m.self.ID && hb.Seen >= stale {
			consider(time.Duration(hb.LatRecent), time.Duration(hb.LatBase))
		}
	}
	m.mu.RUnlock()
	return recent, baseline
}

// Wait waits for the loops to stop after ctx ends.
func (m *Membership) Wait() { m.wg.Wait() }

func (m *Membership) beat(ctx context.Context, lease clientv3.LeaseID) error {
	hb := Heartbeat{Time: time.Now().UnixNano()}
	if m.conns != nil {
		hb.Conns = m.conns()
	}
	if m.latency != nil {
		r, b := m.latency()
		hb.LatRecent, hb.LatBase = int64(r), int64(b)
	}
	for _, d := range m.local() {
		hb.Devices = append(hb.Devices, DeviceStats{ID: d.ID, Used: d.UsedBytes, Queue: d.QueueLen, Streams: d.ActiveStreams, Failed: d.State == model.DeviceFailed})
	}
	b, _ := json.Marshal(hb)
	if lease == 0 {
		return errors.New("cluster: heartbeat without a lease")
	}
	_, err := m.c.Put(ctx, prefixHeartbeat+string(m.self.ID), string(b), clientv3.WithLease(lease))
	return err
}

func (m *Membership) heartbeatLoop(ctx context.Context, lease clientv3.LeaseID) {
	defer m.wg.Done()
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		if lease == 0 {
			cctx, cancel := context.WithTimeout(ctx, m.ttl)
			g, err := m.c.Grant(cctx, int64(m.ttl/time.Second))
			cancel()
			if err == nil {
				lease = g.ID
			} else if ctx.Err() == nil {
				m.log.Warn("heartbeat lease grant failed", "err", err)
			}
		}
		if lease != 0 {
			cctx, cancel := context.WithTimeout(ctx, m.ttl)
			_, kerr := m.c.KeepAliveOnce(cctx, lease)
			err := kerr
			if err == nil {
				err = m.beat(cctx, lease)
			}
			cancel()
			if err != nil && ctx.Err() == nil {
				m.log.Warn("heartbeat failed; re-granting lease", "err", err)
				lease = 0
			}
		}
		select {
		case <-ctx.Done():
			m.revoke(lease)
			return
		case <-t.C:
		}
	}
}

func (m *Membership) watchLoop(ctx context.Context, wc clientv3.WatchChan) {
	defer m.wg.Done()
	for {
		for resp := range wc {
			for _, ev := range resp.Events {
				m.apply(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
			}
		}
		if ctx.Err() != nil {
			return
		}
		// The watch broke (compaction, leader change): reload, then resume
		// from the reload's revision. Events of the gap are lost, so the
		// watch never resumes without a reload (a node whose lease expired
		// in the gap stayed up in this view for good).
		var resp *clientv3.GetResponse
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			var err error
			if resp, err = m.c.Get(ctx, meta.PrefixCluster, clientv3.WithPrefix()); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("cluster view reload failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		m.reload(resp)
		wc = m.c.Watch(ctx, meta.PrefixCluster, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	}
}

// reload replaces the view with a full read of the cluster keys in one
// step: readers never see a partial view (built in place, a scan
// snapshot taken meanwhile missed nodes, and recovery planned for their
// replicas as lost). Nodes that came or went since are reported.
func (m *Membership) reload(resp *clientv3.GetResponse) {
	next := &Membership{log: m.log, nodes: map[model.NodeID]NodeInfo{}, beats: map[model.NodeID]Heartbeat{}, states: map[model.NodeID]NodeState{}}
	for _, kv := range resp.Kvs {
		next.apply(string(kv.Key), kv.Value, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.beats
	m.nodes, m.beats, m.states = next.nodes, next.beats, next.states
	m.gen.Add(1)
	for id := range old {
		if _, ok := m.beats[id]; !ok {
			m.log.Warn("node down (heartbeat gone at a view reload)", "node", id)
			m.notify(Event{Node: id, Up: false, Time: time.Now()})
		}
	}
	for id := range m.beats {
		if _, ok := old[id]; !ok {
			m.log.Info("node up", "node", id)
			m.notify(Event{Node: id, Up: true, Time: time.Now()})
		}
	}
}

// Generation changes whenever the set of nodes, their up/down state or
// their administrative state changes (not on ordinary heartbeats), so a
// cached snapshot can be refreshed at once instead of at its next interval:
// a write must not be placed on a view that misses a node that joined.
func (m *Membership) Generation() uint64 { return m.gen.Load() }

func (m *Membership) apply(key string, val []byte, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case strings.HasPrefix(key, prefixNode):
		id := model.NodeID(strings.TrimPrefix(key, prefixNode))
		m.gen.Add(1)
		if deleted {
			delete(m.nodes, id)
			return
		}
		var ni NodeInfo
		if json.Unmarshal(val, &ni) == nil {
			m.nodes[id] = ni
		}
	case strings.HasPrefix(key, prefixHeartbeat):
		id := model.NodeID(strings.TrimPrefix(key, prefixHeartbeat))
		_, wasUp := m.beats[id]
		if deleted {
			delete(m.beats, id)
			if wasUp {
				m.gen.Add(1)
				m.log.Warn("node down (heartbeat lease expired)", "node", id)
				m.notify(Event{Node: id, Up: false, Time: time.Now()})
			}
			return
		}
		var hb Heartbeat
		if json.Unmarshal(val, &hb) == nil {
			hb.Seen = time.Now().UnixNano()
			m.beats[id] = hb
			if !wasUp {
				m.gen.Add(1)
				m.log.Info("node up", "node", id)
				m.notify(Event{Node: id, Up: true, Time: time.Now()})
			}
		}
	case strings.HasPrefix(key, prefixNodeState):
		id := model.NodeID(strings.TrimPrefix(key, prefixNodeState))
		m.gen.Add(1)
		if deleted {
			delete(m.states, id)
			return
		}
		var st NodeState
		if json.Unmarshal(val, &st) == nil {
			m.states[id] = st
		}
	}
}

// notify must be called with mu held.
func (m *Membership) notify(ev Event) {
	for _, ch := range m.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Subscribe returns a channel of membership events (buffered; events are
// dropped for a subscriber that does not keep up).
func (m *Membership) Subscribe() <-chan Event {
	ch := make(chan Event, 64)
	m.mu.Lock()
	m.subs = append(m.subs, ch)
	m.mu.Unlock()
	return ch
}

// Node returns a node's registration.
func (m *Membership) Node(id model.NodeID) (NodeInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, ok := m.nodes[id]
	return n, ok
}

// NodeView is one node as `terrace status` shows it.
type NodeView struct {
	NodeInfo
	Up        bool       `json:"up"`
	Draining  bool       `json:"draining"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
}

// Nodes returns every registered node, sorted by ID.
func (m *Membership) Nodes() []NodeView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]NodeView, 0, len(m.nodes))
	for id, n := range m.nodes {
		v := NodeView{NodeInfo: n, Draining: m.states[id].Draining}
		if hb, ok := m.beats[id]; ok {
			v.Up = true
			v.Heartbeat = &hb
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetDraining sets or clears a node's draining state.
func (m *Membership) SetDraining(ctx context.Context, id model.NodeID, on bool) error {
	if _, ok := m.Node(id); !ok {
		return fmt.Errorf("cluster: unknown node %s", id)
	}
	if !on {
		_, err := m.c.Delete(ctx, prefixNodeState+string(id))
		return err
	}
	b, _ := json.Marshal(NodeState{Draining: true, Since: time.Now().UnixNano()})
	_, err := m.c.Put(ctx, prefixNodeState+string(id), string(b))
	return err
}

// Snapshot builds the placement snapshot from the watched view. This
// node's devices use live counters; others use their last heartbeat.
func (m *Membership) Snapshot() *model.Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	local := map[model.DeviceID]model.Device{}
	for _, d := range m.local() {
		local[d.ID] = d
	}
	var nodes []model.Node
	var devs []model.Device
	for id, n := range m.nodes {
		hb, up := m.beats[id]
		if id == m.self.ID {
			up = true
		}
		conns := hb.Conns
		if id == m.self.ID && m.conns != nil {
			conns = m.conns()
		}
		nodes = append(nodes, model.Node{ID: id, Rack: n.Rack, Up: up, Conns: conns, NetBps: n.NetBps})
		stats := map[model.DeviceID]DeviceStats{}
		for _, s := range hb.Devices {
			stats[s.ID] = s
		}
		for _, di := range n.Devices {
			if md, ok := local[di.ID]; ok {
				md.Node, md.Rack = id, n.Rack
				if m.states[id].Draining && md.State == model.DeviceUp {
					md.State = model.DeviceDraining
				}
				devs = append(devs, md)
				continue
			}
			s := stats[di.ID]
			st := model.DeviceUp
			switch {
			case s.Failed:
				st = model.DeviceFailed
			case m.states[id].Draining:
				st = model.DeviceDraining
			}
			devs = append(devs, model.Device{ID: di.ID, Node: id, Rack: n.Rack, Tier: di.Tier, State: st,
				CapacityBytes: di.CapacityBytes, UsedBytes: s.Used, QueueLen: s.Queue, ActiveStreams: s.Streams,
				ReadBps: di.ReadBps, WriteBps: di.WriteBps})
		}
	}
	return model.NewSnapshot(time.Now(), nodes, devs).WithSelf(m.self.ID)
}
