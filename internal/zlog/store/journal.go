package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/terrace-storage/terrace/internal/device"
)

// Journal limits.
const (
	// DefaultJournalFileBytes is the size at which a journal file is closed
	// and a new one started: small enough that trimmed space comes back in
	// useful steps, large enough that files stay few.
	DefaultJournalFileBytes = 64 << 20
	// maxBatchBytes bounds one group commit: one write and one fsync cover
	// every record queued while the previous fsync ran, up to this much.
	maxBatchBytes = 8 << 20
	// maxQueuedBytes bounds the records waiting for the writer; writers
	// beyond it wait (back-pressure instead of unbounded memory).
	maxQueuedBytes = 64 << 20
)

const journalDir = "lg/"

func journalName(id uint32) string { return fmt.Sprintf("%s%08x.jnl", journalDir, id) }

func parseJournalName(name string) (uint32, bool) {
	if !strings.HasPrefix(name, journalDir) || !strings.HasSuffix(name, ".jnl") {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, journalDir), ".jnl"), 16, 32)
	return uint32(v), err == nil
}

// jfile is one journal file.
type jfile struct {
	id   uint32
	f    device.File
	size int64        // bytes written (writer goroutine and replay only)
	live atomic.Int64 // records the index still refers to
}

// write is one caller's records waiting for a group commit.
type write struct {
	buf []byte
	// live is how many of buf's records are live once written: the
	// writer counts them in the file before waking the caller, so a
	// file is never removed (a roll, another record dying) between the
	// fsync and the caller's accounting. A caller that finds one of
	// them dead after all takes it back with addLive(file, -1).
	live int64
	done chan struct{}
	file uint32
	off  int64
	err  error
}

// journal is one device's append-only, group-committed record log. Every
// write call returns only after its records are written and fsynced; all
// writes queued while one fsync runs share the next one.
type journal struct {
	dev      *device.Device
	log      *slog.Logger
	maxBytes int64
	metrics  *metrics

	mu      sync.Mutex
	cond    *sync.Cond // signals the writer (queue non-empty) and waiting writers (space)
	queue   []*write
	queued  int
	closed  bool
	broken  error // a write or sync failed: the journal refuses further writes
	stopped chan struct{}

	filesMu sync.RWMutex
	files   map[uint32]*jfile
	active  *jfile
	next    uint32
}

var errClosed = errors.New("store: closed")

func newJournal(dev *device.Device, maxBytes int64, m *metrics, log *slog.Logger) *journal {
	j := &journal{dev: dev, log: log, maxBytes: maxBytes, metrics: m, files: map[uint32]*jfile{}, stopped: make(chan struct{})}
	j.cond = sync.NewCond(&j.mu)
	return j
}

// start runs the writer.
func (j *journal) start() { go j.run() }

// append queues buf (whole encoded records, live of them live once
// written) and waits until it is durable. It returns the file and offset
// where buf begins.
func (j *journal) append(buf []byte, live int64) (uint32, int64, error) {
	w := &write{buf: buf, live: live, done: make(chan struct{})}
	j.mu.Lock()
	for !j.closed && j.broken == nil && j.queued > 0 && j.queued+len(buf) > maxQueuedBytes {
		j.cond.Wait()
	}
	if j.closed {
		j.mu.Unlock()
		return 0, 0, errClosed
	}
	if j.broken != nil {
		err := j.broken
		j.mu.Unlock()
		return 0, 0, err
	}
	j.queue = append(j.queue, w)
	j.queued += len(buf)
	j.cond.Broadcast()
	j.mu.Unlock()
	<-w.done
	return w.file, w.off, w.err
}

