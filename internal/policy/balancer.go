package policy

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Balancer is the Mantle-style balancer hook (Malacology §4.1, Mantle):
// the Curator master asks it, before each scan, which node scans which
// map partition. The policy sees per-node load and per-partition load:
//
//	when(nodes, units, self)          -> boolean: rebalance now?
//	where(nodes, units, self)         -> {node_id = share}: target load split
//	howmuch(nodes, units, targets)    -> {unit_name = node_id} (optional)
//
// Without howmuch, units are dealt biggest first to the node furthest
// below its target (Mantle's "big_first"). When when() says no, the
// previous assignment stands. Units assigned to unknown or down nodes
// stay with the master.
type Balancer struct{ m *Manager }

// Balancer returns the balancer hook's assigner (the server adds the
// remote page reader to make a curator.ScanBalancer).
func (m *Manager) Balancer() Balancer { return Balancer{m: m} }

// Active reports whether a balancer policy is set.
func (b Balancer) Active() bool { return b.m.single(HookBalancer) != nil }

// AssignPartitions returns the assignment, or nil (the master scans
// everything) when no balancer policy is set or every version failed.
func (b Balancer) AssignPartitions(s *model.Snapshot, self model.NodeID, parts []curator.PartitionLoad) map[string]model.NodeID {
	sl := b.m.single(HookBalancer)
	if sl == nil {
		return nil
	}
	var out map[string]model.NodeID
	_, err := b.m.call(sl, func(v *Version) error {
		a, err := assign(context.Background(), v, s, self, parts)
		out = a.Assignment
		return err
	})
	if err != nil {
		return nil
	}
	return out
}

// Assignment is a balancer decision with its reasons (for `policy test`).
type Assignment struct {
	Rebalance  bool                    `json:"rebalance"`
	Targets    map[string]float64      `json:"targets,omitempty"`
	Assignment map[string]model.NodeID `json:"assignment"`
	Moved      int                     `json:"moved"`
}

// assign runs one balancer decision.
func assign(ctx context.Context, v *Version, s *model.Snapshot, self model.NodeID, parts []curator.PartitionLoad) (Assignment, error) {
	up := map[model.NodeID]bool{}
	for _, n := range s.Nodes {
		if n.Up {
			up[n.ID] = true
		}
	}
	if len(s.Nodes) == 0 {
		up[self] = true // a single node without a cluster view
	}
	prev := make(map[string]model.NodeID, len(parts))
	owned := map[model.NodeID]int{}
	scanned := map[model.NodeID]int{}
	for _, p := range parts {
		n := p.Node
		if n == "" || !up[n] {
			n = self
		}
		prev[p.Name] = n
		owned[n]++
		scanned[n] += p.Records
	}
	var nodes []any
	for _, n := range s.Nodes {
		nv := nodeView(s, n)
		nv["partitions"] = owned[n.ID]
		nv["records"] = scanned[n.ID]
		nv["self"] = n.ID == self
		nodes = append(nodes, nv)
	}
	units := make([]any, 0, len(parts))
	for _, p := range parts {
		units = append(units, map[string]any{"name": p.Name, "records": p.Records, "node": string(prev[p.Name])})
	}
	res := Assignment{Assignment: prev}
	err := v.prog.Run(ctx, sandbox.RunOptions{Seed: uint64(s.Now.UnixNano())}, func(sess *sandbox.Session) error {
		nv, uv := sess.Ref(nodes), sess.Ref(units)
		r, err := sess.Call("when", nv, uv, string(self))
		if err != nil {
			return err
		}
		if len(r) == 0 {
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: "when returned nothing: want true or false"}
		}
		rb, ok := r[0].(bool)
		if !ok {
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("when returned %s: want true or false", describe(r[0]))}
		}
		res.Rebalance = rb
		if !rb {
			return nil
		}
		r, err = sess.Call("where", nv, uv, string(self))
		if err != nil {
			return err
		}
		targets, err := shares(v, r, up)
		if err != nil {
			return err
		}
		res.Targets = targets
		if sess.Has("howmuch") {
			r, err = sess.Call("howmuch", nv, uv, targets)
			if err != nil {
				return err
			}
			a, err := explicitAssignment(v, r, parts, up, self)
			if err != nil {
				return err
			}
			res.Assignment = a
			return nil
		}
		res.Assignment = bigFirst(parts, targets, self)
		return nil
	})
	if err != nil {
		return Assignment{}, err
	}
	for name, n := range res.Assignment {
		if prev[name] != n {
			res.Moved++
		}
	}
	return res, nil
}

