package meta

import (
	"context"
	"errors"
	"fmt"
)

// Errors returned by every KV implementation.
var (
	ErrNotFound = errors.New("meta: key not found")
	// ErrConflict means a Txn compare failed: some key changed since the
	// caller read it. Callers re-read and retry, or drop stale work.
	ErrConflict = errors.New("meta: transaction conflict")
	ErrClosed   = errors.New("meta: store closed")
)

// Limits shared by all backends. etcd caps a request at 1.5 MiB and 128
// operations by default; staying under both keeps the backends
// interchangeable.
const (
	MaxValueBytes = 1 << 20
	MaxTxnOps     = 128
)

// Item is one key with its value and modification revision.
type Item struct {
	Key    []byte
	Value  []byte
	ModRev int64
}

// Cmp guards a Txn: the key's current ModRev must equal ModRev; ModRev 0
// means the key must not exist.
type Cmp struct {
	Key    []byte
	ModRev int64
}

// Op is a put, or a delete when Delete is set.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Txn applies Ops atomically if every Cmp holds.
type Txn struct {
	Cmps []Cmp
	Ops  []Op
}

// Put appends a put to the transaction.
func (t *Txn) Put(key, value []byte) { t.Ops = append(t.Ops, Op{Key: key, Value: value}) }

// Del appends a delete to the transaction.
func (t *Txn) Del(key []byte) { t.Ops = append(t.Ops, Op{Key: key, Delete: true}) }

// If appends a compare to the transaction.
func (t *Txn) If(key []byte, modRev int64) { t.Cmps = append(t.Cmps, Cmp{Key: key, ModRev: modRev}) }

// EventType says what happened to a key.
type EventType uint8

// Event types.
const (
	EventPut EventType = iota
	EventDelete
)

// Event is one change seen by a watcher.
type Event struct {
	Type EventType
	Item Item
}

// KV is an ordered transactional key-value store.
type KV interface {
	// Get returns the item or ErrNotFound.
	Get(ctx context.Context, key []byte) (Item, error)
	// Scan returns up to limit items with start <= key < end in key order.
	// A nil end means no upper bound; limit <= 0 means no limit.
	Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error)
	// Commit applies the transaction and returns its revision, or
	// ErrConflict if a compare failed. It returns only once the change is
	// durable.
	Commit(ctx context.Context, t *Txn) (int64, error)
	// Watch streams changes to keys with the prefix until ctx ends. Events
	// may be dropped if the receiver falls behind; the channel is then
	// closed so the watcher re-reads and re-watches.
	Watch(ctx context.Context, prefix []byte) <-chan Event
	Close() error
}

// Snapshot reads a store as of one moment: every Scan sees the same
// state, whatever commits land meanwhile. Close releases it.
type Snapshot interface {
	// Scan is KV.Scan against the snapshot.
	Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error)
	// Rev is the revision the snapshot reads at; another node's store
	// reads the same state with SnapshotAt(Rev) (0: a store whose
	// snapshots cannot be shared).
	Rev() int64
	Close() error
}

// Snapshotter is implemented by stores that can read a consistent
// snapshot. A scan that must not miss a record moving between keys while
// it reads (the Curator's full scan of the maps that reference extents)
// reads through one.
type Snapshotter interface {
	// Snapshot returns a snapshot of everything committed so far.
	Snapshot(ctx context.Context) (Snapshot, error)
	// SnapshotAt returns a snapshot at a revision another snapshot of the
	// same replicated store reported (an error if it cannot, e.g. a
	// store of its own, or the revision is compacted away).
	SnapshotAt(ctx context.Context, rev int64) (Snapshot, error)
}

// StaleReader is implemented by stores that can answer a read from a
// possibly stale local copy without a consensus round (etcd's serializable
// reads). Callers use it only where a stale answer is detected and retried
// linearizably (e.g. an extent location that turns out to be gone).
type StaleReader interface {
	GetStale(ctx context.Context, key []byte) (Item, error)
}

// GetRecordStale is GetRecord through StaleReader when the store offers it.
func GetRecordStale(ctx context.Context, kv KV, key []byte, v any) (int64, error) {
	sr, ok := kv.(StaleReader)
	if !ok {
		return GetRecord(ctx, kv, key, v)
	}
	it, err := sr.GetStale(ctx, key)
	if err != nil {
		return 0, err
	}
	return it.ModRev, Decode(it.Value, v)
}

// PrefixEnd returns the smallest key greater than every key with prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// CheckSnapshots exercises a store's Snapshotter: a snapshot keeps
// reading what was committed when it was taken while puts, deletes and
// moves land, SnapshotAt(Rev) reads the same state while it is open, and
// a fresh snapshot sees the new state. Store tests call it (the meta and
// cluster packages); it is in the package so that both run one contract.
func CheckSnapshots(ctx context.Context, kv KV) error {
	ss, ok := kv.(Snapshotter)
	if !ok {
		return errors.New("meta: the store has no snapshots")
	}
	put := func(k, v string) error {
		var t Txn
		t.Put([]byte(k), []byte(v))
		_, err := kv.Commit(ctx, &t)
		return err
	}
	for _, k := range []string{"snap/a", "snap/b", "snap/c"} {
		if err := put(k, "1"); err != nil {
			return err
		}
	}
	snap, err := ss.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	// After the snapshot: b moves to d (one transaction), c changes, e appears.
	var mv Txn
	mv.Del([]byte("snap/b"))
	mv.Put([]byte("snap/d"), []byte("1"))
	if _, err := kv.Commit(ctx, &mv); err != nil {
		return err
	}
	if err := put("snap/c", "2"); err != nil {
		return err
	}
	if err := put("snap/e", "1"); err != nil {
		return err
	}
	dump := func(s interface {
		Scan(context.Context, []byte, []byte, int) ([]Item, error)
	}) (string, error) {
		var out []string
		start := []byte("snap/")
		for {
			items, err := s.Scan(ctx, start, PrefixEnd([]byte("snap/")), 2) // pages, as scans read
			if err != nil {
				return "", err
			}
			for _, it := range items {
				out = append(out, string(it.Key)+"="+string(it.Value))
			}
			if len(items) < 2 {
				return fmt.Sprint(out), nil
			}
			start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
		}
	}
	if got, err := dump(snap); err != nil || got != "[snap/a=1 snap/b=1 snap/c=1]" {
		return fmt.Errorf("meta: the snapshot reads %s (%v), want the state when it was taken", got, err)
	}
	if snap.Rev() > 0 {
		at, err := ss.SnapshotAt(ctx, snap.Rev())
		if err != nil {
			return fmt.Errorf("meta: SnapshotAt(%d): %w", snap.Rev(), err)
		}
		got, err := dump(at)
		at.Close()
		if err != nil || got != "[snap/a=1 snap/b=1 snap/c=1]" {
			return fmt.Errorf("meta: SnapshotAt(%d) reads %s (%v)", snap.Rev(), got, err)
		}
	}
	now, err := ss.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer now.Close()
	if got, err := dump(now); err != nil || got != "[snap/a=1 snap/c=2 snap/d=1 snap/e=1]" {
		return fmt.Errorf("meta: a fresh snapshot reads %s (%v)", got, err)
	}
	return nil
}
