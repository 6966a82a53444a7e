package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Registry keys, under meta.PrefixPolicy ("p/"):
//
//	p/c/NAME            the current record of a policy (a tombstone after rm)
//	p/h/NAME/VERSION    every version, VERSION zero-padded so keys sort
//	p/s/HOOK            which policy holds a singleton hook
//	p/e/TIME-NODE       policy events reported by nodes (disabled, failed swaps)
//
// Nodes watch p/c/; history, slots and events are read on demand.
const (
	prefixCurrent = meta.PrefixPolicy + "c/"
	prefixHistory = meta.PrefixPolicy + "h/"
	prefixSlot    = meta.PrefixPolicy + "s/"
	prefixEvent   = meta.PrefixPolicy + "e/"
)

func currentKey(name string) []byte { return []byte(prefixCurrent + name) }
func historyPrefix(name string) []byte {
	return []byte(prefixHistory + name + "/")
}
func historyKey(name string, v int64) []byte {
	return []byte(fmt.Sprintf("%s%s/%020d", prefixHistory, name, v))
}
func slotKey(h Hook) []byte { return []byte(prefixSlot + string(h)) }

// Record is one version of a policy. Versions of a name increase by one
// with every put, rollback and rm; they are never reused.
type Record struct {
	Name    string    `json:"name"`
	Hook    Hook      `json:"hook"`
	Version int64     `json:"version"`
	Author  string    `json:"author"`
	Time    time.Time `json:"time"` // when the proposing node proposed it to the store (its clock)
	Source  string    `json:"source,omitempty"`
	SHA256  string    `json:"sha256,omitempty"`
	Comment string    `json:"comment,omitempty"`
	// Deleted marks a tombstone written by rm: the hook reverts to its
	// built-in default; history and numbering continue.
	Deleted bool `json:"deleted,omitempty"`
}

// Summary is the record without its source (for listings).
func (r Record) Summary() Record { r.Source = ""; return r }

// Errors.
var (
	ErrNotFound        = errors.New("policy: no such policy")
	ErrVersionNotFound = errors.New("policy: no such version")
	ErrVersionMismatch = errors.New("policy: version changed (compare-and-swap failed)")
	ErrHookTaken       = errors.New("policy: hook already filled")
	ErrHookMismatch    = errors.New("policy: name belongs to a policy of another hook")
	ErrInvalid         = errors.New("policy: rejected")
)

// Registry stores policies in the metadata KV (Pebble on one node, etcd
// in a cluster): consensus gives every node the same versions in the same
// order, and compare-and-swap makes concurrent puts safe.
type Registry struct {
	kv  meta.KV
	now func() time.Time
	// HistoryLimit bounds the versions kept per policy; the oldest beyond
	// it are removed. 256 is months of daily changes, a few MiB at most.
	historyLimit int
}

// DefaultHistoryLimit is the versions kept per policy.
const DefaultHistoryLimit = 256

// maxPutAttempts bounds retries when concurrent puts race on one name.
const maxPutAttempts = 16

// NewRegistry returns a registry over kv.
func NewRegistry(kv meta.KV, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{kv: kv, now: now, historyLimit: DefaultHistoryLimit}
}

