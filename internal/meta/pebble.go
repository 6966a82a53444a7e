package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// revKey holds the store's current revision. It sorts after every map key
// (all map keys start with a printable byte).
var revKey = []byte("\xff\xffrev")

// Pebble is the embedded single-node KV. Values are stored as an 8-byte
// big-endian modification revision followed by the value, so that Cmp works
// exactly like etcd's ModRevision compare.
type Pebble struct {
	db *pebble.DB

	// mu serialises compare+apply so compares see every earlier commit; the
	// WAL sync happens after mu is released, so concurrent commits share
	// fsyncs (group commit).
	mu  sync.Mutex
	rev int64

	watchMu  sync.Mutex
	watchers map[*watcher]struct{}

	// closed makes calls after Close return ErrClosed instead of letting
	// Pebble panic; Close takes closeMu exclusively, so it waits for calls
	// in flight.
	closeMu sync.RWMutex
	closed  bool

	reads, commits atomic.Int64

	// snaps are the open snapshots (SnapshotAt shares them).
	snapMu sync.Mutex
	snaps  map[*pebbleSnapshot]struct{}
}

// enter guards a call against a concurrent Close.
func (p *Pebble) enter() error {
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (p *Pebble) exit() { p.closeMu.RUnlock() }

var _ KV = (*Pebble)(nil)

// DefaultBlockCacheBytes is Pebble's block cache when none is configured:
// eight times Pebble's own 8 MiB default, so the bucket, object and
// egroup records a busy node reads stay in memory, while a single node
// stays well inside its memory budget.
const DefaultBlockCacheBytes = 64 << 20

// PebbleOptions tune OpenPebbleWith. Zero values mean defaults.
type PebbleOptions struct {
	// BlockCacheBytes sizes the block cache (default
	// DefaultBlockCacheBytes).
	BlockCacheBytes int64
}

// OpenPebble opens (creating if needed) a Pebble store in dir with the
// default options.
func OpenPebble(dir string) (*Pebble, error) { return OpenPebbleWith(dir, PebbleOptions{}) }

// OpenPebbleWith opens (creating if needed) a Pebble store in dir.
func OpenPebbleWith(dir string, o PebbleOptions) (*Pebble, error) {
	if o.BlockCacheBytes < 0 {
		return nil, fmt.Errorf("meta: block cache size %d must not be negative", o.BlockCacheBytes)
	}
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes
	}
	cache := pebble.NewCache(o.BlockCacheBytes)
	// The DB takes its own reference; ours goes when Open returns.
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("meta: open pebble %s: %w", dir, err)
	}
	p := &Pebble{db: db, watchers: map[*watcher]struct{}{}}
	v, closer, err := db.Get(revKey)
	switch {
	case err == pebble.ErrNotFound:
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("meta: read revision: %w", err)
	default:
		if len(v) != 8 {
			closer.Close()
			db.Close()
			return nil, fmt.Errorf("meta: corrupt revision record (%d bytes)", len(v))
		}
		p.rev = int64(binary.BigEndian.Uint64(v))
		closer.Close()
	}
	return p, nil
}

// scanChunkBytes is the size of the chunks a scan copies keys and values
// into.
const scanChunkBytes = 16 << 10

func decodeValue(key, raw []byte) (Item, error) {
	if len(raw) < 8 {
		return Item{}, fmt.Errorf("meta: corrupt value for key %q (%d bytes)", key, len(raw))
	}
	return Item{
		Key:    append([]byte(nil), key...),
		Value:  append([]byte(nil), raw[8:]...),
		ModRev: int64(binary.BigEndian.Uint64(raw[:8])),
	}, nil
}

// Get implements KV.
func (p *Pebble) Get(ctx context.Context, key []byte) (Item, error) {
	p.reads.Add(1)
	if err := ctx.Err(); err != nil {
		return Item{}, err
	}
	if err := p.enter(); err != nil {
		return Item{}, err
	}
	defer p.exit()
	raw, closer, err := p.db.Get(key)
	if err == pebble.ErrNotFound {
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("meta: get: %w", err)
	}
	defer closer.Close()
	return decodeValue(key, raw)
}

// Scan implements KV.
func (p *Pebble) Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error) {
	p.reads.Add(1)
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.exit()
	return scanIter(ctx, p.db.NewIter, start, end, limit)
}

