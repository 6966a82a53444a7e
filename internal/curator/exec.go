package curator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// execute hands a job's tasks to the actuator (the only code that moves
// data) as one job: per-node queues, bounded moves per device and link, an
// adaptive byte rate, and progress checkpointed in the metadata store so
// a new master resumes the job after a failover. Tasks not started by the
// job's deadline (JobTimeLimit, for scan jobs) are deferred: the next scan
// re-plans them from fresh metadata.
// planned are the live planner's moves (liveplan.go), run in the same job.
func (c *Curator) execute(ctx context.Context, tasks []decide.Task, planned []actuate.Task, res *scanResult, rec *JobRecord, deadline bool) {
	if len(tasks) == 0 && len(planned) == 0 {
		return
	}
	ats := make([]actuate.Task, 0, len(tasks)+len(planned))
	var dropped []decide.Task
	tasks, dropped = safeTruncations(tasks, res)
	for _, t := range dropped {
		rec.Stale++
		c.log.Info("truncation dropped: data removal left an extent record in its tail", "egroup", fmt.Sprintf("%016x", t.Egroup))
	}
	for _, t := range tasks {
		at := actuate.FromDecide(t)
		listed := true
		if t.Kind == decide.KindCompact {
			at.Vector = res.vectorOf(t.Egroup)
			var live []extentRec
			live, listed = res.liveOf(t.Egroup)
			for _, x := range live {
				at.Extents = append(at.Extents, object.ExtentMove{ID: x.id, ModRev: x.modRev, Len: x.len})
			}
		}
		switch t.Kind {
		case decide.KindCompress, decide.KindDecompress, decide.KindECEncode, decide.KindECDecode:
			listed = c.transformTask(&at, t, res)
		}
		if !listed {
			// A rewrite with a partial list of live extents would lose the
			// others: without the list (a shuffled scan lists only the
			// egroups it expects rewrites of) the task waits for a scan
			// that has it (docs/design/0000 invariant 9).
			rec.Stale++
			c.m.stale.Inc()
			c.log.Warn("curator: rewrite dropped: the scan did not list the egroup's live extents", "kind", t.Kind, "egroup", fmt.Sprintf("%016x", t.Egroup))
			continue
		}
		ats = append(ats, at)
	}
	ats = append(ats, planned...)
	if c.opts.NodeQueues {
		ats = c.holdQueued(ctx, ats, rec)
	}
	job := actuate.NewJob(rec.ID, rec.Kind, rec.Trigger, rec.Seed, rec.Start, ats)
	if deadline {
		job.Deadline = rec.Start.Add(c.opts.JobTimeLimit)
	}
	c.runJob(ctx, job, rec)
	if deadline && c.opts.NodeQueues {
		c.queueDeferred(ctx, job, rec)
	}
}

