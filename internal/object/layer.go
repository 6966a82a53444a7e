package object

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Layer is the object layer of one node.
type Layer struct {
	opts  Options
	kv    meta.KV
	rio   ReplicaIO
	snaps *snapshotCache

	egroupSeq *meta.Sequence
	extentSeq *meta.Sequence

	pool    *egroupPool
	access  *accessTracker
	buckets *bucketCache
	locs    *locationCache
	m       *metrics

	bg        sync.WaitGroup
	stop      chan struct{}
	stopWatch context.CancelFunc
	closed    sync.Once
}

// New opens the object layer. Call Recover before serving if replica files
// may hold bytes of unacknowledged writes (always, after a restart).
func New(kv meta.KV, rio ReplicaIO, topo Topology, opts Options) (*Layer, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Layer{
		opts: opts,
		kv:   kv,
		rio:  rio,
		snaps: &snapshotCache{topo: topo, interval: opts.StatsInterval, now: opts.Now,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))},
		egroupSeq: meta.NewSequence(kv, "egroup", 1024),
		extentSeq: meta.NewSequence(kv, "extent", 4096),
		stop:      make(chan struct{}),
		m:         newMetrics(),
	}
	l.pool = newEgroupPool(l, opts.MaxOpenEgroups)
	l.buckets = newBucketCache()
	l.locs = newLocationCache(opts.LocationCacheEntries)
	wctx, cancel := context.WithCancel(context.Background())
	l.stopWatch = cancel
	l.bg.Add(1)
	go l.watchBuckets(wctx)
	l.access = newAccessTracker(kv, opts.Now, opts.AccessWindow)
	l.bg.Add(1)
	go l.flushLoop()
	return l, nil
}

// Options returns the layer's effective options.
func (l *Layer) Options() Options { return l.opts }

// KV returns the metadata store.
func (l *Layer) KV() meta.KV { return l.kv }

// ReplicaIO returns the replica data plane.
func (l *Layer) ReplicaIO() ReplicaIO { return l.rio }

// Snapshot returns the current placement snapshot.
func (l *Layer) Snapshot() *model.Snapshot { return l.snaps.get() }

// Close flushes access records and stops background work. It does not
// close the KV.
func (l *Layer) Close() error {
	l.closed.Do(func() { close(l.stop); l.stopWatch() })
	l.bg.Wait()
	return l.access.flush(context.Background())
}

func (l *Layer) flushLoop() {
	defer l.bg.Done()
	t := time.NewTicker(l.opts.AccessFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.access.flush(context.Background()); err != nil {
				l.opts.Logger.Warn("access flush failed", "err", err)
			}
			if _, err := l.SealIdle(context.Background(), l.opts.SealIdleAfter); err != nil {
				l.opts.Logger.Warn("sealing idle egroups failed", "err", err)
			}
		}
	}
}

