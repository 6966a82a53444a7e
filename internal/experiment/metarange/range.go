package metarange

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Config describes one member of a range.
type Config struct {
	// ID is this member's raft ID, 1 or more, unique in the range.
	ID uint64
	// Members maps every founding member's ID to its raft address
	// (host:port), this one's included.
	Members map[uint64]string
	// Listener, when set, is this member's raft listener (tests pass one
	// already bound); otherwise the member listens on Members[ID].
	Listener net.Listener
	// Dir holds the member's Pebble: raft log, hard state and data.
	Dir string
	// Tick is raft's logical clock; elections take 10 ticks, heartbeats 1.
	// Zero: 100 ms, the cluster's etcd setting.
	Tick time.Duration
	Log  *slog.Logger
}

// ErrUncertain means a commit's outcome is unknown: the context ended
// after the proposal left this member. The caller re-reads, as with an
// etcd commit that timed out.
var ErrUncertain = errors.New("metarange: commit outcome unknown")

// Range is one member of a replicated range. It implements meta.KV.
type Range struct {
	cfg  Config
	db   *pebble.DB
	ms   *raft.MemoryStorage
	node raft.Node
	tr   *transport
	log  *slog.Logger

	leader atomic.Uint64

	mu       sync.Mutex
	waiters  map[uint64]chan commitResult
	reads    map[uint64]chan uint64
	watchers map[*watcher]struct{}
	// applied is the last applied index; appliedCh is closed and replaced
	// whenever it moves, so readers wait for an index without polling.
	applied   uint64
	appliedCh chan struct{}
	failed    error

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

type commitResult struct {
	rev int64
	err error
}

type watcher struct {
	prefix []byte
	ch     chan meta.Event
}

// Keys in a member's Pebble. Raft's own state sorts before the data.
var (
	hardStateKey = []byte("\x00raft/hardstate")
	appliedKey   = []byte("\x00raft/applied")
	logPrefix    = []byte("\x00raft/log/")
	logEnd       = meta.PrefixEnd(logPrefix)
	dataPrefix   = []byte{0x01}
	dataEnd      = []byte{0x02}
)

func logKey(i uint64) []byte {
	k := make([]byte, len(logPrefix)+8)
	copy(k, logPrefix)
	binary.BigEndian.PutUint64(k[len(logPrefix):], i)
	return k
}

func dataKey(k []byte) []byte { return append(append(make([]byte, 0, 1+len(k)), dataPrefix...), k...) }

// A data value is the revision that wrote it (8 bytes, big-endian) and
// the caller's value.
func encodeValue(rev uint64, v []byte) []byte {
	b := make([]byte, 8+len(v))
	binary.BigEndian.PutUint64(b, rev)
	copy(b[8:], v)
	return b
}

func decodeValue(key, raw []byte) (meta.Item, error) {
	if len(raw) < 8 {
		return meta.Item{}, fmt.Errorf("metarange: value of %q is %d bytes, want at least 8", key, len(raw))
	}
	return meta.Item{Key: append([]byte(nil), key...), ModRev: int64(binary.BigEndian.Uint64(raw)), Value: append([]byte(nil), raw[8:]...)}, nil
}

// Open starts a member: it founds the range with Members the first time
// and otherwise restarts from its Pebble.
func Open(cfg Config) (*Range, error) {
	if cfg.ID == 0 || cfg.Members[cfg.ID] == "" {
		return nil, fmt.Errorf("metarange: member %d is not among the members %v", cfg.ID, cfg.Members)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	db, err := pebble.Open(cfg.Dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("metarange: open pebble %s: %w", cfg.Dir, err)
	}
	r := &Range{cfg: cfg, db: db, ms: raft.NewMemoryStorage(), log: cfg.Log,
		waiters: map[uint64]chan commitResult{}, reads: map[uint64]chan uint64{}, watchers: map[*watcher]struct{}{},
		appliedCh: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	fresh, err := r.load()
	if err != nil {
		db.Close()
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Members[cfg.ID]); err != nil {
			db.Close()
			return nil, fmt.Errorf("metarange: listen %s: %w", cfg.Members[cfg.ID], err)
		}
	}
	rc := &raft.Config{
		ID:              cfg.ID,
		ElectionTick:    10,
		HeartbeatTick:   1,
		Storage:         r.ms,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		// Bound what one Ready applies so a restart's replay of a long
		// log does not build one huge batch.
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	}
	if fresh {
		var peers []raft.Peer
		for id := range cfg.Members {
			peers = append(peers, raft.Peer{ID: id})
		}
		r.node = raft.StartNode(rc, peers)
	} else {
		// Applied stays 0: raft hands every committed entry back, and
		// apply skips the data entries at or below the applied index but
		// replays the configuration changes, which rebuild the member
		// set (there is no snapshot holding it).
		r.node = raft.RestartNode(rc)
	}
	r.tr = newTransport(cfg.ID, ln, cfg.Members, cfg.Log)
	r.tr.step = r.node.Step
	r.tr.unreachable = r.node.ReportUnreachable
	r.tr.start()
	go r.run()
	return r, nil
}

// load reads the hard state and the log into raft's memory storage and
// the applied index. It reports whether the member is new.
func (r *Range) load() (bool, error) {
	hs, closer, err := r.db.Get(hardStateKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("metarange: read hard state: %w", err)
	}
	var st pb.HardState
	err = proto.Unmarshal(hs, &st)
	closer.Close()
	if err != nil {
		return false, fmt.Errorf("metarange: hard state: %w", err)
	}
	if v, closer, err := r.db.Get(appliedKey); err == nil {
		if len(v) == 8 {
			r.applied = binary.BigEndian.Uint64(v)
		}
		closer.Close()
		if r.applied == 0 {
			return false, errors.New("metarange: applied index is not 8 bytes")
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return false, fmt.Errorf("metarange: read applied index: %w", err)
	}
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: logPrefix, UpperBound: logEnd})
	if err != nil {
		return false, err
	}
	defer it.Close()
	var ents []*pb.Entry
	want := uint64(1)
	for it.First(); it.Valid(); it.Next() {
		e := &pb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return false, fmt.Errorf("metarange: log entry %x: %w", it.Key(), err)
		}
		if e.GetIndex() != want {
			return false, fmt.Errorf("metarange: log entry %d where %d belongs: the log has a hole", e.GetIndex(), want)
		}
		want++
		ents = append(ents, e)
	}
	if err := it.Error(); err != nil {
		return false, fmt.Errorf("metarange: read log: %w", err)
	}
	if st.GetCommit() > uint64(len(ents)) {
		return false, fmt.Errorf("metarange: hard state commits index %d but the log ends at %d", st.GetCommit(), len(ents))
	}
	if r.applied > st.GetCommit() {
		return false, fmt.Errorf("metarange: applied index %d beyond the commit index %d", r.applied, st.GetCommit())
	}
	if err := r.ms.Append(ents); err != nil {
		return false, err
	}
	return false, r.ms.SetHardState(&st)
}

