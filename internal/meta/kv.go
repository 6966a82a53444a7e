package meta

import (
	"context"
	"errors"
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
