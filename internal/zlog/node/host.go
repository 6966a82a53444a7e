package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// errNotHost means this node no longer holds the log's host key.
var errNotHost = errors.New("log: no longer the sequencer host")

// hostLoop decides, on every metadata change and periodically, which logs
// this node should host: it claims logs without a host when the balancer
// chooses it (or any node may, after ClaimFallback), and steps down from
// logs whose host key it lost.
func (s *Service) hostLoop(ctx context.Context) {
	if s.cfg.Etcd != nil {
		s.run(s.leaseLoop)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := s.cache.wait()
		s.reconcileHosts(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

// leaseLoop keeps this node's host lease alive; when it is lost every
// hosted sequencer stops (another node takes over after the TTL).
func (s *Service) leaseLoop(ctx context.Context) {
	ttl := int64(max(s.cfg.Options.HostLeaseTTL/time.Second, 1))
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		g, err := s.cfg.Etcd.Grant(gctx, ttl)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("log host lease grant failed", "err", err)
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		ka, err := s.cfg.Etcd.KeepAlive(ctx, g.ID)
		if err != nil {
			continue
		}
		s.hostMu.Lock()
		s.lease = g.ID
		s.leaseGen++
		s.hostMu.Unlock()
		for range ka {
		}
		s.hostMu.Lock()
		s.lease = 0
		for name, q := range s.hosted {
			q.stop()
			delete(s.hosted, name)
		}
		s.hostMu.Unlock()
		if ctx.Err() == nil {
			s.log.Warn("log host lease lost; stepped down from every sequencer")
		} else {
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s.cfg.Etcd.Revoke(rctx, g.ID) // a clean stop hands over at once
			cancel()
		}
	}
}

// reconcileHosts is one pass of the host decision over every log.
func (s *Service) reconcileHosts(ctx context.Context) {
	names := s.cache.names()
	counts := s.cache.hostCounts()
	var loads []layout.NodeLoad
	if snap := s.cfg.Snapshot(); snap != nil {
		for _, n := range snap.Nodes {
			loads = append(loads, layout.NodeLoad{Node: string(n.ID), Up: n.Up || string(n.ID) == s.cfg.Self, Sequencers: counts[string(n.ID)]})
		}
	}
	known := map[string]bool{}
	for _, name := range names {
		known[name] = true
		v, ok := s.cache.get(name)
		if !ok {
			continue
		}
		s.hostMu.Lock()
		q := s.hosted[name]
		lease := s.lease
		s.hostMu.Unlock()
		switch {
		case v.HostRev != 0 && v.Host.Node == s.cfg.Self:
			s.lastHost[name] = s.cfg.Self
			delete(s.noHost, name)
			if q != nil {
				continue
			}
			if s.cfg.Etcd == nil || (lease != 0 && clientv3.LeaseID(v.Host.LeaseID) == lease) {
				s.startHosting(name, v.HostRev)
			} else if s.cfg.Etcd != nil && v.Host.LeaseID != 0 && lease != 0 {
				// Our key from before a restart: its lease is ours and
				// dead; revoke it so the log is claimed at once.
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				s.cfg.Etcd.Revoke(rctx, clientv3.LeaseID(v.Host.LeaseID))
				cancel()
			}
		case v.HostRev != 0:
			s.lastHost[name] = v.Host.Node
			delete(s.noHost, name)
			if q != nil {
				s.stopHosting(name, "another node hosts it")
			}
		default:
			if q != nil {
				s.stopHosting(name, "host key gone")
			}
			since, ok := s.noHost[name]
			if !ok {
				since = time.Now()
				s.noHost[name] = since
			}
			chosen, _ := layout.ChooseHost(name, loads, s.lastHost[name])
			if s.cfg.Etcd == nil || chosen == s.cfg.Self || time.Since(since) > s.cfg.Options.ClaimFallback {
				s.claim(ctx, name)
			}
		}
	}
	s.hostMu.Lock()
	var gone []string
	for name := range s.hosted {
		if !known[name] {
			gone = append(gone, name)
		}
	}
	s.hostMu.Unlock()
	for _, name := range gone {
		s.stopHosting(name, "log deleted")
	}
}

// claim tries to become the log's host: the host key is created only if
// absent, attached to this node's lease (single node: written as is).
func (s *Service) claim(ctx context.Context, name string) {
	if s.cfg.Etcd == nil {
		var t meta.Txn
		t.Put(hostKey(name), mustJSON(hostRecord{Node: s.cfg.Self, Since: time.Now().UnixNano()}))
		if _, err := s.cfg.KV.Commit(ctx, &t); err != nil {
			s.log.Warn("log host claim failed", "log", name, "err", err)
		}
		return
	}
	s.hostMu.Lock()
	lease := s.lease
	s.hostMu.Unlock()
	if lease == 0 {
		return
	}
	k := string(hostKey(name))
	val := string(mustJSON(hostRecord{Node: s.cfg.Self, LeaseID: int64(lease), Since: time.Now().UnixNano()}))
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := s.cfg.Etcd.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, val, clientv3.WithLease(lease))).Commit()
	if err != nil {
		s.log.Warn("log host claim failed", "log", name, "err", err)
		return
	}
	if resp.Succeeded {
		s.log.Info("claimed log sequencer", "log", name, "previous", fmtNode(s.lastHost[name]))
		s.startHosting(name, resp.Header.Revision)
	}
}

