package curator

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/transform"
)

// The extent side of a full scan, compact. A full scan used to hold every
// extent record decoded (112 bytes) in a map keyed by ID, a copy of each
// live extent in a per-egroup list, a map of referenced IDs, and for every
// reference its owner's name (bucket/key) — about 1 KB per extent at peak
// (docs/perf.md). Now an extent is a 64-byte extentRec in one slice sorted
// by ID (the partitions' outputs are in ID order and tile the ID space), a
// reference is a 16-byte extentRef (ID, position in scan order, interned
// bucket), and the two are merge-joined after sorting the references by
// ID. Live extents are indexes into the extent slice, grouped by egroup.
// Owner names are built only for the references that are reported
// (dangling ones), by reading the owner maps again for just those IDs.

// extentRec is one extent as the master holds it during a full scan.
type extentRec struct {
	id     uint64
	modRev int64
	egroup uint64
	off    int64
	len    int64 // payload bytes
	stored int64 // bytes its slices hold (meta.Extent.StoredLen)
	ctime  int64
	fp     uint32 // 1 + index of its fingerprint in the scan's fps; 0: none
	live   bool   // some object, version or upload part references it
}

// extentRecs is a partition's extentRecs in order (in chunks, on the
// heap or spilled: spill.go) and the fingerprints they carry.
type extentRecs struct {
	run spillRun[extentRec]
	fps [][]byte
}

func (rs *extentRecs) add(r MapRecord) {
	if r.isExtent { // a worker's compact stream
		rs.addRec(r.compactExtent, r.compactFP)
		return
	}
	x := r.Extent
	rs.addRec(extentRec{id: r.ID, modRev: r.Rev, egroup: x.Egroup, off: x.Off, len: x.Len, stored: x.StoredLen(), ctime: x.Ctime}, x.FP)
}

// addRec adds e with its fingerprint (none if fp is empty).
func (rs *extentRecs) addRec(e extentRec, fp []byte) {
	if len(fp) > 0 {
		rs.fps = append(rs.fps, fp)
		e.fp = uint32(len(rs.fps))
	}
	rs.run.add(e)
}

// discard drops the partition's records.
func (rs *extentRecs) discard() {
	rs.run.free()
	rs.fps = nil
}

// joinExtentParts concatenates the partitions' extents into one slice
// sorted by ID (from s: on the heap or spilled), releasing each
// partition once copied, with their fingerprints.
func joinExtentParts(s *spill, parts []extentRecs) ([]extentRec, [][]byte) {
	n := 0
	for i := range parts {
		n += parts[i].run.len()
	}
	xs := spillSlice[extentRec](s, n)[:0]
	var fps [][]byte
	for i := range parts {
		base := uint32(len(fps))
		fps = append(fps, parts[i].fps...)
		parts[i].run.drain(func(x *extentRec) {
			y := *x
			if y.fp != 0 {
				y.fp += base
			}
			xs = append(xs, y)
		})
		parts[i].discard()
	}
	byID := func(a, b extentRec) int { return cmp.Compare(a.id, b.id) }
	if !slices.IsSortedFunc(xs, byID) {
		slices.SortFunc(xs, byID) // partitions are in ID order; this is a guard
	}
	return xs, fps
}

// extentRef is one reference to an extent from an object, a version or an
// upload part.
type extentRef struct {
	id     uint64
	seq    uint32 // position in scan order
	bucket uint32 // 1 + index in the scan's bucket names; 0: an upload part
}

