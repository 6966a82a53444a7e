package store

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/device"
)

// Status is the outcome of a storage operation on one position.
type Status uint8

// Statuses (mirrored by the protocol's Status).
const (
	OK         Status = iota
	Taken             // the position holds another entry, a fill or a trim
	StaleEpoch        // the request's epoch is older than the replica's seal
	Sealed            // the replica is sealed: no new entries
	Busy              // a write of this position is in flight
	NotWritten
	Trimmed
	Failed // I/O or internal error (Result.Err says what)
)

func (s Status) String() string {
	return [...]string{"ok", "taken", "stale-epoch", "sealed", "busy", "not-written", "trimmed", "failed"}[s]
}

// Mode says who writes and so which checks apply.
type Mode uint8

// Modes.
const (
	// Normal: a client's write at the stripe's primary, or the primary's
	// forward to a backup. New entries need an unsealed replica and the
	// segment's epoch.
	Normal Mode = iota
	// Settle: recovery copying entries and filling holes in a sealed
	// replica; needs an epoch at least the seal's.
	Settle
)

// Result is what an operation found or did.
type Result struct {
	Status Status
	Kind   Kind  // what the position holds (Taken, reads, idempotent OK)
	Token  Token // who wrote it
	Data   []byte
	// Existing: the write was already done by the same token (idempotent
	// retry); Confirmed says whether the primary knows it replicated.
	Existing  bool
	Confirmed bool
	Err       error
}

// entry flags
const (
	flagPending   = 1 << iota // reserved; the journal write is in flight
	flagConfirmed             // the primary knows every replica holds it
	// flagReplayed: loaded from the journal at start; whether it was
	// acknowledged before the restart is unknown.
	flagReplayed
)

// entry is one position of a replica in the index.
type entry struct {
	file  uint32
	off   uint32
	size  uint32
	kind  Kind
	flags uint8
	token Token
}

type loc struct {
	file uint32
	off  uint32
	set  bool
}

// replica is one stripe replica on one device.
type replica struct {
	mu      sync.Mutex
	key     Key
	ds      *devStore
	epoch   uint64 // the epoch its entries were written in (0: none yet)
	sealed  uint64 // sealed epoch; 0 = open
	seal    loc    // the live seal record
	reset   loc    // the live reset record
	entries map[uint64]entry
	gone    bool // dropped: callers holding it must look it up again
}

// devStore is the journal and replicas of one device.
type devStore struct {
	dev *device.Device
	j   *journal
}

// ErrUnknownDevice is returned for a device this node does not have.
var ErrUnknownDevice = errors.New("store: unknown device")

// Options configure a Store.
type Options struct {
	// JournalFileBytes is the size at which journal files roll
	// (default DefaultJournalFileBytes).
	JournalFileBytes int64
	Logger           *slog.Logger
}

// Store holds this node's stripe replicas on its devices.
type Store struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics

	mu       sync.RWMutex
	devs     map[string]*devStore
	replicas map[rkey]*replica
}

type rkey struct {
	dev string
	key Key
}

// Open opens the store on devices, replaying every journal found on them.
// Devices without journals cost nothing until a replica is written there.
func Open(devs []*device.Device, opts Options) (*Store, error) {
	if opts.JournalFileBytes <= 0 {
		opts.JournalFileBytes = DefaultJournalFileBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{opts: opts, log: opts.Logger, metrics: newMetrics(), devs: map[string]*devStore{}, replicas: map[rkey]*replica{}}
	for _, d := range devs {
		ds := &devStore{dev: d, j: newJournal(d, opts.JournalFileBytes, s.metrics, opts.Logger)}
		if err := s.replay(ds); err != nil {
			s.Close()
			return nil, err
		}
		ds.j.start()
		s.devs[string(d.ID())] = ds
	}
	return s, nil
}

// Close stops every journal after its queued writes.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ds := range s.devs {
		ds.j.close()
	}
}

