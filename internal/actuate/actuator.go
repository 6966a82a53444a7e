package actuate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/replica"
)

// Store is what the actuator needs from the object layer: its typed
// maintenance calls. *object.Layer implements it.
type Store interface {
	Egroup(ctx context.Context, id uint64) (meta.Egroup, int64, error)
	CopyReplica(ctx context.Context, id uint64, size int64, src, dst model.Replica) error
	SwitchEgroup(ctx context.Context, id uint64, modRev int64, next meta.Egroup) error
	FenceEgroup(ctx context.Context, id uint64, modRev int64) error
	SealEgroup(ctx context.Context, id uint64, modRev int64) error
	RemoveEgroup(ctx context.Context, id uint64, modRev int64) (meta.Egroup, error)
	RemoveReplicaFile(ctx context.Context, r model.Replica, id uint64) error
	RemoveExtents(ctx context.Context, xs []object.ExtentRev) (removed, stale int, err error)
	Relocate(ctx context.Context, v, place model.Vector, moves []object.ExtentMove) (object.RelocateResult, error)
	VerifyReplica(ctx context.Context, r model.Replica, id uint64, size int64) error
	Rewrite(ctx context.Context, req object.RewriteRequest) (object.RewriteResult, error)
	RebuildStrips(ctx context.Context, id uint64, modRev int64, replace map[model.DeviceID]model.Replica) (int64, error)
	ShareExtents(ctx context.Context, canon object.ExtentRev, dups []object.ExtentRev) (object.DedupResult, error)
	VerifyStripe(ctx context.Context, id uint64) (bad int, parityOK bool, err error)
	TruncateEgroup(ctx context.Context, id uint64, modRev int64, size int64) (int64, error)
	MarkReplicaBad(ctx context.Context, id uint64, dev model.DeviceID)
	ReplicaListed(ctx context.Context, id uint64, dev model.DeviceID) bool
	// Snapshot is the current cluster view (device states, nodes up).
	Snapshot() *model.Snapshot
}

var _ Store = (*object.Layer)(nil)

// ErrStale means a task's egroup changed since the decision: the task is
// dropped (counted, not retried with force).
var ErrStale = object.ErrStale

// Result is what one task did.
type Result struct {
	Moved    int64 // bytes copied (moves) or relocated (compaction)
	Freed    int64 // replica bytes freed (removals)
	Backoffs int   // times the task waited for busy devices or slow clients
	// StaleExtents counts compaction's extents that changed meanwhile
	// (their copies became garbage; the records were left alone).
	StaleExtents int
	// Logical and Stored are a transform's payload bytes before and after
	// (compression, decompression).
	Logical, Stored int64
}

// Actuator executes tasks.
type Actuator struct {
	store Store
	sched *Scheduler
	log   *slog.Logger

	mu   sync.Mutex
	busy map[uint64]bool // egroups with a task in flight
}

// New returns an actuator over the object layer's maintenance calls.
func New(store Store, sched *Scheduler, log *slog.Logger) *Actuator {
	if log == nil {
		log = slog.Default()
	}
	return &Actuator{store: store, sched: sched, log: log, busy: map[uint64]bool{}}
}

// Scheduler returns the actuator's scheduler.
func (a *Actuator) Scheduler() *Scheduler { return a.sched }

// ErrBusy means another task on the same egroup is in flight; the task is
// left for later rather than racing it.
var ErrBusy = errors.New("actuate: another task on this egroup is in flight")

// Execute runs one task. It returns ErrStale (wrapped) when the egroup
// changed since the decision, and ErrBusy when another task of this
// actuator is working on the same egroup.
func (a *Actuator) Execute(ctx context.Context, t Task) (Result, error) {
	ids := []uint64{t.Egroup}
	for _, p := range t.Pack {
		if p.ID != t.Egroup {
			ids = append(ids, p.ID)
		}
	}
	a.mu.Lock()
	for _, id := range ids {
		if a.busy[id] {
			a.mu.Unlock()
			return Result{}, ErrBusy
		}
	}
	for _, id := range ids {
		a.busy[id] = true
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		for _, id := range ids {
			delete(a.busy, id)
		}
		a.mu.Unlock()
	}()
	switch {
	case t.Kind.IsMove():
		return a.move(ctx, t)
	case t.Kind == KindSeal:
		return Result{}, a.store.SealEgroup(ctx, t.Egroup, t.ModRev)
	case t.Kind == KindRemoveEgroup:
		eg, err := a.store.RemoveEgroup(ctx, t.Egroup, t.ModRev)
		if err != nil {
			return Result{}, err
		}
		return Result{Freed: object.FileSize(eg) * int64(len(eg.Replicas))}, nil
	case t.Kind == KindCompact:
		return a.compact(ctx, t)
	case t.Kind == KindTruncate:
		return a.truncate(ctx, t)
	case t.Kind == KindCompress, t.Kind == KindDecompress, t.Kind == KindECEncode, t.Kind == KindECDecode:
		return a.rewrite(ctx, t)
	case t.Kind == KindRebuild:
		return a.rebuild(ctx, t)
	case t.Kind == KindDedup:
		return a.dedup(ctx, t)
	}
	return Result{}, fmt.Errorf("actuate: no executor for %s", t.Kind)
}

