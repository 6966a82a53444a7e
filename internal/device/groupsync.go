package device

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// SyncMode says how a device makes a file's writes durable.
type SyncMode string

const (
	// SyncFile fsyncs the file: one fsync per writer.
	SyncFile SyncMode = "file"
	// SyncFS is group commit for a device that is its own filesystem:
	// concurrent syncs of any files on the device share one syncfs(2),
	// which flushes every dirty page and the journal of the filesystem, so
	// N writers appending to N egroup files cost one flush instead of N
	// (Ceph's FileStore committed the same way). It needs Linux ≥ 5.8,
	// where syncfs reports writeback errors; on a filesystem shared with
	// other busy writers it also flushes their data.
	SyncFS SyncMode = "fs"
	// SyncAuto picks SyncFS for a device whose directory is a mount point
	// (a filesystem of its own, so syncfs flushes only this device's
	// files) when the kernel supports it, and SyncFile otherwise.
	SyncAuto SyncMode = "auto"
)

// ParseSyncMode parses "auto", "file" or "fs" ("" is auto).
func ParseSyncMode(s string) (SyncMode, error) {
	switch SyncMode(s) {
	case "", SyncAuto:
		return SyncAuto, nil
	case SyncFile:
		return SyncFile, nil
	case SyncFS:
		return SyncFS, nil
	}
	return "", fmt.Errorf("device: sync mode %q: want auto, file or fs", s)
}

// SetSyncMode switches how the device syncs files. SyncFS needs a
// directory-backed device on a kernel whose syncfs reports errors;
// otherwise the device keeps SyncFile and the error says why.
func (d *Device) SetSyncMode(m SyncMode) error {
	switch m {
	case SyncFile:
		d.group.Store(nil)
		return nil
	case SyncAuto:
		b, ok := d.be.(*dirBackend)
		if !ok || !isMountPoint(b.root) || syncfsSupported() != nil {
			d.group.Store(nil)
			return nil
		}
	case SyncFS:
	default:
		return fmt.Errorf("device %s: unknown sync mode %q", d.id, m)
	}
	b, ok := d.be.(*dirBackend)
	if !ok {
		return fmt.Errorf("device %s: sync mode fs needs a directory device", d.id)
	}
	if err := syncfsSupported(); err != nil {
		return fmt.Errorf("device %s: sync mode fs: %w", d.id, err)
	}
	root, err := os.Open(b.root)
	if err != nil {
		return fmt.Errorf("device %s: sync mode fs: %w", d.id, err)
	}
	d.group.Store(&groupSync{root: root})
	return nil
}

// SyncMode returns the device's current sync mode.
func (d *Device) SyncMode() SyncMode {
	if d.group.Load() != nil {
		return SyncFS
	}
	return SyncFile
}

// groupSync runs syncfs rounds one at a time. A caller needs a round that
// starts after its own writes; callers that arrive while a round runs
// share the next one, so under load there is one flush per round instead
// of one per writer.
type groupSync struct {
	root *os.File // the device's directory: syncfs flushes its filesystem

	mu       sync.Mutex
	cond     *sync.Cond
	running  bool
	started  uint64 // rounds started
	finished uint64 // rounds finished (rounds never overlap)
	errs     [errRing]error
	rounds   uint64 // for Stats
	// failed is the first round error, kept for good: syncfs writes back
	// every dirty page present while it runs — including pages of writers
	// that wrote after it started and wait for the next round — and
	// reports a writeback error once, marking those pages clean. A later
	// round's success therefore proves nothing for anyone who wrote
	// before a failed round finished: every later round fails too.
	failed error
}

// errRing is how many rounds' outcomes are kept: a caller reads its
// round's outcome right after the round, long before 1,024 more finish.
const errRing = 1024

// errRoundLost is returned to a caller whose round's outcome was
// overwritten before it looked (never seen in practice): the safe answer
// is a failed sync.
var errRoundLost = errors.New("device: group sync: outcome of the round was lost")

// sync makes every write issued before the call durable, sharing a round
// with concurrent callers. flush is the round's work (syncfs).
func (g *groupSync) sync(flush func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	// The first round that starts from now on covers this caller's writes.
	target := g.started + 1
	for g.finished < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		round := g.started
		g.mu.Unlock()
		err := flush()
		g.mu.Lock()
		g.running = false
		g.finished = round
		g.rounds++
		if err == nil && g.failed != nil {
			err = fmt.Errorf("device: an earlier syncfs round failed: %w", g.failed)
		} else if err != nil && g.failed == nil {
			g.failed = err
		}
		g.errs[round%errRing] = err
		g.cond.Broadcast()
	}
	if g.finished-target >= errRing {
		return errRoundLost
	}
	// Only round target's outcome counts: a writeback error it reported is
	// consumed, and a later round's success does not bring the data back.
	return g.errs[target%errRing]
}

// syncRounds reports how many flushes ran: syncfs rounds, plus the
// fsyncs of files synced one at a time (SyncFile: one per Sync).
func (d *Device) syncRounds() int64 {
	n := d.fileSyncs.Load()
	g := d.group.Load()
	if g == nil {
		return n
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return n + int64(g.rounds)
}
