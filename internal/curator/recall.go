package curator

import (
	"context"
	"fmt"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
)

// Recall moves the remote-tier replicas of every object under bucket/prefix
// back to local tiers, and returns the job record. Egroups with several
// remote replicas need one call per replica.
func (c *Curator) Recall(ctx context.Context, bucket, prefix string) (*JobRecord, error) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	rec := &JobRecord{ID: fmt.Sprintf("%d", c.now().UnixNano()), Kind: "recall", Trigger: "recall " + bucket + "/" + prefix,
		Start: c.now(), Planned: map[string]int{}, Done: map[string]int{}}
	wanted := map[uint64]bool{}
	after := ""
	for {
		page, err := c.layer.List(ctx, bucket, object.ListOptions{Prefix: prefix, After: after})
		if err != nil {
			return rec, err
		}
		for _, o := range page.Objects {
			for _, ref := range o.Extents {
				var x meta.Extent
				if _, err := meta.GetRecord(ctx, c.kv, meta.ExtentKey(ref.ID), &x); err == nil {
					wanted[x.Egroup] = true
				}
			}
		}
		if !page.Truncated {
			break
		}
		after = page.NextAfter
	}
	res, err := c.scan(ctx, false)
	if err != nil {
		return rec, err
	}
	defer res.release()
	var egs []decide.Egroup
	for _, eg := range res.egroups {
		if wanted[eg.ID] {
			egs = append(egs, eg)
		}
	}
	snap := c.snapshotFor()
	c.mu.Lock()
	tasks := decide.Recall(snap, egs, c.policy, c.opts.Tier, c.rng)
	c.mu.Unlock()
	for _, t := range tasks {
		rec.Planned[string(t.Kind)]++
	}
	c.execute(ctx, tasks, nil, res, rec, false)
	rec.End = c.now()
	c.saveRecord(ctx, rec)
	return rec, ctx.Err()
}
