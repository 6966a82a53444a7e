package curator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// The master's side of a shuffled full scan (shuffle.go describes the
// three steps): it assigns the reducers, tells each reduce which
// contributions to join, and assembles the scan result from the egroups,
// the aggregates and the extents the egroup reducers send.

// canShuffle says whether a full scan with this assignment, read at rev,
// can shuffle: a balancer whose nodes take part, a store here, and a
// snapshot every node reads (rev > 0).
func (c *Curator) canShuffle(assign map[string]model.NodeID, rev int64) bool {
	_, ok := c.opts.Balancer.(ShuffleBalancer)
	return ok && assign != nil && rev > 0 && c.opts.Shuffle != nil && c.opts.Self != ""
}

// reducers routes a map's ID partitions to the nodes assigned them (or
// this one).
func (c *Curator) reducers(parts []Partition, assign map[string]model.NodeID) []ShuffleRoute {
	out := make([]ShuffleRoute, len(parts))
	for i, p := range parts {
		node := assign[p.Name]
		if node == "" {
			node = c.opts.Self
		}
		out[i] = ShuffleRoute{Part: p.Name, Lo: p.Lo, Hi: p.Hi, Node: node}
	}
	return out
}

// shuffledScan runs a full scan whose joins run on the reducers, reading
// kv (the snapshot at rev) and, for the dangling references it reports,
// metaKV; it fills res (res.shuffle names the shuffle, also on error).
func (c *Curator) shuffledScan(ctx context.Context, kv PageScanner, metaKV meta.KV, rev int64, assign map[string]model.NodeID, res *scanResult) error {
	var mu sync.Mutex
	id := fmt.Sprintf("%s-%d", c.opts.Self, res.start.UnixNano())
	res.shuffle = id
	res.maps = append(res.maps, "egroups", "access", "uploads", "objects", "versions", "extents")
	egParts, err := idPartitions(ctx, kv, "egroups", rev)
	if err != nil {
		return err
	}
	extParts, err := idPartitions(ctx, kv, "extents", rev)
	if err != nil {
		return err
	}

	// Egroup partition k is reduced where extent partition k is: IDs of
	// both come from sequences in the order data is written, so an
	// egroup's extents mostly fall in the extent partition of the same
	// index, and step 2's extents mostly stay on their node (a push to
	// the node's own store, not encoded or sent).
	assign = maps.Clone(assign)
	for k := range egParts {
		if k < len(extParts) {
			assign[egParts[k].Name] = assign[extParts[k].Name]
		}
	}

	// 1. Owner maps: references to the extent reducers.
	_, _, sources, err := c.scanOwners(ctx, kv, rev, assign, res, &mu, &ShuffleSpec{ID: id, Routes: c.reducers(extParts, assign)})
	if err != nil {
		return err
	}

	// 2. Extent reduces: extents to the egroup reducers; dangling
	// references here.
	toEgroups := c.reducers(egParts, assign)
	for i := range extParts {
		extParts[i].Shuffle = &ShuffleSpec{ID: id, Routes: toEgroups, Expect: sources[extParts[i].Name]}
	}
	var unres [16][]uint64
	var sent [16]*shuffled
	err = c.scanPartitions(ctx, kv, extParts, assign, res, &mu, func(i int, r MapRecord) {
		switch {
		case r.shuffled != nil:
			sent[i] = r.shuffled
		case r.isRef:
			unres[i] = append(unres[i], r.ID)
		}
	}, func(i int) { unres[i], sent[i] = nil, nil })
	if err != nil {
		return err
	}
	fromExtents := map[string][]ShuffleSource{}
	for i, sh := range sent {
		if sh == nil {
			return fmt.Errorf("curator: shuffle %s: %s was mapped without shuffling its extents", id, extParts[i].Name)
		}
		for _, n := range sh.counts {
			fromExtents[n.Dst] = append(fromExtents[n.Dst], ShuffleSource{Src: extParts[i].Name, Mapper: sh.mapper, Count: n.Count})
		}
	}

	// 3. Egroup reduces: egroups, aggregates and the extents to act on.
	pols, polOK := c.transformPolicies(ctx)
	var policyBuckets []string
	for name, p := range pols {
		if p != (decide.TransformPolicy{}) {
			policyBuckets = append(policyBuckets, name)
		}
	}
	listAll := len(policyBuckets) > maxPolicyBuckets
	if listAll {
		policyBuckets = nil
	}
	slices.Sort(policyBuckets)
	garbageBefore := res.start.UnixNano() - int64(c.opts.Decide.GarbageGrace)
	for i := range egParts {
		egParts[i].Shuffle = &ShuffleSpec{ID: id, Expect: fromExtents[egParts[i].Name], GarbageBefore: garbageBefore,
			PolicyBuckets: policyBuckets, ListAll: listAll}
	}
	var egs [16]egroupRecs
	var interners [16]*shapeInterner
	var aggs [16][]*egroupAgg
	var ships [16]extentRecs
	for i := range ships {
		ships[i].run.s = res.spill
	}
	var reduced [16]bool
	err = c.scanPartitions(ctx, kv, egParts, assign, res, &mu, func(i int, r MapRecord) {
		switch {
		case r.shuffled != nil:
			reduced[i] = true
		case r.agg != nil:
			aggs[i] = append(aggs[i], r.agg)
		case r.isExtent:
			ships[i].add(r)
		case r.compact.shape != nil: // a worker's compact stream
			egs[i].add(r.compact)
		default:
			if interners[i] == nil {
				interners[i] = newShapeInterner()
			}
			egs[i].add(interners[i].rec(r))
		}
	}, func(i int) {
		egs[i], aggs[i], reduced[i] = egroupRecs{}, nil, false
		ships[i].discard()
	})
	if err == nil {
		err = checkReduced(egParts, reduced[:], aggs[:])
	}
	if err != nil {
		for i := range ships {
			ships[i].discard()
		}
		return err
	}
	res.egroups = viewsOf(egs[:])

	// The aggregates fill in what only a full scan knows.
	res.bucketOf = map[uint64]string{}
	res.listed = make([]bool, len(res.egroups))
	for i := range res.egroups {
		res.egroups[i].TailKnown = true
	}
	for i := range aggs {
		for _, g := range aggs[i] {
			if g.firstBucket != 0 {
				res.bucketOf[g.egroup] = g.names[g.firstBucket-1]
			}
			ei, known := res.egroupIndex(g.egroup)
			if !known {
				continue
			}
			d := &res.egroups[ei]
			d.LiveExtents, d.LiveBytes, d.DeadExtents, d.TailEnd = int(g.liveN), g.liveBytes, int(g.deadN), g.tailEnd
			res.listed[ei] = g.listed
			if !polOK {
				continue
			}
			for k, b := range g.buckets {
				var p decide.TransformPolicy
				if b != 0 {
					p = pols[g.names[b-1]]
				}
				if k == 0 {
					d.Policy = p
				} else {
					d.Policy = foldPolicy(d.Policy, p)
				}
			}
		}
		aggs[i] = nil
	}

	// The extents sent: garbage, dangling, dedup and the listed egroups'
	// live extents.
	xs, fps := joinExtentParts(res.spill, ships[:])
	var dangling []uint64
	for i := range unres {
		dangling = append(dangling, unres[i]...)
	}
	liveN := make([]int32, len(res.egroups)+1)
	for k := range xs {
		x := &xs[k]
		ei, known := res.egroupIndex(x.egroup)
		switch {
		case x.live && !known:
			dangling = append(dangling, x.id)
		case x.live && res.listed[ei]:
			liveN[ei]++
		case !x.live && res.start.Sub(time.Unix(0, x.ctime)) >= c.opts.Decide.GarbageGrace:
			res.deadExtents = append(res.deadExtents, extentInfo{id: x.id, modRev: x.modRev,
				rec: meta.Extent{Egroup: x.egroup, Off: x.off, Len: x.len, Ctime: x.ctime}})
		}
	}
	// A listed egroup's list must be whole: a rewrite copies exactly the
	// extents in it.
	for i := range res.egroups {
		if d := &res.egroups[i]; res.listed[i] && int(liveN[i]) != d.LiveExtents {
			return fmt.Errorf("curator: shuffle %s: egroup %016x has %d live extents and %d were sent", id, d.ID, d.LiveExtents, liveN[i])
		}
	}
	res.indexLive(xs, liveN, func(x *extentRec) (int, bool) {
		ei, known := res.egroupIndex(x.egroup)
		return ei, x.live && known && res.listed[ei]
	})
	res.dedup = dedupGroups(xs, fps)
	res.spilled = res.spill.mappedBytes()
	return c.reportDangling(ctx, metaKV, res, dangling)
}

// checkReduced verifies that every egroup partition was reduced (its
// stream ended naming its reducer) and that its aggregates account for
// every extent the extent reducers sent it: a partition mapped without
// its reduce would otherwise look like egroups without extents.
func checkReduced(parts []Partition, reduced []bool, aggs [][]*egroupAgg) error {
	for i, p := range parts {
		if !reduced[i] {
			return fmt.Errorf("curator: shuffle %s: %s was not reduced", p.Shuffle.ID, p.Name)
		}
		want := int64(0)
		for _, x := range p.Shuffle.Expect {
			want += int64(x.Count)
		}
		got := int64(0)
		for _, g := range aggs[i] {
			got += g.liveN + g.deadN
		}
		if got != want {
			return fmt.Errorf("curator: shuffle %s: %s accounts for %d extents, %d were sent to it", p.Shuffle.ID, p.Name, got, want)
		}
	}
	return nil
}
