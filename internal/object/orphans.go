package object

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"golang.org/x/time/rate"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// The periodic orphan sweep. Replica files that no egroup record lists on
// their device are left behind by crashes: of a move between its record
// switch and the removal of the old file, of RemoveEgroup between the
// record's deletion and the files', of a writer between creating a new
// egroup's files and committing its record. Start-up recovery removes
// them (Recover); the sweep finds them while the node serves, so their
// space does not leak until the next restart.
//
// A file without a record listing its device is not necessarily garbage:
//
//   - a writer (of this node, or of a peer appending here over RPC) may be
//     between creating a new egroup's files and committing its record. A
//     large PUT commits every egroup's record at its end, so a file it
//     filled early may sit unchanged for as long as the rest of the
//     stream takes;
//   - a move or an erasure-code rebuild may have copied the egroup here
//     and not switched the record to list the copy yet.
//
// The sweep therefore removes a file only when all of these hold:
//
//  1. it has not been modified for OrphanSweepGrace (at least
//     MinOrphanSweepGrace): a copy or an append in progress keeps it
//     fresh;
//  2. its egroup's record, read linearizably, does not list a replica on
//     the device, and is not open (an open record is its writer's; the
//     Curator seals it once its writer is gone, and a later sweep looks
//     again);
//  3. without a record, no live writer holds the egroup: this node's
//     writers register every egroup they create before its first file
//     exists (inflightEgroups), and in a cluster every other node is asked
//     the same (Options.OrphanHolds). Egroup IDs are never reused, so no
//     writer can take up the egroup after that answer; a writer that had
//     it has committed (the re-check below sees the record) or given up
//     (after a commit that may still land, it stays held for a while);
//  4. right before the removal, the record is checked once more: a file
//     without a record is kept if one exists now; for a record that lists
//     other devices, the sweep fences it (FenceEgroup: rewritten unchanged
//     if still at the revision it read), exactly as a failed move does
//     before deleting its copies. Every change that could list the file —
//     a move's or a rebuild's switch — is a compare-and-swap on the
//     revision it was decided from, so none decided before the fence can
//     land after it. The file is then removed only if it still has the
//     size the listing saw and is still older than the grace (a move
//     decided after the fence that copied it again, or an append, would
//     have changed either).
//
// What remains is a move decided after the fence that finds the old file
// in place, verifies it and keeps it (replica.Local.PullFrom keeps a
// verified copy), and switches the record in the moment between the
// sweep's last look and its removal. The sweep reads the record once more
// after every removal; if it lists the file by then, the replica is
// marked bad (reads skip it, the Curator copies it again), logged, and
// counted in terrace_object_orphan_sweep_races_total.

// MinOrphanSweepGrace is the shortest time a replica file must have gone
// unmodified before the orphan sweep considers it. Start-up recovery may
// use a grace of 0 on a single node, whose writers died with it; a serving
// node has live writers between creating a file and committing its record.
const MinOrphanSweepGrace = 10 * time.Minute

// orphanSweepBatch is how many candidates the sweep gathers before asking
// who holds them and removing them.
const orphanSweepBatch = 256

// OrphanReport counts what one orphan sweep found.
type OrphanReport struct {
	// Devices swept and the replica files listed on them.
	Devices, Files int
	// Fresh files were modified within the grace and not looked at.
	Fresh int
	// Candidates are older files whose egroup record did not list their
	// device (or did not exist).
	Candidates int
	// Held candidates had no record and a live writer that may still
	// commit them, or a node that could not be asked.
	Held int
	// Kept candidates changed before the removal: recorded meanwhile,
	// the record moved on, or the file was written again.
	Kept int
	// Removed files and their bytes.
	Removed      int
	RemovedBytes int64
	// Races are removed files whose egroup listed them by the time of the
	// removal; each was marked bad for the Curator to repair.
	Races int
	// Sealed are abandoned open egroups: open in their record, no file
	// appended to for the grace, and no writer on any node holding them
	// (a writer whose last commit failed uncertainly, then could not seal
	// the egroup). Sealed with the writer fenced, as the Curator seals an
	// egroup whose writer is down; until then nothing moved, repaired or
	// collected them.
	Sealed int
	// Errors are metadata or device errors; their files are left for the
	// next sweep.
	Errors int
}

func (r OrphanReport) String() string {
	return fmt.Sprintf("devices=%d files=%d fresh=%d candidates=%d held=%d kept=%d removed=%d removed_bytes=%d races=%d sealed=%d errors=%d",
		r.Devices, r.Files, r.Fresh, r.Candidates, r.Held, r.Kept, r.Removed, r.RemovedBytes, r.Races, r.Sealed, r.Errors)
}