// Collectors returns the store's Prometheus metrics.
func (s *Store) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// replica returns (creating if asked) the replica key on device dev.
func (s *Store) replica(dev string, key Key, create bool) (*replica, error) {
	s.mu.RLock()
	r := s.replicas[rkey{dev, key}]
	ds := s.devs[dev]
	s.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	if ds == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownDevice, dev)
	}
	if !create {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r = s.replicas[rkey{dev, key}]; r == nil {
		r = &replica{key: key, ds: ds, entries: map[uint64]entry{}}
		s.replicas[rkey{dev, key}] = r
	}
	return r, nil
}

// lockReplica returns the replica locked, retrying if it was dropped
// between lookup and lock.
func (s *Store) lockReplica(dev string, key Key, create bool) (*replica, error) {
	for {
		r, err := s.replica(dev, key, create)
		if err != nil || r == nil {
			return nil, err
		}
		r.mu.Lock()
		if !r.gone {
			return r, nil
		}
		r.mu.Unlock()
	}
}

// Pending is a reserved position whose record is not written yet.
type Pending struct {
	s     *Store
	r     *replica
	pos   uint64
	epoch uint64
	kind  Kind
	token Token
	done  bool
}

// Begin checks a write of kind (data or fill) by token at pos in epoch
// and, if the position is free, reserves it. A free position is reserved
// only on an open replica at the segment's epoch (mode Normal), or on a
// sealed one by recovery (mode Settle). A position already holding the
// same token's entry answers OK with Existing set (an idempotent retry).
// When Begin returns a Pending, the caller must Write or Cancel it.
func (s *Store) Begin(dev string, key Key, pos, epoch uint64, kind Kind, token Token, mode Mode) (*Pending, Result) {
	if kind != KindData && kind != KindFill {
		return nil, Result{Status: Failed, Err: fmt.Errorf("store: begin of kind %s", kind)}
	}
	r, err := s.lockReplica(dev, key, true)
	if err != nil {
		return nil, Result{Status: Failed, Err: err}
	}
	defer r.mu.Unlock()
	if r.sealed != 0 && epoch < r.sealed {
		return nil, Result{Status: StaleEpoch}
	}
	if e, ok := r.entries[pos]; ok {
		if e.flags&flagPending != 0 {
			if e.token == token {
				return nil, Result{Status: Busy}
			}
			return nil, Result{Status: Taken, Kind: e.kind, Token: e.token}
		}
		conf := e.flags&flagConfirmed != 0 || r.sealed != 0
		if e.token == token && e.kind == kind {
			return nil, Result{Status: OK, Existing: true, Kind: e.kind, Token: e.token, Confirmed: conf}
		}
		return nil, Result{Status: Taken, Kind: e.kind, Token: e.token, Confirmed: conf}
	}
	switch {
	case mode == Settle && r.sealed == 0:
		return nil, Result{Status: Failed, Err: fmt.Errorf("store: settle write to unsealed %s", key)}
	case mode == Normal && r.sealed != 0:
		return nil, Result{Status: Sealed}
	case mode == Normal && r.epoch != 0 && epoch != r.epoch:
		if epoch < r.epoch {
			return nil, Result{Status: StaleEpoch}
		}
		// A newer epoch than the segment's: recovery closed this segment
		// (without reaching this replica); new entries go elsewhere.
		return nil, Result{Status: Sealed}
	}
	if r.epoch == 0 && mode == Normal {
		r.epoch = epoch
	}
	r.entries[pos] = entry{kind: kind, flags: flagPending, token: token}
	return &Pending{s: s, r: r, pos: pos, epoch: r.epoch, kind: kind, token: token}, Result{Status: OK}
}

// Write journals the reserved entry and returns once it is durable.
func (p *Pending) Write(data []byte) error {
	return WriteAll([]*Pending{p}, [][]byte{data})[0]
}

// record returns the journal record of the reserved entry.
func (p *Pending) record(data []byte) record {
	if p.kind != KindData {
		data = nil
	}
	epoch := p.epoch
	if epoch == 0 {
		epoch = p.r.sealed // settle into a replica that never saw a write
	}
	return record{kind: p.kind, key: p.r.key, pos: p.pos, epoch: epoch, token: p.token, data: data}
}

