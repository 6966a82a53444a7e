package actuate

import (
	"context"
	"fmt"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/transform"
)

// Executors of the Curator's transformations (docs/design/0010). Like
// every task they run under the scheduler's limits and apply only to the
// record revisions their decision saw.

// truncate cuts an egroup's unreferenced tail (no copy: one metadata
// switch and a truncate per replica).
func (a *Actuator) truncate(ctx context.Context, t Task) (Result, error) {
	eg, err := a.current(ctx, t)
	if err != nil {
		return Result{}, err
	}
	var src model.Replica
	for _, r := range eg.Replicas {
		if !r.Bad {
			src = r.Replica()
			break
		}
	}
	release, err := a.sched.Acquire(ctx, src, model.Replica{})
	if err != nil {
		return Result{}, err
	}
	defer release()
	// The kept prefix is read once to verify it: budget it like a scrub.
	b, err := a.sched.Throttle(ctx, t.Bytes, src.Device)
	if err != nil {
		return Result{Backoffs: b}, err
	}
	freed, err := a.store.TruncateEgroup(ctx, t.Egroup, t.ModRev, t.Bytes)
	return Result{Freed: freed, Backoffs: b}, err
}

// rewrite runs a compression (extents of several source egroups packed
// into fresh compressed ones) or a decompression (one egroup's extents
// rewritten plain). Sources whose record moved on since the decision are
// dropped; the task is stale only if every source is.
func (a *Actuator) rewrite(ctx context.Context, t Task) (Result, error) {
	var res Result
	if len(t.Sources) == 0 {
		return res, fmt.Errorf("%w: %s task of egroup %016x carries no extent list (resumed from a checkpoint): the next scan plans it again", ErrStale, t.Kind, t.Egroup)
	}
	var (
		sources []object.RewriteSource
		first   meta.Egroup
		bytes   int64
	)
	for _, src := range t.Sources {
		eg, rev, err := a.store.Egroup(ctx, src.Egroup)
		if err != nil || rev != src.ModRev {
			continue
		}
		if len(sources) == 0 {
			first = eg
		}
		sources = append(sources, src)
		for _, x := range src.Extents {
			bytes += x.Len
		}
	}
	if len(sources) == 0 {
		return res, fmt.Errorf("%w: every source egroup of %s changed since the decision", ErrStale, t.Kind)
	}
	var devs []model.DeviceID
	var src model.Replica
	place := model.Vector{Counts: map[model.Tier]int{}}
	for _, r := range first.Replicas {
		devs = append(devs, r.Device)
		if !r.Bad {
			if src.Device == "" {
				src = r.Replica()
			}
			place.Counts[r.Tier]++
		}
	}
	release, err := a.sched.Acquire(ctx, src, model.Replica{})
	if err != nil {
		return res, err
	}
	defer release()
	if res.Backoffs, err = a.sched.Throttle(ctx, bytes, devs...); err != nil {
		return res, err
	}
	req := object.RewriteRequest{Vector: first.Vector, Codec: t.Codec, MaxRatio: t.MaxRatio, Label: string(t.Kind), Sources: sources}
	switch t.Kind {
	case KindCompress, KindECEncode:
		// Cold data stays on the tiers it occupies; decoded (hot) data is
		// placed by its vector, where new writes go.
		if place.Total() == first.Vector.Total() || t.Kind == KindECEncode {
			req.Place = place
		}
		if t.Kind == KindECEncode {
			ec, err := transform.ParseEC(t.EC)
			if err != nil || ec.IsZero() {
				return res, fmt.Errorf("actuate: ec-encode of egroup %016x: code %q: %v", t.Egroup, t.EC, err)
			}
			req.EC = ec
		}
	case KindECDecode:
		// Back to replicas: still-wanted compression is kept as stored.
		req.KeepForm = t.Codec != ""
	default:
		req.Codec = ""
	}
	r, err := a.store.Rewrite(ctx, req)
	res.Moved, res.StaleExtents, res.Logical, res.Stored = r.Logical, r.Stale, r.Logical, r.Stored
	if err == nil && r.Moved == 0 && len(r.Incompressible) == 0 && r.Stale > 0 {
		return res, fmt.Errorf("%w: every extent of %s changed since the decision", ErrStale, t.Kind)
	}
	if len(r.Incompressible) > 0 {
		a.log.Info("compression did not pay; egroups remembered as incompressible", "egroups", len(r.Incompressible))
	}
	return res, err
}

// rebuild reconstructs an erasure-coded egroup's lost strips (Remove[i])
// onto new devices (Add[i]).
func (a *Actuator) rebuild(ctx context.Context, t Task) (Result, error) {
	var res Result
	eg, err := a.current(ctx, t)
	if err != nil {
		return res, err
	}
	if eg.EC == nil || len(t.Add) != len(t.Remove) || len(t.Add) == 0 {
		return res, fmt.Errorf("actuate: rebuild of egroup %016x: not erasure coded or %d new for %d lost strips", t.Egroup, len(t.Add), len(t.Remove))
	}
	replace := map[model.DeviceID]model.Replica{}
	for i, r := range t.Remove {
		replace[r.Device] = t.Add[i]
	}
	var src model.Replica
	for _, r := range eg.Replicas {
		if _, lost := replace[r.Device]; !lost && !r.Bad {
			src = r.Replica()
			break
		}
	}
	release, err := a.sched.Acquire(ctx, src, t.Add[0])
	if err != nil {
		return res, err
	}
	defer release()
	// Reading K strips to write the lost ones.
	budget := object.FileSize(eg) * int64(eg.EC.K+len(t.Add))
	if res.Backoffs, err = a.sched.Throttle(ctx, budget, src.Device, t.Add[0].Device); err != nil {
		return res, err
	}
	res.Moved, err = a.store.RebuildStrips(ctx, t.Egroup, t.ModRev, replace)
	return res, err
}

// ScrubStripe verifies every strip of an erasure-coded egroup and its
// parity within the byte budget; corrupt strips are marked bad (recovery
// rebuilds them). It returns the strips found bad and whether the parity
// matched.
func (a *Actuator) ScrubStripe(ctx context.Context, id uint64, bytes int64) (bad int, parityOK bool, err error) {
	release, err := a.sched.Acquire(ctx, model.Replica{}, model.Replica{})
	if err != nil {
		return 0, false, err
	}
	defer release()
	if _, err := a.sched.Throttle(ctx, bytes); err != nil {
		return 0, false, err
	}
	return a.store.VerifyStripe(ctx, id)
}

// dedup points duplicate extents at the canonical copy after comparing
// their bytes (ShareExtents).
func (a *Actuator) dedup(ctx context.Context, t Task) (Result, error) {
	var res Result
	if t.Canon == nil || len(t.Dups) == 0 {
		return res, fmt.Errorf("actuate: dedup task of egroup %016x without extents", t.Egroup)
	}
	release, err := a.sched.Acquire(ctx, model.Replica{}, model.Replica{})
	if err != nil {
		return res, err
	}
	defer release()
	// Every duplicate and the canonical copy are read to compare them.
	if res.Backoffs, err = a.sched.Throttle(ctx, 2*t.Bytes); err != nil {
		return res, err
	}
	r, err := a.store.ShareExtents(ctx, *t.Canon, t.Dups)
	res.Logical, res.StaleExtents = r.Bytes, r.Stale
	if err == nil && r.Shared == 0 && r.Differ == 0 && r.Stale > 0 {
		return res, fmt.Errorf("%w: every duplicate (or the canonical extent) changed since the decision", ErrStale)
	}
	return res, err
}
