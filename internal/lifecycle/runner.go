package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
)

// Leader says whether this node runs background work (the Curator's
// elector); nil means always (a single node).
type Leader interface{ IsLeader() bool }

// Options configure a Runner. Zero values mean defaults.
type Options struct {
	// Interval between runs. Default 1h (S3 applies rules once a day; an
	// hour keeps the lag small at the cost of one listing per hour).
	Interval time.Duration
	// Day is the length of a lifecycle day. Default 24h; shorter only
	// for demos and tests.
	Day time.Duration
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Leader Leader
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Interval <= 0 {
		o.Interval = time.Hour
	}
	if o.Day <= 0 {
		o.Day = 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Runner applies the lifecycle rules of every bucket.
type Runner struct {
	l    *object.Layer
	opts Options
	runs sync.Mutex // one run at a time

	mu   sync.Mutex
	last *RunReport

	// rules the current pass decides with for the bucket it is on (set
	// and read by the pass alone; runs holds one pass at a time).
	rules bucketRules

	actions *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	runsC   prometheus.Counter
}

// New returns a runner over l.
func New(l *object.Layer, opts Options) *Runner {
	opts.EnsureDefaults()
	return &Runner{l: l, opts: opts,
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_lifecycle_actions_total",
			Help: "Lifecycle actions applied, by kind (expire, transition, abort, noncurrent-expire, delete-marker)."}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_lifecycle_bytes_total",
			Help: "Bytes expired or transitioned by lifecycle rules, by kind."}, []string{"kind"}),
		runsC: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_lifecycle_runs_total",
			Help: "Lifecycle runs completed."}),
	}
}

// Collectors returns the runner's metrics.
func (r *Runner) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.actions, r.bytes, r.runsC}
}

// Options returns the runner's options.
func (r *Runner) Options() Options { return r.opts }

// Run applies the rules every Interval until ctx ends (on the leader).
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.opts.Leader != nil && !r.opts.Leader.IsLeader() {
			continue
		}
		if rep, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("lifecycle run failed", "err", err)
		} else if rep.Expired+rep.Transitioned+rep.Aborted > 0 {
			r.opts.Logger.Info("lifecycle run", "expired", rep.Expired, "transitioned", rep.Transitioned,
				"aborted_uploads", rep.Aborted, "scanned", rep.Scanned, "took", rep.End.Sub(rep.Start).Round(time.Millisecond))
		}
	}
}

// RuleReport counts one rule's work (applied, or pending in a dry run).
type RuleReport struct {
	Bucket          string `json:"bucket"`
	Rule            string `json:"rule"`
	Expire          int    `json:"expire"`
	ExpireBytes     int64  `json:"expire_bytes"`
	Transition      int    `json:"transition"`
	TransitionBytes int64  `json:"transition_bytes"`
	AbortUploads    int    `json:"abort_uploads"`
	// NoncurrentExpire counts noncurrent versions removed (or, dry, due);
	// MarkersRemoved lone delete markers removed.
	NoncurrentExpire      int      `json:"noncurrent_expire,omitempty"`
	NoncurrentExpireBytes int64    `json:"noncurrent_expire_bytes,omitempty"`
	MarkersRemoved        int      `json:"markers_removed,omitempty"`
	Waiting               int      `json:"waiting"` // objects with an action due later
	WaitingBytes          int64    `json:"waiting_bytes"`
	NextDue               string   `json:"next_due,omitempty"`
	TransitionClasses     []string `json:"transition_classes,omitempty"`
}

