package object

import (
	"container/list"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// locationCache keeps recently used extent and egroup records, decoded, so
// a read of a hot object costs one metadata round trip (the object record)
// instead of three. Entries are hints, exactly like the store's stale
// reads: a reader that fails with a cached location asks the metadata
// store again (locateExtent with stale false), which refreshes the entry.
// That is safe because locations only change by background moves and
// packs, which copy and switch before they delete, and egroup and extent
// ids are never reused: a stale location either still holds the verified
// bytes or fails to read.
//
// The cache is bounded (least recently used entries go first) and
// invalidated for an egroup whenever this node changes that egroup's
// record itself (a replica marked bad), so it does not keep offering a
// replica it knows is bad.
//
// Egroup records also expire after egroupTTL. A failed read corrects a
// location that lost a replica, but nothing corrects one that gained a
// replica while the old ones still read: a move that keeps one source
// (add a replica on a node that joined, remove another) left every node
// reading only the replica it had cached, so the new node served almost
// none of the reads of the data moved onto it (terrace bench scaleout,
// docs/perf.md). The TTL bounds how long reads ignore a new replica.
type locationCache struct {
	mu        sync.Mutex
	max       int
	egroupTTL time.Duration // 0: egroup records do not expire
	now       func() time.Time
	order     *list.List // front = most recent; values are locKey
	entries   map[locKey]*list.Element
}

type locKey struct {
	egroup bool
	id     uint64
}

type locEntry struct {
	key locKey
	x   meta.Extent
	eg  meta.Egroup
	at  time.Time // when it was cached
}

// newLocationCache returns a cache of at most max records (≤ 0: off) whose
// egroup records expire egroupTTL after they were cached (0: never),
// timed by now (nil: time.Now).
func newLocationCache(max int, egroupTTL time.Duration, now func() time.Time) *locationCache {
	if now == nil {
		now = time.Now
	}
	return &locationCache{max: max, egroupTTL: egroupTTL, now: now, order: list.New(), entries: make(map[locKey]*list.Element)}
}

func (c *locationCache) get(k locKey) (*locEntry, bool) {
	if c == nil || c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*locEntry)
	if k.egroup && c.egroupTTL > 0 && c.now().Sub(e.at) > c.egroupTTL {
		c.order.Remove(el)
		delete(c.entries, k)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e, true
}

// extent returns a cached extent record.
func (c *locationCache) extent(id uint64) (meta.Extent, bool) {
	e, ok := c.get(locKey{id: id})
	if !ok {
		return meta.Extent{}, false
	}
	return e.x, true
}

// egroup returns a cached egroup record. Callers must not modify its
// Replicas slice, which the cache shares.
func (c *locationCache) egroup(id uint64) (meta.Egroup, bool) {
	e, ok := c.get(locKey{egroup: true, id: id})
	if !ok {
		return meta.Egroup{}, false
	}
	return e.eg, true
}

func (c *locationCache) put(e *locEntry) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e.at = c.now()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*locEntry).key)
	}
}

func (c *locationCache) putExtent(id uint64, x meta.Extent) {
	c.put(&locEntry{key: locKey{id: id}, x: x})
}

func (c *locationCache) putEgroup(id uint64, eg meta.Egroup) {
	// Copy the replicas: the caller's record may be changed after this.
	eg.Replicas = append([]meta.EgroupReplica(nil), eg.Replicas...)
	c.put(&locEntry{key: locKey{egroup: true, id: id}, eg: eg})
}

// forgetEgroup drops an egroup's record.
func (c *locationCache) forgetEgroup(id uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := locKey{egroup: true, id: id}
	if el, ok := c.entries[k]; ok {
		c.order.Remove(el)
		delete(c.entries, k)
	}
}

// forgetExtent drops an extent's record (this node just moved it).
func (c *locationCache) forgetExtent(id uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := locKey{id: id}
	if el, ok := c.entries[k]; ok {
		c.order.Remove(el)
		delete(c.entries, k)
	}
}

// len reports the number of cached records.
func (c *locationCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