func (r *OrphanReport) add(o OrphanReport) {
	r.Devices += o.Devices
	r.Files += o.Files
	r.Fresh += o.Fresh
	r.Candidates += o.Candidates
	r.Held += o.Held
	r.Kept += o.Kept
	r.Removed += o.Removed
	r.RemovedBytes += o.RemovedBytes
	r.Races += o.Races
	r.Sealed += o.Sealed
	r.Errors += o.Errors
}

// OrphanSweepGrace is how long a replica file must have gone unmodified
// before the sweep considers it: Options.OrphanGrace, at least
// MinOrphanSweepGrace.
func (l *Layer) OrphanSweepGrace() time.Duration {
	return max(l.opts.OrphanGrace, MinOrphanSweepGrace)
}

// StartOrphanSweep runs SweepOrphans over local's devices every period
// (the first one period from now) until ctx ends or the layer closes.
// A period ≤ 0 runs nothing.
func (l *Layer) StartOrphanSweep(ctx context.Context, local *Local, every time.Duration) {
	if every <= 0 {
		return
	}
	select {
	case <-l.stop:
		return
	default:
	}
	l.bg.Add(1)
	go l.orphanSweepLoop(ctx, local, every)
}

func (l *Layer) orphanSweepLoop(ctx context.Context, local *Local, every time.Duration) {
	defer l.bg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close stops a sweep in the middle: its rate limiter's waits and
	// metadata reads end with ctx.
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.SweepOrphans(ctx, local); err != nil && ctx.Err() == nil {
			l.opts.Logger.Warn("orphan sweep", "err", err)
		}
		t.Reset(every)
	}
}

// SweepOrphans makes one pass over local's devices and removes the
// replica files no egroup record lists on their device (see the comment
// at the top of this file for when a file counts as an orphan). It reads
// at most Options.OrphanSweepRate records per second and logs a summary
// per device.
func (l *Layer) SweepOrphans(ctx context.Context, local *Local) (OrphanReport, error) {
	var total OrphanReport
	lim := rate.NewLimiter(rate.Limit(l.opts.OrphanSweepRate), max(1, int(l.opts.OrphanSweepRate/10)))
	var errs []error
	for _, dev := range local.Devices() {
		if dev.Failed() {
			continue
		}
		st, ok := local.Store(dev.ID())
		if !ok {
			continue
		}
		start := time.Now()
		rep, err := l.sweepDevice(ctx, st, lim)
		total.add(rep)
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("device %s: %w", dev.ID(), err))
			continue
		}
		lvl := l.opts.Logger.Debug
		if rep.Candidates > 0 || rep.Errors > 0 {
			lvl = l.opts.Logger.Info
		}
		lvl("orphan sweep", "device", dev.ID(), "removed", rep.Removed, "bytes", rep.RemovedBytes,
			"candidates", rep.Candidates, "held", rep.Held, "kept", rep.Kept, "files", rep.Files,
			"errors", rep.Errors, "took", time.Since(start).Round(time.Millisecond))
	}
	return total, errors.Join(errs...)
}

// orphanCandidate is a replica file whose record did not list its device.
type orphanCandidate struct {
	file extent.FileInfo
	// rev is the revision of the record that lists other devices only;
	// 0: there was no record.
	rev int64
	// open: the record is open (at rev) and this file idle for the
	// grace: a seal candidate if no writer holds the egroup, not a
	// removal.
	open bool
}

func (l *Layer) sweepDevice(ctx context.Context, st *extent.Store, lim *rate.Limiter) (OrphanReport, error) {
	var rep OrphanReport
	dev := st.Device().ID()
	files, err := st.ListInfo()
	if err != nil {
		return rep, err
	}
	rep.Devices, rep.Files = 1, len(files)
	cutoff := time.Now().Add(-l.OrphanSweepGrace())
	var batch, opens []orphanCandidate
	for _, fi := range files {
		if fi.ModTime.After(cutoff) {
			rep.Fresh++
			continue
		}
		if err := lim.Wait(ctx); err != nil {
			return rep, err
		}
		c, orphan, err := l.orphanCandidate(ctx, dev, fi)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			rep.Errors++
			continue
		}
		if c.open {
			opens = append(opens, c)
			continue
		}
		if !orphan {
			continue
		}
		rep.Candidates++
		batch = append(batch, c)
		if len(batch) == orphanSweepBatch {
			l.removeOrphans(ctx, st, batch, cutoff, lim, &rep)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		l.removeOrphans(ctx, st, batch, cutoff, lim, &rep)
	}
	if len(opens) > 0 {
		l.sealAbandoned(ctx, opens, &rep)
	}
	return rep, ctx.Err()
}

