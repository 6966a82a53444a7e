package curator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// scanPage is how many records one Scan call returns: large enough to
// amortise the call, small enough to bound memory per partition.
const scanPage = 1024

// partitions splits a map keyed by 16-hex-digit IDs into 16 key ranges by
// first digit, so partitions scan in parallel.
func partitions(prefix string) [][2][]byte {
	const hex = "0123456789abcdef"
	out := make([][2][]byte, 0, 16)
	for i := 0; i < 16; i++ {
		start := []byte(prefix + hex[i:i+1])
		end := meta.PrefixEnd(start)
		out = append(out, [2][]byte{start, end})
	}
	return out
}

// scanRange streams every item in [start, end) to fn, page by page.
func scanRange(ctx context.Context, kv meta.KV, start, end []byte, fn func(meta.Item) error) (int, error) {
	n := 0
	for {
		items, err := kv.Scan(ctx, start, end, scanPage)
		if err != nil {
			return n, err
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return n, err
			}
			n++
		}
		if len(items) < scanPage {
			return n, nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// mapParallel runs fn over the partitions with at most par in flight.
func mapParallel(ctx context.Context, parts [][2][]byte, par int, fn func(ctx context.Context, start, end []byte) error) error {
	sem := make(chan struct{}, par)
	errc := make(chan error, len(parts))
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, p[0], p[1]); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// extentInfo is one extent record as the scan saw it.
type extentInfo struct {
	id     uint64
	modRev int64
	rec    meta.Extent
}

// scanResult is the shuffled, joined output of a scan.
type scanResult struct {
	egroups []decide.Egroup
	// records keeps each egroup's record for the executor.
	records map[uint64]meta.Egroup
	// deadExtents are unreferenced extents older than the grace period.
	deadExtents []extentInfo
	// liveByEgroup lists referenced extents per egroup (for compaction).
	liveByEgroup map[uint64][]extentInfo
	dangling     []string
	records0     int // records scanned
	maps         []string
}

// scan reads the maps and joins them. A partial scan reads the egroup and
// access maps only (recovery, scrubbing); a full scan also reads objects,
// uploads and extents (data removal, GC, consistency).
func (c *Curator) scan(ctx context.Context, full bool) (*scanResult, error) {
	kv := c.kv
	res := &scanResult{records: map[uint64]meta.Egroup{}, liveByEgroup: map[uint64][]extentInfo{}}
	var mu sync.Mutex
	egRevs := map[uint64]int64{}

	// Map: egroups.
	res.maps = append(res.maps, "egroups")
	err := mapParallel(ctx, partitions(meta.PrefixEgroup), c.opts.ScanParallelism, func(ctx context.Context, s, e []byte) error {
		_, err := scanRange(ctx, kv, s, e, func(it meta.Item) error {
			id, err := meta.ParseID(it.Key)
			if err != nil {
				return fmt.Errorf("curator: bad egroup key %q", it.Key)
			}
			var eg meta.Egroup
			if err := meta.Decode(it.Value, &eg); err != nil {
				return err
			}
			mu.Lock()
			res.records[id] = eg
			egRevs[id] = it.ModRev
			res.records0++
			mu.Unlock()
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// Map: access records.
	res.maps = append(res.maps, "access")
	access := map[uint64]meta.Access{}
	_, err = scanRange(ctx, kv, []byte(meta.PrefixAccess), meta.PrefixEnd([]byte(meta.PrefixAccess)), func(it meta.Item) error {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			return nil
		}
		var a meta.Access
		if meta.Decode(it.Value, &a) == nil {
			access[id] = a
		}
		res.records0++
		return nil
	})
	if err != nil {
		return nil, err
	}

	live := map[uint64]int64{} // egroup -> live payload bytes
	liveN := map[uint64]int{}  // egroup -> live extents
	deadN := map[uint64]int{}  // egroup -> dead extents
	if full {
		// Map: object and part records emit referenced extent IDs.
		res.maps = append(res.maps, "objects", "uploads", "extents")
		refs := map[uint64]bool{}
		var refOwners []refOwner
		collect := func(owner string, xs []meta.ExtentRef) {
			for _, x := range xs {
				refs[x.ID] = true
				refOwners = append(refOwners, refOwner{owner: owner, id: x.ID})
			}
		}
		_, err = scanRange(ctx, kv, []byte(meta.PrefixObject), meta.PrefixEnd([]byte(meta.PrefixObject)), func(it meta.Item) error {
			var o meta.Object
			if err := meta.Decode(it.Value, &o); err != nil {
				return err
			}
			b, k, _ := meta.SplitObjectKey(it.Key)
			collect(b+"/"+k, o.Extents)
			res.records0++
			return nil
		})
		if err != nil {
			return nil, err
		}
		_, err = scanRange(ctx, kv, []byte(meta.PrefixUpload), meta.PrefixEnd([]byte(meta.PrefixUpload)), func(it meta.Item) error {
			var p meta.Part
			if meta.Decode(it.Value, &p) == nil && len(p.Extents) > 0 {
				collect("upload part "+string(it.Key), p.Extents)
			}
			res.records0++
			return nil
		})
		if err != nil {
			return nil, err
		}
		// Map: extents, joined with refs (reduce by extent ID).
		extents := map[uint64]extentInfo{}
		err = mapParallel(ctx, partitions(meta.PrefixExtent), c.opts.ScanParallelism, func(ctx context.Context, s, e []byte) error {
			_, err := scanRange(ctx, kv, s, e, func(it meta.Item) error {
				id, err := meta.ParseID(it.Key)
				if err != nil {
					return fmt.Errorf("curator: bad extent key %q", it.Key)
				}
				var x meta.Extent
				if err := meta.Decode(it.Value, &x); err != nil {
					return err
				}
				mu.Lock()
				extents[id] = extentInfo{id: id, modRev: it.ModRev, rec: x}
				res.records0++
				mu.Unlock()
				return nil
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		now := c.now()
		for id, x := range extents {
			if refs[id] {
				live[x.rec.Egroup] += x.rec.Len
				liveN[x.rec.Egroup]++
				res.liveByEgroup[x.rec.Egroup] = append(res.liveByEgroup[x.rec.Egroup], x)
				continue
			}
			deadN[x.rec.Egroup]++
			if now.Sub(time.Unix(0, x.rec.Ctime)) >= c.opts.Decide.GarbageGrace {
				res.deadExtents = append(res.deadExtents, x)
			}
		}
		sort.Slice(res.deadExtents, func(i, j int) bool { return res.deadExtents[i].id < res.deadExtents[j].id })
		// Consistency check: every reference must resolve to an extent
		// and every referenced extent to an egroup.
		for _, r := range refOwners {
			x, ok := extents[r.id]
			if ok {
				_, ok = res.records[x.rec.Egroup]
			}
			if !ok {
				if why := unresolved(ctx, kv, r.id); why != "" {
					res.dangling = append(res.dangling, r.owner+" → "+why)
				}
			}
		}
		for id := range res.liveByEgroup {
			xs := res.liveByEgroup[id]
			sort.Slice(xs, func(i, j int) bool { return xs[i].rec.Off < xs[j].rec.Off })
		}
	}

	// Reduce: one joined view per egroup.
	ids := make([]uint64, 0, len(res.records))
	for id := range res.records {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		eg := res.records[id]
		d := decide.Egroup{ID: id, ModRev: egRevs[id], Open: eg.State == meta.EgroupOpen, Writer: eg.Writer,
			Size: eg.Size, Vector: eg.Vector, Mtime: time.Unix(0, eg.Mtime)}
		for _, r := range eg.Replicas {
			d.Replicas = append(d.Replicas, decide.Replica{Replica: r.Replica(), Bad: r.Bad})
		}
		if a, ok := access[id]; ok {
			d.Atime, d.Reads = time.Unix(0, a.Atime), a.WinReads
		}
		if full {
			// Live bytes are encoded sizes on disk, to compare with Size.
			d.LiveBytes = encodedLive(res.liveByEgroup[id])
			d.LiveExtents = liveN[id]
			d.DeadExtents = deadN[id]
		} else {
			d.LiveBytes = eg.Size
			d.LiveExtents = 1
		}
		res.egroups = append(res.egroups, d)
	}
	_ = live
	return res, nil
}

type refOwner struct {
	owner string
	id    uint64
}

func encodedLive(xs []extentInfo) int64 {
	var n int64
	for _, x := range xs {
		n += encodedLen(x.rec.Len)
	}
	return n
}

// snapshotFor returns the placement snapshot with long-down nodes' devices
// marked failed.
func (c *Curator) snapshotFor() *model.Snapshot {
	s := c.topo.Snapshot()
	c.mu.Lock()
	now := c.now()
	for _, n := range s.Nodes {
		if !n.Up {
			if _, ok := c.downSince[n.ID]; !ok {
				c.downSince[n.ID] = now
			}
		} else {
			delete(c.downSince, n.ID)
		}
	}
	down := make(map[model.NodeID]time.Time, len(c.downSince))
	for k, v := range c.downSince {
		down[k] = v
	}
	c.mu.Unlock()
	s = model.NewSnapshot(now, s.Nodes, s.Devices).WithSelf(s.Self)
	return decide.Health(s, down, c.opts.Decide)
}

// unresolved re-reads a reference the scan could not resolve and says
// what is missing now ("" if it resolves). The maps are read one after
// another, not as one snapshot: a write landing between the egroup scan
// and the object scan references an egroup the scan never saw, which is
// not a dangling reference.
func unresolved(ctx context.Context, kv meta.KV, id uint64) string {
	var x meta.Extent
	if _, err := meta.GetRecord(ctx, kv, meta.ExtentKey(id), &x); errors.Is(err, meta.ErrNotFound) {
		return "missing extent " + meta.FormatID(id)
	} else if err != nil {
		return "" // cannot tell now; the next scan checks again
	}
	var eg meta.Egroup
	if _, err := meta.GetRecord(ctx, kv, meta.EgroupKey(x.Egroup), &eg); errors.Is(err, meta.ErrNotFound) {
		return fmt.Sprintf("extent %s → missing egroup %s", meta.FormatID(id), meta.FormatID(x.Egroup))
	}
	return ""
}
