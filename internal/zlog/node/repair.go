package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

func modelNode(n string) model.NodeID { return model.NodeID(n) }

// placeStripes places a new segment's stripes with the node's placement
// policy, on a snapshot where the nodes recovery could not reach are down.
// Replica lists are rotated by stripe so primaries spread over nodes.
func (s *Service) placeStripes(rec layout.Record, dead map[string]bool) ([][]layout.Replica, error) {
	v, err := model.ParseVector(rec.Vector)
	if err != nil {
		return nil, err
	}
	snap := s.cfg.Snapshot()
	if snap == nil {
		return nil, fmt.Errorf("log: no cluster snapshot")
	}
	if len(dead) > 0 {
		nodes := append([]model.Node(nil), snap.Nodes...)
		for i := range nodes {
			if dead[string(nodes[i].ID)] {
				nodes[i].Up = false
			}
		}
		snap = model.NewSnapshot(snap.Now, nodes, snap.Devices)
	}
	s.rngMu.Lock()
	rng := rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
	s.rngMu.Unlock()
	// A stripe's replicas must be on distinct nodes whenever enough nodes
	// are up: that is what lets an acknowledged entry survive losing one.
	up := 0
	for _, n := range snap.Nodes {
		if n.Up {
			up++
		}
	}
	needNodes := min(v.Total(), up)
	if up < v.Total() {
		// Degraded on purpose (recovery must go on with nodes down), but
		// an entry acknowledged now survives fewer node losses than the
		// vector promises until a recovery places its next segment.
		s.log.Warn("log stripes placed on fewer nodes than the vector has replicas",
			"log", rec.Name, "vector", rec.Vector, "nodes_up", up)
	}
	out := make([][]layout.Replica, rec.Stripes)
	primaries := map[string]int{} // stripes each node is the primary of
	for st := range out {
		reps, err := s.cfg.Policy.Place(snap, placement.Request{Vector: v, Bytes: s.cfg.Options.SegmentBytes}, rng)
		if err != nil {
			return nil, fmt.Errorf("log: place stripe %d of %s (vector %s): %w", st, rec.Name, rec.Vector, err)
		}
		nodes := map[string]bool{}
		for i := range reps {
			r := reps[(i+st)%len(reps)]
			node := string(r.Node)
			if d, ok := snap.Device(r.Device); ok && node == "" {
				node = string(d.Node)
			}
			nodes[node] = true
			out[st] = append(out[st], layout.Replica{Node: node, Device: string(r.Device)})
		}
		if len(nodes) < needNodes {
			return nil, fmt.Errorf("log: placement put stripe %d of %s on %d nodes while %d are up; retrying", st, rec.Name, len(nodes), up)
		}
		// The first replica is the stripe's primary, which takes the
		// stripe's writes: the replica on the node that is primary of
		// the fewest stripes so far goes first, so a log's primaries
		// spread over its nodes (placement alone put all four of a
		// 4-stripe log's primaries on one of three nodes about once in
		// 27 logs).
		best := 0
		for i, r := range out[st] {
			if primaries[r.Node] < primaries[out[st][best].Node] {
				best = i
			}
		}
		out[st][0], out[st][best] = out[st][best], out[st][0]
		primaries[out[st][0].Node]++
	}
	return out, nil
}

// Report handles a client's report that node failed at epoch: if the node
// is really unreachable, a dead sequencer host is deposed (its lease
// revoked, so another node claims the log at once instead of after the
// lease TTL), and a dead storage node makes the host recover around it.
func (s *Service) Report(ctx context.Context, req *zlogpb.ReportRequest) (*zlogpb.ReportResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	v, ok := s.cache.get(req.Name)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "log: no log %s", req.Name)
	}
	s.metrics.reports.Inc()
	if req.Epoch < v.Layout.Epoch || req.Node == "" || req.Node == s.cfg.Self {
		return &zlogpb.ReportResponse{}, nil
	}
	if !s.unreachable(ctx, req.Node) {
		return &zlogpb.ReportResponse{}, nil
	}
	if v.HostRev != 0 && v.Host.Node == req.Node {
		if s.cfg.Etcd == nil || v.Host.LeaseID == 0 {
			return &zlogpb.ReportResponse{}, nil
		}
		s.run(func(ctx context.Context) { s.depose(ctx, req.Name, v.Host, req.Reason) })
		return &zlogpb.ReportResponse{Acted: true}, nil
	}
	if v.HostRev == 0 {
		return &zlogpb.ReportResponse{}, nil
	}
	if !inActive(v.Layout, req.Node) {
		// Only the active segment needs recovery around a dead node: a
		// sealed segment's other replicas serve everything.
		return &zlogpb.ReportResponse{}, nil
	}
	if v.Host.Node == s.cfg.Self {
		s.hostMu.Lock()
		q := s.hosted[req.Name]
		s.hostMu.Unlock()
		if q != nil {
			s.log.Info("replica node reported unreachable; recovering", "log", req.Name, "node", req.Node, "reason", req.Reason)
			q.requestRecovery(req.Epoch)
			return &zlogpb.ReportResponse{Acted: true}, nil
		}
		return &zlogpb.ReportResponse{}, nil
	}
	// Pass it to the host.
	resp, err := s.callNode(ctx, v.Host.Node, 2*time.Second, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
		return c.Report(ctx, req)
	}, func(ctx context.Context) (any, error) { return &zlogpb.ReportResponse{}, nil })
	if err != nil {
		return &zlogpb.ReportResponse{}, nil
	}
	return resp.(*zlogpb.ReportResponse), nil
}

