package curator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// execute runs tasks from per-node queues: tasks are grouped by the node
// that receives data (or owns the egroup's first replica), each node's
// queue runs in priority order, and Workers queues run at once so one slow
// node does not hold up the rest.
func (c *Curator) execute(ctx context.Context, tasks []decide.Task, res *scanResult, rec *JobRecord) {
	queues := map[model.NodeID][]decide.Task{}
	var order []model.NodeID
	for _, t := range tasks {
		n := taskNode(t, res)
		if _, ok := queues[n]; !ok {
			order = append(order, n)
		}
		queues[n] = append(queues[n], t)
	}
	var mu sync.Mutex
	sem := make(chan struct{}, c.opts.Workers)
	var wg sync.WaitGroup
	for _, n := range order {
		q := queues[n]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for i, t := range q {
				if ctx.Err() != nil {
					return
				}
				if c.now().Sub(rec.Start) > c.opts.JobTimeLimit {
					mu.Lock()
					rec.Deferred += len(q) - i
					mu.Unlock()
					return
				}
				moved, err := c.runTask(ctx, t, res)
				mu.Lock()
				switch {
				case errors.Is(err, errStale):
					rec.Stale++
					c.m.stale.Inc()
				case err != nil:
					rec.Failed++
					rec.addErr(fmt.Errorf("%s: %w", t, err))
					c.m.failed.WithLabelValues(string(t.Kind)).Inc()
				default:
					rec.Done[string(t.Kind)]++
					rec.Moved += moved
					if t.Kind == decide.KindRemoveEgroup {
						rec.Freed += t.Bytes * int64(len(res.records[t.Egroup].Replicas))
					}
					c.m.tasks.WithLabelValues(string(t.Kind)).Inc()
					c.m.moved.Add(float64(moved))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func taskNode(t decide.Task, res *scanResult) model.NodeID {
	if len(t.Add) > 0 {
		return t.Add[0].Node
	}
	if eg, ok := res.records[t.Egroup]; ok && len(eg.Replicas) > 0 {
		return eg.Replicas[0].Node
	}
	return ""
}

// throttle waits for the byte budget and for busy devices to calm down.
//
// The byte rate adapts (additive increase, multiplicative decrease, as in
// TCP and Mirador §5's adaptive queueing): every time a device is found
// busy the rate halves, down to 1 % of the maximum; every task that finds
// its devices idle raises it by 5 % of the maximum.
func (c *Curator) throttle(ctx context.Context, bytes int64, devs ...model.DeviceID) error {
	if c.load != nil {
		backedOff := false
		for i := 0; i < 50; i++ { // back off at most ~5 s per task
			busy := false
			for _, d := range devs {
				if c.load(d) > c.opts.BusyQueueLen {
					busy = true
				}
			}
			if !busy {
				break
			}
			if !backedOff {
				backedOff = true
				c.bucket.adapt(false, c.opts.MoveBytesPerSec)
			}
			c.m.backoffs.Inc()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !backedOff {
			c.bucket.adapt(true, c.opts.MoveBytesPerSec)
		}
	}
	c.m.rate.Set(c.bucket.currentRate())
	return c.bucket.wait(ctx, bytes)
}

// loadEgroup re-reads an egroup record and checks the task is not stale.
func (c *Curator) loadEgroup(ctx context.Context, t decide.Task) (meta.Egroup, error) {
	var eg meta.Egroup
	rev, err := meta.GetRecord(ctx, c.layer.KV(), meta.EgroupKey(t.Egroup), &eg)
	if errors.Is(err, meta.ErrNotFound) || (err == nil && rev != t.ModRev) {
		return eg, errStale
	}
	return eg, err
}

// switchEgroup writes an egroup record with compare-and-swap.
func (c *Curator) switchEgroup(ctx context.Context, t decide.Task, eg meta.Egroup) error {
	var txn meta.Txn
	txn.If(meta.EgroupKey(t.Egroup), t.ModRev)
	txn.Put(meta.EgroupKey(t.Egroup), meta.Encode(eg))
	_, err := c.layer.KV().Commit(ctx, &txn)
	if errors.Is(err, meta.ErrConflict) {
		return errStale
	}
	return err
}

func (c *Curator) runTask(ctx context.Context, t decide.Task, res *scanResult) (int64, error) {
	switch t.Kind {
	case decide.KindSeal:
		eg, err := c.loadEgroup(ctx, t)
		if err != nil {
			return 0, err
		}
		eg.State = meta.EgroupSealed
		return 0, c.switchEgroup(ctx, t, eg)
	case decide.KindRecover, decide.KindRemoveReplicas, decide.KindTierDown, decide.KindTierUp, decide.KindBalance:
		return c.recover(ctx, t)
	case decide.KindRemoveEgroup:
		return 0, c.removeEgroup(ctx, t)
	case decide.KindCompact:
		return c.compact(ctx, t, res)
	}
	return 0, fmt.Errorf("curator: no executor for %s", t.Kind)
}

// recover copies the egroup to each added device (verified), switches the
// replica list with compare-and-swap, and only then deletes the removed
// replicas' files (docs/design/0000 invariant 4: durability never dips).
func (c *Curator) recover(ctx context.Context, t decide.Task) (int64, error) {
	eg, err := c.loadEgroup(ctx, t)
	if err != nil {
		return 0, err
	}
	removing := map[model.DeviceID]bool{}
	for _, r := range t.Remove {
		removing[r.Device] = true
	}
	var sources []model.Replica
	for _, r := range eg.Replicas {
		if !r.Bad && !removing[r.Device] {
			sources = append(sources, r.Replica())
		}
	}
	// A draining or lost-but-readable replica can still serve as source.
	for _, r := range eg.Replicas {
		if !r.Bad && removing[r.Device] {
			sources = append(sources, r.Replica())
		}
	}
	var moved int64
	var added []model.Replica
	cleanup := func() {
		for _, a := range added {
			_ = c.layer.ReplicaIO().Remove(context.WithoutCancel(ctx), a, t.Egroup)
		}
	}
	for _, dst := range t.Add {
		if err := c.throttle(ctx, eg.Size, dst.Device); err != nil {
			cleanup()
			return moved, err
		}
		var lastErr error
		ok := false
		for _, src := range sources {
			if err := c.layer.CopyReplica(ctx, t.Egroup, eg.Size, src, dst); err != nil {
				lastErr = err
				continue
			}
			ok = true
			break
		}
		if !ok {
			cleanup()
			if lastErr == nil {
				lastErr = errors.New("no readable source replica")
			}
			return moved, fmt.Errorf("copy to %s: %w", dst.Device, lastErr)
		}
		added = append(added, dst)
		moved += eg.Size
	}
	next := eg
	next.Replicas = nil
	for _, r := range eg.Replicas {
		if !removing[r.Device] {
			next.Replicas = append(next.Replicas, r)
		}
	}
	for _, a := range added {
		next.Replicas = append(next.Replicas, meta.EgroupReplica{Device: a.Device, Node: a.Node, Tier: a.Tier})
	}
	if len(next.Replicas) == 0 {
		cleanup()
		return moved, errors.New("refusing to leave an egroup with no replicas")
	}
	if err := c.switchEgroup(ctx, t, next); err != nil {
		cleanup()
		return moved, err
	}
	readded := map[model.DeviceID]bool{}
	for _, a := range added {
		readded[a.Device] = true
	}
	for _, r := range t.Remove {
		if readded[r.Device] {
			continue // the fresh copy replaced the bad file in place
		}
		if err := c.layer.ReplicaIO().Remove(ctx, r, t.Egroup); err != nil {
			c.log.Debug("remove old replica failed (device may be gone)", "egroup", meta.FormatID(t.Egroup), "device", r.Device, "err", err)
		}
	}
	return moved, nil
}

// removeEgroup is data removal stage 2: delete the record (and its access
// record) with compare-and-swap, then the replica files.
func (c *Curator) removeEgroup(ctx context.Context, t decide.Task) error {
	eg, err := c.loadEgroup(ctx, t)
	if err != nil {
		return err
	}
	var txn meta.Txn
	txn.If(meta.EgroupKey(t.Egroup), t.ModRev)
	txn.Del(meta.EgroupKey(t.Egroup))
	txn.Del(meta.AccessKey(t.Egroup))
	if _, err := c.layer.KV().Commit(ctx, &txn); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return errStale
		}
		return err
	}
	for _, r := range eg.Replicas {
		if err := c.layer.ReplicaIO().Remove(ctx, r.Replica(), t.Egroup); err != nil {
			c.log.Debug("remove egroup file", "egroup", meta.FormatID(t.Egroup), "device", r.Device, "err", err)
		}
	}
	return nil
}

// compact (GC) moves an egroup's live extents into fresh egroups of the
// same vector; the emptied egroup is removed by a later data-removal pass.
func (c *Curator) compact(ctx context.Context, t decide.Task, res *scanResult) (int64, error) {
	eg, err := c.loadEgroup(ctx, t)
	if err != nil {
		return 0, err
	}
	var moves []object.ExtentMove
	var devs []model.DeviceID
	for _, r := range eg.Replicas {
		devs = append(devs, r.Device)
	}
	for _, x := range res.liveByEgroup[t.Egroup] {
		moves = append(moves, object.ExtentMove{ID: x.id, ModRev: x.modRev, Len: x.rec.Len})
	}
	if err := c.throttle(ctx, t.Bytes, devs...); err != nil {
		return 0, err
	}
	// Keep the data on the tiers its replicas occupy now.
	place := model.Vector{Counts: map[model.Tier]int{}}
	for _, rp := range eg.Replicas {
		if !rp.Bad {
			place.Counts[rp.Tier]++
		}
	}
	if place.Total() != eg.Vector.Total() {
		place = model.Vector{}
	}
	r, err := c.layer.Relocate(ctx, eg.Vector, place, moves)
	if r.Stale > 0 {
		c.m.stale.Add(float64(r.Stale))
	}
	return r.Bytes, err
}

// removeExtents is data removal stage 1: delete unreferenced extent
// records older than the grace period, with compare-and-swap per record.
func (c *Curator) removeExtents(ctx context.Context, xs []extentInfo, rec *JobRecord) {
	const batch = meta.MaxTxnOps / 2
	for len(xs) > 0 {
		n := min(batch, len(xs))
		var txn meta.Txn
		for _, x := range xs[:n] {
			txn.If(meta.ExtentKey(x.id), x.modRev)
			txn.Del(meta.ExtentKey(x.id))
		}
		_, err := c.layer.KV().Commit(ctx, &txn)
		switch {
		case errors.Is(err, meta.ErrConflict):
			// Some record changed; retry one by one to drop only those.
			for _, x := range xs[:n] {
				var one meta.Txn
				one.If(meta.ExtentKey(x.id), x.modRev)
				one.Del(meta.ExtentKey(x.id))
				if _, err := c.layer.KV().Commit(ctx, &one); err == nil {
					rec.Done[string(decide.KindRemoveExtents)]++
				} else {
					rec.Stale++
					c.m.stale.Inc()
				}
			}
		case err != nil:
			rec.Failed += n
			rec.addErr(err)
		default:
			rec.Done[string(decide.KindRemoveExtents)] += n
			c.m.tasks.WithLabelValues(string(decide.KindRemoveExtents)).Add(float64(n))
		}
		xs = xs[n:]
	}
}

// scrub verifies every replica of every sealed egroup within the byte
// budget; a replica that fails is marked bad (recovery repairs it).
func (c *Curator) scrub(ctx context.Context, res *scanResult, rec *JobRecord) {
	for _, eg := range res.egroups {
		if eg.Open || eg.Size == 0 {
			continue
		}
		for _, r := range eg.Replicas {
			if r.Bad {
				continue
			}
			if err := c.throttle(ctx, eg.Size, r.Device); err != nil {
				return
			}
			err := c.layer.ReplicaIO().Verify(ctx, r.Replica, eg.ID, eg.Size)
			rec.Scrubbed += eg.Size
			c.m.scrubbed.Add(float64(eg.Size))
			if err == nil {
				continue
			}
			if errors.Is(err, extent.ErrCorrupt) || isMissing(err) {
				if !c.stillListed(ctx, eg.ID, r.Device) {
					// Removed or moved since the scan (by this job's own
					// data removal, compaction or recovery, or by a
					// concurrent job): not a bad replica.
					continue
				}
				rec.BadFound++
				c.m.scrubBad.Inc()
				c.log.Error("scrub: bad replica", "egroup", meta.FormatID(eg.ID), "device", r.Device, "err", err)
				c.layer.MarkReplicaBad(ctx, eg.ID, r.Device)
			} else {
				rec.addErr(fmt.Errorf("scrub egroup %s on %s: %w", meta.FormatID(eg.ID), r.Device, err))
			}
		}
	}
}

func isMissing(err error) bool { return errors.Is(err, device.ErrNotExist) }

// stillListed reports whether an egroup's current record still lists a
// good replica on dev (when in doubt, true: a real bad replica must not be
// missed).
func (c *Curator) stillListed(ctx context.Context, id uint64, dev model.DeviceID) bool {
	var eg meta.Egroup
	_, err := meta.GetRecord(ctx, c.layer.KV(), meta.EgroupKey(id), &eg)
	if errors.Is(err, meta.ErrNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	for _, r := range eg.Replicas {
		if r.Device == dev {
			return !r.Bad
		}
	}
	return false
}

// tokenBucket is a byte-rate limiter.
type tokenBucket struct {
	rate float64
	mu   sync.Mutex
	next time.Time
}

func newTokenBucket(rate float64) *tokenBucket { return &tokenBucket{rate: rate} }

// adapt raises (idle) or halves (busy) the rate within [1 %, 100 %] of max.
func (b *tokenBucket) adapt(idle bool, maxRate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if idle {
		b.rate = min(maxRate, b.rate+0.05*maxRate)
	} else {
		b.rate = max(0.01*maxRate, b.rate/2)
	}
}

func (b *tokenBucket) currentRate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

func (b *tokenBucket) wait(ctx context.Context, n int64) error {
	now := time.Now()
	b.mu.Lock()
	if b.rate <= 0 || n <= 0 {
		b.mu.Unlock()
		return nil
	}
	if b.next.Before(now) {
		b.next = now
	}
	b.next = b.next.Add(time.Duration(float64(n) / b.rate * float64(time.Second)))
	until := b.next
	b.mu.Unlock()
	// Allow a burst of one second's budget before waiting.
	if d := time.Until(until) - time.Second; d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}

type metrics struct {
	jobs            *prometheus.CounterVec
	jobSeconds      *prometheus.HistogramVec
	tasks           *prometheus.CounterVec
	failed          *prometheus.CounterVec
	stale           prometheus.Counter
	moved           prometheus.Counter
	scrubbed        prometheus.Counter
	scrubBad        prometheus.Counter
	backoffs        prometheus.Counter
	rate            prometheus.Gauge
	underReplicated prometheus.Gauge
	garbage         prometheus.Gauge
	dangling        prometheus.Gauge
}

func newMetrics() *metrics {
	ns, sub := "terrace", "curator"
	return &metrics{
		jobs:            prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "jobs_total", Help: "Jobs run."}, []string{"kind"}),
		jobSeconds:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "job_seconds", Help: "Job durations.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"kind"}),
		tasks:           prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tasks_total", Help: "Tasks completed, by kind."}, []string{"kind"}),
		failed:          prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tasks_failed_total", Help: "Tasks failed, by kind."}, []string{"kind"}),
		stale:           prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tasks_stale_total", Help: "Tasks dropped because metadata changed since the scan."}),
		moved:           prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "moved_bytes_total", Help: "Bytes copied by recovery and compaction."}),
		scrubbed:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrubbed_bytes_total", Help: "Replica bytes verified by scrubbing."}),
		scrubBad:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrub_bad_replicas_total", Help: "Replicas found bad by scrubbing."}),
		backoffs:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "backoffs_total", Help: "Times a task waited for busy devices."}),
		rate:            prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "move_rate_bytes_per_second", Help: "Current adaptive budget for background data movement."}),
		underReplicated: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "under_replicated_bytes", Help: "Bytes missing from replication vectors at the last scan."}),
		garbage:         prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "garbage_bytes", Help: "Dead bytes in egroups at the last full scan."}),
		dangling:        prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "dangling_references", Help: "Dangling references found by the last consistency check (should be 0)."}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.jobs, m.jobSeconds, m.tasks, m.failed, m.stale, m.moved, m.scrubbed, m.scrubBad, m.backoffs, m.rate, m.underReplicated, m.garbage, m.dangling}
}