// startHosting starts the log's sequencer: recovery, then serving.
func (s *Service) startHosting(name string, hostRev int64) {
	s.hostMu.Lock()
	if s.hosted[name] != nil {
		s.hostMu.Unlock()
		return
	}
	q := newSequencer(s.ctx, name, hostRev)
	s.hosted[name] = q
	s.hostMu.Unlock()
	s.metrics.hosting.Inc()
	s.run(func(context.Context) { s.host(q) })
}

func (s *Service) stopHosting(name, why string) {
	s.hostMu.Lock()
	q := s.hosted[name]
	delete(s.hosted, name)
	s.hostMu.Unlock()
	if q != nil {
		q.stop()
		s.metrics.hosting.Dec()
		s.log.Info("stepped down as log sequencer", "log", name, "why", why)
	}
}

// host runs a hosted sequencer: recovery until it succeeds, then serving
// (lease sweeper, repair, recovery again when a failure is reported).
func (s *Service) host(q *sequencer) {
	var epoch uint64
	for q.ctx.Err() == nil {
		start := time.Now()
		err := s.recoverLog(q)
		if errors.Is(err, errNotHost) {
			s.stopHosting(q.name, "host key changed during recovery")
			return
		}
		if err != nil {
			if q.ctx.Err() == nil {
				s.log.Warn("log recovery failed; retrying", "log", q.name, "err", err)
				select {
				case <-q.ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			continue
		}
		q.mu.Lock()
		epoch = q.epoch
		q.mu.Unlock()
		s.metrics.recoveries.Inc()
		s.metrics.recoverySeconds.Observe(time.Since(start).Seconds())
		break
	}
	if q.ctx.Err() != nil {
		return
	}
	go s.sweep(q)
	repair := time.NewTicker(s.cfg.Options.RepairEvery)
	defer repair.Stop()
	for {
		select {
		case <-q.ctx.Done():
			return
		case e := <-q.recover:
			if e < epoch {
				continue // already past that epoch
			}
			q.mu.Lock()
			q.ready = false
			q.mu.Unlock()
			for q.ctx.Err() == nil {
				start := time.Now()
				err := s.recoverLog(q)
				if errors.Is(err, errNotHost) {
					s.stopHosting(q.name, "host key changed during recovery")
					return
				}
				if err == nil {
					s.metrics.recoveries.Inc()
					s.metrics.recoverySeconds.Observe(time.Since(start).Seconds())
					break
				}
				s.log.Warn("log recovery failed; retrying", "log", q.name, "err", err)
				time.Sleep(200 * time.Millisecond)
			}
			q.mu.Lock()
			epoch = q.epoch
			q.mu.Unlock()
		case <-repair.C:
			s.checkActive(q, epoch)
			s.rehomeOne(q)
			s.repairOne(q)
			// A repair longer than the period leaves a tick waiting:
			// drop it, so the next pass starts a full period later.
			select {
			case <-repair.C:
			default:
			}
		}
	}
}

// checkActive asks for recovery when membership says a node holding a
// replica of the active segment is down (clients usually report first).
func (s *Service) checkActive(q *sequencer, epoch uint64) {
	v, ok := s.cache.get(q.name)
	if !ok || v.Layout.Epoch != epoch {
		return
	}
	act, ok := v.Layout.Active()
	if !ok {
		return
	}
	snap := s.cfg.Snapshot()
	for _, st := range act.Stripes {
		for _, r := range st {
			if r.Node != s.cfg.Self && snap != nil && !snap.NodeUp(modelNode(r.Node)) {
				s.log.Info("replica node down; recovering", "log", q.name, "node", r.Node)
				q.requestRecovery(epoch)
				return
			}
		}
	}
}

func (q *sequencer) requestRecovery(epoch uint64) {
	select {
	case q.recover <- epoch:
	default:
	}
}

// recoverLog is CORFU's recovery with segments: seal the active segment at
// epoch+1 on every replica that answers, take K = one past the highest
// position any holds, settle (copy what some live replicas lack, fill what
// none holds), close the segment at K and open a new one at K on freshly
// placed replicas, and install that layout with compare-and-swap (fenced
// by our host key). Only then does the sequencer hand out positions from
// K. Stale clients are refused by the sealed replicas and retry.
func (s *Service) recoverLog(q *sequencer) error {
	ctx := q.ctx
	ri, err := s.cfg.KV.Get(ctx, recordKey(q.name))
	if err != nil {
		return fmt.Errorf("read record: %w", err)
	}
	li, err := s.cfg.KV.Get(ctx, layoutKey(q.name))
	if err != nil {
		return fmt.Errorf("read layout: %w", err)
	}
	hi, err := s.cfg.KV.Get(ctx, hostKey(q.name))
	if err != nil {
		if errors.Is(err, meta.ErrNotFound) {
			return errNotHost
		}
		return fmt.Errorf("read host: %w", err)
	}
	h, err := decodeHost(hi.Value)
	if err != nil {
		return err
	}
	s.hostMu.Lock()
	lease := s.lease
	s.hostMu.Unlock()
	if h.Node != s.cfg.Self || (s.cfg.Etcd != nil && clientv3.LeaseID(h.LeaseID) != lease) {
		return errNotHost
	}
	rec, err := decodeRecord(ri.Value)
	if err != nil {
		return err
	}
	old, err := decodeLayout(li.Value)
	if err != nil {
		return err
	}
	w := rec.Stripes
	epoch := old.Epoch + 1
	var k uint64
	var live [][]bool
	dead := map[string]bool{}
	if act, ok := old.Active(); ok {
		sealed := s.sealSegment(ctx, rec, act, epoch)
		live = make([][]bool, w)
		for st := range sealed {
			live[st] = sealed[st].Live
			for r, ok := range sealed[st].Live {
				if !ok {
					dead[act.Stripes[st][r].Node] = true
				}
			}
		}
		k = layout.Tail(act.Start, w, sealed)
		plan, err := layout.PlanSettle(act.Start, k, w, sealed)
		if err != nil {
			return err
		}
		// Replicas that disagree with a fill are closed out as stale,
		// not settled (the layout marks them; repair refills them).
		var dropped []string
		for _, sp := range plan {
			for _, r := range sp.Stale {
				sealed[sp.Stripe].Live[r] = false
				dropped = append(dropped, fmt.Sprintf("stripe %d %s", sp.Stripe, act.Stripes[sp.Stripe][r]))
			}
		}
		if len(dropped) > 0 {
			s.metrics.settleDropped.Add(float64(len(dropped)))
			s.log.Warn("log replicas disagree with an earlier settle attempt's fills; closing them out as stale",
				"log", q.name, "segment", act.ID, "epoch", epoch, "replicas", dropped)
		}
		copies, fills, unsure, err := s.settle(ctx, rec, act, plan, sealed, epoch)
		if err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		for st, rs := range unsure {
			for _, r := range rs {
				sealed[st].Live[r] = false
				s.metrics.settleDropped.Inc()
			}
			if !slices.Contains(sealed[st].Live, true) {
				return fmt.Errorf("settle: stripe %d: every live replica has a write in flight that settle could not read", st)
			}
		}
		s.log.Info("log segment sealed and settled", "log", q.name, "segment", act.ID, "epoch", epoch,
			"start", act.Start, "tail", k, "copies", copies, "fills", fills, "unreachable", keys(dead), "unsettled", len(unsure))
	} else if n := len(old.Segments); n > 0 {
		k = old.Segments[n-1].End
	}
	if k < rec.TrimBefore {
		k = rec.TrimBefore
	}
	fresh, err := s.placeStripes(rec, dead)
	if err != nil {
		return err
	}
	nl, err := layout.Recover(old, w, k, live, fresh, rec.TrimBefore)
	if err != nil {
		return err
	}
	var t meta.Txn
	t.If(layoutKey(q.name), li.ModRev)
	t.If(hostKey(q.name), hi.ModRev)
	t.Put(layoutKey(q.name), mustJSON(nl))
	if _, err := s.cfg.KV.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("layout or host changed during recovery: %w", err)
		}
		return err
	}
	q.mu.Lock()
	q.epoch, q.tail, q.rec, q.ready = nl.Epoch, k, rec, true
	q.leases = map[uint64]*seqLease{}
	q.mu.Unlock()
	s.log.Info("log sequencer ready", "log", q.name, "epoch", nl.Epoch, "tail", k, "segments", len(nl.Segments))
	return nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sealTimeout bounds one seal: a dead node's refused connection fails at
// once; a hung node must not hold recovery for long.
const sealTimeout = time.Second

// sealSegment seals every replica of seg at epoch, in parallel.
func (s *Service) sealSegment(ctx context.Context, rec layout.Record, seg layout.Segment, epoch uint64) []layout.SealedStripe {
	out := make([]layout.SealedStripe, len(seg.Stripes))
	var wg sync.WaitGroup
	for st, reps := range seg.Stripes {
		out[st] = layout.SealedStripe{Live: make([]bool, len(reps)), Runs: make([][]layout.Run, len(reps)), Fills: make([][]layout.Run, len(reps))}
		for r, rep := range reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := &zlogpb.SealRequest{Ref: &zlogpb.StripeRef{Log: rec.ID, Segment: seg.ID, Stripe: uint32(st)},
					Device: rep.Device, Epoch: epoch, Stripes: uint32(rec.Stripes)}
				resp, err := s.callNode(ctx, rep.Node, sealTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
					return c.Seal(ctx, req)
				}, func(ctx context.Context) (any, error) { return s.Seal(ctx, req) })
				if err != nil {
					s.log.Info("seal failed; replica treated as unreachable", "log", rec.Name, "segment", seg.ID, "stripe", st, "node", rep.Node, "err", err)
					return
				}
				sr := resp.(*zlogpb.SealResponse)
				out[st].Live[r] = true
				out[st].Runs[r] = runsOf(sr.Runs)
				out[st].Fills[r] = runsOf(sr.FillRuns)
			}()
		}
	}
	wg.Wait()
	return out
}