// holdQueued drops the tasks of egroups that a node queue already holds a
// move for (on a node that is up): that node will run it, and a second
// move planned from the same record would only race it to go stale.
// Recovery is never held: a failure since the queued move was planned
// (a device of another replica failed, a replica went bad) makes the
// egroup's protection, not its placement, the urgent thing, and the
// queued move, planned from the record before the recovery switches it,
// goes stale when it runs.
func (c *Curator) holdQueued(ctx context.Context, ats []actuate.Task, rec *JobRecord) []actuate.Task {
	snap := c.topo.Snapshot()
	busy, err := c.queues.Egroups(ctx, snap.NodeUp)
	if err != nil {
		rec.addErr(fmt.Errorf("curator: read node queues: %w", err))
		return ats
	}
	if len(busy) == 0 {
		return ats
	}
	kept := ats[:0]
	for _, t := range ats {
		if busy[t.Egroup] && !recoveryKind(t.Kind) {
			rec.Held++
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// recoveryKind reports whether a task restores an egroup's protection.
func recoveryKind(k actuate.Kind) bool {
	switch k {
	case actuate.KindRecover, actuate.KindRebuild, actuate.KindSeal:
		return true
	}
	return false
}

// queueDeferred hands the moves the job's time limit cut off to the node
// queues; what cannot wait there stays deferred to the next scan.
func (c *Curator) queueDeferred(ctx context.Context, job *actuate.Job, rec *JobRecord) {
	var left []actuate.Task
	for i, t := range job.Tasks {
		if job.State[i] == actuate.Deferred && actuate.Queueable(t) {
			left = append(left, t)
		}
	}
	if len(left) == 0 {
		return
	}
	n, err := c.queues.Enqueue(context.WithoutCancel(ctx), rec.ID, c.now(), left)
	if err != nil {
		rec.addErr(fmt.Errorf("curator: queue deferred moves: %w", err))
	}
	rec.Queued += n
	rec.Deferred -= n
	c.log.Info("curator: moves past the job's time limit handed to node queues", "job", rec.ID, "queued", n)
}

// runJob runs an actuate job and folds its outcome into rec.
func (c *Curator) runJob(ctx context.Context, job *actuate.Job, rec *JobRecord) {
	var mu sync.Mutex
	observe := func(t actuate.Task, st actuate.TaskState, res actuate.Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case actuate.Stale:
			rec.Stale++
		case actuate.Failed:
			rec.Failed++
			rec.addErr(err)
		case actuate.Deferred:
			rec.Deferred++
		case actuate.Done:
			rec.Done[string(t.Kind)]++
			if rec.Plan != nil && t.Kind == actuate.KindPlanned {
				for _, r := range t.Rules {
					rec.Plan.Fired[r]++
				}
			}
			rec.Moved += res.Moved
			rec.Freed += res.Freed
			rec.addTransformed(t.Kind, res)
		}
	}
	if err := c.runner.Run(ctx, job, observe); err != nil && ctx.Err() == nil {
		rec.addErr(err)
	}
	// Tasks a deadline cut off never reached OnTask.
	p := job.Progress(c.now())
	rec.Deferred = p.States[actuate.Deferred.String()]
}

// removeExtents is data removal stage 1: delete unreferenced extent
// records older than the grace period, with compare-and-swap per record.
func (c *Curator) removeExtents(ctx context.Context, res *scanResult, rec *JobRecord) {
	xs := res.deadExtents
	revs := make([]object.ExtentRev, len(xs))
	for i, x := range xs {
		revs[i] = object.ExtentRev{ID: x.id, ModRev: x.modRev}
	}
	removed, stale, err := c.act.RemoveExtents(ctx, revs)
	res.removalIncomplete = removed != len(revs)
	rec.Done[string(decide.KindRemoveExtents)] += removed
	rec.Stale += stale
	c.m.stale.Add(float64(stale))
	c.m.tasks.WithLabelValues(string(decide.KindRemoveExtents)).Add(float64(removed))
	if err != nil {
		rec.Failed += len(xs) - removed - stale
		rec.addErr(err)
	}
}

// collectHistory removes tombstones and snapshot-only versions nobody can
// see any more (their extents become garbage for the next data removal).
func (c *Curator) collectHistory(ctx context.Context, res *scanResult, rec *JobRecord) {
	seen := map[[2]string]bool{}
	for _, bk := range res.history {
		if seen[bk] {
			continue
		}
		seen[bk] = true
		n, err := c.layer.CollectVersions(ctx, bk[0], bk[1])
		if err != nil {
			rec.addErr(err)
			continue
		}
		rec.Done["collect-versions"] += n
	}
}

// pinRepairAge: a snapshot or clone pin still unfinished this long after
// its creation was left by a crash (creation takes two commits).
const pinRepairAge = time.Minute

// reduceBudget bounds the records one job copies into clones (snapshot
// tree reduction), so a huge clone is reduced over several jobs.
const reduceBudget = 20000

// reduceClones is snapshot tree reduction (Curator §3.2.4): every clone
// gets the records it reads through to its parent copied into it, so
// lookups stop walking the chain; a fully reduced clone is unlinked and
// its pin on the parent released.
func (c *Curator) reduceClones(ctx context.Context, rec *JobRecord) {
	buckets, err := c.layer.ListBuckets(ctx)
	if err != nil {
		rec.addErr(err)
		return
	}
	for _, b := range buckets {
		if len(b.Snapshots) == 0 {
			continue
		}
		finished, dropped, err := c.layer.RepairPins(ctx, b.Name, pinRepairAge)
		if err != nil {
			rec.addErr(fmt.Errorf("repair pins of %s: %w", b.Name, err))
			continue
		}
		if finished+dropped > 0 {
			rec.Done["repair-pins"] += finished + dropped
			c.log.Warn("snapshot pins left by an interrupted create repaired", "bucket", b.Name, "finished", finished, "dropped", dropped)
		}
	}
	budget := reduceBudget
	for _, b := range buckets {
		if b.Parent == nil || budget <= 0 {
			continue
		}
		n, done, err := c.layer.ReduceClone(ctx, b.Name, budget)
		budget -= n
		rec.Done["reduce-snapshot-tree"] += n
		if err != nil {
			rec.addErr(fmt.Errorf("reduce clone %s: %w", b.Name, err))
			continue
		}
		if done {
			c.log.Info("clone reduced: it no longer reads through its parent", "bucket", b.Name, "copied", n)
		}
	}
}

// scrubLanes bounds how many devices are scrubbed at once. Each device is
// read by one lane at a time (a scrub is a sequential read of the whole
// replica), so devices are verified side by side instead of one replica
// after another across the cluster; the scheduler's per-device limits and
// its byte rate still apply to every read.
const scrubLanes = 8

// scrub verifies every replica of every sealed egroup; a replica that
// fails is marked bad (recovery repairs it). Replicas are grouped by
// device and devices are scrubbed in parallel (scrubLanes).
func (c *Curator) scrub(ctx context.Context, res *scanResult, rec *JobRecord) {
	type item struct {
		eg decide.Egroup
		r  model.Replica
	}
	byDevice := map[model.DeviceID][]item{}
	var stripes []decide.Egroup
	for _, eg := range res.egroups {
		if eg.Open || eg.Size == 0 {
			continue
		}
		if eg.EC.K > 0 {
			stripes = append(stripes, eg)
			continue
		}
		for _, r := range eg.Replicas {
			if !r.Bad {
				byDevice[r.Device] = append(byDevice[r.Device], item{eg, r.Replica})
			}
		}
	}
	devices := make([]model.DeviceID, 0, len(byDevice))
	for d := range byDevice {
		devices = append(devices, d)
	}
	slices.Sort(devices) // a deterministic order for logs and tests

	var mu sync.Mutex // guards rec
	lanes := make(chan func(), len(devices)+1)
	for _, d := range devices {
		lanes <- func() {
			for _, it := range byDevice[d] {
				out, err := c.act.Scrub(ctx, it.eg.ID, it.r, it.eg.Size)
				if ctx.Err() != nil {
					return
				}
				c.m.scrubbed.Add(float64(it.eg.Size))
				mu.Lock()
				rec.Scrubbed += it.eg.Size
				switch {
				case err != nil:
					rec.addErr(err)
				case out == actuate.ScrubBad:
					rec.BadFound++
					c.m.scrubBad.Inc()
				}
				mu.Unlock()
			}
		}
	}
	if len(stripes) > 0 {
		lanes <- func() {
			for _, eg := range stripes {
				c.scrubStripe(ctx, eg, rec, &mu)
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
	close(lanes)
	var wg sync.WaitGroup
	for range min(scrubLanes, len(lanes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lane := range lanes {
				lane()
			}
		}()
	}
	wg.Wait()
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
	shuffles        *prometheus.CounterVec
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
		shuffles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "shuffles_total",
			Help: "Full scans that joined on the nodes (outcome done) or abandoned the shuffle and joined on the master (abandoned)."}, []string{"outcome"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.jobs, m.jobSeconds, m.tasks, m.failed, m.stale, m.moved, m.scrubbed, m.scrubBad, m.backoffs, m.rate, m.underReplicated, m.garbage, m.dangling, m.shuffles}
}

// safeTruncations drops truncations planned past extent records that this
// job's data removal was to delete but did not (stale or failed): their
// egroup's tail end was computed without them.
func safeTruncations(tasks []decide.Task, res *scanResult) (keep, dropped []decide.Task) {
	if res == nil || !res.removalIncomplete {
		return tasks, nil
	}
	hadDead := map[uint64]bool{}
	for _, x := range res.deadExtents {
		hadDead[x.rec.Egroup] = true
	}
	for _, t := range tasks {
		if t.Kind == decide.KindTruncate && hadDead[t.Egroup] {
			dropped = append(dropped, t)
			continue
		}
		keep = append(keep, t)
	}
	return keep, dropped
}

// scrubStripe verifies an erasure-coded egroup's strips and parity.
// It takes mu (which guards rec) to record the outcome.
func (c *Curator) scrubStripe(ctx context.Context, eg decide.Egroup, rec *JobRecord, mu *sync.Mutex) {
	bytes := eg.FileBytes * int64(len(eg.Replicas))
	bad, parityOK, err := c.act.ScrubStripe(ctx, eg.ID, bytes)
	if ctx.Err() != nil {
		return
	}
	c.m.scrubbed.Add(float64(bytes))
	mu.Lock()
	defer mu.Unlock()
	rec.Scrubbed += bytes
	switch {
	case err != nil:
		rec.addErr(err)
	case bad > 0:
		rec.BadFound += bad
		c.m.scrubBad.Add(float64(bad))
	case !parityOK:
		rec.addErr(fmt.Errorf("egroup %016x: stripe parity does not match its data", eg.ID))
	}
}

// replicaDevices lists the devices of rs (for task samples).
func replicaDevices(rs []model.Replica) []model.DeviceID {
	out := make([]model.DeviceID, len(rs))
	for i, r := range rs {
		out[i] = r.Device
	}
	return out
}