func (r *Range) run() {
	defer close(r.done)
	ticker := time.NewTicker(r.cfg.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			r.node.Tick()
		case rd := <-r.node.Ready():
			if err := r.handle(rd); err != nil {
				// A member that cannot write its log must not take part:
				// stop it, fail everything waiting, and say why.
				r.log.Error("metarange: member stopped", "member", r.cfg.ID, "err", err)
				r.fail(err)
				r.node.Stop()
				return
			}
		case <-r.stop:
			r.node.Stop()
			r.fail(meta.ErrClosed)
			return
		}
	}
}

func (r *Range) handle(rd raft.Ready) error {
	if rd.SoftState != nil {
		r.leader.Store(rd.SoftState.Lead)
	}
	isLeader := r.leader.Load() == r.cfg.ID
	if isLeader {
		// The leader's appends go out while it writes its own copy.
		r.tr.Send(rd.Messages)
	}
	if err := r.persist(rd); err != nil {
		return err
	}
	if !isLeader {
		r.tr.Send(rd.Messages)
	}
	if err := r.apply(rd.CommittedEntries); err != nil {
		return err
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		r.mu.Lock()
		if ch := r.reads[id]; ch != nil {
			ch <- rs.Index
			delete(r.reads, id)
		}
		r.mu.Unlock()
	}
	r.node.Advance()
	return nil
}