// runsOf decodes runs sent as start, end pairs.
func runsOf(pairs []uint64) []layout.Run {
	var runs []layout.Run
	for i := 0; i+1 < len(pairs); i += 2 {
		runs = append(runs, layout.Run{Start: pairs[i], End: pairs[i+1]})
	}
	return runs
}

// callNode calls a peer's Log service with a timeout, or runs local for
// this node.
func (s *Service) callNode(ctx context.Context, node string, timeout time.Duration,
	remote func(context.Context, zlogpb.LogClient) (any, error), local func(context.Context) (any, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if node == s.cfg.Self {
		return local(ctx)
	}
	addr, ok := s.cfg.Address(node)
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "log: node %s has no address", node)
	}
	c, err := s.peers.pool.Get(addr)
	if err != nil {
		return nil, err
	}
	return remote(ctx, c)
}

// settleChunk bounds the ops of one settle RPC.
const settleChunk = 1024

// settle applies a settle plan to a sealed segment: copies first (each
// entry read from a replica holding it), then fills. It returns, per
// stripe, the replicas whose entry it could not read (a write still in
// flight there when it gave up): the position is filled on the others,
// and the write may still land, so the layout must mark them stale.
func (s *Service) settle(ctx context.Context, rec layout.Record, seg layout.Segment, plan []layout.StripeSettle, sealed []layout.SealedStripe, epoch uint64) (int, int, map[int][]int, error) {
	var mu sync.Mutex
	var firstErr error
	copies, fills := 0, 0
	unsure := map[int][]int{}
	var wg sync.WaitGroup
	for _, sp := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := &zlogpb.StripeRef{Log: rec.ID, Segment: seg.ID, Stripe: uint32(sp.Stripe)}
			reps := seg.Stripes[sp.Stripe]
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			for _, c := range sp.Copies {
				// Read the entry from every holder: one whose write
				// failed, or is still in flight after the wait, is closed
				// out (stale), since what it ends up holding is unknown;
				// the entry comes from any other. Only if none has it is
				// the position filled.
				have := c.Have
				if len(have) == 0 {
					have = []int{c.From}
				}
				var e *zlogpb.Op
				for _, h := range have {
					got, err := s.fetch(ctx, reps[h], ref, c.Pos)
					if err != nil {
						fail(err)
						return
					}
					if got == nil {
						mu.Lock()
						if !slices.Contains(unsure[sp.Stripe], h) {
							unsure[sp.Stripe] = append(unsure[sp.Stripe], h)
						}
						mu.Unlock()
					} else if e == nil {
						e = got
					}
				}
				var op *zlogpb.Op
				if e == nil {
					op = &zlogpb.Op{Ref: ref, Pos: c.Pos, Kind: zlogpb.Kind_KIND_FILL, Token: make([]byte, 16), Epoch: epoch}
				} else {
					op = &zlogpb.Op{Ref: ref, Pos: c.Pos, Kind: e.Kind, Token: e.Token, Data: e.Data, Epoch: epoch}
				}
				for _, to := range c.To {
					if err := s.settleWrite(ctx, reps[to], []*zlogpb.Op{op}); err != nil {
						fail(err)
						return
					}
				}
				mu.Lock()
				copies++
				mu.Unlock()
			}
			var ops []*zlogpb.Op
			flush := func() bool {
				if len(ops) == 0 {
					return true
				}
				for r, rep := range reps {
					if !sealed[sp.Stripe].Live[r] {
						continue
					}
					if err := s.settleWrite(ctx, rep, ops); err != nil {
						fail(err)
						return false
					}
				}
				mu.Lock()
				fills += len(ops)
				mu.Unlock()
				ops = ops[:0]
				return true
			}
			for _, run := range sp.Fills {
				for l := run.Start; l < run.End; l++ {
					ops = append(ops, &zlogpb.Op{Ref: ref, Pos: layout.Position(l, sp.Stripe, rec.Stripes),
						Kind: zlogpb.Kind_KIND_FILL, Token: make([]byte, 16), Epoch: epoch})
					if len(ops) == settleChunk && !flush() {
						return
					}
				}
			}
			flush()
		}()
	}
	wg.Wait()
	s.metrics.settleCopies.Add(float64(copies))
	s.metrics.settleFills.Add(float64(fills))
	return copies, fills, unsure, firstErr
}

