package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
)

// Re-homing replicas of lost nodes. Repair brings a stale replica back
// when its node returns; a node that does not return (a dead disk, a
// decommissioned machine) would leave every closed segment it held one
// replica short forever, and a second failure would lose entries. After a
// node has been down for Options.ReplaceAfter, the host points each of its
// replicas in closed segments at a device on a live node (marked stale,
// layout.Rehome), and repair copies the stripe there.

// gone reports whether node has been down for ReplaceAfter, counted from
// the first time this host saw it down (a node the snapshot no longer
// lists, decommissioned, counts as down).
func (s *Service) gone(node string, snap *model.Snapshot, now time.Time) bool {
	if s.cfg.Options.ReplaceAfter < 0 || node == s.cfg.Self {
		return false
	}
	s.downMu.Lock()
	defer s.downMu.Unlock()
	if s.downSince == nil {
		s.downSince = map[string]time.Time{}
	}
	if snap.NodeUp(model.NodeID(node)) {
		delete(s.downSince, node)
		return false
	}
	since, ok := s.downSince[node]
	if !ok {
		s.downSince[node] = now
		return false
	}
	return now.Sub(since) >= s.cfg.Options.ReplaceAfter
}

// rehomeOne re-homes one replica of a hosted log whose node is gone.
func (s *Service) rehomeOne(q *sequencer) {
	now := time.Now()
	snap := s.cfg.Snapshot()
	v, ok := s.cache.get(q.name)
	if !ok || snap == nil {
		return
	}
	lost := layout.LostReplicas(v.Layout, func(n string) bool { return s.gone(n, snap, now) })
	if len(lost) == 0 {
		return
	}
	lr := lost[0]
	to, err := s.placeReplacement(v, lr, snap)
	if err != nil {
		s.log.Warn("cannot re-home a log replica of a lost node; will retry", "log", q.name, "segment", lr.Segment, "stripe", lr.Stripe, "node", lr.Node, "err", err)
		return
	}
	for attempt := 0; attempt < 20; attempt++ {
		li, err := s.cfg.KV.Get(q.ctx, layoutKey(q.name))
		if err != nil {
			return
		}
		cur, err := decodeLayout(li.Value)
		if err != nil {
			return
		}
		nl, err := layout.Rehome(cur, lr.Segment, lr.Stripe, lr.Replica, to)
		if err != nil {
			// Trimmed, re-homed or repaired meanwhile; the next tick
			// looks again.
			s.log.Info("log replica not re-homed", "log", q.name, "segment", lr.Segment, "stripe", lr.Stripe, "err", err)
			return
		}
		if err := nl.Validate(v.Record.Stripes); err != nil {
			s.log.Warn("re-homed layout invalid; not installed", "log", q.name, "err", err)
			return
		}
		var t meta.Txn
		t.If(layoutKey(q.name), li.ModRev)
		t.Put(layoutKey(q.name), mustJSON(nl))
		if _, err := s.cfg.KV.Commit(q.ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else if err != nil {
			return
		}
		s.metrics.rehomed.Inc()
		s.log.Warn("re-homed a log replica of a lost node; repair copies the stripe to it", "log", q.name,
			"segment", lr.Segment, "stripe", lr.Stripe, "from", lr.Node, "to", to.Device)
		return
	}
}

// placeReplacement chooses the device that takes over a lost replica: on
// the lost device's tier when the snapshot still knows it (else any), on a
// node holding no other replica of the stripe when one is up, and never on
// a device the stripe uses.
func (s *Service) placeReplacement(v view, lr layout.StaleReplica, snap *model.Snapshot) (layout.Replica, error) {
	var seg layout.Segment
	for _, g := range v.Layout.Segments {
		if g.ID == lr.Segment {
			seg = g
		}
	}
	stripe := seg.Stripes[lr.Stripe]
	lostDev := stripe[lr.Replica].Device
	tier := model.TierAny
	if d, ok := snap.Device(model.DeviceID(lostDev)); ok && d.Tier != "" {
		tier = d.Tier
	}
	usedDev, usedNode := map[string]bool{}, map[string]bool{}
	for i, r := range stripe {
		usedDev[r.Device] = true
		if i != lr.Replica {
			usedNode[r.Node] = true
		}
	}
	s.rngMu.Lock()
	rng := rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
	s.rngMu.Unlock()
	var lastErr error
	// First on a node of its own (what survives a node loss), then, on
	// a cluster too small for that, on any other device.
	for _, distinctNode := range []bool{true, false} {
		for _, t := range []model.Tier{tier, model.TierAny} {
			var devs []model.Device
			for _, d := range snap.Devices {
				if usedDev[string(d.ID)] || (distinctNode && usedNode[string(d.Node)]) {
					continue
				}
				devs = append(devs, d)
			}
			sub := model.NewSnapshot(snap.Now, snap.Nodes, devs)
			vec := model.Vector{Counts: map[model.Tier]int{t: 1}}
			reps, err := s.cfg.Policy.Place(sub, placement.Request{Vector: vec, Bytes: s.cfg.Options.SegmentBytes}, rng)
			if err == nil && len(reps) == 1 {
				node := string(reps[0].Node)
				if d, ok := snap.Device(reps[0].Device); ok && node == "" {
					node = string(d.Node)
				}
				return layout.Replica{Node: node, Device: string(reps[0].Device)}, nil
			}
			if err == nil {
				err = fmt.Errorf("placement returned %d replicas", len(reps))
			}
			lastErr = err
			if t == model.TierAny {
				break
			}
		}
	}
	return layout.Replica{}, lastErr
}