// WriteAll journals reserved entries (data[i] for ps[i]) with one append
// per device, so a batch costs one group commit, and returns each entry's
// error once all are durable (or failed).
func WriteAll(ps []*Pending, data [][]byte) []error {
	errs := make([]error, len(ps))
	byDev := map[*devStore][]int{}
	for i, p := range ps {
		if p.done {
			errs[i] = fmt.Errorf("store: pending write reused")
			continue
		}
		p.done = true
		byDev[p.r.ds] = append(byDev[p.r.ds], i)
	}
	var wg sync.WaitGroup
	for ds, idx := range byDev {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			offs := make([]int, len(idx))
			for k, i := range idx {
				offs[k] = len(buf)
				rec := ps[i].record(data[i])
				buf = appendRecord(buf, &rec)
			}
			file, base, err := ds.j.append(buf, int64(len(idx)))
			for k, i := range idx {
				end := len(buf)
				if k+1 < len(idx) {
					end = offs[k+1]
				}
				errs[i] = ps[i].finish(file, base+int64(offs[k]), uint32(end-offs[k]), len(data[i]), err)
			}
		}()
	}
	wg.Wait()
	return errs
}

// finish records where the entry landed (or drops the reservation).
func (p *Pending) finish(file uint32, off int64, size uint32, n int, err error) error {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[p.pos]
	if r.gone || !ok || e.flags&flagPending == 0 || e.token != p.token {
		// Dropped or reset while the write was in flight: the record
		// the journal counted live is dead.
		if err == nil {
			r.ds.j.addLive(file, -1)
			return fmt.Errorf("store: %s dropped during write", r.key)
		}
		return err
	}
	if err != nil {
		delete(r.entries, p.pos)
		p.s.metrics.writeErrors.Inc()
		return err
	}
	e.file, e.off, e.size = file, uint32(off), size
	e.flags &^= flagPending
	r.entries[p.pos] = e
	p.s.metrics.records.WithLabelValues(p.kind.String()).Inc()
	if p.kind == KindData {
		p.s.metrics.bytes.Add(float64(n))
	}
	return nil
}

// Cancel releases a reservation that will not be written.
func (p *Pending) Cancel() {
	if p.done {
		return
	}
	p.done = true
	p.r.mu.Lock()
	if e, ok := p.r.entries[p.pos]; ok && e.flags&flagPending != 0 && e.token == p.token {
		delete(p.r.entries, p.pos)
	}
	p.r.mu.Unlock()
}

// Confirm marks pos as replicated to every replica (the primary's view):
// reads of an open replica return only confirmed entries.
func (s *Store) Confirm(dev string, key Key, pos uint64) {
	r, _ := s.lockReplica(dev, key, false)
	if r == nil {
		return
	}
	if e, ok := r.entries[pos]; ok && e.flags&flagPending == 0 {
		e.flags |= flagConfirmed
		r.entries[pos] = e
	}
	r.mu.Unlock()
}