// persist writes a Ready's entries and hard state in one batch, synced
// when raft says it must be.
func (r *Range) persist(rd raft.Ready) error {
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		return errors.New("metarange: raft sent a snapshot, and this prototype keeps the whole log instead of snapshots")
	}
	hasState := rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState)
	if len(rd.Entries) == 0 && !hasState {
		return nil
	}
	b := r.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, e := range rd.Entries {
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], e); err != nil {
			return err
		}
		if err := b.Set(logKey(e.GetIndex()), buf, nil); err != nil {
			return err
		}
	}
	if n := len(rd.Entries); n > 0 {
		// New entries that start at or before the end of the log replace
		// its tail from there on (a deposed leader's entries): drop what
		// lies past the last new one. Only then: a range deletion per
		// Ready would pile up tombstones that every read must step over.
		last, err := r.ms.LastIndex()
		if err != nil {
			return err
		}
		if rd.Entries[0].GetIndex() <= last {
			if err := b.DeleteRange(logKey(rd.Entries[n-1].GetIndex()+1), logEnd, nil); err != nil {
				return err
			}
		}
	}
	if hasState {
		hs, err := proto.Marshal(rd.HardState)
		if err != nil {
			return err
		}
		if err := b.Set(hardStateKey, hs, nil); err != nil {
			return err
		}
	}
	opt := pebble.NoSync
	if rd.MustSync {
		opt = pebble.Sync
	}
	if err := b.Commit(opt); err != nil {
		return fmt.Errorf("metarange: write raft log: %w", err)
	}
	if err := r.ms.Append(rd.Entries); err != nil {
		return err
	}
	if hasState {
		return r.ms.SetHardState(rd.HardState)
	}
	return nil
}

type applied struct {
	id  uint64
	res commitResult
}

// apply runs committed entries against the data in one batch. Compares
// read through the batch, so an entry sees the writes of the entries
// before it in the same Ready.
func (r *Range) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	b := r.db.NewIndexedBatch()
	defer b.Close()
	var answers []applied
	var events []meta.Event
	last := r.applied
	for _, e := range ents {
		idx := e.GetIndex()
		switch e.GetType() {
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.Data, &cc); err != nil {
				return fmt.Errorf("metarange: configuration change at %d: %w", idx, err)
			}
			r.node.ApplyConfChange(&cc)
		case pb.EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.Data, &cc); err != nil {
				return fmt.Errorf("metarange: configuration change at %d: %w", idx, err)
			}
			r.node.ApplyConfChange(&cc)
		case pb.EntryNormal:
			if idx <= r.applied || len(e.Data) == 0 {
				break // applied before a restart, or a new leader's empty entry
			}
			id, t, err := decodeCommand(e.Data)
			if err != nil {
				// Every member fails the same bytes the same way; the
				// proposer, if it is waiting, learns why.
				if len(e.Data) >= 8 {
					answers = append(answers, applied{id: binary.BigEndian.Uint64(e.Data), res: commitResult{err: err}})
				}
				break
			}
			ok, err := holds(b, t.Cmps)
			if err != nil {
				return err
			}
			if !ok {
				answers = append(answers, applied{id: id, res: commitResult{err: meta.ErrConflict}})
				break
			}
			for _, op := range t.Ops {
				if op.Delete {
					if err := b.Delete(dataKey(op.Key), nil); err != nil {
						return err
					}
					events = append(events, meta.Event{Type: meta.EventDelete, Item: meta.Item{Key: bytes.Clone(op.Key), ModRev: int64(idx)}})
					continue
				}
				if err := b.Set(dataKey(op.Key), encodeValue(idx, op.Value), nil); err != nil {
					return err
				}
				// Copies: the command aliases raft's in-memory log.
				events = append(events, meta.Event{Type: meta.EventPut, Item: meta.Item{Key: bytes.Clone(op.Key), Value: bytes.Clone(op.Value), ModRev: int64(idx)}})
			}
			answers = append(answers, applied{id: id, res: commitResult{rev: int64(idx)}})
		}
		last = max(last, idx)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], last)
	if err := b.Set(appliedKey, v[:], nil); err != nil {
		return err
	}
	// Unsynced: the log holding these entries is synced already, and a
	// restart replays whatever this batch loses.
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("metarange: apply: %w", err)
	}
	r.mu.Lock()
	r.applied = last
	close(r.appliedCh)
	r.appliedCh = make(chan struct{})
	for _, a := range answers {
		if ch := r.waiters[a.id]; ch != nil {
			ch <- a.res
			delete(r.waiters, a.id)
		}
	}
	for _, ev := range events {
		for w := range r.watchers {
			if !bytes.HasPrefix(ev.Item.Key, w.prefix) {
				continue
			}
			select {
			case w.ch <- ev:
			default:
				// Too slow: close, so the watcher re-reads (meta.KV.Watch).
				close(w.ch)
				delete(r.watchers, w)
			}
		}
	}
	r.mu.Unlock()
	return nil
}