// scanIter is Scan over the iterators newIter makes (the store's or a
// snapshot's).
func scanIter(ctx context.Context, newIter func(*pebble.IterOptions) (*pebble.Iterator, error), start, end []byte, limit int) ([]Item, error) {
	if end == nil || bytes.Compare(end, revKey) > 0 {
		end = revKey
	}
	if len(start) == 0 {
		// No lower bound. (An empty, non-nil one makes Pebble's invariant
		// checks, on in -race builds, index key[0] and panic.)
		start = nil
	}
	it, err := newIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, fmt.Errorf("meta: scan: %w", err)
	}
	defer it.Close()
	var out []Item
	if limit > 0 {
		out = make([]Item, 0, min(limit, 1024))
	}
	// The items' keys and values are copied into shared chunks, not one
	// allocation each: a scan page of small records (the Curator's map
	// stage reads millions) is then a few allocations instead of two per
	// record. A chunk is small enough that an item a caller keeps pins
	// little else.
	var chunk []byte
	for ok := it.First(); ok; ok = it.Next() {
		if limit > 0 && len(out) >= limit {
			break
		}
		if len(out)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("meta: scan: %w", err)
		}
		key := it.Key()
		if len(v) < 8 {
			return nil, fmt.Errorf("meta: corrupt value for key %q (%d bytes)", key, len(v))
		}
		n := len(key) + len(v) - 8
		if cap(chunk)-len(chunk) < n {
			chunk = make([]byte, 0, max(scanChunkBytes, n))
		}
		at := len(chunk)
		chunk = append(chunk, key...)
		chunk = append(chunk, v[8:]...)
		k := at + len(key)
		out = append(out, Item{
			// Full slice expressions: appending to a Key must not
			// overwrite its Value.
			Key:    chunk[at:k:k],
			Value:  chunk[k:len(chunk):len(chunk)],
			ModRev: int64(binary.BigEndian.Uint64(v[:8])),
		})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("meta: scan: %w", err)
	}
	return out, nil
}

func (p *Pebble) modRev(key []byte) (int64, error) {
	raw, closer, err := p.db.Get(key)
	if err == pebble.ErrNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(raw) < 8 {
		return 0, fmt.Errorf("meta: corrupt value for key %q", key)
	}
	return int64(binary.BigEndian.Uint64(raw[:8])), nil
}

// KVStats implements StatsReporter.
func (p *Pebble) KVStats() KVStats {
	c := p.commits.Load()
	return KVStats{Reads: p.reads.Load(), Commits: c, BackendTxns: c}
}

var _ StatsReporter = (*Pebble)(nil)

// Commit implements KV.
func (p *Pebble) Commit(ctx context.Context, t *Txn) (int64, error) {
	p.commits.Add(1)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(t.Ops) == 0 {
		return 0, fmt.Errorf("meta: empty transaction")
	}
	if len(t.Ops) > MaxTxnOps {
		return 0, fmt.Errorf("meta: transaction has %d ops, limit %d", len(t.Ops), MaxTxnOps)
	}
	for _, op := range t.Ops {
		if len(op.Key) == 0 || op.Key[0] == 0xff {
			return 0, fmt.Errorf("meta: invalid key %q", op.Key)
		}
		if len(op.Value) > MaxValueBytes {
			return 0, fmt.Errorf("meta: value for %q is %d bytes, limit %d", op.Key, len(op.Value), MaxValueBytes)
		}
	}
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.exit()
	b := p.db.NewBatch()
	defer b.Close()

	p.mu.Lock()
	for _, c := range t.Cmps {
		cur, err := p.modRev(c.Key)
		if err != nil {
			p.mu.Unlock()
			return 0, fmt.Errorf("meta: compare: %w", err)
		}
		if cur != c.ModRev {
			p.mu.Unlock()
			return 0, ErrConflict
		}
	}
	rev := p.rev + 1
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(rev))
	for _, op := range t.Ops {
		if op.Delete {
			_ = b.Delete(op.Key, nil)
			continue
		}
		v := make([]byte, 8+len(op.Value))
		copy(v, hdr[:])
		copy(v[8:], op.Value)
		_ = b.Set(op.Key, v, nil)
	}
	_ = b.Set(revKey, hdr[:], nil)
	if err := p.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		p.mu.Unlock()
		return 0, fmt.Errorf("meta: commit: %w", err)
	}
	p.rev = rev
	p.mu.Unlock()

	if err := b.SyncWait(); err != nil {
		// The batch is applied but its durability is unknown; the store is
		// no longer trustworthy. Pebble treats WAL sync failure as fatal.
		return 0, fmt.Errorf("meta: commit sync: %w", err)
	}
	p.notify(t, rev)
	return rev, nil
}

