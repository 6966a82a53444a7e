package curator

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Spilling a full scan's extent side to disk. A full scan holds one
// 64-byte record per extent and one 16-byte reference per extent an
// object, version or upload part names — at 40M extents, 2.6 GB and
// 0.6 GB, a third of the master's heap at the 10M-egroup scale
// (docs/perf.md) and, unlike the egroup views, proportional to the data,
// not to the egroups. Past a budget (Options.ScanMemoryBytes) these
// arrays live in memory-mapped files instead of the Go heap: the kernel
// writes their pages to the file and drops them under memory pressure
// instead of the process growing until it is killed, and the collector
// neither counts nor scans them.
//
// A file is created in the spill directory, unlinked at once (a crash
// leaves nothing behind), given its whole size with fallocate (so that
// a full disk is an error here, not a SIGBUS on the first write to a
// page) and mapped shared. Only arrays of pointer-free types live there
// (extentRec, extentRef, int32): the collector does not see the mapping,
// so a pointer in it would not keep its target alive.
//
// Every array the scan allocates through a spill is released by
// spill.release when the job is done with the scan result; an array
// that cannot be mapped (the disk is full, the directory is not
// writable) is allocated on the heap, with one warning per scan.

// A spillRun's mapped chunks start at spillChunkMin bytes and double up
// to spillChunkMax: a 40M-extent scan needs a few hundred mappings, and
// the partly filled last chunks of 64 partitions (16 per map) reserve
// little disk when the partitions are small.
const (
	spillChunkMin = 1 << 20
	spillChunkMax = 16 << 20
)

// spill is one scan's budget of heap for its spillable arrays and the
// mappings it made past it.
type spill struct {
	dir    string
	budget int64 // <= 0: no limit (never map)
	log    *slog.Logger

	mu     sync.Mutex
	heap   int64    // bytes of spillable arrays on the heap now
	maps   [][]byte // live mappings
	mapped int64    // bytes mapped now
	peak   int64    // the most bytes mapped at once
	warned bool
}

func newSpill(dir string, budget int64, log *slog.Logger) *spill {
	if dir == "" {
		dir = os.TempDir()
	}
	return &spill{dir: dir, budget: budget, log: log}
}

// onHeap reports whether size more bytes fit the heap budget, and if so
// counts them.
func (s *spill) onHeap(size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget <= 0 || s.heap+size <= s.budget {
		s.heap += size
		return true
	}
	return false
}

// charge counts size bytes of heap that cannot be spilled (a reducer's
// fingerprints) against the budget, so that the arrays after them spill
// sooner; freeHeap returns them.
func (s *spill) charge(size int64) {
	s.mu.Lock()
	s.heap += size
	s.mu.Unlock()
}

// freeHeap returns size bytes of heap arrays to the budget.
func (s *spill) freeHeap(size int64) {
	s.mu.Lock()
	s.heap -= size
	s.mu.Unlock()
}

// mapFile returns size zeroed bytes backed by a new unlinked file in the
// spill directory.
func (s *spill) mapFile(size int64) ([]byte, error) {
	f, err := os.CreateTemp(s.dir, "terrace-scan-spill-*")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return nil, err
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return nil, fmt.Errorf("fallocate %d bytes in %s: %w", size, s.dir, err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	s.mu.Lock()
	s.maps = append(s.maps, b)
	s.mapped += size
	s.peak = max(s.peak, s.mapped)
	s.mu.Unlock()
	return b, nil
}

// unmap releases one mapping made by mapFile.
func (s *spill) unmap(b []byte) {
	s.mu.Lock()
	for i, m := range s.maps {
		if len(m) > 0 && &m[0] == &b[0] {
			s.maps = append(s.maps[:i], s.maps[i+1:]...)
			s.mapped -= int64(len(b))
			break
		}
	}
	s.mu.Unlock()
	_ = unix.Munmap(b)
}

// mappedBytes is the most bytes the scan has had in mapped files at
// once (the disk a spill takes at its peak).
func (s *spill) mappedBytes() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// release unmaps every mapping: no array from this spill may be used
// after it.
func (s *spill) release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	maps := s.maps
	s.maps, s.heap, s.mapped = nil, 0, 0
	s.mu.Unlock()
	for _, b := range maps {
		_ = unix.Munmap(b)
	}
}

