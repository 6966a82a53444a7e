package object

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// bucketCacheTTL bounds how long a cached bucket record is trusted without
// a watch event. Writes compare the bucket's guard at commit, so a stale
// entry can only turn into a retried commit, never into a wrong write; the
// TTL and the watch keep such retries rare. What is read without a commit
// (the gateway's ACL, policy, public-access block, default encryption and
// default vector) follows a change on another node within the watch's
// delay, and within the TTL when the watch is restarting or this node's
// etcd member is cut off (its watch goes silent): a tightened policy can
// still let a request through for up to about 2 s there.
const bucketCacheTTL = 2 * time.Second

// bucketCache saves the metadata reads of the bucket record and guard on
// every write and on every gateway lookup of a bucket's ACL, policy or
// configuration (in a cluster, linearizable etcd reads: 9–13 % of a small
// PUT's CPU before the cache).
//
// A fill that raced an invalidation must not store what it read before the
// invalidation, or the stale value would outlive the watch event that
// should have removed it: fills carry the generation at which their read
// started and are stored only if no drop happened since (gen).
type bucketCache struct {
	mu      sync.Mutex
	entries map[string]bucketEntry
	gen     uint64
}

type bucketEntry struct {
	v  bucketView
	at time.Time
}

func newBucketCache() *bucketCache { return &bucketCache{entries: map[string]bucketEntry{}} }

func (c *bucketCache) get(name string, now time.Time) (bucketEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || now.Sub(e.at) > bucketCacheTTL {
		return bucketEntry{}, false
	}
	return e, true
}

// generation returns the invalidation count; pass it to put.
func (c *bucketCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put stores e unless an entry was dropped since gen was read.
func (c *bucketCache) put(name string, e bucketEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.entries) > 10_000 {
		c.entries = map[string]bucketEntry{} // bounded: drop all, refill on demand
	}
	// Clone the key: the S3 gateway's names alias its HTTP server's
	// request buffers (fasthttp reuses them once the request returns), and
	// a map key that changes under the map finds another bucket's entry.
	c.entries[strings.Clone(name)] = e
}

func (c *bucketCache) drop(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.gen++
	c.mu.Unlock()
}

func (c *bucketCache) dropAll() {
	c.mu.Lock()
	c.entries = map[string]bucketEntry{}
	c.gen++
	c.mu.Unlock()
}

// watchBuckets drops cache entries as bucket records and guards change.
// Both prefixes ("b/" and "bg/") start with "b", and no other map does.
func (l *Layer) watchBuckets(ctx context.Context) {
	defer l.bg.Done()
	for ctx.Err() == nil {
		for ev := range l.kv.Watch(ctx, []byte("b")) {
			k := string(ev.Item.Key)
			if name, ok := strings.CutPrefix(k, meta.PrefixBucketGuard); ok {
				l.buckets.drop(name)
			} else {
				l.buckets.drop(strings.TrimPrefix(k, meta.PrefixBucket))
			}
		}
		// The watch closed (lagging, or the store restarted): forget
		// everything, then watch again.
		l.buckets.dropAll()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cachedBucket is liveBucket through the cache, for writers whose commit
// compares the bucket's guard (guardedCommit).
func (l *Layer) cachedBucket(ctx context.Context, name string) (bucketView, error) {
	if e, ok := l.buckets.get(name, l.opts.Now()); ok && e.v.deletingSince == 0 {
		return e.v, nil
	}
	gen := l.buckets.generation()
	v, err := l.liveBucket(ctx, name)
	if err == nil {
		l.buckets.put(name, bucketEntry{v: v, at: l.opts.Now()}, gen)
	}
	return v, err
}