// Trim marks pos trimmed (whatever it held) so its bytes can be reclaimed.
// Trim is advisory: a read may still see the entry on a replica the trim
// did not reach, but never another entry.
func (s *Store) Trim(dev string, key Key, pos uint64) Result {
	r, err := s.lockReplica(dev, key, true)
	if err != nil {
		return Result{Status: Failed, Err: err}
	}
	e, ok := r.entries[pos]
	if ok && (e.kind == KindTrim || e.flags&flagPending != 0) {
		r.mu.Unlock()
		if e.kind == KindTrim {
			return Result{Status: OK}
		}
		return Result{Status: Busy}
	}
	// Reserve so concurrent writers see the position taken while the trim
	// record is written.
	var tok Token
	r.entries[pos] = entry{kind: KindTrim, flags: flagPending, token: tok}
	epoch := r.epoch
	r.mu.Unlock()
	rec := record{kind: KindTrim, key: key, pos: pos, epoch: epoch}
	buf := appendRecord(nil, &rec)
	file, off, err := r.ds.j.append(buf, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, still := r.entries[pos]
	if r.gone || !still || cur.kind != KindTrim || cur.flags&flagPending == 0 {
		if err == nil {
			r.ds.j.addLive(file, -1) // superseded (reset, dropped) while written
		}
		return Result{Status: OK}
	}
	if err != nil {
		if ok {
			r.entries[pos] = e
		} else {
			delete(r.entries, pos)
		}
		return Result{Status: Failed, Err: err}
	}
	if ok {
		r.ds.j.addLive(e.file, -1) // the data or fill record is dead now
	}
	r.entries[pos] = entry{file: file, off: uint32(off), size: uint32(len(buf)), kind: KindTrim, flags: flagConfirmed}
	s.metrics.records.WithLabelValues("trim").Inc()
	return Result{Status: OK}
}

// Read returns what pos holds. On an open replica only confirmed entries
// are visible (a backup's and an unconfirmed primary entry read as not
// written): a reader must never see an entry that recovery could replace
// with a fill. An unconfirmed entry replayed after a restart answers Busy
// (it may have been acknowledged). Positions below trimBefore read as
// trimmed. A reader whose layout epoch is older than the replica's seal
// answers StaleEpoch: the seal may belong to a recovery that has not
// settled (its entries may still lose to a fill) or whose layout has not
// committed, and the reader must wait for the layout that closes it.
func (s *Store) Read(dev string, key Key, pos, epoch, trimBefore uint64) Result {
	if pos < trimBefore {
		return Result{Status: Trimmed, Kind: KindTrim}
	}
	r, err := s.lockReplica(dev, key, false)
	if err != nil {
		return Result{Status: Failed, Err: err}
	}
	if r == nil {
		return Result{Status: NotWritten}
	}
	e, ok := r.entries[pos]
	sealed := r.sealed != 0
	stale := epoch < r.sealed
	r.mu.Unlock()
	switch {
	case stale:
		return Result{Status: StaleEpoch}
	case !ok || e.flags&flagPending != 0:
		return Result{Status: NotWritten}
	case e.kind == KindTrim:
		return Result{Status: Trimmed, Kind: KindTrim}
	case !sealed && e.flags&flagConfirmed == 0 && e.flags&flagReplayed != 0:
		// It may have been acknowledged before a restart: "not written"
		// could contradict an acknowledged append. The reader completes it
		// (a fill re-replicates it) or waits for recovery to seal it.
		return Result{Status: Busy}
	case !sealed && e.flags&flagConfirmed == 0:
		return Result{Status: NotWritten}
	case e.kind == KindFill:
		return Result{Status: OK, Kind: KindFill, Token: e.token}
	}
	data, err := s.readData(r, pos, e)
	if err != nil {
		return Result{Status: Failed, Err: err}
	}
	return Result{Status: OK, Kind: KindData, Token: e.token, Data: data}
}

// ReadAny returns what pos holds whether or not it is confirmed (settle
// and repair copy entries with it). Pending entries answer Busy.
func (s *Store) ReadAny(dev string, key Key, pos uint64) Result {
	r, err := s.lockReplica(dev, key, false)
	if err != nil {
		return Result{Status: Failed, Err: err}
	}
	if r == nil {
		return Result{Status: NotWritten}
	}
	e, ok := r.entries[pos]
	r.mu.Unlock()
	switch {
	case !ok:
		return Result{Status: NotWritten}
	case e.flags&flagPending != 0:
		return Result{Status: Busy}
	case e.kind != KindData:
		return Result{Status: OK, Kind: e.kind, Token: e.token}
	}
	data, err := s.readData(r, pos, e)
	if err != nil {
		return Result{Status: Failed, Err: err}
	}
	return Result{Status: OK, Kind: KindData, Token: e.token, Data: data}
}

func (s *Store) readData(r *replica, pos uint64, e entry) ([]byte, error) {
	buf, err := r.ds.j.read(e.file, int64(e.off), int(e.size))
	if err != nil {
		return nil, fmt.Errorf("store: read %s position %d: %w", r.key, pos, err)
	}
	rec, _, err := decodeRecord(buf)
	if err != nil || rec.key != r.key || rec.pos != pos || rec.kind != KindData {
		s.metrics.corrupt.Inc()
		if err == nil {
			err = fmt.Errorf("%w: record at %s:%d is not %s position %d", errCorrupt, journalName(e.file), e.off, r.key, pos)
		}
		return nil, fmt.Errorf("store: read %s position %d on %s: %w", r.key, pos, r.ds.dev.ID(), err)
	}
	s.metrics.reads.Inc()
	return rec.data, nil
}

// Seal installs epoch on the replica (durably) and returns every position
// it holds, sorted, including writes still in flight (they may become
// durable, so the new tail must be past them), and, among them, the
// positions holding fills (recovery must not settle a replica that holds
// an entry where another holds a fill as if they agreed). A seal with an
// epoch older than the replica's answers StaleEpoch.
func (s *Store) Seal(dev string, key Key, epoch uint64) (held, fills []uint64, res Result) {
	r, err := s.lockReplica(dev, key, true)
	if err != nil {
		return nil, nil, Result{Status: Failed, Err: err}
	}
	if epoch < r.sealed {
		r.mu.Unlock()
		return nil, nil, Result{Status: StaleEpoch}
	}
	if epoch > r.sealed {
		rec := record{kind: kindSeal, key: key, epoch: epoch}
		// Holding the replica lock across the journal write makes the seal
		// atomic with respect to writes: none is reserved in between.
		file, off, err := r.ds.j.append(appendRecord(nil, &rec), 1)
		if err != nil {
			r.mu.Unlock()
			return nil, nil, Result{Status: Failed, Err: err}
		}
		if r.seal.set {
			r.ds.j.addLive(r.seal.file, -1)
		}
		r.seal = loc{file: file, off: uint32(off), set: true}
		r.sealed = epoch
	}
	held = make([]uint64, 0, len(r.entries))
	for p, e := range r.entries {
		held = append(held, p)
		if e.kind == KindFill {
			fills = append(fills, p)
		}
	}
	r.mu.Unlock()
	slices.Sort(held)
	slices.Sort(fills)
	return held, fills, Result{Status: OK}
}

// DumpEntry is one entry of a replica.
type DumpEntry struct {
	Pos   uint64
	Kind  Kind
	Token Token
	Data  []byte
}

// Dump returns up to limit entries at positions >= from, in order, and the
// position to continue from (0 when done). Pending entries are skipped.
func (s *Store) Dump(dev string, key Key, from uint64, limit int) ([]DumpEntry, uint64, error) {
	r, err := s.lockReplica(dev, key, false)
	if err != nil || r == nil {
		return nil, 0, err
	}
	var ps []uint64
	for p, e := range r.entries {
		if p >= from && e.flags&flagPending == 0 {
			ps = append(ps, p)
		}
	}
	r.mu.Unlock()
	sort.Slice(ps, func(a, b int) bool { return ps[a] < ps[b] })
	var next uint64
	if len(ps) > limit {
		next = ps[limit]
		ps = ps[:limit]
	}
	out := make([]DumpEntry, 0, len(ps))
	for _, p := range ps {
		res := s.ReadAny(dev, key, p)
		switch res.Status {
		case OK:
			out = append(out, DumpEntry{Pos: p, Kind: res.Kind, Token: res.Token, Data: res.Data})
		case NotWritten, Busy:
		default:
			return nil, 0, fmt.Errorf("store: dump %s position %d: %v", key, p, res.Err)
		}
	}
	return out, next, nil
}

// Reset voids every entry of a replica (durably), keeping its seal: repair
// then copies the segment into it from a fresh replica.
//
// Reset first waits (up to resetWait) for the replica's writes in flight:
// a record reserved before the reset could otherwise reach the journal
// after the reset record, and replay would bring it back over what repair
// copies in. A sealed replica takes no new client writes, so the wait
// ends unless a device is stuck.
func (s *Store) Reset(dev string, key Key) error {
	var r *replica
	for start := time.Now(); ; {
		var err error
		if r, err = s.lockReplica(dev, key, true); err != nil {
			return err
		}
		if !r.hasPending() {
			break
		}
		r.mu.Unlock()
		if time.Since(start) > resetWait {
			return fmt.Errorf("store: reset %s: writes still in flight after %s", key, resetWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer r.mu.Unlock()
	rec := record{kind: kindReset, key: key}
	file, off, err := r.ds.j.append(appendRecord(nil, &rec), 1)
	if err != nil {
		return err
	}
	for _, e := range r.entries {
		if e.flags&flagPending == 0 {
			r.ds.j.addLive(e.file, -1)
		}
	}
	r.entries = map[uint64]entry{}
	if r.reset.set {
		r.ds.j.addLive(r.reset.file, -1)
	}
	r.reset = loc{file: file, off: uint32(off), set: true}
	return nil
}

// resetWait bounds how long Reset waits for writes in flight.
const resetWait = 10 * time.Second

// hasPending reports whether a write of the replica is in flight. r.mu
// is held.
func (r *replica) hasPending() bool {
	for _, e := range r.entries {
		if e.flags&flagPending != 0 {
			return true
		}
	}
	return false
}

// Sealed returns the replica's sealed epoch (0: open or unknown).
func (s *Store) Sealed(dev string, key Key) uint64 {
	r, _ := s.lockReplica(dev, key, false)
	if r == nil {
		return 0
	}
	defer r.mu.Unlock()
	return r.sealed
}

// TrimBefore drops the index entries of log's replicas below before:
// their records become dead and journal files that hold nothing else are
// removed. (A restart replays them; the node applies the trim again.)
func (s *Store) TrimBefore(log, before uint64) int {
	s.mu.RLock()
	var rs []*replica
	for k, r := range s.replicas {
		if k.key.Log == log {
			rs = append(rs, r)
		}
	}
	s.mu.RUnlock()
	n := 0
	for _, r := range rs {
		r.mu.Lock()
		for p, e := range r.entries {
			if p < before && e.flags&flagPending == 0 {
				r.ds.j.addLive(e.file, -1)
				delete(r.entries, p)
				n++
			}
		}
		r.mu.Unlock()
	}
	return n
}

// ReplicaInfo describes one replica.
type ReplicaInfo struct {
	Device  string
	Key     Key
	Entries int
	Sealed  uint64
}

// Replicas lists every replica.
func (s *Store) Replicas() []ReplicaInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ReplicaInfo, 0, len(s.replicas))
	for k, r := range s.replicas {
		r.mu.Lock()
		out = append(out, ReplicaInfo{Device: k.dev, Key: k.key, Entries: len(r.entries), Sealed: r.sealed})
		r.mu.Unlock()
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Device != out[b].Device {
			return out[a].Device < out[b].Device
		}
		ka, kb := out[a].Key, out[b].Key
		if ka.Log != kb.Log {
			return ka.Log < kb.Log
		}
		if ka.Segment != kb.Segment {
			return ka.Segment < kb.Segment
		}
		return ka.Stripe < kb.Stripe
	})
	return out
}

// Drop removes the replicas keep rejects (segments no longer in any
// layout) from the index; their journal space is reclaimed as files empty.
// No record is written: after a restart the caller drops them again.
func (s *Store) Drop(keep func(dev string, key Key) bool) int {
	s.mu.Lock()
	var gone []*replica
	for k, r := range s.replicas {
		if !keep(k.dev, k.key) {
			gone = append(gone, r)
			delete(s.replicas, k)
		}
	}
	s.mu.Unlock()
	for _, r := range gone {
		r.mu.Lock()
		r.gone = true
		for _, e := range r.entries {
			if e.flags&flagPending == 0 {
				r.ds.j.addLive(e.file, -1)
			}
		}
		if r.seal.set {
			r.ds.j.addLive(r.seal.file, -1)
		}
		if r.reset.set {
			r.ds.j.addLive(r.reset.file, -1)
		}
		r.entries = nil
		r.mu.Unlock()
	}
	return len(gone)
}

// DeviceStats is one device's journal state.
type DeviceStats struct {
	Device       string `json:"device"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
	FilesWithLog int    `json:"live_files"`
}

// Devices reports each device's journal.
func (s *Store) Devices() []DeviceStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []DeviceStats
	for id, ds := range s.devs {
		st := ds.j.stats()
		if st.Files == 0 {
			continue
		}
		out = append(out, DeviceStats{Device: id, Files: st.Files, Bytes: st.Bytes, FilesWithLog: st.LiveFiles})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Device < out[b].Device })
	return out
}
