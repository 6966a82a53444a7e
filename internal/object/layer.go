package object

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Layer is the object layer of one node.
type Layer struct {
	opts  Options
	kv    meta.KV
	rio   ReplicaIO
	snaps *snapshotCache

	egroupSeq *meta.Sequence
	extentSeq *meta.Sequence

	pool *egroupPool
	// appenders batch small writes, one per pool key (appender.go).
	appenders sync.Map
	// unsealed are retired egroups whose seal failed; SealIdle retries.
	unsealedMu sync.Mutex
	unsealed   []retiredEgroup
	access     *accessTracker
	buckets    *bucketCache
	locs       *locationCache
	lat        latencyTracker
	m          *metrics
	// inflight are the egroups this node's writers created and may still
	// commit; sweepHook is a test hook the orphan sweep calls with stage
	// "candidate" between its first look at a file and the re-check, and
	// "removed" between a removal and the look after it (orphans.go).
	inflight  inflightEgroups
	sweepHook func(stage string, dev model.DeviceID, id uint64)

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
		snaps: &snapshotCache{topo: topo, interval: opts.StatsInterval, now: opts.Now, order: placement.ReadOrders[opts.ReadOrder],
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))},
		egroupSeq: meta.NewSequence(kv, "egroup", 1024),
		extentSeq: meta.NewSequence(kv, "extent", extentIDBlock),
		stop:      make(chan struct{}),
		m:         newMetrics(),
	}
	l.pool = newEgroupPool(l, opts.MaxOpenEgroups)
	l.buckets = newBucketCache()
	l.locs = newLocationCache(opts.LocationCacheEntries, max(opts.LocationCacheEgroupTTL, 0), opts.Now)
	wctx, cancel := context.WithCancel(context.Background())
	l.stopWatch = cancel
	l.bg.Add(1)
	go l.watchBuckets(wctx)
	l.access = newAccessTracker(kv, opts.Now, opts.AccessWindow)
	l.access.hotReads = opts.HotReads
	l.bg.Add(1)
	go l.flushLoop()
	return l, nil
}

// Options returns the layer's effective options.
func (l *Layer) Options() Options { return l.opts }

// Snapshot returns the current placement snapshot.
func (l *Layer) Snapshot() *model.Snapshot { return l.snaps.get() }

// Close flushes access records and stops background work. It does not
// close the KV.
// extentIDBlock is how many extent IDs a layer takes from the counter at
// a time: one metadata write per 4,096 extents. It also bounds the tail
// range an open egroup's record states (Egroup.TailFrom). Tests shrink it
// to cross blocks often.
var extentIDBlock uint64 = 4096

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
	if !utf8.ValidString(k) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	return nil
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