// Close implements KV.
func (p *Pebble) Close() error {
	p.closeMu.Lock()
	if p.closed {
		p.closeMu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.closeMu.Unlock()
	p.watchMu.Lock()
	for w := range p.watchers {
		w.close()
	}
	p.watchers = map[*watcher]struct{}{}
	p.watchMu.Unlock()
	return p.db.Close()
}

var _ Snapshotter = (*Pebble)(nil)

// Snapshot implements Snapshotter with a Pebble snapshot: a view of the
// store as of the last commit, kept (with the versions it needs) until
// Close.
func (p *Pebble) Snapshot(ctx context.Context) (Snapshot, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.exit()
	p.mu.Lock() // no commit half applied
	defer p.mu.Unlock()
	s := &pebbleSnapshot{p: p, s: p.db.NewSnapshot(), rev: p.rev}
	p.snapMu.Lock()
	if p.snaps == nil {
		p.snaps = map[*pebbleSnapshot]struct{}{}
	}
	p.snaps[s] = struct{}{}
	p.snapMu.Unlock()
	return s, nil
}

// SnapshotAt implements Snapshotter. A Pebble store keeps no past
// revisions: it can share only a snapshot still open at rev (a second
// reader of the same snapshot, e.g. a scan's partitions mapped by
// another goroutine); it answers for as long as that one is open.
func (p *Pebble) SnapshotAt(ctx context.Context, rev int64) (Snapshot, error) {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	for s := range p.snaps {
		if s.rev == rev {
			return sharedSnapshot{s}, nil
		}
	}
	return nil, fmt.Errorf("meta: no open snapshot at revision %d (a local store keeps no past revisions)", rev)
}

type pebbleSnapshot struct {
	p    *Pebble
	s    *pebble.Snapshot
	rev  int64
	once sync.Once
}

func (s *pebbleSnapshot) Rev() int64 { return s.rev }

func (s *pebbleSnapshot) Close() error {
	var err error
	s.once.Do(func() {
		s.p.snapMu.Lock()
		delete(s.p.snaps, s)
		s.p.snapMu.Unlock()
		if e := s.p.enter(); e != nil {
			return // the store closed and released it
		}
		defer s.p.exit()
		err = s.s.Close()
	})
	return err
}

// sharedSnapshot reads an open snapshot it does not own: closing it
// leaves the snapshot to its owner.
type sharedSnapshot struct{ *pebbleSnapshot }

func (sharedSnapshot) Close() error { return nil }

// Scan implements Snapshot.
func (s *pebbleSnapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error) {
	s.p.reads.Add(1)
	if err := s.p.enter(); err != nil {
		return nil, err
	}
	defer s.p.exit()
	return scanIter(ctx, func(o *pebble.IterOptions) (*pebble.Iterator, error) { return s.s.NewIter(o) }, start, end, limit)
}

// CursorStore is a store that can walk a key range without copying it
// (Pebble and its snapshots); callers that read millions of records use
// it when the store offers it and Scan pages otherwise (etcd).
type CursorStore interface {
	Cursor(ctx context.Context, start, end []byte) (*Cursor, error)
}

// A Cursor walks the records of a key range in order. The key and value
// Next returns alias the store's memory: they are valid only until the
// next call to Next or Close, so a caller decodes or copies what it
// keeps. That saves the two copies per record a Scan page makes, which
// for the Curator's map stage were a sixth of its time. Close it
// promptly: an open cursor holds the store open (Close waits for it) and
// pins the state it reads. Not safe for concurrent use.
type Cursor struct {
	ctx     context.Context
	it      *pebble.Iterator
	exit    func()
	started bool
	n       int
	err     error
}

// Cursor opens a cursor over [start, end).
func (p *Pebble) Cursor(ctx context.Context, start, end []byte) (*Cursor, error) {
	return p.cursor(ctx, p.db.NewIter, start, end)
}

// Cursor opens a cursor over [start, end) of the snapshot.
func (s *pebbleSnapshot) Cursor(ctx context.Context, start, end []byte) (*Cursor, error) {
	return s.p.cursor(ctx, func(o *pebble.IterOptions) (*pebble.Iterator, error) { return s.s.NewIter(o) }, start, end)
}

func (p *Pebble) cursor(ctx context.Context, newIter func(*pebble.IterOptions) (*pebble.Iterator, error), start, end []byte) (*Cursor, error) {
	p.reads.Add(1)
	if err := p.enter(); err != nil {
		return nil, err
	}
	if end == nil || bytes.Compare(end, revKey) > 0 {
		end = revKey
	}
	if len(start) == 0 {
		start = nil // see scanIter
	}
	it, err := newIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		p.exit()
		return nil, fmt.Errorf("meta: cursor: %w", err)
	}
	return &Cursor{ctx: ctx, it: it, exit: p.exit}, nil
}

// Next returns the next record, or ok false at the end of the range or
// on an error (Err).
func (c *Cursor) Next() (key, value []byte, modRev int64, ok bool) {
	if c.err != nil || c.it == nil {
		return nil, nil, 0, false
	}
	if !c.started {
		c.started = true
		ok = c.it.First()
	} else {
		ok = c.it.Next()
	}
	if !ok {
		if err := c.it.Error(); err != nil {
			c.err = fmt.Errorf("meta: cursor: %w", err)
		}
		return nil, nil, 0, false
	}
	if c.n++; c.n%256 == 0 {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			return nil, nil, 0, false
		}
	}
	v, err := c.it.ValueAndErr()
	if err != nil {
		c.err = fmt.Errorf("meta: cursor: %w", err)
		return nil, nil, 0, false
	}
	key = c.it.Key()
	if len(v) < 8 {
		c.err = fmt.Errorf("meta: corrupt value for key %q (%d bytes)", key, len(v))
		return nil, nil, 0, false
	}
	return key, v[8:], int64(binary.BigEndian.Uint64(v[:8])), true
}

// Err is the error that ended the walk, if any.
func (c *Cursor) Err() error { return c.err }

// Close releases the cursor. It is safe to call more than once.
func (c *Cursor) Close() error {
	if c.it == nil {
		return nil
	}
	err := c.it.Close()
	c.it = nil
	c.exit()
	return err
}

// Rev returns the latest committed revision.
func (p *Pebble) Rev() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rev
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	fmt.Printf("pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
