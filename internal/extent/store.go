package extent

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
)

// maxOpenFiles bounds cached file handles per device. 512 handles cost a few
// hundred KiB of kernel memory and cover every open egroup of a busy node.
const maxOpenFiles = 512

// ErrAppendOnly means a write did not start at the current end of the file.
var ErrAppendOnly = errors.New("extent: write not at end of egroup (append-only)")

// Store keeps the egroup replica files of one device.
type Store struct {
	dev *device.Device

	mu    sync.Mutex
	files map[uint64]*handle
}

type handle struct {
	f    device.File
	refs int
	// dropped marks a handle that left the cache (its file was removed or
	// re-created) while in use; the last release closes it. Closing it
	// under a reader would fail the read with "file already closed",
	// which the device counts as an I/O error and fails the device for.
	dropped bool
	mu      sync.Mutex // serialises appends to one file
}

// dropLocked takes egroup id's handle out of the cache and closes it, or,
// while it is in use, leaves the close to its last release. The caller
// holds s.mu.
func (s *Store) dropLocked(id uint64) {
	h, ok := s.files[id]
	if !ok {
		return
	}
	delete(s.files, id)
	if h.refs == 0 {
		h.f.Close()
	} else {
		h.dropped = true
	}
}

// NewStore returns the extent store on dev.
func NewStore(dev *device.Device) *Store {
	return &Store{dev: dev, files: map[uint64]*handle{}}
}

// Device returns the underlying device.
func (s *Store) Device() *device.Device { return s.dev }

// FileName is the device-relative path of an egroup replica. 256 fan-out
// directories keep directory sizes small on large devices.
func FileName(id uint64) string { return fmt.Sprintf("eg/%02x/%016x.eg", id&0xff, id) }

func parseFileName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "eg/") || !strings.HasSuffix(name, ".eg") {
		return 0, false
	}
	base := name[strings.LastIndexByte(name, '/')+1 : len(name)-3]
	id, err := strconv.ParseUint(base, 16, 64)
	return id, err == nil
}

func (s *Store) acquire(id uint64, create bool) (*handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.files[id]; ok && !create {
		h.refs++
		return h, nil
	}
	if len(s.files) >= maxOpenFiles {
		for k, h := range s.files {
			if h.refs == 0 {
				h.f.Close()
				delete(s.files, k)
				break
			}
		}
	}
	var f device.File
	var err error
	if create {
		s.dropLocked(id)
		f, err = s.dev.Create(FileName(id))
	} else {
		f, err = s.dev.OpenFile(FileName(id))
	}
	if err != nil {
		return nil, err
	}
	h := &handle{f: f, refs: 1}
	s.files[id] = h
	return h, nil
}

func (s *Store) release(h *handle) {
	s.mu.Lock()
	h.refs--
	last := h.dropped && h.refs == 0
	s.mu.Unlock()
	if last {
		h.f.Close()
	}
}

// Create makes an empty replica file for egroup id.
func (s *Store) Create(id uint64) error {
	h, err := s.acquire(id, true)
	if err != nil {
		return err
	}
	s.release(h)
	return nil
}

// Append writes already-encoded slices at off, which must be the file's
// current size. On error the file is truncated back to off so a failed
// append leaves no partial slice behind.
func (s *Store) Append(id uint64, off int64, encoded []byte) error {
	h, err := s.acquire(id, false)
	if err != nil {
		return err
	}
	defer s.release(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	if sz := h.f.Size(); sz != off {
		return fmt.Errorf("%w: egroup %016x size %d, write at %d", ErrAppendOnly, id, sz, off)
	}
	if _, err := h.f.WriteAt(encoded, off); err != nil {
		if h.f.Size() > off {
			_ = h.f.Truncate(off)
		}
		return err
	}
	return nil
}

// Sync makes the replica durable.
func (s *Store) Sync(id uint64) error {
	h, err := s.acquire(id, false)
	if err != nil {
		return err
	}
	defer s.release(h)
	return h.f.Sync()
}

// Truncate cuts the replica to size (used to undo an unacknowledged append).
func (s *Store) Truncate(id uint64, size int64) error {
	h, err := s.acquire(id, false)
	if err != nil {
		return err
	}
	defer s.release(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f.Size() <= size {
		return nil
	}
	if err := h.f.Truncate(size); err != nil {
		return err
	}
	return h.f.Sync()
}

// Size returns the replica file's length.
func (s *Store) Size(id uint64) (int64, error) {
	h, err := s.acquire(id, false)
	if err != nil {
		return 0, err
	}
	defer s.release(h)
	return h.f.Size(), nil
}

// Read returns payload bytes [from, to) of the extent that starts at file
// offset extOff and holds extLen payload bytes. Every covering slice is
// checksum-verified; a mismatch returns ErrCorrupt and no data.
func (s *Store) Read(id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	return s.ReadInto(nil, id, extOff, extLen, from, to)
}

// ReadInto is Read using buf's storage when it is large enough, so that a
// streaming reader can recycle one buffer. The result aliases buf.
func (s *Store) ReadInto(buf []byte, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	if from < 0 || to > extLen || from > to {
		return nil, fmt.Errorf("extent: read [%d,%d) outside extent of %d bytes", from, to, extLen)
	}
	if from == to {
		return nil, nil
	}
	first, last := sliceSpan(from, to)
	start := extOff + first*(SliceSize+HeaderSize)
	end := extOff + EncodedLen(min(extLen, (last+1)*SliceSize))
	h, err := s.acquire(id, false)
	if err != nil {
		return nil, err
	}
	defer s.release(h)
	if int64(cap(buf)) >= end-start {
		buf = buf[:end-start]
	} else {
		buf = make([]byte, end-start)
	}
	n, err := h.f.ReadAt(buf, start)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: egroup %016x ends at %d, extent needs %d", ErrCorrupt, id, start+int64(n), end)
		}
		return nil, err
	}
	payload, err := decodeSlices(buf, first, extLen)
	if err != nil {
		return nil, fmt.Errorf("egroup %016x at %d: %w", id, extOff, err)
	}
	lo := from - first*SliceSize
	return payload[lo : lo+(to-from)], nil
}

