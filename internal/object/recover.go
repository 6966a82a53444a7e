package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// RecoveryReport counts what start-up recovery found.
type RecoveryReport struct {
	Egroups       int
	Intact        int
	Truncated     int
	Damaged       int
	Missing       int
	Sealed        int
	OrphanFiles   int
	OrphanRemoved int
	// OrphanDeferred files are removed after Options.OrphanGrace, if their
	// egroup still has no record then.
	OrphanDeferred int
}

func (r RecoveryReport) String() string {
	return fmt.Sprintf("egroups=%d intact=%d truncated=%d damaged=%d missing=%d sealed=%d orphan_files_removed=%d orphan_files_deferred=%d",
		r.Egroups, r.Intact, r.Truncated, r.Damaged, r.Missing, r.Sealed, r.OrphanRemoved, r.OrphanDeferred)
}

// Recover brings this node's replica files in line with metadata after a
// restart, before any request is served:
//   - every replica is truncated to its egroup's committed size, removing
//     the bytes of writes that were never acknowledged — except replicas of
//     egroups another node is writing (see recoverReplica);
//   - a replica shorter than committed, or missing (a mem device after a
//     restart), is marked bad so reads skip it and the Curator repairs it;
//   - egroups this node left open are sealed (other nodes' open egroups
//     belong to their live writers);
//   - replica files with no egroup record (an unacknowledged write's new
//     egroup) are removed: at once when Options.OrphanGrace is 0 (a single
//     node, whose only writers died with it), otherwise after the grace, if
//     their egroup still has no record then and no other node's writer
//     holds it (Options.OrphanHolds). In a cluster a peer may have
//     created the file for a write it has not committed yet; removing it
//     early would leave the committed egroup a replica short.
func (l *Layer) Recover(ctx context.Context, local *Local) (RecoveryReport, error) {
	var rep RecoveryReport
	known := map[model.DeviceID]map[uint64]bool{}
	start := []byte(meta.PrefixEgroup)
	end := meta.PrefixEnd(start)
	for {
		items, err := l.kv.Scan(ctx, start, end, 1024)
		if err != nil {
			return rep, err
		}
		for _, it := range items {
			id, err := meta.ParseID(it.Key)
			if err != nil {
				return rep, fmt.Errorf("object: recover: bad egroup key %q", it.Key)
			}
			var eg meta.Egroup
			if err := meta.Decode(it.Value, &eg); err != nil {
				return rep, err
			}
			rep.Egroups++
			rev := it.ModRev
			own := eg.State == meta.EgroupOpen && (eg.Writer == l.opts.Node || eg.Writer == "")
			if own && eg.TailTo != 0 {
				// Its committed length may be past Size; find it before
				// truncating to it.
				eg, rev, err = l.settleOwnTail(ctx, id, eg, rev)
				if errors.Is(err, meta.ErrNotFound) {
					continue // removed meanwhile; its files are orphans
				}
				if err != nil {
					return rep, fmt.Errorf("object: recover: egroup %s: %w", meta.FormatID(id), err)
				}
			}
			changed := false
			for i, r := range eg.Replicas {
				st, ok := local.Store(r.Device)
				if !ok {
					continue
				}
				if known[r.Device] == nil {
					known[r.Device] = map[uint64]bool{}
				}
				known[r.Device][id] = true
				res, err := recoverReplica(st, id, eg, l.opts.Node)
				if err != nil {
					l.opts.Logger.Error("recover replica", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
				}
				switch res {
				case extent.Intact:
					rep.Intact++
				case extent.Truncated:
					rep.Truncated++
				case extent.Damaged:
					rep.Damaged++
				case extent.Missing:
					rep.Missing++
				}
				if (res == extent.Damaged || res == extent.Missing) && !r.Bad {
					eg.Replicas[i].Bad = true
					changed = true
				}
			}
			if eg.State == meta.EgroupOpen && (eg.Writer == l.opts.Node || eg.Writer == "") {
				eg.State = meta.EgroupSealed
				changed = true
				rep.Sealed++
			}
			if changed || rev != it.ModRev {
				var t meta.Txn
				t.If(it.Key, rev)
				t.Put(it.Key, meta.Encode(eg))
				if _, err := l.kv.Commit(ctx, &t); err != nil && !errors.Is(err, meta.ErrConflict) {
					return rep, err
				}
			}
		}
		if len(items) < 1024 {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	for _, dev := range local.Devices() {
		st, _ := local.Store(dev.ID())
		ids, err := st.List()
		if err != nil {
			l.opts.Logger.Error("recover: list device", "device", dev.ID(), "err", err)
			continue
		}
		var deferred []uint64
		for _, id := range ids {
			if known[dev.ID()][id] {
				continue
			}
			// The scan above is not atomic with the listing: a record
			// committed in between makes the file live. Ask again.
			if live, err := l.replicaRecorded(ctx, id, dev.ID()); err != nil || live {
				continue
			}
			rep.OrphanFiles++
			if l.opts.OrphanGrace > 0 {
				deferred = append(deferred, id)
				continue
			}
			if err := st.Remove(id); err == nil {
				rep.OrphanRemoved++
			}
		}
		if len(deferred) > 0 {
			rep.OrphanDeferred += len(deferred)
			l.bg.Add(1)
			go l.removeOrphansLater(st, deferred)
		}
	}
	l.snaps.invalidate()
	return rep, nil
}

// settleOwnTail is settleTail for an egroup this node left open, retried
// when the record changes in between (a reader on another node marked a
// replica bad, the Curator sealed it because this node was down).
func (l *Layer) settleOwnTail(ctx context.Context, id uint64, eg meta.Egroup, rev int64) (meta.Egroup, int64, error) {
	for attempt := 0; ; attempt++ {
		settled, nrev, err := l.settleTail(ctx, id, eg, rev)
		if !errors.Is(err, meta.ErrConflict) || attempt == 5 {
			return settled, nrev, err
		}
		eg = meta.Egroup{}
		if rev, err = meta.GetRecord(ctx, l.kv, meta.EgroupKey(id), &eg); err != nil {
			return eg, 0, err
		}
	}
}

// recoverReplica checks one replica against its egroup record. The
// bytes past the committed size of an egroup another node has open are
// left alone: that writer may have appended and synced them here (this
// node's replica RPC serves during recovery) and be about to commit them,
// and the record read above may already be older than its commit.
// Truncating would silently drop this replica of an acknowledged write
// (found by the chaos suite). Such a tail is harmless: readers read
// committed extents only, an append at the writer's own size fails on a
// longer file (the writer then seals the egroup), and the next restart
// after the egroup is sealed truncates it.
func recoverReplica(st *extent.Store, id uint64, eg meta.Egroup, self model.NodeID) (extent.RecoverResult, error) {
	if eg.State != meta.EgroupOpen || eg.Writer == "" || eg.Writer == self {
		return st.Recover(id, fileSize(eg))
	}
	sz, err := st.Size(id)
	switch {
	case errors.Is(err, device.ErrNotExist):
		return extent.Missing, nil
	case err != nil:
		return extent.Damaged, err
	case sz < eg.Size:
		return extent.Damaged, nil
	}
	return extent.Intact, nil
}

// replicaRecorded reports whether egroup id's record (read linearizably)
// lists a replica on device dev. A record that lists other devices only
// (the egroup moved away) leaves this file an orphan.
func (l *Layer) replicaRecorded(ctx context.Context, id uint64, dev model.DeviceID) (bool, error) {
	var eg meta.Egroup
	_, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(id), &eg)
	if errors.Is(err, meta.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range eg.Replicas {
		if r.Device == dev {
			return true, nil
		}
	}
	return false, nil
}

// removeOrphansLater removes the given replica files after the orphan
// grace unless their egroup has been recorded by then or a writer of
// another node still holds it.
func (l *Layer) removeOrphansLater(st *extent.Store, ids []uint64) {
	defer l.bg.Done()
	listed := time.Now()
	select {
	case <-l.stop:
		return // the next start-up looks at them again
	case <-time.After(l.opts.OrphanGrace):
	}
	// The same checks as the orphan sweep (orphans.go): a writer of
	// another node may still hold an egroup without a record (a stream
	// that outlasts the grace), and a file whose record lists other
	// devices may be a move's verified copy about to be switched in, so
	// that record is fenced before the removal. A file written since the
	// listing is kept.
	ctx := context.Background()
	var batch []orphanCandidate
	for _, id := range ids {
		fi, err := st.Stat(id)
		if err != nil {
			continue // removed meanwhile
		}
		c, ok, err := l.orphanCandidate(ctx, st.Device().ID(), fi)
		if err != nil {
			l.opts.Logger.Warn("orphan check failed; leaving the file for the orphan sweep", "egroup", meta.FormatID(id), "err", err)
			continue
		}
		if ok {
			batch = append(batch, c)
		}
	}
	var rep OrphanReport
	l.removeOrphans(ctx, st, batch, listed, rate.NewLimiter(rate.Inf, 1), &rep)
	l.opts.Logger.Info("removed orphan replica files after the grace", "device", st.Device().ID(), "removed", rep.Removed,
		"candidates", len(ids), "held", rep.Held, "kept", rep.Kept)
}