// Get returns the current record of a policy (a tombstone if removed) and
// its metadata revision, or ErrNotFound.
func (r *Registry) Get(ctx context.Context, name string) (Record, int64, error) {
	var rec Record
	rev, err := meta.GetRecord(ctx, r.kv, currentKey(name), &rec)
	if errors.Is(err, meta.ErrNotFound) {
		return Record{}, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return rec, rev, err
}

// List returns every current record (tombstones included), by name.
func (r *Registry) List(ctx context.Context) ([]Record, error) {
	p := []byte(prefixCurrent)
	items, err := r.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(items))
	for _, it := range items {
		var rec Record
		if err := meta.Decode(it.Value, &rec); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Version returns one version of a policy.
func (r *Registry) Version(ctx context.Context, name string, v int64) (Record, error) {
	var rec Record
	_, err := meta.GetRecord(ctx, r.kv, historyKey(name, v), &rec)
	if errors.Is(err, meta.ErrNotFound) {
		return Record{}, fmt.Errorf("%w: %s version %d", ErrVersionNotFound, name, v)
	}
	return rec, err
}

// History returns every kept version of a policy, oldest first.
func (r *Registry) History(ctx context.Context, name string) ([]Record, error) {
	p := historyPrefix(name)
	items, err := r.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	out := make([]Record, 0, len(items))
	for _, it := range items {
		var rec Record
		if err := meta.Decode(it.Value, &rec); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Change is a put, rollback or rm to commit.
type Change struct {
	Name    string
	Hook    Hook
	Source  string
	Author  string
	Comment string
	Deleted bool
	// IfVersion, when >= 0, requires the current version to be exactly
	// this (0: the policy must not exist yet); the change fails with
	// ErrVersionMismatch otherwise. -1 means any version.
	IfVersion int64
}

// Commit writes the next version of a policy with compare-and-swap on its
// current record (and on the hook's slot for singleton hooks), retrying
// when another writer raced it unless IfVersion pins the version. It
// returns the record and when the commit returned.
func (r *Registry) Commit(ctx context.Context, c Change) (Record, time.Time, error) {
	if err := CheckName(c.Name); err != nil {
		return Record{}, time.Time{}, err
	}
	for attempt := 0; attempt < maxPutAttempts; attempt++ {
		cur, rev, err := r.Get(ctx, c.Name)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Record{}, time.Time{}, err
		}
		if c.IfVersion >= 0 && cur.Version != c.IfVersion {
			return Record{}, time.Time{}, fmt.Errorf("%w: %s is at version %d, expected %d", ErrVersionMismatch, c.Name, cur.Version, c.IfVersion)
		}
		if c.Deleted && (!exists || cur.Deleted) {
			return Record{}, time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, c.Name)
		}
		hook := c.Hook
		if c.Deleted {
			hook = cur.Hook
		}
		if exists && !cur.Deleted && cur.Hook != hook {
			return Record{}, time.Time{}, fmt.Errorf("%w: %s is a %s policy, not %s (rm it first to reuse the name)", ErrHookMismatch, c.Name, cur.Hook, hook)
		}
		rec := Record{Name: c.Name, Hook: hook, Version: cur.Version + 1, Author: c.Author, Comment: c.Comment, Deleted: c.Deleted}
		if !c.Deleted {
			rec.Source = c.Source
			sum := sha256.Sum256([]byte(c.Source))
			rec.SHA256 = hex.EncodeToString(sum[:])
		}
		var t meta.Txn
		t.If(currentKey(c.Name), rev)
		if hook.Singleton() {
			holder, srev, err := r.slot(ctx, hook)
			if err != nil {
				return Record{}, time.Time{}, err
			}
			if holder != "" && holder != c.Name {
				return Record{}, time.Time{}, fmt.Errorf("%w: the %s hook is filled by policy %s (rm it, or put a new version of it)", ErrHookTaken, hook, holder)
			}
			t.If(slotKey(hook), srev)
			if c.Deleted {
				if holder == c.Name {
					t.Del(slotKey(hook))
				}
			} else {
				t.Put(slotKey(hook), []byte(c.Name))
			}
		}
		// The record's time is taken last, just before the proposal, so
		// that commit-to-swap delays measured from it include the
		// consensus round and nothing before it.
		rec.Time = r.now().UTC()
		b := meta.Encode(rec)
		t.Put(currentKey(c.Name), b)
		t.Put(historyKey(c.Name, rec.Version), b)
		_, err = r.kv.Commit(ctx, &t)
		if errors.Is(err, meta.ErrConflict) {
			if c.IfVersion >= 0 {
				return Record{}, time.Time{}, fmt.Errorf("%w: %s changed while committing", ErrVersionMismatch, c.Name)
			}
			continue
		}
		if err != nil {
			return Record{}, time.Time{}, err
		}
		committed := time.Now()
		r.trimHistory(ctx, c.Name, rec.Version)
		return rec, committed, nil
	}
	return Record{}, time.Time{}, fmt.Errorf("%w: %s: %d attempts lost to concurrent writers", ErrVersionMismatch, c.Name, maxPutAttempts)
}

// slot returns the policy holding a singleton hook and the slot's revision.
func (r *Registry) slot(ctx context.Context, h Hook) (string, int64, error) {
	it, err := r.kv.Get(ctx, slotKey(h))
	if errors.Is(err, meta.ErrNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	return string(it.Value), it.ModRev, nil
}

// trimHistory removes versions older than the limit (best effort: a
// failure leaves extra history, never loses the current version).
func (r *Registry) trimHistory(ctx context.Context, name string, latest int64) {
	oldest := latest - int64(r.historyLimit)
	if oldest < 1 {
		return
	}
	p := historyPrefix(name)
	items, err := r.kv.Scan(ctx, p, historyKey(name, oldest+1), meta.MaxTxnOps)
	if err != nil || len(items) == 0 {
		return
	}
	var t meta.Txn
	for _, it := range items {
		t.Del(it.Key)
	}
	_, _ = r.kv.Commit(context.WithoutCancel(ctx), &t)
}

// Event is something a node reports about a policy for the cluster-wide
// log (Malacology's central log of balancer version changes and failures).
type Event struct {
	Time    time.Time `json:"time"`
	Node    string    `json:"node"`
	Name    string    `json:"name"`
	Hook    Hook      `json:"hook"`
	Version int64     `json:"version"`
	Kind    string    `json:"kind"` // "disabled", "load-failed"
	Message string    `json:"message"`
}

// EventLimit bounds the cluster-wide event log.
const EventLimit = 1000

// AddEvent appends an event (best effort).
func (r *Registry) AddEvent(ctx context.Context, e Event) error {
	var t meta.Txn
	t.Put([]byte(fmt.Sprintf("%s%020d-%s", prefixEvent, e.Time.UnixNano(), e.Node)), meta.Encode(e))
	_, err := r.kv.Commit(ctx, &t)
	if err == nil {
		r.trimEvents(ctx)
	}
	return err
}

func (r *Registry) trimEvents(ctx context.Context) {
	p := []byte(prefixEvent)
	items, err := r.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil || len(items) <= EventLimit {
		return
	}
	var t meta.Txn
	for _, it := range items[:min(len(items)-EventLimit, meta.MaxTxnOps)] {
		t.Del(it.Key)
	}
	_, _ = r.kv.Commit(ctx, &t)
}

// Events returns up to n events about name ("" for all), newest first.
func (r *Registry) Events(ctx context.Context, name string, n int) ([]Event, error) {
	p := []byte(prefixEvent)
	items, err := r.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	var out []Event
	for i := len(items) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		var e Event
		if json.Unmarshal(items[i].Value, &e) == nil && (name == "" || e.Name == name) {
			out = append(out, e)
		}
	}
	return out, nil
}