// current loads the egroup and checks the task is not stale.
func (a *Actuator) current(ctx context.Context, t Task) (meta.Egroup, error) {
	eg, rev, err := a.store.Egroup(ctx, t.Egroup)
	if err != nil {
		return eg, err
	}
	if rev != t.ModRev {
		return eg, fmt.Errorf("%w: egroup %016x at revision %d, task computed at %d", ErrStale, t.Egroup, rev, t.ModRev)
	}
	return eg, nil
}

// move copies the egroup to each added device (verified, on the
// destination node), switches the replica list with compare-and-swap, and
// only then deletes the removed replicas' files (docs/design/0000
// invariant 4). A failed task leaves no copy that metadata does not list.
func (a *Actuator) move(ctx context.Context, t Task) (Result, error) {
	var res Result
	eg, err := a.current(ctx, t)
	if err != nil {
		return res, err
	}
	if eg.EC != nil {
		// Strips are not interchangeable copies; decisions never ask
		// this, and a bug must not turn a stripe into replicas.
		return res, fmt.Errorf("actuate: refusing a replica move of erasure-coded egroup %016x", t.Egroup)
	}
	if eg.State == meta.EgroupOpen {
		// Its writer still appends, and commits small writes without
		// rewriting the record: a copy of Size bytes could miss
		// committed extents that the switch would not notice.
		return res, fmt.Errorf("actuate: refusing to move open egroup %016x (its writer owns it)", t.Egroup)
	}
	removing := map[model.DeviceID]bool{}
	for _, r := range t.Remove {
		removing[r.Device] = true
	}
	// Sources: good replicas that stay first, then good ones being
	// removed (a draining device can still serve its data).
	var sources []model.Replica
	for _, keep := range []bool{true, false} {
		for _, r := range eg.Replicas {
			if !r.Bad && removing[r.Device] != keep {
				sources = append(sources, r.Replica())
			}
		}
	}
	var added []model.Replica
	cleanup := func() {
		if len(added) == 0 {
			return
		}
		c := context.WithoutCancel(ctx)
		// Another executor of this same move (a master that took over
		// the job, a node's queue) keeps a verified copy it finds in
		// place and may be about to switch it in: fence the record
		// first, so that no switch decided from t.ModRev lands after the
		// delete. Stale: the record moved on, and whatever lists a copy
		// keeps it below.
		if err := a.store.FenceEgroup(c, t.Egroup, t.ModRev); err != nil && !errors.Is(err, ErrStale) {
			a.log.Warn("failed move: copies left for recovery to remove (the egroup record could not be fenced)",
				"egroup", meta.FormatID(t.Egroup), "err", err)
			return
		}
		for _, d := range added {
			if a.store.ReplicaListed(c, t.Egroup, d.Device) {
				continue // another move of this egroup made it a replica
			}
			_ = a.store.RemoveReplicaFile(c, d, t.Egroup)
		}
	}
	for _, dst := range t.Add {
		var lastErr error
		ok := false
		for _, src := range sources {
			release, err := a.sched.Acquire(ctx, src, dst)
			if err != nil {
				cleanup()
				return res, err
			}
			b, err := a.sched.Throttle(ctx, eg.Size, src.Device, dst.Device)
			res.Backoffs += b
			if err == nil {
				err = a.store.CopyReplica(ctx, t.Egroup, eg.Size, src, dst)
			}
			release()
			if err != nil {
				if ctx.Err() != nil {
					cleanup()
					return res, ctx.Err()
				}
				lastErr = err
				continue
			}
			ok = true
			break
		}
		if !ok {
			cleanup()
			if lastErr == nil {
				lastErr = errors.New("no readable source replica")
			}
			return res, fmt.Errorf("copy to %s: %w", dst.Device, lastErr)
		}
		added = append(added, dst)
		res.Moved += eg.Size
	}
	next := eg
	next.Replicas = nil
	for _, r := range eg.Replicas {
		if !removing[r.Device] {
			next.Replicas = append(next.Replicas, r)
		}
	}
	for _, d := range added {
		next.Replicas = append(next.Replicas, meta.EgroupReplica{Device: d.Device, Node: d.Node, Tier: d.Tier})
	}
	if len(next.Replicas) == 0 {
		cleanup()
		return res, errors.New("actuate: refusing to leave an egroup with no replicas")
	}
	// The decision saw the cluster as it was; a device failure or a node
	// going down since does not change the egroup's record, so the
	// revision check above cannot notice it. Never trade healthy replicas
	// for unhealthy ones: a removal planned when three copies were fine
	// must not delete the only one left on a working device.
	if snap := a.store.Snapshot(); snap != nil {
		if now, after := healthyReplicas(snap, eg.Replicas), healthyReplicas(snap, next.Replicas); after < now {
			cleanup()
			return res, fmt.Errorf("%w: egroup %016x would keep %d replicas on working devices, down from %d (devices failed since the decision)",
				ErrStale, t.Egroup, after, now)
		}
	}
	if err := a.store.SwitchEgroup(ctx, t.Egroup, t.ModRev, next); err != nil {
		cleanup()
		return res, err
	}
	readded := map[model.DeviceID]bool{}
	for _, d := range added {
		readded[d.Device] = true
	}
	for _, r := range t.Remove {
		if readded[r.Device] {
			continue // the fresh copy replaced the bad file in place
		}
		if err := a.store.RemoveReplicaFile(ctx, r, t.Egroup); err != nil {
			a.log.Debug("remove old replica failed (device may be gone)", "egroup", meta.FormatID(t.Egroup), "device", r.Device, "err", err)
		} else {
			res.Freed += eg.Size
		}
	}
	return res, nil
}