// holds evaluates compares against the state as of the entries applied
// so far, batch included.
func holds(b *pebble.Batch, cmps []meta.Cmp) (bool, error) {
	for _, c := range cmps {
		raw, closer, err := b.Get(dataKey(c.Key))
		if errors.Is(err, pebble.ErrNotFound) {
			if c.ModRev != 0 {
				return false, nil
			}
			continue
		}
		if err != nil {
			return false, err
		}
		rev := int64(0)
		if len(raw) >= 8 {
			rev = int64(binary.BigEndian.Uint64(raw))
		}
		closer.Close()
		if rev != c.ModRev {
			return false, nil
		}
	}
	return true, nil
}

func (r *Range) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = err
	}
	// Wake the reads waiting for apply: they see failed.
	close(r.appliedCh)
	r.appliedCh = make(chan struct{})
	for id, ch := range r.waiters {
		ch <- commitResult{err: err}
		delete(r.waiters, id)
	}
	for id, ch := range r.reads {
		close(ch)
		delete(r.reads, id)
	}
	for w := range r.watchers {
		close(w.ch)
		delete(r.watchers, w)
	}
}

func newID() uint64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return binary.BigEndian.Uint64(b[:])
}

// Leader is the member this one believes leads (0: none known).
func (r *Range) Leader() uint64 { return r.leader.Load() }

// ID is this member's raft ID.
func (r *Range) ID() uint64 { return r.cfg.ID }

// Commit implements meta.KV. The revision is the raft index of the entry
// that carried the transaction.
func (r *Range) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if len(t.Ops) == 0 {
		return 0, errors.New("meta: empty transaction")
	}
	if len(t.Ops)+len(t.Cmps) > meta.MaxTxnOps+16 {
		return 0, fmt.Errorf("meta: transaction has %d ops, limit %d", len(t.Ops), meta.MaxTxnOps)
	}
	for _, op := range t.Ops {
		if len(op.Value) > meta.MaxValueBytes {
			return 0, fmt.Errorf("meta: value for %q is %d bytes, limit %d", op.Key, len(op.Value), meta.MaxValueBytes)
		}
	}
	id := newID()
	ch := make(chan commitResult, 1)
	r.mu.Lock()
	if r.failed != nil {
		r.mu.Unlock()
		return 0, r.failed
	}
	r.waiters[id] = ch
	r.mu.Unlock()
	if err := r.node.Propose(ctx, encodeCommand(id, t)); err != nil {
		r.forget(id)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// raft returns the context's error also when the context
			// ended after it took the proposal, which may commit.
			return 0, fmt.Errorf("%w: %w", ErrUncertain, err)
		}
		// Not proposed (stopped, or dropped for want of a leader):
		// nothing was committed.
		return 0, fmt.Errorf("metarange: propose: %w", err)
	}
	select {
	case res := <-ch:
		return res.rev, res.err
	case <-ctx.Done():
		r.forget(id)
		return 0, fmt.Errorf("%w: %w", ErrUncertain, ctx.Err())
	}
}