func (s *spill) warn(size int64, err error) {
	s.mu.Lock()
	first := !s.warned
	s.warned = true
	s.mu.Unlock()
	if first && s.log != nil {
		s.log.Warn("curator: cannot spill scan arrays to disk; keeping them in memory", "dir", s.dir, "bytes", size, "err", err)
	}
}

// spillSlice returns n zeroed Ts on the heap while the budget allows,
// else in a mapped file. T must hold no pointers. A nil spill allocates
// on the heap.
func spillSlice[T any](s *spill, n int) []T {
	var zero T
	size := int64(n) * int64(unsafe.Sizeof(zero))
	if s == nil || n == 0 || s.onHeap(size) {
		return make([]T, n)
	}
	b, err := s.mapFile(size)
	if err != nil {
		s.warn(size, err)
		s.mu.Lock()
		s.heap += size
		s.mu.Unlock()
		return make([]T, n)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// freeSlice gives back what spillSlice took for xs: heap bytes to the
// budget, a mapping to the kernel. xs must not be used afterwards.
func freeSlice[T any](s *spill, xs []T) {
	if s == nil || cap(xs) == 0 {
		return
	}
	var zero T
	size := int64(cap(xs)) * int64(unsafe.Sizeof(zero))
	if b := s.mappingOf(unsafe.Pointer(unsafe.SliceData(xs))); b != nil {
		s.unmap(b)
		return
	}
	s.freeHeap(size)
}

// mappingOf returns the mapping starting at p, if any.
func (s *spill) mappingOf(p unsafe.Pointer) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.maps {
		if unsafe.Pointer(&m[0]) == p {
			return m
		}
	}
	return nil
}

// spillRun is an append-only sequence of Ts (pointer-free) in chunks:
// heap chunks of heapChunk records while the spill's budget allows, then
// mapped chunks of spillChunkBytes. One goroutine appends; moveTo hands
// the records over in order and frees the chunks.
type spillRun[T any] struct {
	s         *spill
	chunks    [][]T
	n         int
	lastChunk int64 // bytes of the last mapped chunk
}

// heapChunkRecords is the length of a heap chunk of a spillRun.
const heapChunkRecords = 4096

func (r *spillRun[T]) add(x T) {
	if k := len(r.chunks); k == 0 || len(r.chunks[k-1]) == cap(r.chunks[k-1]) {
		r.chunks = append(r.chunks, r.newChunk())
	}
	k := len(r.chunks) - 1
	r.chunks[k] = append(r.chunks[k], x)
	r.n++
}

func (r *spillRun[T]) newChunk() []T {
	var zero T
	rec := int64(unsafe.Sizeof(zero))
	if r.s == nil || r.s.onHeap(heapChunkRecords*rec) {
		return make([]T, 0, heapChunkRecords)
	}
	size := min(max(2*r.lastChunk, spillChunkMin), spillChunkMax)
	n := int(size / rec)
	b, err := r.s.mapFile(int64(n) * rec)
	if err != nil {
		r.s.warn(int64(n)*rec, err)
		r.s.mu.Lock()
		r.s.heap += heapChunkRecords * rec
		r.s.mu.Unlock()
		return make([]T, 0, heapChunkRecords)
	}
	r.lastChunk = int64(n) * rec
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)[:0]
}

// len is how many records the run holds.
func (r *spillRun[T]) len() int { return r.n }

// drain calls fn with every record in order, freeing each chunk once
// visited (so that copying a run elsewhere does not hold both whole);
// the run is empty afterwards.
func (r *spillRun[T]) drain(fn func(*T)) {
	for c, ch := range r.chunks {
		for i := range ch {
			fn(&ch[i])
		}
		freeSlice(r.s, ch)
		r.chunks[c] = nil
	}
	r.chunks, r.n, r.lastChunk = nil, 0, 0
}

// free releases every chunk; the run is empty afterwards.
func (r *spillRun[T]) free() {
	for _, ch := range r.chunks {
		freeSlice(r.s, ch)
	}
	r.chunks, r.n, r.lastChunk = nil, 0, 0
}