// orphanCandidate reads fi's egroup record and reports whether the file
// is a candidate: the record is missing, or sealed and lists other
// devices only.
func (l *Layer) orphanCandidate(ctx context.Context, dev model.DeviceID, fi extent.FileInfo) (orphanCandidate, bool, error) {
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(fi.ID), &eg)
	if errors.Is(err, meta.ErrNotFound) {
		return orphanCandidate{file: fi}, true, nil
	}
	if err != nil {
		return orphanCandidate{}, false, err
	}
	if eg.State == meta.EgroupOpen {
		// An open egroup belongs to its writer: never removed. Its
		// file has not been appended to for the grace, though, so it
		// may be abandoned (sweepDevice asks who holds it).
		return orphanCandidate{file: fi, rev: rev, open: true}, false, nil
	}
	for _, r := range eg.Replicas {
		if r.Device == dev {
			return orphanCandidate{}, false, nil
		}
	}
	return orphanCandidate{file: fi, rev: rev}, true, nil
}

// removeOrphans removes a batch of candidates that still qualify.
func (l *Layer) removeOrphans(ctx context.Context, st *extent.Store, batch []orphanCandidate, cutoff time.Time, lim *rate.Limiter, rep *OrphanReport) {
	dev := st.Device().ID()
	if l.sweepHook != nil {
		for _, c := range batch {
			l.sweepHook("candidate", dev, c.file.ID)
		}
	}
	var unrecorded []uint64
	for _, c := range batch {
		if c.rev == 0 {
			unrecorded = append(unrecorded, c.file.ID)
		}
	}
	held, holdErr := l.heldAnywhere(ctx, unrecorded)
	if holdErr != nil && ctx.Err() == nil {
		l.opts.Logger.Info("orphan sweep: files without an egroup record kept for the next sweep (could not ask every node whether a writer holds them)",
			"device", dev, "files", len(unrecorded), "err", holdErr)
	}
	for _, c := range batch {
		if ctx.Err() != nil {
			return
		}
		id := c.file.ID
		if c.rev == 0 && (holdErr != nil || held[id]) {
			rep.Held++
			continue
		}
		if err := lim.Wait(ctx); err != nil {
			return
		}
		still, err := l.stillOrphan(ctx, id, c.rev)
		if err != nil {
			rep.Errors++
			continue
		}
		if !still {
			rep.Kept++
			continue
		}
		fi, err := st.Stat(id)
		if errors.Is(err, device.ErrNotExist) {
			continue // removed meanwhile (recovery's deferred removal, a move's cleanup)
		}
		if err != nil {
			rep.Errors++
			continue
		}
		if fi.Size != c.file.Size || fi.ModTime.After(cutoff) {
			rep.Kept++ // written since the listing: a copy made after the fence
			continue
		}
		if err := st.Remove(id); err != nil {
			if !errors.Is(err, device.ErrNotExist) {
				rep.Errors++
			}
			continue
		}
		rep.Removed++
		rep.RemovedBytes += fi.Size
		l.m.orphanFiles.Inc()
		l.m.orphanBytes.Add(float64(fi.Size))
		if l.sweepHook != nil {
			l.sweepHook("removed", dev, id)
		}
		if live, err := l.replicaRecorded(ctx, id, dev); err == nil && live {
			rep.Races++
			l.m.orphanRaces.Inc()
			l.opts.Logger.Error("orphan sweep removed a replica file that its egroup lists now; marking the replica bad for the Curator to repair",
				"egroup", meta.FormatID(id), "device", dev)
			l.MarkReplicaBad(context.WithoutCancel(ctx), id, dev)
		}
	}
}

