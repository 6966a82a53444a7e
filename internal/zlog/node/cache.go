package node

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
)

// view is one log as the cache knows it. Revisions are the metadata
// store's ModRevs (0: absent), used for compare-and-swap.
type view struct {
	Record  layout.Record
	RecRev  int64
	Layout  layout.Layout
	LayRev  int64
	Host    hostRecord
	HostRev int64
}

// cache keeps every log's record, layout and host from the metadata store
// (scan, then watch; re-scan when the watch breaks). Readers get copies.
type cache struct {
	kv  meta.KV
	log *slog.Logger

	mu      sync.RWMutex
	logs    map[string]*view
	revs    map[string]int64 // last applied ModRev per key (deletes too)
	changed chan struct{}    // closed and replaced on every change
	loaded  bool
}

func newCache(kv meta.KV, log *slog.Logger) *cache {
	return &cache{kv: kv, log: log, logs: map[string]*view{}, revs: map[string]int64{}, changed: make(chan struct{})}
}

// run keeps the cache current until ctx ends.
func (c *cache) run(ctx context.Context) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		// Watch first, then scan: an event between the two is applied
		// after the scan, and revisions drop what the scan already saw.
		ch := c.kv.Watch(wctx, []byte(prefix))
		if err := c.rescan(ctx); err != nil {
			cancel()
			if ctx.Err() == nil {
				c.log.Warn("log metadata scan failed", "err", err)
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		resync := time.NewTicker(30 * time.Second)
	watch:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					break watch
				}
				c.apply(string(ev.Item.Key), ev.Item.Value, ev.Item.ModRev, ev.Type == meta.EventDelete)
			case <-resync.C:
				// A periodic scan bounds the damage of any missed event.
				if err := c.rescan(ctx); err != nil && ctx.Err() == nil {
					c.log.Warn("log metadata scan failed", "err", err)
				}
			case <-ctx.Done():
				break watch
			}
		}
		resync.Stop()
		cancel()
	}
}

// rescan reads every log key and replaces the view.
func (c *cache) rescan(ctx context.Context) error {
	items, err := c.kv.Scan(ctx, []byte(prefix), meta.PrefixEnd([]byte(prefix)), 0)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, it := range items {
		seen[string(it.Key)] = true
		c.apply(string(it.Key), it.Value, it.ModRev, false)
	}
	// Keys gone since: delete them (at their last known revision + 1, so
	// a later put still applies).
	c.mu.RLock()
	var gone []string
	for k, v := range c.logs {
		for m, rev := range map[string]int64{prefixRecord + k: v.RecRev, prefixLayout + k: v.LayRev, prefixHost + k: v.HostRev} {
			if rev != 0 && !seen[m] {
				gone = append(gone, m)
			}
		}
	}
	c.mu.RUnlock()
	for _, k := range gone {
		c.mu.RLock()
		rev := c.revs[k]
		c.mu.RUnlock()
		c.apply(k, nil, rev+1, true)
	}
	c.mu.Lock()
	if !c.loaded {
		c.loaded = true
		c.notifyLocked()
	}
	c.mu.Unlock()
	return nil
}

// apply folds one key's change into the cache.
func (c *cache) apply(key string, val []byte, rev int64, deleted bool) {
	m, name, ok := splitKey(key)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.revs[key] {
		return
	}
	c.revs[key] = rev
	v := c.logs[name]
	if v == nil {
		if deleted {
			return
		}
		v = &view{}
		c.logs[name] = v
	}
	switch m {
	case "r":
		if deleted {
			v.Record, v.RecRev = layout.Record{}, 0
		} else if r, err := decodeRecord(val); err == nil {
			v.Record, v.RecRev = r, rev
		} else {
			c.log.Error("bad log record in metadata", "key", key, "err", err)
		}
	case "y":
		if deleted {
			v.Layout, v.LayRev = layout.Layout{}, 0
		} else if l, err := decodeLayout(val); err == nil {
			v.Layout, v.LayRev = l, rev
		} else {
			c.log.Error("bad log layout in metadata", "key", key, "err", err)
		}
	case "q":
		if deleted {
			v.Host, v.HostRev = hostRecord{}, 0
		} else if h, err := decodeHost(val); err == nil {
			v.Host, v.HostRev = h, rev
		} else {
			c.log.Error("bad log host in metadata", "key", key, "err", err)
		}
	}
	if v.RecRev == 0 && v.LayRev == 0 && v.HostRev == 0 {
		delete(c.logs, name)
	}
	c.notifyLocked()
}

func (c *cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// get returns a copy of a log's view.
func (c *cache) get(name string) (view, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.logs[name]
	if !ok || v.RecRev == 0 {
		return view{}, false
	}
	out := *v
	out.Layout = v.Layout.Clone()
	return out, true
}

// byID returns the name of the log with ID id.
func (c *cache) byID(id uint64) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for n, v := range c.logs {
		if v.RecRev != 0 && v.Record.ID == id {
			return n, true
		}
	}
	return "", false
}

// names lists the logs with a record, sorted.
func (c *cache) names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for n, v := range c.logs {
		if v.RecRev != 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// hostCounts returns how many sequencers each node hosts.
func (c *cache) hostCounts() map[string]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]int{}
	for _, v := range c.logs {
		if v.HostRev != 0 {
			out[v.Host.Node]++
		}
	}
	return out
}

// wait returns a channel closed at the next change.
func (c *cache) wait() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// isLoaded reports whether the first scan finished.
func (c *cache) isLoaded() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded
}
