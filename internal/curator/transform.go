package curator

import (
	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// The transform policy of an egroup folds those of the buckets whose
// objects (and versions kept for snapshots and clones) reference its
// extents: an egroup is compressed only if every bucket holding its data
// asks for it (so a bucket set to "none" never has its data compressed
// because it shares an egroup with another bucket), and it is cold only
// after the longest cold-after among them. Extents of unfinished multipart
// uploads veto transformations. The full scan's reduce folds them
// (joinFull, bucketPolicies and foldPolicy in scanext.go).

// transformTask attaches what a transform task needs from the scan: the
// live extents of its source egroups (not part of the pure decision) and
// the codec its buckets asked for. It returns false if the scan did not
// list the live extents of every source egroup (the task must not run).
func (c *Curator) transformTask(at *actuate.Task, t decide.Task, res *scanResult) bool {
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
		live, ok := res.liveOf(id)
		if !ok {
			return false
		}
		for _, x := range live {
			src.Extents = append(src.Extents, object.ExtentMove{ID: x.id, ModRev: x.modRev, Len: x.len})
		}
		at.Sources = append(at.Sources, src)
	}
	at.MaxRatio = c.opts.Decide.Transform.MaxRatio
	at.Vector = res.vectorOf(t.Egroup)
	return true
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