// Bucket names follow S3's rules (3-63 chars, lowercase, digits, dots,
// hyphens); the gateway enforces the full rule set, this is the floor the
// metadata layout needs (no NUL, no slash).
var bucketNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.\-_]{1,61}[a-z0-9]$`)

// maxKeyBytes is S3's object key limit.
const maxKeyBytes = 1024

func checkBucketName(b string) error {
	if !bucketNameRE.MatchString(b) {
		return fmt.Errorf("%w: %q", ErrInvalidBucketName, b)
	}
	return nil
}

func checkKey(k string) error {
	if k == "" || len(k) > maxKeyBytes {
		return fmt.Errorf("%w: length %d not in [1, %d]", ErrInvalidKey, len(k), maxKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if k[i] == 0 {
			return fmt.Errorf("%w: contains NUL", ErrInvalidKey)
		}
	}
	return nil
}

// bucketDeleting marks a bucket being deleted in its Attrs so that writers
// that read it afterwards see it as gone.
const bucketDeleting = "terrace.deleting"

// CreateBucket creates a bucket; vector may be zero (cluster default).
func (l *Layer) CreateBucket(ctx context.Context, name, owner string, vector model.Vector) error {
	if err := checkBucketName(name); err != nil {
		return err
	}
	if !vector.IsZero() {
		if err := vector.Validate(); err != nil {
			return err
		}
	}
	var t meta.Txn
	t.If(meta.BucketKey(name), 0)
	t.Put(meta.BucketKey(name), meta.Encode(meta.Bucket{Name: name, Owner: owner, Created: l.opts.Now().UnixNano(), Vector: vector}))
	_, err := l.kv.Commit(ctx, &t)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrBucketExists, name)
	}
	return err
}

// GetBucket returns the bucket record and its revision.
func (l *Layer) GetBucket(ctx context.Context, name string) (meta.Bucket, int64, error) {
	var b meta.Bucket
	rev, err := meta.GetRecord(ctx, l.kv, meta.BucketKey(name), &b)
	if errors.Is(err, meta.ErrNotFound) || (err == nil && b.Attrs[bucketDeleting] != nil) {
		return b, 0, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
	}
	return b, rev, err
}

// UpdateBucket applies fn to the bucket record with compare-and-swap.
func (l *Layer) UpdateBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) error {
	for attempt := 0; attempt < 16; attempt++ {
		b, rev, err := l.GetBucket(ctx, name)
		if err != nil {
			return err
		}
		if err := fn(&b); err != nil {
			return err
		}
		var t meta.Txn
		t.If(meta.BucketKey(name), rev)
		t.Put(meta.BucketKey(name), meta.Encode(b))
		if _, err := l.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else {
			return err
		}
	}
	return fmt.Errorf("object: update bucket %s: too much contention", name)
}

// SetBucketVector sets a bucket's default replication vector.
func (l *Layer) SetBucketVector(ctx context.Context, name string, v model.Vector) error {
	if !v.IsZero() {
		if err := l.checkVectorTiers(v); err != nil {
			return err
		}
	}
	return l.UpdateBucket(ctx, name, func(b *meta.Bucket) error { b.Vector = v; return nil })
}

// ListBuckets returns every bucket in name order.
func (l *Layer) ListBuckets(ctx context.Context) ([]meta.Bucket, error) {
	items, err := l.kv.Scan(ctx, []byte(meta.PrefixBucket), meta.PrefixEnd([]byte(meta.PrefixBucket)), 0)
	if err != nil {
		return nil, err
	}
	out := make([]meta.Bucket, 0, len(items))
	for _, it := range items {
		var b meta.Bucket
		if err := meta.Decode(it.Value, &b); err != nil {
			return nil, err
		}
		if b.Attrs[bucketDeleting] == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// DeleteBucket deletes an empty bucket. It first marks the bucket as
// deleting (which changes its revision, so a racing writer's commit fails
// its bucket compare), then checks emptiness, then deletes.
func (l *Layer) DeleteBucket(ctx context.Context, name string) error {
	b, rev, err := l.GetBucket(ctx, name)
	if err != nil {
		return err
	}
	if b.Attrs == nil {
		b.Attrs = map[string][]byte{}
	}
	b.Attrs[bucketDeleting] = []byte{1}
	var mark meta.Txn
	mark.If(meta.BucketKey(name), rev)
	mark.Put(meta.BucketKey(name), meta.Encode(b))
	rev, err = l.kv.Commit(ctx, &mark)
	if err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("object: delete bucket %s: concurrent change, retry", name)
		}
		return err
	}
	unmark := func() {
		delete(b.Attrs, bucketDeleting)
		var t meta.Txn
		t.If(meta.BucketKey(name), rev)
		t.Put(meta.BucketKey(name), meta.Encode(b))
		if _, err := l.kv.Commit(context.WithoutCancel(ctx), &t); err != nil {
			l.opts.Logger.Error("un-mark bucket deletion failed", "bucket", name, "err", err)
		}
	}
	objs, err := l.kv.Scan(ctx, meta.ObjectPrefix(name, ""), meta.PrefixEnd(meta.ObjectPrefix(name, "")), 1)
	if err != nil {
		unmark()
		return err
	}
	if len(objs) > 0 {
		unmark()
		return fmt.Errorf("%w: %s", ErrBucketNotEmpty, name)
	}
	// Abandoned multipart uploads do not keep a bucket alive (S3 semantics);
	// their part records are removed with it and their data becomes garbage.
	up := []byte(meta.PrefixUpload + name + "\x00")
	for {
		items, err := l.kv.Scan(ctx, up, meta.PrefixEnd(up), meta.MaxTxnOps-1)
		if err != nil || len(items) == 0 {
			break
		}
		var t meta.Txn
		for _, it := range items {
			t.Del(it.Key)
		}
		if _, err := l.kv.Commit(ctx, &t); err != nil {
			break
		}
	}
	var del meta.Txn
	del.If(meta.BucketKey(name), rev)
	del.Del(meta.BucketKey(name))
	_, err = l.kv.Commit(ctx, &del)
	return err
}

// resolveVector picks the vector for a write: explicit, then storage class,
// then bucket default, then cluster default.
func (l *Layer) resolveVector(b meta.Bucket, explicit model.Vector, class string) (model.Vector, error) {
	v := explicit
	if v.IsZero() && class != "" {
		cv, ok := l.opts.Classes[class]
		if !ok {
			return model.Vector{}, fmt.Errorf("%w: %s", ErrUnknownClass, class)
		}
		v = cv
	}
	if v.IsZero() {
		v = b.Vector
	}
	if v.IsZero() {
		v = l.opts.DefaultVector
	}
	if err := l.checkVectorTiers(v); err != nil {
		return model.Vector{}, err
	}
	return v, nil
}

// checkVectorTiers rejects a vector naming a tier no device has.
func (l *Layer) checkVectorTiers(v model.Vector) error {
	if err := v.Validate(); err != nil {
		return err
	}
	have := map[model.Tier]bool{}
	for _, t := range l.snaps.get().Tiers() {
		have[t] = true
	}
	for _, t := range v.Tiers() {
		if t != model.TierAny && !have[t] {
			var names []string
			for h := range have {
				names = append(names, string(h))
			}
			sort.Strings(names)
			return fmt.Errorf("%w: unknown tier %s (cluster has %v)", model.ErrInvalidVector, t, names)
		}
	}
	return nil
}