// shares validates where()'s result: non-negative finite weights of up
// nodes, not all zero.
func shares(v *Version, r []any, up map[model.NodeID]bool) (map[string]float64, error) {
	bad := func(format string, args ...any) error {
		return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: "where: " + fmt.Sprintf(format, args...)}
	}
	if len(r) == 0 {
		return nil, bad("returned nothing: want {node_id = share}")
	}
	tbl, ok := r[0].(map[string]any)
	if !ok {
		return nil, bad("returned %s: want {node_id = share}", describe(r[0]))
	}
	out := map[string]float64{}
	total := 0.0
	for k, x := range tbl {
		f, ok := x.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return nil, bad("share of %s is %s: want a finite number >= 0", k, describe(x))
		}
		if !up[model.NodeID(k)] {
			return nil, bad("node %s is not an up node", k)
		}
		out[k] = f
		total += f
	}
	if total <= 0 {
		return nil, bad("every share is zero")
	}
	return out, nil
}

// explicitAssignment validates howmuch()'s result. Units it leaves out
// stay where they are.
func explicitAssignment(v *Version, r []any, parts []curator.PartitionLoad, up map[model.NodeID]bool, self model.NodeID) (map[string]model.NodeID, error) {
	if len(r) == 0 {
		return nil, &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: "howmuch returned nothing: want {unit = node_id}"}
	}
	tbl, ok := r[0].(map[string]any)
	if !ok {
		return nil, &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("howmuch returned %s: want {unit = node_id}", describe(r[0]))}
	}
	known := map[string]bool{}
	out := map[string]model.NodeID{}
	for _, p := range parts {
		known[p.Name] = true
		n := p.Node
		if n == "" || !up[n] {
			n = self
		}
		out[p.Name] = n
	}
	for k, x := range tbl {
		id, ok := x.(string)
		if !ok || !known[k] || !up[model.NodeID(id)] {
			return nil, &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("howmuch: %s = %s: want a known unit mapped to an up node", k, describe(x))}
		}
		out[k] = model.NodeID(id)
	}
	return out, nil
}

// bigFirst deals units, largest first, each to the node with the largest
// remaining deficit against its target share (ties: node ID), so the
// assignment is deterministic. Every unit weighs at least 1 so empty
// partitions spread too.
func bigFirst(parts []curator.PartitionLoad, targets map[string]float64, self model.NodeID) map[string]model.NodeID {
	type unit struct {
		name string
		w    float64
	}
	us := make([]unit, 0, len(parts))
	total := 0.0
	for _, p := range parts {
		w := float64(max(p.Records, 1))
		us = append(us, unit{p.Name, w})
		total += w
	}
	sort.Slice(us, func(i, j int) bool {
		if us[i].w != us[j].w {
			return us[i].w > us[j].w
		}
		return us[i].name < us[j].name
	})
	var ids []string
	sum := 0.0
	for id, sh := range targets {
		ids = append(ids, id)
		sum += sh
	}
	sort.Strings(ids)
	deficit := map[string]float64{}
	for _, id := range ids {
		deficit[id] = total * targets[id] / sum
	}
	out := make(map[string]model.NodeID, len(us))
	for _, u := range us {
		best := ""
		for _, id := range ids {
			if best == "" || deficit[id] > deficit[best] {
				best = id
			}
		}
		if best == "" {
			out[u.name] = self
			continue
		}
		out[u.name] = model.NodeID(best)
		deficit[best] -= u.w
	}
	return out
}
