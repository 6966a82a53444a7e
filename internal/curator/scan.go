package curator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// scanPage is how many records one Scan call returns: large enough to
// amortise the call, small enough to bound memory per partition.
const scanPage = 1024

// scanRange streams every item in [start, end) to fn, page by page.
func scanRange(ctx context.Context, kv pageScanner, start, end []byte, fn func(meta.Item) error) (int, error) {
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

// visitRange is scanRange for the map stage's hot loops: on a store that
// offers cursors (Pebble) the item fn gets aliases the store's memory and
// is valid only during the call — fn decodes or copies what it keeps.
func visitRange(ctx context.Context, kv pageScanner, start, end []byte, fn func(meta.Item) error) (int, error) {
	cs, ok := kv.(meta.CursorStore)
	if !ok {
		return scanRange(ctx, kv, start, end, fn)
	}
	cur, err := cs.Cursor(ctx, start, end)
	if err != nil {
		return 0, err
	}
	defer cur.Close()
	n := 0
	for {
		k, v, rev, ok := cur.Next()
		if !ok {
			return n, cur.Err()
		}
		if err := fn(meta.Item{Key: k, Value: v, ModRev: rev}); err != nil {
			return n, err
		}
		n++
	}
}

// pager reads the items of [start, end) a page at a time, on demand, for
// a merge join that walks one range alongside another. On a store that
// offers cursors it walks one instead, and an item is then valid only
// until the next call (see visitRange); close releases it.
type pager struct {
	kv         pageScanner
	start, end []byte
	items      []meta.Item
	i          int
	done       bool
	read       int // items fetched so far
	cur        *meta.Cursor
}

// close releases the pager's cursor, if it opened one.
func (p *pager) close() {
	if p.cur != nil {
		p.cur.Close()
	}
}

// next returns the next item, or false at the end of the range.
func (p *pager) next(ctx context.Context) (meta.Item, bool, error) {
	if cs, ok := p.kv.(meta.CursorStore); ok && !p.done {
		if p.cur == nil {
			cur, err := cs.Cursor(ctx, p.start, p.end)
			if err != nil {
				return meta.Item{}, false, err
			}
			p.cur = cur
		}
		k, v, rev, ok := p.cur.Next()
		if !ok {
			p.done = true
			return meta.Item{}, false, p.cur.Err()
		}
		p.read++
		return meta.Item{Key: k, Value: v, ModRev: rev}, true, nil
	}
	for p.i >= len(p.items) {
		if p.done {
			return meta.Item{}, false, nil
		}
		items, err := p.kv.Scan(ctx, p.start, p.end, scanPage)
		if err != nil {
			return meta.Item{}, false, err
		}
		p.items, p.i = items, 0
		p.read += len(items)
		if len(items) < scanPage {
			p.done = true
		} else {
			p.start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
		}
	}
	p.i++
	return p.items[p.i-1], true, nil
}

// skipRest reads the rest of the range without handing it out.
func (p *pager) skipRest(ctx context.Context) error {
	p.i = len(p.items)
	for !p.done {
		p.items = nil
		if _, _, err := p.next(ctx); err != nil {
			return err
		}
		p.i = len(p.items)
	}
	return nil
}

// mapParallel runs fn over the partitions with at most par in flight.
func mapParallel(ctx context.Context, parts []Partition, par int, fn func(ctx context.Context, p Partition) error) error {
	// The first error fails the whole map: the others stop at once
	// instead of running (or waiting on a dead peer) for nothing.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, par)
	errc := make(chan error, len(parts))
	var wg sync.WaitGroup
	var once sync.Once
	for _, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, p); err != nil {
				once.Do(func() {
					errc <- err
					cancel()
				})
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
	// egroups are the decision views of the egroups, sorted by ID
	// (egroupIndex finds one).
	egroups []decide.Egroup
	// deadExtents are unreferenced extents older than the grace period.
	deadExtents []extentInfo
	// bucketOf names an egroup's bucket (the first object that references
	// it; full scans only), for the planner's isolate and co_locate rules.
	bucketOf map[uint64]string
	// history lists bucket/key pairs with history to collect: tombstones
	// and versions kept only for snapshots.
	history [][2]string
	// extents are a full scan's extent records, sorted by ID; liveIdx
	// indexes the live ones, grouped by egroup in the order of egroups
	// (egroup i's are liveIdx[liveStart[i]:liveStart[i+1]], in offset
	// order; liveOf lists them).
	extents   []extentRec
	liveIdx   []int32
	liveStart []int32
	// listed, when set (a shuffled scan), says which egroups' live
	// extents the scan knows (liveOf).
	listed   []bool
	dangling []string
	records0 int // records scanned
	// spill holds the extent-side arrays past the scan's memory budget
	// (spill.go); spilled is how many bytes it mapped from files.
	spill   *spill
	spilled int64
	// start is when the scan began, just before its snapshot: the
	// garbage grace period is measured to it.
	start time.Time
	maps  []string
	// partitions names who scanned each partition (with a balancer).
	partitions map[string]string
	// dedup groups live extents by fingerprint (full scans).
	dedup []decide.DedupGroup
	// shuffle names the shuffle that joined the references on the
	// reducers (shuffle.go); shuffleErr says why one failed and the
	// references were joined here instead.
	shuffle, shuffleErr string
	// removalIncomplete is set when data removal's first stage did not
	// delete every extent record in deadExtents: tail ends computed
	// without them are then not safe to truncate to (exec.go).
	removalIncomplete bool
}

// scan reads the maps and joins them. A partial scan reads the egroup and
// access maps only (recovery, scrubbing); a full scan also reads objects,
// uploads and extents (data removal, GC, consistency).
func (c *Curator) scan(ctx context.Context, full bool) (*scanResult, error) {
	return c.scanAssigned(ctx, full, c.assignPartitions(c.topo.Snapshot()))
}

// scanAssigned is scan with a given partition assignment (nil: every
// partition here).
func (c *Curator) scanAssigned(ctx context.Context, full bool, assign map[string]model.NodeID) (*scanResult, error) {
	start := c.now()
	c.mu.Lock()
	c.scanStart = start
	c.mu.Unlock()
	kv := c.kv
	res := &scanResult{start: start}
	if full {
		res.spill = newSpill(c.opts.ScanSpillDir, c.opts.ScanMemoryBytes, c.log)
	}
	done := false
	defer func() {
		if !done {
			res.release()
		}
	}()
	var mu sync.Mutex

	// A full scan reads every map as of one snapshot (docs/design/0000
	// invariant 7): references move between owner records while it runs
	// (scanOwners), and an extent written after the owner maps were read
	// must not be seen without the record that references it — it would
	// look unreferenced, and a scan that outlasts the garbage grace
	// period would remove it. Every partition, here or on a worker, is
	// read at the snapshot's revision. A partial scan needs no snapshot:
	// it joins egroups with their access records only.
	var scanKV PageScanner = kv
	rev := int64(0)
	if ss, ok := kv.(meta.Snapshotter); ok && full {
		snap, err := ss.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		defer snap.Close()
		scanKV, rev = snap, snap.Rev()
	}
	if full && rev == 0 && assign != nil {
		// Without a revision to read at, a worker would read its store
		// as it is by then: map everything here, one map after another in
		// the order references move (ownerMaps).
		assign = nil
	}

	if full && c.canShuffle(assign, rev) {
		// The joins on the nodes (shuffle.go), in a result of their own:
		// if anything fails, the scan runs again without a shuffle.
		sres := &scanResult{start: start, spill: newSpill(c.opts.ScanSpillDir, c.opts.ScanMemoryBytes, c.log)}
		err := c.shuffledScan(ctx, scanKV, kv, rev, assign, sres)
		if err == nil {
			c.m.shuffles.WithLabelValues("done").Inc()
			res.release()
			res, done = sres, true
			return res, nil
		}
		c.m.shuffles.WithLabelValues("abandoned").Inc()
		sres.release()
		c.opts.Shuffle.Drop(sres.shuffle)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log.Warn("curator: shuffle failed; scanning again with the joins here", "shuffle", sres.shuffle, "err", err)
		res.shuffleErr = err.Error()
		assign = c.withoutFailed(assign)
	}

	// Map: egroups joined with their access records, partition by
	// partition (mapwork.go), here or on the node the partition is
	// assigned to. Each partition keeps its output in compact form
	// (scanmem.go); partitions tile the ID space in order and each one's
	// output is in ID order, so their concatenation is sorted.
	res.maps = append(res.maps, "egroups", "access")
	var egParts [16]egroupRecs
	var interners [16]*shapeInterner
	parts, err := idPartitions(ctx, scanKV, "egroups", rev)
	if err != nil {
		return nil, err
	}
	err = c.scanPartitions(ctx, scanKV, parts, assign, res, &mu, func(i int, r MapRecord) {
		if r.compact.shape != nil { // a worker's compact stream
			egParts[i].add(r.compact)
			return
		}
		if interners[i] == nil {
			interners[i] = newShapeInterner()
		}
		egParts[i].add(interners[i].rec(r))
	}, func(i int) { egParts[i] = egroupRecs{} })
	if err != nil {
		return nil, err
	}
	interners = [16]*shapeInterner{}
	res.egroups = viewsOf(egParts[:])

	if full {
		res.maps = append(res.maps, "uploads", "objects", "versions", "extents")
		xs, fps, refs, bucketNames, err := c.scanExtentSide(ctx, scanKV, rev, assign, res, &mu)
		if err != nil {
			return nil, err
		}
		err = c.joinFull(ctx, kv, res, xs, fps, refs, bucketNames)
		freeSlice(res.spill, refs)
		if err != nil {
			return nil, err
		}
		res.spilled = res.spill.mappedBytes()
	} else {
		for i := range res.egroups {
			d := &res.egroups[i]
			d.LiveBytes = d.Size
			d.LiveExtents = 1
		}
	}
	done = true
	return res, nil
}

// scanExtentSide maps the owner maps and the extent map of a full scan
// and returns the extents sorted by ID with their fingerprints, and the
// references to them with the bucket names they index.
func (c *Curator) scanExtentSide(ctx context.Context, kv PageScanner, rev int64, assign map[string]model.NodeID, res *scanResult, mu *sync.Mutex) ([]extentRec, [][]byte, []extentRef, []string, error) {
	parts, err := idPartitions(ctx, kv, "extents", rev)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Map: object, version and part records emit the extent IDs they
	// reference (scanOwners).
	refs, bucketNames, _, err := c.scanOwners(ctx, kv, rev, assign, res, mu, nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Map: extents, joined with refs (reduce by extent ID, in joinFull).
	var extParts [16]extentRecs
	for i := range extParts {
		extParts[i].run.s = res.spill
	}
	err = c.scanPartitions(ctx, kv, parts, assign, res, mu, func(i int, r MapRecord) {
		extParts[i].add(r)
	}, func(i int) { extParts[i].discard() })
	if err != nil {
		freeSlice(res.spill, refs)
		for i := range extParts {
			extParts[i].discard()
		}
		return nil, nil, nil, nil, err
	}
	xs, fps := joinExtentParts(res.spill, extParts[:])
	return xs, fps, refs, bucketNames, nil
}

// viewsOf is the decision views of partitions' egroups, in order; it
// empties the partitions.
func viewsOf(parts []egroupRecs) []decide.Egroup {
	n := 0
	for _, p := range parts {
		n += p.n
	}
	if n == 0 {
		return nil
	}
	out := make([]decide.Egroup, 0, n)
	for i := range parts {
		for _, ch := range parts[i].chunks {
			for j := range ch {
				out = append(out, ch[j].view())
			}
		}
		parts[i] = egroupRecs{}
	}
	return out
}

// release frees what the scan holds outside the Go heap (spill.go): its
// extent arrays are unusable afterwards. Every caller of scan defers it.
func (r *scanResult) release() {
	if r == nil || r.spill == nil {
		return
	}
	r.spill.release()
	r.extents, r.liveIdx = nil, nil
}

// egroupView is the decision view of an egroup record at revision rev
// with its access counts (nil: never read); the caller fills what only a
// full scan knows (live bytes and extents, tails, transform policy).
func egroupView(id uint64, rev int64, eg meta.Egroup, a *meta.Access) decide.Egroup {
	d := decide.Egroup{ID: id, ModRev: rev, Open: eg.State == meta.EgroupOpen, Writer: eg.Writer,
		Size: eg.Size, Vector: eg.Vector, Mtime: time.Unix(0, eg.Mtime),
		Codec: eg.Codec, Logical: eg.Logical, Incompressible: eg.Incompressible, FileBytes: object.FileSize(eg)}
	if eg.EC != nil {
		d.EC = decide.ECShape{K: eg.EC.K, M: eg.EC.M}
	}
	for _, r := range eg.Replicas {
		d.Replicas = append(d.Replicas, decide.Replica{Replica: r.Replica(), Bad: r.Bad})
	}
	if a != nil {
		d.Atime, d.Reads = time.Unix(0, a.Atime), a.WinReads
	}
	return d
}

// idPartitions returns the 16 partitions of the egroup (with access) or
// extent map, cut from the IDs in use in kv, to be read at revision rev
// (0: as the store is).
func idPartitions(ctx context.Context, kv PageScanner, mapName string, rev int64) ([]Partition, error) {
	prefix := map[string]string{"egroups": meta.PrefixEgroup, "extents": meta.PrefixExtent}[mapName]
	lo, hi, err := idBounds(ctx, kv, prefix)
	if err != nil {
		return nil, err
	}
	parts := partitionsOf(mapName, lo, hi)
	for i := range parts {
		parts[i].Rev = rev
	}
	return parts, nil
}

// scanOwners maps the object, version and upload maps of a full scan, in
// key-range partitions, and returns the extent references in scan order
// (key order within a map; upload parts, then objects, then versions)
// with their buckets interned in bucketNames, collecting history in res.
//
// kv is the scan's snapshot at revision rev, and every partition, here
// or on a worker, is read at it: references move between keys while a
// scan runs — an S3 rename copies an object to a new key sharing its
// extents and deletes the old one, a completed upload's parts become an
// object, an overwrite moves the current object to the version map — and
// a scan reading the maps over time could see the reference at neither
// place, take its extents for garbage and let data removal delete them.
// In a snapshot every extent referenced then is seen referenced. A store
// without snapshots (rev 0) is read as it goes, one map after another in
// the order references move (ownerMaps), all of it here.
//
// With a shuffle spec (shuffle.go) the partitions send their references
// to the spec's reducers instead, and scanOwners returns, per extent
// partition, the contributions its reducer must join.
func (c *Curator) scanOwners(ctx context.Context, kv PageScanner, rev int64, assign map[string]model.NodeID, res *scanResult, mu *sync.Mutex,
	spec *ShuffleSpec) ([]extentRef, []string, map[string][]ShuffleSource, error) {
	var buckets []string
	if _, err := scanRange(ctx, kv, []byte(meta.PrefixBucket), meta.PrefixEnd([]byte(meta.PrefixBucket)), func(it meta.Item) error {
		buckets = append(buckets, strings.TrimPrefix(string(it.Key), meta.PrefixBucket))
		return nil
	}); err != nil {
		return nil, nil, nil, err
	}
	// Buckets are interned across partitions (emit runs on every
	// partition's goroutine); an upload part's bucket index is 0.
	var bucketNames []string
	bucketIdx := map[string]uint32{}
	var internMu sync.Mutex
	intern := func(b string) uint32 {
		internMu.Lock()
		defer internMu.Unlock()
		bi := bucketIdx[b]
		if bi == 0 {
			bucketNames = append(bucketNames, b)
			bi = uint32(len(bucketNames))
			bucketIdx[b] = bi
		}
		return bi
	}
	type partOut struct {
		refs    spillRun[extentRef] // seq: position within the partition
		history [][2]string
		cuts    []string
		sent    *shuffled // what a shuffled map sent
	}
	// Every partition's references stay in its run until all three maps
	// are mapped, then move into one array (from res.spill: on the heap
	// or spilled) a chunk at a time.
	var runs []*spillRun[extentRef]
	var sources map[string][]ShuffleSource
	defer func() {
		for _, r := range runs {
			r.free()
		}
	}()
	for _, m := range ownerMaps {
		cuts := c.cutsFor(ctx, m)
		parts := ownerPartitions(m, buckets, cuts)
		for i := range parts {
			parts[i].Rev = rev
			parts[i].Shuffle = spec
		}
		outs := make([]partOut, len(parts))
		for i := range outs {
			outs[i].refs.s = res.spill
		}
		err := c.scanPartitions(ctx, kv, parts, assign, res, mu, func(i int, r MapRecord) {
			o, out := r.Owner, &outs[i]
			if r.shuffled != nil {
				out.sent = r.shuffled
				return
			}
			if o.Cut != "" {
				out.cuts = append(out.cuts, o.Cut)
				return
			}
			var bi uint32
			if m != "uploads" {
				bi = intern(o.Bucket)
			}
			for _, id := range o.Extents {
				out.refs.add(extentRef{id: id, seq: uint32(out.refs.len()), bucket: bi})
			}
			if o.History {
				out.history = append(out.history, [2]string{o.Bucket, o.Key})
			}
		}, func(i int) {
			outs[i].refs.free()
			outs[i] = partOut{refs: spillRun[extentRef]{s: res.spill}}
		})
		if err != nil {
			return nil, nil, nil, err
		}
		// The partitions tile the map in key order: their outputs
		// concatenated are the map in key order.
		cuts = nil
		for i := range outs {
			cuts = append(cuts, outs[i].cuts...)
		}
		c.keepCuts(ctx, m, cuts)
		for i := range outs {
			if spec != nil {
				if outs[i].sent == nil {
					return nil, nil, nil, fmt.Errorf("curator: shuffle %s: %s was mapped without shuffling its references", spec.ID, parts[i].Name)
				}
				if sources == nil {
					sources = map[string][]ShuffleSource{}
				}
				for _, n := range outs[i].sent.counts {
					sources[n.Dst] = append(sources[n.Dst], ShuffleSource{Src: parts[i].Name, Mapper: outs[i].sent.mapper, Count: n.Count})
				}
			}
			runs = append(runs, &outs[i].refs)
			res.history = append(res.history, outs[i].history...)
			outs[i].history = nil
		}
	}
	total := 0
	for _, r := range runs {
		total += r.len()
	}
	if total >= math.MaxUint32 {
		return nil, nil, nil, fmt.Errorf("curator: a full scan holds at most %d extent references", uint32(math.MaxUint32))
	}
	refs := spillSlice[extentRef](res.spill, total)[:0]
	for _, r := range runs {
		base := uint32(len(refs))
		r.drain(func(x *extentRef) {
			y := *x
			y.seq += base
			refs = append(refs, y)
		})
	}
	return refs, bucketNames, sources, nil
}

// scanPartitions maps partitions of a map in parallel (here through
// local) and hands each
// partition's output records to emit with the partition's index, in key
// order, from that partition's goroutine: calls for one index never
// overlap, and a record's Egroup, Access and Extent are valid only during
// the call (emit copies what it keeps); discard(i) drops what emit got for partition i when a remote
// map of it fails part way (it is then mapped here from the start). A
// partition assigned to another node is mapped there; if that fails —
// the node is down, dies mid-stream, or sends a bad stream — it is mapped
// here, so an assignment can slow a scan but never lose or duplicate
// records.
func (c *Curator) scanPartitions(ctx context.Context, local PageScanner, parts []Partition, assign map[string]model.NodeID,
	res *scanResult, mu *sync.Mutex, emit func(part int, r MapRecord), discard func(part int)) error {
	self := c.opts.Self
	if self == "" {
		self = "master"
	}
	// ScanParallelism partitions in flight per node mapping: the master's
	// budget does not throttle the other nodes' share.
	workers := map[model.NodeID]bool{c.opts.Self: true}
	for _, n := range assign {
		workers[n] = true
	}
	par := min(c.opts.ScanParallelism*len(workers), 16)
	index := make(map[string]int, len(parts))
	for i, p := range parts {
		index[p.Name] = i
	}
	return mapParallel(ctx, parts, par, func(ctx context.Context, part Partition) error {
		start := c.now()
		i := index[part.Name]
		name := part.Name
		node := assign[name]
		who, scanner := string(self), c.opts.Self
		var out MapOutput
		var err error
		remote := false
		if node != "" && node != c.opts.Self && c.opts.Balancer != nil {
			if sb, ok := c.opts.Balancer.(StreamingScanBalancer); ok {
				out = MapOutput{Part: name}
				out.Read, err = sb.MapPartitionTo(ctx, node, part, func(r MapRecord) { emit(i, r) })
				if err != nil {
					discard(i) // the partition is used whole or not at all
				}
			} else if out, err = c.opts.Balancer.MapPartition(ctx, node, part); err == nil {
				for _, r := range out.Records {
					emit(i, r)
				}
				out.Records = nil
			}
			var pe *ShufflePushError
			switch {
			case err == nil:
				remote, who, scanner = true, string(node), node
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.As(err, &pe):
				// A reducer failed, not this mapper: the shuffle cannot
				// complete (the master falls back), and the reducer is
				// left out of the next scans' assignments.
				c.markFailed(pe.Node)
				return err
			default:
				who = fmt.Sprintf("%s (%s failed: %v)", self, node, err)
				c.markFailed(node)
				c.log.Warn("curator: remote partition map failed; mapping here", "partition", name, "node", node, "err", err)
			}
		}
		if !remote {
			out = MapOutput{Part: name}
			// emit copies what it keeps of a record (scanPartitions' contract).
			mapFn := mapPartitionReused
			if part.Shuffle != nil {
				mapFn = func(ctx context.Context, kv PageScanner, p Partition, emit func(MapRecord) error) (int, error) {
					return mapShuffled(ctx, kv, p, c.shuffleEnv(), emit)
				}
			}
			out.Read, err = mapFn(ctx, local, part, func(r MapRecord) error {
				emit(i, r)
				return nil
			})
			if pe := (*ShufflePushError)(nil); errors.As(err, &pe) {
				c.markFailed(pe.Node)
			}
			if err != nil {
				return err
			}
		}
		mu.Lock()
		res.records0 += out.Read
		if assign != nil {
			if res.partitions == nil {
				res.partitions = map[string]string{}
			}
			res.partitions[name] = who
		}
		mu.Unlock()
		c.mu.Lock()
		c.partLoad[name] = PartitionLoad{Name: name, Records: out.Read, Node: scanner, Start: start, End: c.now()}
		c.mu.Unlock()
		return nil
	})
}

// markFailed leaves node out of scan assignments for mapRetryAfter.
func (c *Curator) markFailed(node model.NodeID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mapFailed[node] = c.now()
}

// withoutFailed is assign with the partitions of nodes whose maps failed
// lately (mapRetryAfter) given to this node.
func (c *Curator) withoutFailed(assign map[string]model.NodeID) map[string]model.NodeID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]model.NodeID, len(assign))
	for part, n := range assign {
		if at, failed := c.mapFailed[n]; failed && c.now().Sub(at) < mapRetryAfter {
			n = c.opts.Self
		}
		out[part] = n
	}
	return out
}

// shuffleEnv is this node's part in the shuffles it masters.
func (c *Curator) shuffleEnv() ShuffleEnv {
	env := ShuffleEnv{Self: c.opts.Self, Store: c.opts.Shuffle}
	if sb, ok := c.opts.Balancer.(ShuffleBalancer); ok {
		env.Push = sb.PushShuffle
	}
	return env
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
