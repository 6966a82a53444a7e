package object

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// maxAccessPending bounds the egroups whose access counts wait in memory
// between flushes; past it the oldest counts are dropped (access data is
// a hint for tiering, never needed for correctness).
const maxAccessPending = 100_000

// accessTracker batches per-egroup read counts and last-access times and
// writes them to the access map periodically (Curator's eventually
// consistent egroup-access map).
type accessTracker struct {
	kv     meta.KV
	now    func() time.Time
	window time.Duration
	// hotReads, when > 0, is the window read count at which an egroup is
	// hot: the flush that takes its count there also writes a promotion
	// request (meta.HotKey) for the Curator master, once per window.
	hotReads int64

	mu      sync.Mutex
	pending map[uint64]meta.Access
}

func newAccessTracker(kv meta.KV, now func() time.Time, window time.Duration) *accessTracker {
	return &accessTracker{kv: kv, now: now, window: window, pending: map[uint64]meta.Access{}}
}

func (a *accessTracker) record(egroup uint64) {
	now := a.now().UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= maxAccessPending {
		if _, ok := a.pending[egroup]; !ok {
			return
		}
	}
	p := a.pending[egroup]
	p.Atime = now
	p.Reads++
	a.pending[egroup] = p
}

// flush merges pending counts into the access map.
func (a *accessTracker) flush(ctx context.Context) error {
	a.mu.Lock()
	batch := a.pending
	a.pending = map[uint64]meta.Access{}
	a.mu.Unlock()
	ids := make([]uint64, 0, len(batch))
	for id := range batch {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for len(ids) > 0 {
		n := min(len(ids), meta.MaxTxnOps/2)
		chunk := ids[:n]
		ids = ids[n:]
		for attempt := 0; attempt < 4; attempt++ {
			var t meta.Txn
			for _, id := range chunk {
				var cur meta.Access
				rev, err := meta.GetRecord(ctx, a.kv, meta.AccessKey(id), &cur)
				if err != nil && !errors.Is(err, meta.ErrNotFound) {
					return err
				}
				p := batch[id]
				cur.Reads += p.Reads
				cur.Atime = max(cur.Atime, p.Atime)
				before := cur.WinReads
				if cur.WinStart == 0 || time.Duration(p.Atime-cur.WinStart) > a.window {
					cur.WinStart, cur.WinReads, before = p.Atime, p.Reads, 0
				} else {
					cur.WinReads += p.Reads
				}
				t.If(meta.AccessKey(id), rev)
				t.Put(meta.AccessKey(id), meta.Encode(cur))
				if a.hotReads > 0 && before < a.hotReads && cur.WinReads >= a.hotReads {
					// Crossing the threshold: ask for a promotion now
					// rather than at the next scan. The Curator drops
					// requests for egroups already on their fastest tier.
					t.Put(meta.HotKey(id), meta.Encode(meta.HotRequest{Reads: cur.WinReads, At: cur.Atime}))
				}
			}
			_, err := a.kv.Commit(ctx, &t)
			if errors.Is(err, meta.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// FlushAccess writes pending access records now (tests, shutdown).
func (l *Layer) FlushAccess(ctx context.Context) error { return l.access.flush(ctx) }
