package curator

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/transform"
)

// transformPolicies folds the transform settings of the buckets whose
// objects (and versions kept for snapshots and clones) reference each
// egroup's extents: an egroup is compressed only if every bucket holding
// its data asks for it (so a bucket set to "none" never has its data
// compressed because it shares an egroup with another bucket), and it is
// cold only after the longest cold-after among them. Extents of
// unfinished multipart uploads veto transformations.
func (c *Curator) transformPolicies(ctx context.Context, owners []refOwner, extents map[uint64]extentInfo) map[uint64]decide.TransformPolicy {
	buckets, err := c.layer.ListBuckets(ctx)
	if err != nil {
		c.log.Warn("curator: list buckets for transform policies", "err", err)
		return nil
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
	out := map[uint64]decide.TransformPolicy{}
	seen := map[uint64]bool{}
	for _, r := range owners {
		x, ok := extents[r.id]
		if !ok {
			continue
		}
		var p decide.TransformPolicy
		if !strings.HasPrefix(r.owner, "upload part ") {
			b, _, _ := strings.Cut(r.owner, "/")
			p = byName[b]
		}
		id := x.rec.Egroup
		if !seen[id] {
			seen[id] = true
			out[id] = p
			continue
		}
		cur := out[id]
		if cur.Compress != p.Compress {
			cur.Compress = ""
		}
		if cur.EC != p.EC {
			cur.EC = decide.ECShape{}
		}
		cur.ColdAfter = max(cur.ColdAfter, p.ColdAfter)
		out[id] = cur
	}
	return out
}

// transformTask attaches what a transform task needs from the scan: the
// live extents of its source egroups (not part of the pure decision) and
// the codec its buckets asked for.
func (c *Curator) transformTask(at *actuate.Task, t decide.Task, res *scanResult) {
	ids := []uint64{t.Egroup}
	revs := []int64{t.ModRev}
	if len(t.Pack) > 0 {
		ids, revs = nil, nil
		for _, p := range t.Pack {
			ids, revs = append(ids, p.ID), append(revs, p.ModRev)
		}
	}
	for i, id := range ids {
		src := object.RewriteSource{Egroup: id, ModRev: revs[i]}
		for _, x := range res.liveByEgroup[id] {
			src.Extents = append(src.Extents, object.ExtentMove{ID: x.id, ModRev: x.modRev, Len: x.rec.Len})
		}
		at.Sources = append(at.Sources, src)
	}
	at.MaxRatio = c.opts.Decide.Transform.MaxRatio
	at.Vector = res.vectorOf(t.Egroup)
}

// TransformBytes is what one kind of transform rewrote in a job.
type TransformBytes struct {
	Logical int64 `json:"logical_bytes"`
	Stored  int64 `json:"stored_bytes"`
}

func (r *JobRecord) addTransformed(k actuate.Kind, res actuate.Result) {
	if res.Logical == 0 && res.Stored == 0 {
		return
	}
	if r.Transformed == nil {
		r.Transformed = map[string]TransformBytes{}
	}
	tb := r.Transformed[string(k)]
	tb.Logical += res.Logical
	tb.Stored += res.Stored
	r.Transformed[string(k)] = tb
}

// dedupGroups groups live extents with a fingerprint by it, keeping only
// fingerprints stored at more than one place.
func dedupGroups(live map[uint64][]extentInfo) []decide.DedupGroup {
	byFP := map[string][]decide.DedupExtent{}
	for _, xs := range live {
		for _, x := range xs {
			if len(x.rec.FP) == 0 {
				continue
			}
			byFP[string(x.rec.FP)] = append(byFP[string(x.rec.FP)], decide.DedupExtent{ID: x.id, ModRev: x.modRev, Egroup: x.rec.Egroup, Off: x.rec.Off, Len: x.rec.Len})
		}
	}
	var out []decide.DedupGroup
	for fp, xs := range byFP {
		if len(xs) < 2 {
			continue
		}
		out = append(out, decide.DedupGroup{FP: fp, Extents: xs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FP < out[j].FP })
	return out
}

// dedupTasks decides deduplication for a full scan.
func (c *Curator) dedupTasks(snap *model.Snapshot, res *scanResult, planned []decide.Task) []decide.Task {
	if len(res.dedup) == 0 {
		return nil
	}
	// Dedup looks up only the egroups its groups' extents sit in.
	egs := map[uint64]decide.Egroup{}
	for _, g := range res.dedup {
		for _, x := range g.Extents {
			if i, ok := res.egroupIndex(x.Egroup); ok {
				egs[x.Egroup] = res.egroups[i]
			}
		}
	}
	return decide.Dedup(res.dedup, egs, planned, func(r decide.Replica) bool {
		d, ok := snap.Device(r.Device)
		return ok && d.State == model.DeviceUp && snap.NodeUp(d.Node)
	})
}
