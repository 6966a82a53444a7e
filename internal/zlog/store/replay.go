package store

import (
	"errors"
	"fmt"
	"io"
)

// replayChunk is how much of a journal file replay reads at a time.
const replayChunk = 4 << 20

// replay rebuilds the index of one device from its journal files, in
// order. Entries come back unconfirmed: a primary re-replicates an entry
// before it serves it again. A torn record at the end of the last file (a
// crash during a write that was never acknowledged) is cut off; a bad
// record anywhere else is corruption: the rest of that file is skipped and
// counted.
func (s *Store) replay(ds *devStore) error {
	ids, err := existing(ds.dev)
	if err != nil {
		return fmt.Errorf("store: list journals on %s: %w", ds.dev.ID(), err)
	}
	j := ds.j
	for i, id := range ids {
		last := i == len(ids)-1
		f, err := ds.dev.OpenFile(journalName(id))
		if err != nil {
			return fmt.Errorf("store: open %s on %s: %w", journalName(id), ds.dev.ID(), err)
		}
		jf := &jfile{id: id, f: f}
		j.files[id] = jf
		valid, rerr := s.replayFile(ds, jf)
		jf.size = valid
		if rerr != nil {
			if last && errors.Is(rerr, errShort) {
				if err := f.Truncate(valid); err != nil {
					return fmt.Errorf("store: cut torn tail of %s on %s: %w", journalName(id), ds.dev.ID(), err)
				}
				s.log.Info("log journal: cut a torn record at the end", "device", ds.dev.ID(), "file", journalName(id), "at", valid)
			} else {
				s.metrics.corrupt.Inc()
				s.log.Error("log journal: corrupt record; rest of the file skipped", "device", ds.dev.ID(), "file", journalName(id), "at", valid, "err", rerr)
			}
		}
		j.next = id + 1
	}
	for _, jf := range j.files {
		if jf.live.Load() <= 0 {
			j.filesMu.Lock()
			j.removeLocked(jf)
			j.filesMu.Unlock()
		}
	}
	return nil
}

// replayFile applies every record of jf and returns the length of its
// valid prefix and why it stopped early (errShort: torn tail).
func (s *Store) replayFile(ds *devStore, jf *jfile) (int64, error) {
	size := jf.f.Size()
	var buf []byte
	var base int64 // file offset of buf[0]
	var off int64  // file offset of the next unread byte
	for {
		// Decode what buf holds.
		for len(buf) > 0 {
			rec, n, err := decodeRecord(buf)
			if errors.Is(err, errShort) {
				break
			}
			if err != nil {
				return base, err
			}
			s.apply(ds, jf.id, uint32(base), uint32(n), &rec)
			buf = buf[n:]
			base += int64(n)
		}
		if off >= size {
			if len(buf) > 0 {
				return base, errShort
			}
			return base, nil
		}
		chunk := min(int64(replayChunk), size-off)
		next := make([]byte, len(buf)+int(chunk))
		copy(next, buf)
		m, err := jf.f.ReadAt(next[len(buf):], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return base, fmt.Errorf("store: read %s: %w", journalName(jf.id), err)
		}
		if m == 0 {
			return base, errShort
		}
		buf = next[:len(buf)+m]
		off += int64(m)
	}
}

// apply replays one record into the index.
func (s *Store) apply(ds *devStore, file, off, size uint32, rec *record) {
	r, _ := s.replica(string(ds.dev.ID()), rec.key, false)
	if r == nil {
		r = &replica{key: rec.key, ds: ds, entries: map[uint64]entry{}}
		s.replicas[rkey{string(ds.dev.ID()), rec.key}] = r
	}
	j := ds.j
	switch rec.kind {
	case KindData, KindFill:
		if old, ok := r.entries[rec.pos]; ok {
			if old.token != rec.token || old.kind != rec.kind {
				// Write-once was broken on disk; the first record stands.
				s.metrics.conflicts.Inc()
				s.log.Error("log journal: second entry for a position ignored", "replica", rec.key, "pos", rec.pos)
			}
			return
		}
		r.entries[rec.pos] = entry{file: file, off: off, size: size, kind: rec.kind, token: rec.token, flags: flagReplayed}
		j.files[file].live.Add(1)
		if r.epoch == 0 {
			r.epoch = rec.epoch
		}
	case KindTrim:
		if old, ok := r.entries[rec.pos]; ok {
			if old.kind == KindTrim {
				return
			}
			j.files[old.file].live.Add(-1)
		}
		r.entries[rec.pos] = entry{file: file, off: off, size: size, kind: KindTrim, flags: flagConfirmed}
		j.files[file].live.Add(1)
	case kindSeal:
		if rec.epoch <= r.sealed {
			return
		}
		if r.seal.set {
			j.files[r.seal.file].live.Add(-1)
		}
		r.sealed = rec.epoch
		r.seal = loc{file: file, off: off, set: true}
		j.files[file].live.Add(1)
	case kindReset:
		for _, e := range r.entries {
			j.files[e.file].live.Add(-1)
		}
		r.entries = map[uint64]entry{}
		if r.reset.set {
			j.files[r.reset.file].live.Add(-1)
		}
		r.reset = loc{file: file, off: off, set: true}
		j.files[file].live.Add(1)
	}
}