// sealAbandoned seals the open egroups among opens that no writer on any
// node holds. Only a writer holding an egroup can append to it (and would
// have kept its files fresh), so one that none holds will never be sealed
// by its writer; SealEgroup settles its tail with the writer fenced first
// (at the revision read), so a writer that does commit meanwhile makes the
// seal stale instead.
func (l *Layer) sealAbandoned(ctx context.Context, opens []orphanCandidate, rep *OrphanReport) {
	ids := make([]uint64, len(opens))
	for i, c := range opens {
		ids[i] = c.file.ID
	}
	held, err := l.heldAnywhere(ctx, ids)
	if err != nil {
		return // a node could not be asked: the next sweep looks again
	}
	for _, c := range opens {
		if held[c.file.ID] || ctx.Err() != nil {
			continue
		}
		if err := l.SealEgroup(ctx, c.file.ID, c.rev); err != nil {
			if !errors.Is(err, ErrStale) {
				rep.Errors++
			}
			continue
		}
		rep.Sealed++
		l.opts.Logger.Warn("orphan sweep sealed an abandoned open egroup (no writer holds it; its files idle for the grace)",
			"egroup", meta.FormatID(c.file.ID))
	}
}

// stillOrphan is the check right before a removal. Without a record
// (rev 0): the record still does not exist. With one that listed other
// devices at rev: it is fenced at rev, so that no switch decided from an
// earlier revision (a move or rebuild that would list this file) can land
// after the removal. A record that moved on is left for the next sweep.
func (l *Layer) stillOrphan(ctx context.Context, id uint64, rev int64) (bool, error) {
	if rev == 0 {
		_, err := l.kv.Get(ctx, meta.EgroupKey(id))
		if errors.Is(err, meta.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	err := l.FenceEgroup(ctx, id, rev)
	if errors.Is(err, ErrStale) {
		return false, nil
	}
	return err == nil, err
}

// heldAnywhere returns which of ids a live writer holds: this node's
// (inflightEgroups) or, through Options.OrphanHolds, another node's.
func (l *Layer) heldAnywhere(ctx context.Context, ids []uint64) (map[uint64]bool, error) {
	held := map[uint64]bool{}
	if len(ids) == 0 {
		return held, nil
	}
	for _, id := range ids {
		if l.inflight.holds(id) {
			held[id] = true
		}
	}
	if l.opts.OrphanHolds == nil {
		return held, nil
	}
	var ask []uint64
	for _, id := range ids {
		if !held[id] {
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return held, nil
	}
	peers, err := l.opts.OrphanHolds(ctx, ask)
	if err != nil {
		return held, err
	}
	for _, id := range peers {
		held[id] = true
	}
	return held, nil
}

// HeldEgroups returns the egroups among ids that this node's writers
// created and may still commit: the answer to another node's orphan
// sweep (Options.OrphanHolds).
func (l *Layer) HeldEgroups(ids []uint64) []uint64 {
	var out []uint64
	for _, id := range ids {
		if l.inflight.holds(id) {
			out = append(out, id)
		}
	}
	return out
}

// inflightEgroups are the egroups this node's writers created, from
// before their first file exists for as long as a writer can still
// commit them. An entry holds its openEgroup weakly: once no writer, pool
// or appender refers to the egroup any more, nothing can commit it, and
// the entry lapses with the next garbage collection. (Egroups that were
// committed and stay in the pool keep their entries; the sweep asks only
// about egroups without a record.)
//
// A writer whose commit failed without saying whether it landed gives the
// egroup up, but the transaction may still land a moment later: such
// egroups are pinned for MinOrphanSweepGrace (pin, from sealDropped).
type inflightEgroups struct {
	mu     sync.Mutex
	m      map[uint64]weak.Pointer[openEgroup]
	pinned map[uint64]time.Time
	// pruneAt is the size at which add drops lapsed entries.
	pruneAt int
}

func (r *inflightEgroups) add(e *openEgroup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint64]weak.Pointer[openEgroup]{}
	}
	if len(r.m)+len(r.pinned) >= max(r.pruneAt, 1024) {
		for id, p := range r.m {
			if p.Value() == nil {
				delete(r.m, id)
			}
		}
		now := time.Now()
		for id, until := range r.pinned {
			if !now.Before(until) {
				delete(r.pinned, id)
			}
		}
		r.pruneAt = 2 * (len(r.m) + len(r.pinned))
	}
	r.m[e.id] = weak.Make(e)
}

// pin holds egroup id until the given time, whoever refers to it.
func (r *inflightEgroups) pin(id uint64, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned == nil {
		r.pinned = map[uint64]time.Time{}
	}
	if until.After(r.pinned[id]) {
		r.pinned[id] = until
	}
}

func (r *inflightEgroups) holds(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if until, ok := r.pinned[id]; ok {
		if time.Now().Before(until) {
			return true
		}
		delete(r.pinned, id)
	}
	p, ok := r.m[id]
	if !ok {
		return false
	}
	if p.Value() == nil {
		delete(r.m, id)
		return false
	}
	return true
}