// walkOwners reads the object, version and upload maps in that order and
// calls visit with each record's extent references and a function that
// names the record (built only if called). A full scan maps these maps in
// partitions (scanOwners); this is the second, rare pass that names the
// owners of dangling references.
func walkOwners(ctx context.Context, kv meta.KV, visit func(owner func() string, xs []meta.ExtentRef)) error {
	_, err := scanRange(ctx, kv, []byte(meta.PrefixObject), meta.PrefixEnd([]byte(meta.PrefixObject)), func(it meta.Item) error {
		var o meta.Object
		if err := meta.Decode(it.Value, &o); err != nil {
			return err
		}
		b, k, _ := meta.SplitObjectKey(it.Key)
		visit(func() string { return b + "/" + k }, o.Extents)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = scanRange(ctx, kv, []byte(meta.PrefixVersion), meta.PrefixEnd([]byte(meta.PrefixVersion)), func(it meta.Item) error {
		v, b, k, err := decodeVersion(it)
		if err != nil {
			return err
		}
		visit(func() string { return b + "/" + k + " (version " + v.VersionID + ")" }, v.Extents)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = scanRange(ctx, kv, []byte(meta.PrefixUpload), meta.PrefixEnd([]byte(meta.PrefixUpload)), func(it meta.Item) error {
		var p meta.Part
		if meta.Decode(it.Value, &p) == nil && len(p.Extents) > 0 {
			key := it.Key
			visit(func() string { return "upload part " + string(key) }, p.Extents)
		}
		return nil
	})
	return err
}

// bucketPolicies is the transform policy of each named bucket (a bucket
// without transform settings, or an upload part, has the zero policy);
// ok is false if the buckets could not be listed (no policies then).
func (c *Curator) bucketPolicies(ctx context.Context, names []string) (pols []decide.TransformPolicy, ok bool) {
	byName, ok := c.transformPolicies(ctx)
	if !ok {
		return nil, false
	}
	pols = make([]decide.TransformPolicy, len(names)+1) // [0]: upload parts
	for i, n := range names {
		pols[i+1] = byName[n]
	}
	return pols, true
}

// transformPolicies is the transform policy of each bucket that has
// one; ok is false if the buckets could not be listed.
func (c *Curator) transformPolicies(ctx context.Context) (map[string]decide.TransformPolicy, bool) {
	buckets, err := c.layer.ListBuckets(ctx)
	if err != nil {
		c.log.Warn("curator: list buckets for transform policies", "err", err)
		return nil, false
	}
	byName := map[string]decide.TransformPolicy{}
	for _, b := range buckets {
		if b.Transform != nil {
			p := decide.TransformPolicy{Compress: b.Transform.Compress, ColdAfter: time.Duration(b.Transform.ColdAfter)}
			if ec, err := transform.ParseEC(b.Transform.EC); err == nil {
				p.EC = decide.ECShape{K: ec.K, M: ec.M}
			}
			byName[b.Name] = p
		}
	}
	return byName, true
}

// foldPolicy folds the policy of one more bucket holding an egroup's data
// into cur: compress or erasure-code only if every bucket asks for the
// same, cold only after the longest cold-after among them.
func foldPolicy(cur, p decide.TransformPolicy) decide.TransformPolicy {
	if cur.Compress != p.Compress {
		cur.Compress = ""
	}
	if cur.EC != p.EC {
		cur.EC = decide.ECShape{}
	}
	cur.ColdAfter = max(cur.ColdAfter, p.ColdAfter)
	return cur
}

// joinFull is the reduce of a full scan: it joins the references (sorted
// here) with the extents (sorted by ID) and the extents with the egroups,
// and fills in res what only a full scan knows — each egroup's live and
// dead extents, live bytes, tail end, transform policy and bucket, the
// garbage, the dangling references, the dedup groups and each egroup's
// live extents.
func (c *Curator) joinFull(ctx context.Context, kv meta.KV, res *scanResult, xs []extentRec, fps [][]byte, refs []extentRef, bucketNames []string) error {
	ids := make([]uint64, len(res.egroups))
	for i := range res.egroups {
		ids[i] = res.egroups[i].ID
	}
	egIndex := func(id uint64) (int, bool) { return slices.BinarySearch(ids, id) }

	slices.SortFunc(refs, func(a, b extentRef) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	pols, polOK := c.bucketPolicies(ctx, bucketNames)
	polSeen := make([]bool, len(res.egroups))
	// The bucket of an egroup is that of the first object or version (in
	// scan order) that references one of its extents.
	type first struct{ seq, bucket uint32 }
	firstRef := make([]first, len(res.egroups))
	for i := range firstRef {
		firstRef[i].seq = math.MaxUint32
	}
	var firstOther map[uint64]first // egroups the scan did not see
	var unres []uint64              // IDs referenced that do not resolve, ascending
	j := 0
	for k := range xs {
		x := &xs[k]
		for ; j < len(refs) && refs[j].id < x.id; j++ {
			if n := len(unres); n == 0 || unres[n-1] != refs[j].id {
				unres = append(unres, refs[j].id)
			}
		}
		if j == len(refs) || refs[j].id != x.id {
			continue
		}
		x.live = true
		ei, known := egIndex(x.egroup)
		if !known {
			unres = append(unres, x.id)
		}
		for ; j < len(refs) && refs[j].id == x.id; j++ {
			r := refs[j]
			if r.bucket != 0 {
				if known {
					if r.seq < firstRef[ei].seq {
						firstRef[ei] = first{r.seq, r.bucket}
					}
				} else {
					if firstOther == nil {
						firstOther = map[uint64]first{}
					}
					if f, ok := firstOther[x.egroup]; !ok || r.seq < f.seq {
						firstOther[x.egroup] = first{r.seq, r.bucket}
					}
				}
			}
			if known && polOK {
				d := &res.egroups[ei]
				if !polSeen[ei] {
					polSeen[ei], d.Policy = true, pols[r.bucket]
				} else {
					d.Policy = foldPolicy(d.Policy, pols[r.bucket])
				}
			}
		}
	}
	for ; j < len(refs); j++ {
		if n := len(unres); n == 0 || unres[n-1] != refs[j].id {
			unres = append(unres, refs[j].id)
		}
	}
	res.bucketOf = make(map[uint64]string, len(res.egroups)+len(firstOther))
	for i, f := range firstRef {
		if f.seq != math.MaxUint32 {
			res.bucketOf[ids[i]] = bucketNames[f.bucket-1]
		}
	}
	for id, f := range firstOther {
		res.bucketOf[id] = bucketNames[f.bucket-1]
	}

	// Live and dead extents, garbage and tail ends. Tail ends count every
	// extent record except those this job's data removal deletes before
	// any task runs (if one of them survives, exec.go drops the job's
	// truncations of its egroup).
	liveN := make([]int32, len(res.egroups)+1)
	for k := range xs {
		x := &xs[k]
		ei, known := egIndex(x.egroup)
		if x.live {
			if known {
				liveN[ei]++
			}
		} else {
			if known {
				res.egroups[ei].DeadExtents++
			}
			// The age is taken at the scan's start (its snapshot), not
			// now: an unreferenced extent must have been garbage for the
			// grace period when the owner maps were read, however long
			// the scan took since.
			if res.start.Sub(time.Unix(0, x.ctime)) >= c.opts.Decide.GarbageGrace {
				res.deadExtents = append(res.deadExtents, extentInfo{id: x.id, modRev: x.modRev,
					rec: meta.Extent{Egroup: x.egroup, Off: x.off, Len: x.len, Ctime: x.ctime}})
				continue // removed: not in the tail
			}
		}
		if known {
			d := &res.egroups[ei]
			d.TailEnd = max(d.TailEnd, x.off+encodedLen(x.stored))
		}
	}
	// Live extents by egroup, each egroup's in offset order.
	res.indexLive(xs, liveN, func(x *extentRec) (int, bool) {
		if !x.live {
			return 0, false
		}
		return egIndex(x.egroup)
	})
	for i := range res.egroups {
		live := res.liveIdx[res.liveStart[i]:res.liveStart[i+1]]
		d := &res.egroups[i]
		d.LiveExtents = len(live)
		d.TailKnown = true
		// Live bytes are encoded sizes on disk, to compare with Size; a
		// location several extents share (dedup) counts once.
		for n, k := range live {
			if n == 0 || xs[k].off != xs[live[n-1]].off {
				d.LiveBytes += encodedLen(xs[k].stored)
			}
		}
	}
	res.dedup = dedupGroups(xs, fps)
	return c.reportDangling(ctx, kv, res, unres)
}

// reportDangling is a full scan's consistency check: every reference
// must resolve to an extent and every referenced extent to an egroup.
// unres lists the IDs that did not at the scan's snapshot; those that
// still do not are reported with their owners' names, built only for
// them by reading the owner maps again.
func (c *Curator) reportDangling(ctx context.Context, kv meta.KV, res *scanResult, unres []uint64) error {
	if len(unres) == 0 {
		return nil
	}
	slices.Sort(unres)
	why := map[uint64]string{}
	for _, id := range unres {
		if w := unresolved(ctx, kv, id); w != "" {
			why[id] = w
		}
	}
	if len(why) == 0 {
		return nil
	}
	return walkOwners(ctx, kv, func(owner func() string, refs []meta.ExtentRef) {
		for _, r := range refs {
			if w, ok := why[r.ID]; ok {
				res.dangling = append(res.dangling, owner()+" → "+w)
			}
		}
	})
}

// indexLive indexes the live extents of xs by egroup: of says which
// egroup's list an extent goes in (false: none), liveN[i] is how many
// go in egroup i's (used up here). Each list is a counting sort's slot
// (liveIdx[liveStart[i]:liveStart[i+1]]), sorted by offset then ID.
func (r *scanResult) indexLive(xs []extentRec, liveN []int32, of func(*extentRec) (int, bool)) {
	r.extents = xs
	r.liveStart = make([]int32, len(r.egroups)+1)
	for i := range r.egroups {
		r.liveStart[i+1] = r.liveStart[i] + liveN[i]
	}
	r.liveIdx = spillSlice[int32](r.spill, int(r.liveStart[len(r.egroups)]))
	next := liveN[:len(r.egroups)]
	copy(next, r.liveStart[:len(r.egroups)])
	for k := range xs {
		if ei, ok := of(&xs[k]); ok {
			r.liveIdx[next[ei]] = int32(k)
			next[ei]++
		}
	}
	for i := range r.egroups {
		slices.SortFunc(r.liveIdx[r.liveStart[i]:r.liveStart[i+1]], func(a, b int32) int {
			if c := cmp.Compare(xs[a].off, xs[b].off); c != 0 {
				return c
			}
			return cmp.Compare(xs[a].id, xs[b].id)
		})
	}
}

// liveOf lists the live extents of an egroup the scan saw, in offset
// order; ok is false if the scan does not know them (a shuffled scan
// lists only the egroups a rewrite may need: shuffle.go), and a task
// that rewrites the egroup must then not run.
func (r *scanResult) liveOf(id uint64) (xs []extentRec, ok bool) {
	i, ok := r.egroupIndex(id)
	if !ok || r.liveStart == nil || r.listed != nil && !r.listed[i] {
		return nil, false
	}
	idx := r.liveIdx[r.liveStart[i]:r.liveStart[i+1]]
	out := make([]extentRec, len(idx))
	for n, k := range idx {
		out[n] = r.extents[k]
	}
	return out, true
}

// dedupGroups groups live extents with a fingerprint by it, keeping only
// fingerprints stored at more than one place; each group's extents are in
// ID order.
func dedupGroups(xs []extentRec, fps [][]byte) []decide.DedupGroup {
	if len(fps) == 0 {
		return nil
	}
	byFP := map[string][]decide.DedupExtent{}
	for _, x := range xs {
		if !x.live || x.fp == 0 {
			continue
		}
		fp := string(fps[x.fp-1])
		byFP[fp] = append(byFP[fp], decide.DedupExtent{ID: x.id, ModRev: x.modRev, Egroup: x.egroup, Off: x.off, Len: x.len})
	}
	var out []decide.DedupGroup
	for fp, xs := range byFP {
		if len(xs) < 2 {
			continue
		}
		out = append(out, decide.DedupGroup{FP: fp, Extents: xs})
	}
	slices.SortFunc(out, func(a, b decide.DedupGroup) int { return cmp.Compare(a.FP, b.FP) })
	return out
}