// ReadRaw returns n raw bytes at off (no verification): replica copies move
// encoded slices verbatim and verify them at the destination.
func (s *Store) ReadRaw(id uint64, off, n int64) ([]byte, error) {
	h, err := s.acquire(id, false)
	if err != nil {
		return nil, err
	}
	defer s.release(h)
	buf := make([]byte, n)
	m, err := h.f.ReadAt(buf, off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(m) == n) {
		return nil, fmt.Errorf("extent: read raw egroup %016x: %w", id, err)
	}
	return buf, nil
}

// Verify checks that the first size bytes of the replica are whole, valid
// slices (scrubbing). It returns ErrCorrupt naming the first bad offset.
func (s *Store) Verify(id uint64, size int64) error {
	buf, err := s.ReadRaw(id, 0, size)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: egroup %016x shorter than %d", ErrCorrupt, id, size)
		}
		return err
	}
	if v := ScanValid(buf); v != size {
		return fmt.Errorf("%w: egroup %016x bad slice at offset %d", ErrCorrupt, id, v)
	}
	return nil
}

// Remove deletes the replica file. A read in progress on it finishes on
// the removed file (its handle stays open until released); later reads
// find no file.
//
// The handle is dropped again after the unlink: a read that arrived
// between the first drop and the unlink opened the file and cached its
// handle, and through it the store would go on serving and verifying a
// file that no longer exists (a pull moving the egroup back here would
// find a "complete copy" and copy nothing). The unlink itself runs outside
// the lock (a remote device's delete is a round trip).
func (s *Store) Remove(id uint64) error {
	s.mu.Lock()
	s.dropLocked(id)
	s.mu.Unlock()
	err := s.dev.Remove(FileName(id))
	s.mu.Lock()
	s.dropLocked(id)
	s.mu.Unlock()
	return err
}

// List returns the IDs of every egroup replica on the device.
func (s *Store) List() ([]uint64, error) {
	names, err := s.dev.List()
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseFileName(n); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// FileInfo describes one egroup replica file.
type FileInfo struct {
	ID   uint64
	Size int64
	// ModTime is the file's last modification (device.FileInfo.ModTime).
	ModTime time.Time
}

// ListInfo returns every egroup replica on the device with its size and
// modification time (the orphan sweep leaves recently written files
// alone).
func (s *Store) ListInfo() ([]FileInfo, error) {
	infos, err := s.dev.ListInfo()
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	for _, fi := range infos {
		if id, ok := parseFileName(fi.Name); ok {
			out = append(out, FileInfo{ID: id, Size: fi.Size, ModTime: fi.ModTime})
		}
	}
	return out, nil
}

// Stat returns egroup id's replica file size and modification time, as
// the medium has them (not the size a cached handle knows): a device
// error wrapping device.ErrNotExist when there is no file.
func (s *Store) Stat(id uint64) (FileInfo, error) {
	fi, err := s.dev.Stat(FileName(id))
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{ID: id, Size: fi.Size, ModTime: fi.ModTime}, nil
}

// RecoverResult says what recovery did to one replica.
type RecoverResult int

// Recovery outcomes.
const (
	// Intact: the file is exactly the committed length.
	Intact RecoverResult = iota
	// Truncated: bytes of unacknowledged writes past the committed length
	// were cut off.
	Truncated
	// Damaged: the file is shorter than committed or its tail slice is
	// invalid; the replica must be repaired from another.
	Damaged
	// Missing: the file does not exist.
	Missing
)

func (r RecoverResult) String() string {
	return [...]string{"intact", "truncated", "damaged", "missing"}[r]
}

// Recover brings one replica to its committed length after a restart.
func (s *Store) Recover(id uint64, committed int64) (RecoverResult, error) {
	sz, err := s.Size(id)
	if errors.Is(err, device.ErrNotExist) {
		return Missing, nil
	}
	if err != nil {
		return Damaged, err
	}
	res := Intact
	if sz > committed {
		if err := s.Truncate(id, committed); err != nil {
			return Damaged, err
		}
		res = Truncated
	} else if sz < committed {
		return Damaged, nil
	}
	// Content is not re-verified here: reads verify every slice they
	// return and scrubbing walks whole replicas on its own schedule, so a
	// restart costs O(egroups), not O(bytes).
	return res, nil
}