// healthyReplicas counts the replicas not marked bad whose device is known,
// not failed, and on a node that is up (a draining device still serves).
func healthyReplicas(s *model.Snapshot, rs []meta.EgroupReplica) int {
	n := 0
	for _, r := range rs {
		if r.Bad {
			continue
		}
		if d, ok := s.Device(r.Device); ok && d.State != model.DeviceFailed && s.NodeUp(d.Node) {
			n++
		}
	}
	return n
}

// compact (GC) moves an egroup's live extents into fresh egroups on the
// tiers its replicas occupy now; the emptied egroup is removed by a later
// data-removal pass.
func (a *Actuator) compact(ctx context.Context, t Task) (Result, error) {
	var res Result
	eg, err := a.current(ctx, t)
	if err != nil {
		return res, err
	}
	var devs []model.DeviceID
	for _, r := range eg.Replicas {
		devs = append(devs, r.Device)
	}
	var src model.Replica
	if len(eg.Replicas) > 0 {
		src = eg.Replicas[0].Replica()
	}
	release, err := a.sched.Acquire(ctx, src, model.Replica{})
	if err != nil {
		return res, err
	}
	defer release()
	if res.Backoffs, err = a.sched.Throttle(ctx, t.Bytes, devs...); err != nil {
		return res, err
	}
	// Keep the data on the tiers its replicas occupy now: compaction must
	// not promote cold data onto the fast tier.
	place := model.Vector{Counts: map[model.Tier]int{}}
	for _, rp := range eg.Replicas {
		if !rp.Bad {
			place.Counts[rp.Tier]++
		}
	}
	if place.Total() != eg.Vector.Total() {
		place = model.Vector{}
	}
	r, err := a.store.Relocate(ctx, eg.Vector, place, t.Extents)
	res.Moved, res.StaleExtents = r.Bytes, r.Stale
	return res, err
}

// RemoveExtents is data removal's first stage (unreferenced extent
// records), with compare-and-swap per record.
func (a *Actuator) RemoveExtents(ctx context.Context, xs []object.ExtentRev) (removed, stale int, err error) {
	return a.store.RemoveExtents(ctx, xs)
}

// ScrubResult is what verifying one replica found.
type ScrubResult int

// Scrub outcomes.
const (
	ScrubOK      ScrubResult = iota
	ScrubBad                 // corrupt or missing; marked bad (recovery repairs it)
	ScrubSkipped             // removed or moved since the scan: not a bad replica
)

// Scrub verifies one replica within the byte budget; a replica that fails
// is marked bad.
func (a *Actuator) Scrub(ctx context.Context, id uint64, r model.Replica, size int64) (ScrubResult, error) {
	release, err := a.sched.Acquire(ctx, r, model.Replica{})
	if err != nil {
		return ScrubOK, err
	}
	defer release()
	if _, err := a.sched.Throttle(ctx, size, r.Device); err != nil {
		return ScrubOK, err
	}
	err = a.store.VerifyReplica(ctx, r, id, size)
	if err == nil {
		return ScrubOK, nil
	}
	if errors.Is(err, replica.ErrCorrupt) || errors.Is(err, replica.ErrNotExist) {
		if !a.store.ReplicaListed(ctx, id, r.Device) {
			return ScrubSkipped, nil
		}
		if eg, _, err := a.store.Egroup(ctx, id); err == nil && eg.Size != size {
			// Truncated since the scan: the scan's size is not the
			// replica's any more; the next scrub checks the new one.
			return ScrubSkipped, nil
		}
		a.log.Error("scrub: bad replica", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
		a.store.MarkReplicaBad(ctx, id, r.Device)
		return ScrubBad, nil
	}
	return ScrubOK, fmt.Errorf("scrub egroup %s on %s: %w", meta.FormatID(id), r.Device, err)
}