// RunReport describes a run (or, with DryRun, what a run would do now).
type RunReport struct {
	DryRun       bool      `json:"dry_run"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	Buckets      int       `json:"buckets"`
	Scanned      int       `json:"scanned"`
	Expired      int       `json:"expired"`
	Transitioned int       `json:"transitioned"`
	Aborted      int       `json:"aborted_uploads"`
	// NoncurrentExpired counts noncurrent versions removed; Markers lone
	// delete markers removed (versioned buckets).
	NoncurrentExpired int          `json:"noncurrent_expired"`
	Markers           int          `json:"markers_removed"`
	Skipped           int          `json:"skipped"` // changed since the decision, or failed
	Rules             []RuleReport `json:"rules"`
}

// Last returns the last completed run (nil before the first).
func (r *Runner) Last() *RunReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// RunOnce applies every bucket's rules now.
func (r *Runner) RunOnce(ctx context.Context) (RunReport, error) {
	r.runs.Lock()
	defer r.runs.Unlock()
	rep, err := r.pass(ctx, false)
	if err == nil {
		r.runsC.Inc()
		r.mu.Lock()
		r.last = &rep
		r.mu.Unlock()
	}
	return rep, err
}

// Pending reports, per rule, what a run would do now and what waits for
// a later day: bytes pending by rule. Nothing is changed.
func (r *Runner) Pending(ctx context.Context) (RunReport, error) {
	return r.pass(ctx, true)
}

// ParseBucketConfig returns a bucket's lifecycle configuration (ok false
// if it has none).
func ParseBucketConfig(b meta.Bucket) (Config, bool, error) {
	raw, ok := b.Attrs[BucketAttr]
	if !ok || len(raw) == 0 {
		return Config{}, false, nil
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, false, fmt.Errorf("lifecycle: bucket %s: corrupt configuration: %w", b.Name, err)
	}
	return c, true, nil
}

// plainSize is the size rules see: an encrypted object's plaintext size.
func plainSize(o meta.Object) int64 {
	if _, ok := o.Headers[sse.ObjectHeader]; !ok {
		return o.Size
	}
	streams := o.Parts
	if len(streams) == 0 {
		streams = []int64{o.Size}
	}
	if l, err := sse.NewLayout(streams); err == nil {
		return l.Plain
	}
	return o.Size
}

func (r *Runner) pass(ctx context.Context, dry bool) (RunReport, error) {
	now := r.opts.Now()
	rep := RunReport{DryRun: dry, Start: now}
	buckets, err := r.l.ListBuckets(ctx)
	if err != nil {
		return rep, err
	}
	for _, listed := range buckets {
		// The bucket as it is now, not as listed when the pass began
		// (a pass can take hours): its rules may have changed, or the
		// bucket been deleted and created again by someone else.
		b, _, err := r.l.GetBucket(ctx, listed.Name)
		if errors.Is(err, object.ErrNoSuchBucket) {
			continue
		}
		if err != nil {
			return rep, err
		}
		cfg, ok, err := ParseBucketConfig(b)
		if err != nil {
			r.opts.Logger.Warn("lifecycle: skipping bucket", "bucket", b.Name, "err", err)
			continue
		}
		if !ok {
			continue
		}
		rep.Buckets++
		byRule := map[string]*RuleReport{}
		rule := func(id string) *RuleReport {
			if rr, ok := byRule[id]; ok {
				return rr
			}
			rr := &RuleReport{Bucket: b.Name, Rule: id}
			byRule[id] = rr
			return rr
		}
		r.rules = rulesOf(b)
		err = r.objects(ctx, b.Name, cfg, now, dry, &rep, rule)
		if err == nil {
			err = r.uploads(ctx, b.Name, cfg, now, dry, &rep, rule)
		}
		if err == nil && b.Versioning != object.VersioningOff {
			err = r.versions(ctx, b.Name, cfg, now, dry, &rep, rule)
		}
		switch {
		case errors.Is(err, object.ErrNoSuchBucket):
		case errors.Is(err, errRulesChanged):
			r.opts.Logger.Info("lifecycle: the bucket's rules changed during the pass; the next pass applies them", "bucket", b.Name)
		case err != nil:
			return rep, err
		}
		for _, rr := range byRule {
			sort.Strings(rr.TransitionClasses)
			rep.Rules = append(rep.Rules, *rr)
		}
	}
	sort.Slice(rep.Rules, func(i, j int) bool {
		if rep.Rules[i].Bucket != rep.Rules[j].Bucket {
			return rep.Rules[i].Bucket < rep.Rules[j].Bucket
		}
		return rep.Rules[i].Rule < rep.Rules[j].Rule
	})
	rep.End = r.opts.Now()
	return rep, nil
}

// errRulesChanged stops a bucket's part of a pass: its lifecycle
// configuration is no longer the one the pass decides with.
var errRulesChanged = errors.New("lifecycle: the bucket's rules changed")

// bucketRules identifies the lifecycle configuration a pass decides with:
// the bucket's incarnation and its raw configuration.
type bucketRules struct {
	created int64
	raw     string
}

func rulesOf(b meta.Bucket) bucketRules {
	return bucketRules{created: b.Created, raw: string(b.Attrs[BucketAttr])}
}

// stillRules checks, before an action, that bucket still has the rules the
// pass decided with (read through the bucket cache, which follows changes
// within its watch delay): a rule removed or relaxed meanwhile must not
// expire what it no longer covers.
func (r *Runner) stillRules(ctx context.Context, bucket string) error {
	b, _, err := r.l.GetBucket(ctx, bucket)
	if err != nil {
		return err
	}
	if rulesOf(b) != r.rules {
		return errRulesChanged
	}
	return nil
}

func (r *Runner) objects(ctx context.Context, bucket string, cfg Config, now time.Time, dry bool, rep *RunReport, rule func(string) *RuleReport) error {
	after := ""
	for {
		page, err := r.l.List(ctx, bucket, object.ListOptions{After: after, MaxKeys: 1000})
		if err != nil {
			return err
		}
		for _, oi := range page.Objects {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Scanned++
			o := Object{Key: oi.Key, Size: plainSize(oi.Object), Modified: time.Unix(0, oi.Mtime), Tags: oi.Tags, Class: oi.Class}
			a := cfg.Decide(o, now, r.opts.Day)
			if a.Kind == None {
				if next, id := cfg.NextDue(o, now, r.opts.Day); !next.IsZero() {
					rr := rule(id)
					rr.Waiting++
					rr.WaitingBytes += oi.Size
					if n := next.UTC().Format(time.RFC3339); rr.NextDue == "" || n < rr.NextDue {
						rr.NextDue = n
					}
				}
				continue
			}
			rr := rule(a.Rule)
			same := func(cur object.ObjectInfo) bool { return cur.ETag == oi.ETag && cur.Mtime == oi.Mtime }
			switch a.Kind {
			case Expire:
				if dry {
					rr.Expire++
					rr.ExpireBytes += oi.Size
					continue
				}
				if err := r.stillRules(ctx, bucket); err != nil {
					return err
				}
				deleted, err := r.l.DeleteIf(ctx, bucket, oi.Key, same)
				if err != nil || !deleted {
					rep.Skipped++
					continue
				}
				rr.Expire++
				rr.ExpireBytes += oi.Size
				rep.Expired++
				r.actions.WithLabelValues("expire").Inc()
				r.bytes.WithLabelValues("expire").Add(float64(oi.Size))
			case TransitionTo:
				if !contains(rr.TransitionClasses, a.Class) {
					rr.TransitionClasses = append(rr.TransitionClasses, a.Class)
				}
				if dry {
					rr.Transition++
					rr.TransitionBytes += oi.Size
					continue
				}
				if err := r.stillRules(ctx, bucket); err != nil {
					return err
				}
				done, started, err := r.l.Transition(ctx, bucket, oi.Key, a.Class, same)
				if err == nil && started {
					// One move at a time: transitions rewrite bytes, and a
					// rule may match millions of objects.
					select {
					case err = <-done:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if err != nil || !started {
					if err != nil {
						r.opts.Logger.Warn("lifecycle transition failed", "bucket", bucket, "key", oi.Key, "class", a.Class, "err", err)
					}
					rep.Skipped++
					continue
				}
				rr.Transition++
				rr.TransitionBytes += oi.Size
				rep.Transitioned++
				r.actions.WithLabelValues("transition").Inc()
				r.bytes.WithLabelValues("transition").Add(float64(oi.Size))
			}
		}
		if !page.Truncated {
			return nil
		}
		after = page.NextAfter
	}
}

// versions applies NoncurrentVersionExpiration and
// ExpiredObjectDeleteMarker to a versioned bucket: it walks every key's
// versions, newest first; a version stopped being current when the one
// just newer than it was written.
func (r *Runner) versions(ctx context.Context, bucket string, cfg Config, now time.Time, dry bool, rep *RunReport, rule func(string) *RuleReport) error {
	var key []object.VersionInfo // the versions of one key, newest first
	flush := func() error {
		if len(key) == 0 {
			return nil
		}
		defer func() { key = key[:0] }()
		if len(key) == 1 && key[0].DeleteMarker {
			ok, id := cfg.DecideLoneMarker(key[0].Key)
			if !ok {
				return nil
			}
			if !dry {
				if err := r.stillRules(ctx, bucket); err != nil {
					return err
				}
				if _, err := r.l.DeleteObject(ctx, bucket, key[0].Key, key[0].VersionID); err != nil {
					rep.Skipped++
					return nil
				}
				rep.Markers++
				r.actions.WithLabelValues("delete-marker").Inc()
			}
			rule(id).MarkersRemoved++
			return nil
		}
		for i := 1; i < len(key); i++ {
			v := key[i]
			since := time.Unix(0, key[i-1].Mtime)
			o := Object{Key: v.Key, Size: plainSize(v.Object), Modified: time.Unix(0, v.Mtime), Tags: v.Tags, Class: v.Class}
			ok, id := cfg.DecideNoncurrent(o, since, now, r.opts.Day)
			if !ok {
				continue
			}
			rr := rule(id)
			if !dry {
				// Only while it is still noncurrent: deleting every newer
				// version by ID (a rollback) makes it current again.
				if err := r.stillRules(ctx, bucket); err != nil {
					return err
				}
				deleted, err := r.l.DeleteNoncurrent(ctx, bucket, v.Key, v.VersionID)
				if err != nil || !deleted {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					rep.Skipped++
					continue
				}
				rep.NoncurrentExpired++
				r.actions.WithLabelValues("noncurrent-expire").Inc()
				r.bytes.WithLabelValues("noncurrent-expire").Add(float64(v.Size))
			}
			rr.NoncurrentExpire++
			rr.NoncurrentExpireBytes += v.Size
		}
		return nil
	}
	opts := object.VersionListOptions{MaxKeys: 1000}
	for {
		page, err := r.l.ListVersions(ctx, bucket, opts)
		if err != nil {
			return err
		}
		for _, v := range page.Versions {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if len(key) > 0 && key[0].Key != v.Key {
				if err := flush(); err != nil {
					return err
				}
			}
			rep.Scanned++
			key = append(key, v)
		}
		if !page.Truncated {
			return flush()
		}
		opts.KeyMarker, opts.VersionMarker = page.NextKeyMarker, page.NextVersionMarker
	}
}

func (r *Runner) uploads(ctx context.Context, bucket string, cfg Config, now time.Time, dry bool, rep *RunReport, rule func(string) *RuleReport) error {
	ups, _, err := r.l.ListUploads(ctx, bucket, "", 0)
	if err != nil {
		return err
	}
	for _, u := range ups {
		abort, id := cfg.DecideUpload(u.Key, time.Unix(0, u.Created), now, r.opts.Day)
		if !abort {
			continue
		}
		if !dry {
			if err := r.stillRules(ctx, bucket); err != nil {
				return err
			}
			if err := r.l.AbortUpload(ctx, bucket, u.ID); err != nil {
				rep.Skipped++ // completed or aborted meanwhile
				continue
			}
			rep.Aborted++
			r.actions.WithLabelValues("abort").Inc()
		}
		rule(id).AbortUploads++
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