// fetch reads the entry at pos from a replica (waiting out an in-flight
// write); nil means it holds nothing there.
func (s *Service) fetch(ctx context.Context, rep layout.Replica, ref *zlogpb.StripeRef, pos uint64) (*zlogpb.Op, error) {
	for attempt := 0; attempt < 200; attempt++ {
		req := &zlogpb.DumpRequest{Ref: ref, Device: rep.Device, From: pos, Limit: 1}
		resp, err := s.callNode(ctx, rep.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
			return c.Dump(ctx, req)
		}, func(ctx context.Context) (any, error) { return s.Dump(ctx, req) })
		if err != nil {
			return nil, fmt.Errorf("fetch %d from %s: %w", pos, rep.Node, err)
		}
		d := resp.(*zlogpb.DumpResponse)
		if len(d.Entries) > 0 && d.Entries[0].Pos == pos {
			return d.Entries[0], nil
		}
		// Skipped: pending (retry) or gone (a failed write).
		time.Sleep(5 * time.Millisecond)
	}
	return nil, nil
}

// settleWrite writes ops into a sealed replica.
func (s *Service) settleWrite(ctx context.Context, rep layout.Replica, ops []*zlogpb.Op) error {
	for _, op := range ops {
		op.Device = rep.Device
	}
	req := &zlogpb.WriteRequest{Ops: ops, Settle: true}
	resp, err := s.callNode(ctx, rep.Node, s.cfg.Options.PeerTimeout, func(ctx context.Context, c zlogpb.LogClient) (any, error) {
		return c.Replicate(ctx, req)
	}, func(ctx context.Context) (any, error) { return s.Replicate(ctx, req) })
	if err != nil {
		return fmt.Errorf("settle write to %s: %w", rep.Node, err)
	}
	for i, r := range resp.(*zlogpb.WriteResponse).Results {
		switch r.Status {
		case zlogpb.Status_STATUS_OK:
		case zlogpb.Status_STATUS_TAKEN:
			// Another settle (a previous attempt) got there first with the
			// same decision, or a copy raced a fill: the plan is re-made
			// on the next recovery if it matters; same-token takes are OK.
			if string(r.Token) != string(ops[i].Token) {
				return fmt.Errorf("settle write to %s: position %d holds another entry", rep.Node, ops[i].Pos)
			}
		default:
			return fmt.Errorf("settle write to %s position %d: %v %s", rep.Node, ops[i].Pos, r.Status, r.Message)
		}
	}
	return nil
}