func (r *Range) forget(id uint64) {
	r.mu.Lock()
	delete(r.waiters, id)
	r.mu.Unlock()
}

// barrier waits until this member has applied everything committed when
// it was called (a ReadIndex round through the leader).
func (r *Range) barrier(ctx context.Context) error {
	id := newID()
	ch := make(chan uint64, 1)
	r.mu.Lock()
	if r.failed != nil {
		r.mu.Unlock()
		return r.failed
	}
	r.reads[id] = ch
	r.mu.Unlock()
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], id)
	forget := func() {
		r.mu.Lock()
		delete(r.reads, id)
		r.mu.Unlock()
	}
	// raft drops a read request while this member knows no leader (just
	// restarted, or an election is on), so ask again until answered.
	retry := time.NewTicker(5 * r.cfg.Tick)
	defer retry.Stop()
	var index uint64
ask:
	for {
		if err := r.node.ReadIndex(ctx, rctx[:]); err != nil {
			forget()
			return fmt.Errorf("metarange: read index: %w", err)
		}
		select {
		case i, ok := <-ch:
			if !ok {
				return r.failure()
			}
			index = i
			break ask
		case <-retry.C:
		case <-ctx.Done():
			forget()
			return ctx.Err()
		}
	}
	for {
		r.mu.Lock()
		done, wait, failed := r.applied >= index, r.appliedCh, r.failed
		r.mu.Unlock()
		if failed != nil {
			return failed
		}
		if done {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Range) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return r.failed
	}
	return meta.ErrClosed
}

// Get implements meta.KV with a linearizable read.
func (r *Range) Get(ctx context.Context, key []byte) (meta.Item, error) {
	if err := r.barrier(ctx); err != nil {
		return meta.Item{}, err
	}
	return r.GetStale(ctx, key)
}

// GetStale reads this member's copy, which may lag the leader's.
func (r *Range) GetStale(_ context.Context, key []byte) (meta.Item, error) {
	raw, closer, err := r.db.Get(dataKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return meta.Item{}, meta.ErrNotFound
	}
	if err != nil {
		return meta.Item{}, fmt.Errorf("metarange: get: %w", err)
	}
	defer closer.Close()
	return decodeValue(key, raw)
}

// Scan implements meta.KV with a linearizable read.
func (r *Range) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	if err := r.barrier(ctx); err != nil {
		return nil, err
	}
	upper := dataEnd
	if end != nil {
		upper = dataKey(end)
	}
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(start), UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if limit <= 0 {
		limit = math.MaxInt
	}
	var out []meta.Item
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		item, err := decodeValue(it.Key()[len(dataPrefix):], it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, it.Error()
}

// Watch implements meta.KV: changes applied on this member from now on.
func (r *Range) Watch(ctx context.Context, prefix []byte) <-chan meta.Event {
	w := &watcher{prefix: append([]byte(nil), prefix...), ch: make(chan meta.Event, 1024)}
	r.mu.Lock()
	if r.failed != nil {
		r.mu.Unlock()
		close(w.ch)
		return w.ch
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-r.done: // closed or failed: fail() closed the channel
		}
		r.mu.Lock()
		if _, ok := r.watchers[w]; ok {
			delete(r.watchers, w)
			close(w.ch)
		}
		r.mu.Unlock()
	}()
	return w.ch
}

// Close stops the member and closes its Pebble. The data stays for a
// restart with the same Dir.
func (r *Range) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.tr.close()
		r.closeErr = r.db.Close()
	})
	return r.closeErr
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

var _ meta.KV = (*Range)(nil)