// deposeFor bounds how long a node keeps trying to revoke a dead host's
// lease: etcd may be electing a leader (the dead node may have led it),
// and the first revoke that can commit should end the wait at once.
const deposeFor = 10 * time.Second

// depose revokes an unreachable host's lease, retrying while etcd cannot
// commit, until it succeeds or the log has another host.
func (s *Service) depose(ctx context.Context, name string, h hostRecord, reason string) {
	s.hostMu.Lock()
	if s.deposing[h.LeaseID] {
		s.hostMu.Unlock()
		return
	}
	s.deposing[h.LeaseID] = true
	s.hostMu.Unlock()
	defer func() {
		s.hostMu.Lock()
		delete(s.deposing, h.LeaseID)
		s.hostMu.Unlock()
	}()
	deadline := time.Now().Add(deposeFor)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if v, ok := s.cache.get(name); !ok || v.HostRev == 0 || v.Host.LeaseID != h.LeaseID {
			return // already gone
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.cfg.Etcd.Revoke(rctx, clientv3.LeaseID(h.LeaseID))
		cancel()
		if err == nil || strings.Contains(err.Error(), "requested lease not found") {
			s.metrics.deposed.Inc()
			s.log.Warn("deposed unreachable log sequencer host", "log", name, "host", h.Node, "reason", reason)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unreachable pings node: a refused connection or no answer within
// ProbeTimeout means unreachable.
func (s *Service) unreachable(ctx context.Context, node string) bool {
	addr, _ := s.cfg.Address(node)
	for attempt := 0; attempt < 2; attempt++ {
		if addr != "" {
			s.peers.pool.Reset(addr) // a fresh dial, not a cached failure
		}
		_, err := s.callNode(ctx, node, s.cfg.Options.ProbeTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
			return c.Ping(ctx, &zlogpb.Empty{})
		}, func(context.Context) (any, error) { return nil, nil })
		if err == nil {
			return false
		}
		c := status.Code(err)
		if c != codes.Unavailable && c != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
			return false // it answered, with an error: reachable
		}
		time.Sleep(20 * time.Millisecond) // let the reset connection dial
	}
	return true
}

// repairPage is how many entries repair copies per round trip.
const repairPage = 512

// repairOne brings back one stale replica of a hosted log whose node is up
// again: seal it (so it takes no client writes), reset it, copy the
// segment's stripe from a fresh replica, and mark it fresh in the layout.
//
// The layout is read from the metadata store, not the cache: a repair
// that just marked a replica fresh must not find it stale again in a
// cache its own commit has not reached yet, and reset it.
func (s *Service) repairOne(q *sequencer) {
	v, ok := s.cache.get(q.name)
	if !ok {
		return
	}
	li, err := s.cfg.KV.Get(q.ctx, layoutKey(q.name))
	if err != nil {
		return
	}
	if v.Layout, err = decodeLayout(li.Value); err != nil {
		return
	}
	snap := s.cfg.Snapshot()
	up := func(n string) bool { return n == s.cfg.Self || (snap != nil && snap.NodeUp(model.NodeID(n))) }
	stale := layout.StaleReplicas(v.Layout, up)
	if len(stale) == 0 {
		return
	}
	sr := stale[0]
	if err := s.repair(q.ctx, v, sr); err != nil {
		s.log.Info("log replica repair failed; will retry", "log", q.name, "segment", sr.Segment, "stripe", sr.Stripe, "node", sr.Node, "err", err)
		return
	}
	s.metrics.repairs.Inc()
	s.log.Info("log replica repaired", "log", q.name, "segment", sr.Segment, "stripe", sr.Stripe, "node", sr.Node)
}

func (s *Service) repair(ctx context.Context, v view, sr layout.StaleReplica) error {
	var seg layout.Segment
	for _, g := range v.Layout.Segments {
		if g.ID == sr.Segment {
			seg = g
		}
	}
	target := seg.Stripes[sr.Stripe][sr.Replica]
	// Copy from a fresh replica on a node that is up (the first fresh
	// one may be on a node that died since).
	snap := s.cfg.Snapshot()
	var src layout.Replica
	ok := false
	for _, r := range seg.Stripes[sr.Stripe] {
		if !r.Stale && (r.Node == s.cfg.Self || snap == nil || snap.NodeUp(model.NodeID(r.Node))) {
			src, ok = r, true
			break
		}
	}
	if !ok {
		return fmt.Errorf("no fresh replica on a live node to copy from")
	}
	// Fence: repair only as this log's host, and remember the host key's
	// revision for the commit (a host that lost its key must not mark
	// what it copied fresh).
	hi, err := s.cfg.KV.Get(ctx, hostKey(v.Record.Name))
	if err != nil {
		return fmt.Errorf("read host: %w", err)
	}
	if h, err := decodeHost(hi.Value); err != nil || h.Node != s.cfg.Self {
		return fmt.Errorf("not the log's host any more")
	}
	ref := &zlogpb.StripeRef{Log: v.Record.ID, Segment: seg.ID, Stripe: uint32(sr.Stripe)}
	sealReq := &zlogpb.SealRequest{Ref: ref, Device: target.Device, Epoch: v.Layout.Epoch, Stripes: uint32(v.Record.Stripes)}
	if _, err := s.callNode(ctx, target.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
		return c.Seal(ctx, sealReq)
	}, func(ctx context.Context) (any, error) { return s.Seal(ctx, sealReq) }); err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	// Just before the reset (which voids the replica), check once more
	// that the committed layout still calls it stale on this device.
	if li, err := s.cfg.KV.Get(ctx, layoutKey(v.Record.Name)); err != nil {
		return err
	} else if cur, err := decodeLayout(li.Value); err != nil {
		return err
	} else if !stillStale(cur, sr, target.Device) {
		return fmt.Errorf("replica no longer stale on %s", target.Device)
	}
	resetReq := &zlogpb.ResetRequest{Ref: ref, Device: target.Device}
	if _, err := s.callNode(ctx, target.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
		return c.Reset(ctx, resetReq)
	}, func(ctx context.Context) (any, error) { return s.Reset(ctx, resetReq) }); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	from, copied := seg.Start, 0
	for {
		req := &zlogpb.DumpRequest{Ref: ref, Device: src.Device, From: from, Limit: repairPage}
		resp, err := s.callNode(ctx, src.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
			return c.Dump(ctx, req)
		}, func(ctx context.Context) (any, error) { return s.Dump(ctx, req) })
		if err != nil {
			return fmt.Errorf("dump: %w", err)
		}
		d := resp.(*zlogpb.DumpResponse)
		if len(d.Entries) > 0 {
			for _, e := range d.Entries {
				e.Epoch = v.Layout.Epoch
			}
			if err := s.settleWrite(ctx, target, d.Entries); err != nil {
				return err
			}
			copied += len(d.Entries)
		}
		if d.Next == 0 {
			break
		}
		from = d.Next
	}
	// The copy skips entries the source was still writing (a trim in
	// flight): mark the target fresh only if it holds every position the
	// source holds (a seal at the same epoch only reports them).
	heldRuns := func(rep layout.Replica) ([]uint64, error) {
		req := &zlogpb.SealRequest{Ref: ref, Device: rep.Device, Epoch: v.Layout.Epoch, Stripes: uint32(v.Record.Stripes)}
		resp, err := s.callNode(ctx, rep.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
			return c.Seal(ctx, req)
		}, func(ctx context.Context) (any, error) { return s.Seal(ctx, req) })
		if err != nil {
			return nil, err
		}
		return resp.(*zlogpb.SealResponse).Runs, nil
	}
	srcHeld, err := heldRuns(src)
	if err != nil {
		return fmt.Errorf("check source: %w", err)
	}
	dstHeld, err := heldRuns(target)
	if err != nil {
		return fmt.Errorf("check copy: %w", err)
	}
	if !slices.Equal(srcHeld, dstHeld) {
		return fmt.Errorf("copy holds other positions than its source (an entry was in flight there); retrying")
	}
	for attempt := 0; attempt < 20; attempt++ {
		li, err := s.cfg.KV.Get(ctx, layoutKey(v.Record.Name))
		if err != nil {
			return err
		}
		cur, err := decodeLayout(li.Value)
		if err != nil {
			return err
		}
		nl, err := layout.MarkFresh(cur, sr.Segment, sr.Stripe, sr.Replica, target.Device)
		if err != nil {
			return err // trimmed, re-homed or repaired meanwhile
		}
		if err := nl.Validate(v.Record.Stripes); err != nil {
			return err
		}
		var t meta.Txn
		t.If(layoutKey(v.Record.Name), li.ModRev)
		t.If(hostKey(v.Record.Name), hi.ModRev)
		t.Put(layoutKey(v.Record.Name), mustJSON(nl))
		if _, err := s.cfg.KV.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		s.metrics.repairedEntries.Add(float64(copied))
		return nil
	}
	return fmt.Errorf("layout kept changing")
}

// stillStale reports whether replica sr of l is still a stale replica on
// device dev.
func stillStale(l layout.Layout, sr layout.StaleReplica, dev string) bool {
	for _, g := range l.Segments {
		if g.ID == sr.Segment && sr.Stripe < len(g.Stripes) && sr.Replica < len(g.Stripes[sr.Stripe]) {
			r := g.Stripes[sr.Stripe][sr.Replica]
			return r.Stale && r.Device == dev
		}
	}
	return false
}

// inActive reports whether node holds a replica of the active segment.
func inActive(l layout.Layout, node string) bool {
	act, ok := l.Active()
	if !ok {
		return false
	}
	for _, st := range act.Stripes {
		for _, r := range st {
			if r.Node == node {
				return true
			}
		}
	}
	return false
}