func (j *journal) run() {
	defer close(j.stopped)
	var scratch []byte
	for {
		j.mu.Lock()
		for len(j.queue) == 0 && !j.closed {
			j.cond.Wait()
		}
		if len(j.queue) == 0 && j.closed {
			j.mu.Unlock()
			return
		}
		var batch []*write
		n := 0
		for len(j.queue) > 0 && (n == 0 || n+len(j.queue[0].buf) <= maxBatchBytes) {
			w := j.queue[0]
			j.queue = j.queue[1:]
			batch = append(batch, w)
			n += len(w.buf)
		}
		j.queued -= n
		j.cond.Broadcast()
		broken := j.broken
		j.mu.Unlock()

		err := broken
		var f *jfile
		var base int64
		if err == nil {
			f, err = j.activeFor(int64(n))
		}
		if err == nil {
			scratch = scratch[:0]
			for _, w := range batch {
				scratch = append(scratch, w.buf...)
			}
			base = f.size
			if _, err = f.f.WriteAt(scratch, base); err == nil {
				err = f.f.Sync()
			}
			if err == nil {
				f.size += int64(n)
				j.metrics.syncs.Inc()
				j.metrics.batchBytes.Observe(float64(n))
			} else {
				// The bytes past f.size may be partly on disk; a restart's
				// replay stops at the first torn record, and nothing was
				// acknowledged. Later writes would land after garbage, so
				// the journal stops taking writes (the device is failed).
				err = fmt.Errorf("store: journal %s on %s: %w", journalName(f.id), j.dev.ID(), err)
				j.mu.Lock()
				j.broken = err
				j.mu.Unlock()
				j.log.Error("log journal write failed; device stops taking log writes", "device", j.dev.ID(), "err", err)
			}
		}
		off := base
		for _, w := range batch {
			w.err = err
			if f != nil {
				w.file, w.off = f.id, off
				if err == nil {
					f.live.Add(w.live)
				}
			}
			off += int64(len(w.buf))
			close(w.done)
		}
	}
}

// activeFor returns the file the next n bytes go to, starting a new file
// when the active one would grow past maxBytes.
func (j *journal) activeFor(n int64) (*jfile, error) {
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	if j.active != nil && (j.active.size == 0 || j.active.size+n <= j.maxBytes) {
		return j.active, nil
	}
	id := j.next
	f, err := j.dev.Create(journalName(id))
	if err != nil {
		return nil, fmt.Errorf("store: create journal on %s: %w", j.dev.ID(), err)
	}
	j.next++
	jf := &jfile{id: id, f: f}
	j.files[id] = jf
	prev := j.active
	j.active = jf
	if prev != nil && prev.live.Load() <= 0 {
		j.removeLocked(prev)
	}
	return jf, nil
}

// read returns n bytes at off of file id.
func (j *journal) read(id uint32, off int64, n int) ([]byte, error) {
	j.filesMu.RLock()
	f := j.files[id]
	j.filesMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("store: journal %s on %s: %w", journalName(id), j.dev.ID(), device.ErrNotExist)
	}
	buf := make([]byte, n)
	if _, err := f.f.ReadAt(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// addLive changes the live record count of file id; a file other than
// the active one whose count drops to zero is removed (space reclaimed).
func (j *journal) addLive(id uint32, delta int64) {
	j.filesMu.RLock()
	f := j.files[id]
	j.filesMu.RUnlock()
	if f == nil {
		return
	}
	if f.live.Add(delta) > 0 || delta > 0 {
		return
	}
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	if j.files[id] == f && f != j.active && f.live.Load() <= 0 {
		j.removeLocked(f)
	}
}

func (j *journal) removeLocked(f *jfile) {
	delete(j.files, f.id)
	f.f.Close()
	if err := j.dev.Remove(journalName(f.id)); err != nil {
		j.log.Warn("remove log journal file", "device", j.dev.ID(), "file", journalName(f.id), "err", err)
		return
	}
	j.metrics.filesRemoved.Inc()
}

// close stops the writer after the queued writes.
func (j *journal) close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	j.cond.Broadcast()
	j.mu.Unlock()
	<-j.stopped
	j.filesMu.Lock()
	for _, f := range j.files {
		f.f.Close()
	}
	j.filesMu.Unlock()
}

// existing lists the device's journal files in order.
func existing(dev *device.Device) ([]uint32, error) {
	names, err := dev.List()
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, n := range names {
		if id, ok := parseJournalName(n); ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids, nil
}

// stats is a device journal's state for status and metrics.
type stats struct {
	Files     int
	Bytes     int64
	LiveFiles int
}

func (j *journal) stats() stats {
	j.filesMu.RLock()
	defer j.filesMu.RUnlock()
	var s stats
	for _, f := range j.files {
		s.Files++
		s.Bytes += f.f.Size()
		if f.live.Load() > 0 {
			s.LiveFiles++
		}
	}
	return s
}
