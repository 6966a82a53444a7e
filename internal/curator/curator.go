package curator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/replica"
)

func encodedLen(n int64) int64 { return replica.EncodedLen(n) }

// Options configure the Curator. Zero values mean defaults.
type Options struct {
	Decide decide.Options
	// Tier holds the tiering and balancing thresholds; Tiering enables
	// them (the Curator ON/OFF experiment turns everything off instead).
	Tier    decide.TierOptions
	Tiering bool
	// TieringScheduler decides when tiering runs (nil: the threshold
	// rule); TierSignals feeds it the node's signals (tiering_scheduler.go).
	TieringScheduler TieringScheduler
	TierSignals      func() learn.Observation
	// PartialEvery and FullEvery are the periodic schedules (Curator §3.3:
	// partial scans hourly, full scans every six hours).
	PartialEvery time.Duration
	FullEvery    time.Duration
	// RecheckAfter is how soon another partial scan follows a job whose
	// scan found under-replicated egroups, doubling while they stay
	// under-replicated, up to PartialEvery. A job cannot finish every
	// recovery it sees: an open egroup with a replica on a failed device
	// belongs to its writer until sealed (the next scan seals it once
	// idle, SealIdleBeforeScan), JobTimeLimit leaves tasks for later, a
	// copy can fail. Without the re-check they waited for the periodic
	// partial scan (hourly) with one copy fewer than their vector; the
	// re-check also confirms protection soon after a rebuild. Default
	// 10 s.
	RecheckAfter time.Duration
	// PollEvery is how often the Curator checks the cluster view for new
	// failures (event-driven recovery).
	PollEvery time.Duration
	// ScanParallelism is the number of map partitions scanned at once.
	ScanParallelism int
	// ScanMemoryBytes bounds the heap a full scan's extent-side arrays
	// take (a 64-byte record per extent, 16 bytes per reference to one,
	// 4 per live extent); past it they are kept in memory-mapped,
	// unlinked files in ScanSpillDir (spill.go). Default 1 GiB; negative:
	// no bound.
	ScanMemoryBytes int64
	// ScanSpillDir is where those files go (default: the system's
	// temporary directory; a server uses its data directory).
	ScanSpillDir string
	// Workers run tasks concurrently.
	Workers int
	// MoveBytesPerSec bounds background data movement (copies, compaction,
	// scrubbing) so client I/O keeps the devices.
	MoveBytesPerSec float64
	// BusyQueueLen: when a device involved in a task has more operations
	// in flight than this, the task waits (backs off) for client I/O.
	BusyQueueLen int
	// Limits bound concurrent moves per device and per node link.
	Limits actuate.Limits
	// ClientLatency reports recent foreground latency and its quiet
	// baseline; background moves slow down above twice the baseline.
	ClientLatency func() (recent, baseline time.Duration)
	// Node is this node's ID (recorded as the owner of the jobs it runs).
	Node string
	// PlannerRules are the planner's rules, one per line (terrace plan;
	// default DefaultPlannerRules).
	PlannerRules string
	// PlannerRuleSource, when set, adds rules from outside the
	// configuration (the live Lua rule policies) to every plan, bound to
	// the snapshot the plan's model is built from.
	PlannerRuleSource func(*model.Snapshot) RuleSource
	// LiveRules are the rules every scan job plans with after its own
	// decisions (liveplan.go): "" is DefaultLiveRules with the tiering
	// options' m and s, LiveRulesOff disables live planning.
	LiveRules string
	// Scrub enables checksum verification of every replica on full scans.
	Scrub bool
	// SealIdleBeforeScan seals open egroups idle this long before each
	// scan (negative: every idle egroup), so a job sees recent writes as
	// movable data. Default 10 s. The object layer also seals idle egroups
	// on its own after a minute.
	SealIdleBeforeScan time.Duration
	// NodeQueues hands the moves a scan job did not start within
	// JobTimeLimit to the durable queue of the node that runs them
	// (actuate.NodeQueues) instead of leaving them for the next scan; every
	// node executes its own queue at its own pace.
	NodeQueues bool
	// JobTimeLimit bounds how long one job executes tasks; tasks not
	// started by then are left for the next scan, which re-plans them from
	// fresh metadata. It keeps a long compaction from holding up tiering
	// and recovery decisions. Default 1 min.
	JobTimeLimit time.Duration
	// HistoryLen bounds kept job records.
	HistoryLen int
	Logger     *slog.Logger
	Now        func() time.Time
	// Tuner and Balancer are the policy hooks (hooks.go); nil keeps the
	// configured thresholds and scans everything on the master. Self is
	// this node's ID, which the balancer may assign partitions to.
	Tuner    TierTuner
	Balancer ScanBalancer
	Self     model.NodeID
	// Shuffle is this node's store of shuffled references (shuffle.go):
	// with it and a ShuffleBalancer, a full scan joins references with
	// extents on the nodes that map the extent partitions.
	Shuffle *ShuffleStore
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	o.Decide.EnsureDefaults()
	o.Tier.EnsureDefaults()
	if o.PartialEvery == 0 {
		o.PartialEvery = time.Hour
	}
	if o.FullEvery == 0 {
		o.FullEvery = 6 * time.Hour
	}
	if o.PollEvery == 0 {
		o.PollEvery = 2 * time.Second
	}
	if o.RecheckAfter == 0 {
		o.RecheckAfter = 10 * time.Second
	}
	if o.ScanParallelism == 0 {
		o.ScanParallelism = 4
	}
	if o.ScanMemoryBytes == 0 {
		o.ScanMemoryBytes = 1 << 30
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.MoveBytesPerSec == 0 {
		o.MoveBytesPerSec = 200e6
	}
	if o.BusyQueueLen == 0 {
		o.BusyQueueLen = 8
	}
	if o.HistoryLen == 0 {
		o.HistoryLen = 100
	}
	if o.JobTimeLimit == 0 {
		o.JobTimeLimit = time.Minute
	}
	if strings.TrimSpace(o.PlannerRules) == "" {
		o.PlannerRules = DefaultPlannerRules
	}
	if o.SealIdleBeforeScan == 0 {
		o.SealIdleBeforeScan = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Leader tells whether this node is the Curator master.
type Leader interface{ IsLeader() bool }

// Termed is a Leader that numbers its terms: Term changes whenever this
// node wins mastership again (cluster.Elector). With it, a node that lost
// and won back mastership between two checks still sees that another
// master's term came between; a plain Leader is only seen at each check.
type Termed interface {
	Leader
	Term() uint64
}

type alwaysLeader struct{}

func (alwaysLeader) IsLeader() bool { return true }

// Topology provides cluster snapshots.
type Topology interface{ Snapshot() *model.Snapshot }

// DeviceLoad reports a device's in-flight operations (for back-off); nil
// means no back-off information.
type DeviceLoad func(model.DeviceID) int

// Curator runs jobs and tasks.
type Curator struct {
	opts   Options
	layer  *object.Layer
	kv     meta.KV // read-only scans of the maps; job history
	topo   Topology
	policy placement.Policy
	leader Leader
	load   DeviceLoad
	now    func() time.Time
	log    *slog.Logger
	m      *metrics

	sched  *actuate.Scheduler
	act    *actuate.Actuator
	queues *actuate.NodeQueues
	worker *actuate.QueueWorker
	jobs   *actuate.JobStore
	runner *actuate.Runner

	qmu      sync.Mutex
	qsnap    *model.Snapshot
	qsnapAt  time.Time
	resuming sync.Mutex

	runMu sync.Mutex // one job at a time

	mu        sync.Mutex
	downSince map[model.NodeID]time.Time
	seenBad   map[model.DeviceID]bool
	// recheckAt is when a partial scan re-checks the under-replication
	// the last job saw (zero: none pending); recheckDelay the current
	// back-off (RecheckAfter doubling up to PartialEvery).
	recheckAt    time.Time
	recheckDelay time.Duration
	running      *JobRecord
	last         map[string]time.Time
	trigger      chan string
	// hot is signalled when promotion requests appear (promote.go).
	hot chan struct{}
	rng *rand.Rand
	// partLoad is what each scan partition held and who scanned it last;
	// assigned is the balancer's latest assignment.
	partLoad map[string]PartitionLoad
	// scanStart is when the latest scan began (its partitions' loads are
	// the ones Status reports per node).
	scanStart time.Time
	assigned  map[string]model.NodeID
	// mapFailed is when a node's partition map last failed.
	mapFailed map[model.NodeID]time.Time
	// ownerCuts are, per owner map, the cut points its partitions sampled
	// in the last full scan (every ownerCutEvery-th record), in key
	// order: where the next full scan cuts that map (ownerPartitions).
	ownerCuts map[string][]string
	tier      tierState
	// lastJobID is the latest job ID issued (jobID).
	lastJobID int64
}

// New returns a Curator. kv is the metadata store the layer runs on: the
// Curator scans its maps (read-only) and keeps job history and job
// checkpoints in it; every change to egroups and extents goes through the
// actuator and the layer's maintenance calls. leader may be nil (single
// node: always master). load reports this node's device queues (nil:
// heartbeats only).
func New(layer *object.Layer, kv meta.KV, topo Topology, pol placement.Policy, leader Leader, load DeviceLoad, opts Options) *Curator {
	opts.EnsureDefaults()
	if leader == nil {
		leader = alwaysLeader{}
	}
	c := &Curator{opts: opts, layer: layer, kv: kv, topo: topo, policy: pol, leader: leader, load: load,
		now: opts.Now, log: opts.Logger, m: newMetrics(),
		downSince: map[model.NodeID]time.Time{}, seenBad: map[model.DeviceID]bool{},
		last: map[string]time.Time{}, trigger: make(chan string, 8), hot: make(chan struct{}, 1), partLoad: map[string]PartitionLoad{}, mapFailed: map[model.NodeID]time.Time{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))}
	c.sched = actuate.NewScheduler(opts.Limits, opts.MoveBytesPerSec, actuate.Signals{
		QueueLen: c.queueLen, BusyQueueLen: opts.BusyQueueLen, ClientLatency: opts.ClientLatency})
	c.act = actuate.New(layer, c.sched, opts.Logger)
	c.jobs = actuate.NewJobStore(kv)
	c.runner = &actuate.Runner{Actuator: c.act, Store: c.jobs, Workers: opts.Workers, Owner: opts.Node,
		Log: opts.Logger, Now: opts.Now, OnTask: c.countTask}
	c.queues = actuate.NewNodeQueues(kv)
	c.worker = &actuate.QueueWorker{Actuator: c.act, Queues: c.queues, Node: model.NodeID(opts.Node), Log: opts.Logger, OnTask: c.countTask}
	return c
}

// Queues returns the node task queues.
func (c *Curator) Queues() *actuate.NodeQueues { return c.queues }

// QueueWorker returns this node's queue worker.
func (c *Curator) QueueWorker() *actuate.QueueWorker { return c.worker }

// countTask feeds every executed task (of scan, recall, resumed and
// planned jobs alike) into the metrics.
func (c *Curator) countTask(t actuate.Task, st actuate.TaskState, res actuate.Result, err error) {
	c.m.backoffs.Add(float64(res.Backoffs))
	c.m.stale.Add(float64(res.StaleExtents))
	switch st {
	case actuate.Stale:
		c.m.stale.Inc()
	case actuate.Failed:
		c.m.failed.WithLabelValues(string(t.Kind)).Inc()
	case actuate.Done:
		c.m.tasks.WithLabelValues(string(t.Kind)).Inc()
		c.m.moved.Add(float64(res.Moved))
	}
	c.m.rate.Set(c.sched.Rate())
}

// queueLen is a device's operations in flight: live for this node's
// devices, from the last heartbeat (refreshed at most every second) for
// other nodes'.
func (c *Curator) queueLen(id model.DeviceID) int {
	if c.load != nil {
		if q := c.load(id); q > 0 {
			return q
		}
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qsnap == nil || time.Since(c.qsnapAt) > time.Second {
		c.qsnap, c.qsnapAt = c.topo.Snapshot(), time.Now()
	}
	if d, ok := c.qsnap.Device(id); ok {
		return d.QueueLen
	}
	return 0
}

// Actuator returns the actuator the Curator moves data with.
func (c *Curator) Actuator() *actuate.Actuator { return c.act }

// Jobs returns the job store (checkpointed actuator jobs).
func (c *Curator) Jobs() *actuate.JobStore { return c.jobs }

// Runner returns the job runner.
func (c *Curator) Runner() *actuate.Runner { return c.runner }

// whileLeader returns a context that ends when ctx does or when this node,
// master now, stops being the Curator master, so a deposed master stops
// moving data. On a node that is not the master (an operator's explicit
// run) it is ctx.
func (c *Curator) whileLeader(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if !c.leader.IsLeader() {
		return ctx, cancel
	}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !c.leader.IsLeader() {
					c.log.Warn("lost Curator mastership: stopping the running job (it resumes under the new master)")
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// resume runs the jobs an earlier master left unfinished.
func (c *Curator) resume(ctx context.Context) {
	if !c.resuming.TryLock() {
		return
	}
	defer c.resuming.Unlock()
	ctx, cancel := c.whileLeader(ctx)
	defer cancel()
	if err := c.runner.ResumeUnfinished(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("resuming unfinished jobs", "err", err)
	}
}

// jobID returns the ID of a new job: the time in nanoseconds, raised above
// every ID this Curator issued before, so that two jobs never share an ID
// — their history record and their actuator checkpoint — even if the
// clock is coarse, stands still or steps back. (A job's first checkpoint
// must not find its key taken: the JobStore refuses to write over another
// job's record.)
func (c *Curator) jobID() int64 {
	n := c.now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	n = max(n, c.lastJobID+1)
	c.lastJobID = n
	return n
}

// Collectors returns Prometheus collectors.
func (c *Curator) Collectors() []prometheus.Collector { return c.m.collectors() }

// Trigger asks for a job soon ("full" or "partial").
func (c *Curator) Trigger(kind string) {
	select {
	case c.trigger <- kind:
	default:
	}
}

// Run drives the schedules until ctx ends: event-driven recovery when a
// device fails or a node has been down past the stabilisation interval,
// event-driven promotion of data read hot on a slow tier (promote.go),
// partial scans every PartialEvery and full scans every FullEvery.
func (c *Curator) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.PollEvery)
	defer t.Stop()
	start := c.now()
	c.mu.Lock()
	c.last["partial"], c.last["full"] = start, start
	c.mu.Unlock()
	wasLeader := false
	var lastPromote time.Time
	if c.opts.Tiering {
		go c.watchHot(ctx)
	}
	if c.opts.NodeQueues && c.opts.Node != "" {
		go c.worker.Run(ctx) // on every node, master or not
	}
	for {
		var kind, why string
		hot := false
		select {
		case <-ctx.Done():
			return
		case kind = <-c.trigger:
			why = "requested"
		case <-t.C:
			kind, why = c.due()
		case <-c.hot:
			hot = true
		}
		leader := c.leader.IsLeader()
		if leader && !wasLeader {
			go c.resume(ctx)
			c.signalHot() // requests made while no master was watching
		}
		wasLeader = leader
		if hot && leader {
			// Gather a burst of reads into one job, and keep jobs apart
			// by promoteGap (see there).
			wait := max(promoteDebounce, promoteGap-c.now().Sub(lastPromote))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			if _, err := c.PromoteHot(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("curator promotion failed", "err", err)
			}
			lastPromote = c.now()
			continue
		}
		if kind == "" || !leader {
			continue
		}
		if _, err := c.RunJob(ctx, kind, why); err != nil && ctx.Err() == nil {
			c.log.Warn("curator job failed", "kind", kind, "err", err)
		}
	}
}

// due decides whether a job should run now (event or schedule).
func (c *Curator) due() (kind, why string) {
	s := c.topo.Snapshot()
	// A tiering policy is consulted before taking c.mu: a policy call may
	// take up to its deadline and must not hold up Status or Trigger.
	to, tierRun := c.opts.Tier, false
	starved := 0
	if c.opts.Tiering {
		to, tierRun = c.tierOptions(s, nil)
		// Read before c.mu too: it looks egroups up in the metadata store.
		starved = c.starved(context.Background(), s, to)
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range s.Devices {
		if d.State == model.DeviceFailed && !c.seenBad[d.ID] {
			c.seenBad[d.ID] = true
			return "partial", "device " + string(d.ID) + " failed"
		}
		if d.State == model.DeviceDraining && now.Sub(c.last["partial"]) > c.opts.PollEvery*5 {
			return "partial", "draining " + string(d.ID)
		}
	}
	for _, n := range s.Nodes {
		if n.Up {
			delete(c.downSince, n.ID)
			continue
		}
		since, ok := c.downSince[n.ID]
		if !ok {
			c.downSince[n.ID] = now
			continue
		}
		if now.Sub(since) >= c.opts.Decide.NodeDownAfter && c.last["partial"].Before(since.Add(c.opts.Decide.NodeDownAfter)) {
			return "partial", fmt.Sprintf("node %s down for %s", n.ID, now.Sub(since).Round(time.Second))
		}
	}
	if !c.recheckAt.IsZero() && !now.Before(c.recheckAt) {
		c.recheckAt = time.Time{}
		return "partial", "re-check under-replicated egroups"
	}
	if tierRun && now.Sub(c.last["partial"]) >= to.MinInterval {
		// The scheduler decides on the policy's thresholds (a tiering
		// policy tunes them; the scheduler says when to act on them).
		if run, why := c.tierCheck(s, now, to, starved); run {
			return "partial", why
		}
	}
	if now.Sub(c.last["full"]) >= c.opts.FullEvery {
		return "full", "periodic"
	}
	if now.Sub(c.last["partial"]) >= c.opts.PartialEvery {
		return "partial", "periodic"
	}
	return "", ""
}

// JobRecord is one job's history entry.
type JobRecord struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Trigger string    `json:"trigger"`
	Start   time.Time `json:"start"`
	Seed    uint64    `json:"seed"` // seed of the job's decisions (replays them)
	End     time.Time `json:"end"`
	Maps    []string  `json:"maps"`
	Records int       `json:"records_scanned"`
	// Spilled is the most bytes of a full scan's extent arrays held in
	// mapped files at once (Options.ScanMemoryBytes).
	Spilled  int64          `json:"scan_spilled_bytes,omitempty"`
	Stats    decide.Stats   `json:"stats"`
	Planned  map[string]int `json:"tasks_planned"`
	Done     map[string]int `json:"tasks_done"`
	Stale    int            `json:"tasks_stale"`
	Deferred int            `json:"tasks_deferred"`
	// Queued counts the moves handed to node queues at the job's time
	// limit (Options.NodeQueues); Held the tasks not planned because a
	// node queue already holds a move of their egroup.
	Queued   int      `json:"tasks_queued,omitempty"`
	Held     int      `json:"tasks_held,omitempty"`
	Failed   int      `json:"tasks_failed"`
	Moved    int64    `json:"bytes_moved"`
	Scrubbed int64    `json:"bytes_scrubbed"`
	Freed    int64    `json:"bytes_freed"`
	BadFound int      `json:"bad_replicas_found"`
	Dangling []string `json:"dangling,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Sample   []string `json:"sample_tasks,omitempty"`
	// Partitions names the node that scanned each map partition when a
	// balancer spreads the scan (absent: the master scanned everything).
	Partitions map[string]string `json:"partitions,omitempty"`
	// Shuffle names the shuffle that joined a full scan's references with
	// the extents on the reducers (shuffle.go); ShuffleError why one failed
	// and the master joined them instead.
	Shuffle      string `json:"shuffle,omitempty"`
	ShuffleError string `json:"shuffle_error,omitempty"`
	// Transformed counts the payload bytes compression and decompression
	// rewrote, before (logical) and after (stored), by task kind.
	Transformed map[string]TransformBytes `json:"transformed,omitempty"`
	// Plan is the live planning stage: its rules, the cost before and
	// after, and the rules its executed moves lowered.
	Plan *LivePlan `json:"plan,omitempty"`
}

// maxRecordList bounds lists kept in a job record.
const maxRecordList = 50

func (r *JobRecord) addErr(err error) {
	if len(r.Errors) < maxRecordList {
		r.Errors = append(r.Errors, err.Error())
	}
}

// RunJob runs one job now and returns its record.
func (c *Curator) RunJob(ctx context.Context, kind, trigger string) (*JobRecord, error) {
	if kind != "full" && kind != "partial" {
		return nil, fmt.Errorf("curator: unknown job kind %q (full or partial)", kind)
	}
	c.runMu.Lock()
	defer c.runMu.Unlock()
	ctx, cancel := c.whileLeader(ctx)
	defer cancel()
	rec := &JobRecord{ID: fmt.Sprintf("%d", c.jobID()), Kind: kind, Trigger: trigger, Start: c.now(),
		Planned: map[string]int{}, Done: map[string]int{}}
	c.mu.Lock()
	rec.Seed = c.rng.Uint64()
	rng := rand.New(rand.NewPCG(rec.Seed, 0))
	c.running = rec
	c.last[kind] = rec.Start
	if kind == "full" {
		c.last["partial"] = rec.Start
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = nil
		c.mu.Unlock()
	}()
	full := kind == "full"
	// Idle open egroups are invisible to GC and tiering; seal them.
	if _, err := c.layer.SealIdle(ctx, max(c.opts.SealIdleBeforeScan, 0)); err != nil {
		rec.addErr(err)
	}
	res, err := c.scan(ctx, full)
	if err != nil {
		return rec, fmt.Errorf("curator: scan: %w", err)
	}
	defer res.release()
	rec.Maps, rec.Records, rec.Spilled = res.maps, res.records0, res.spilled
	if len(res.partitions) > 0 {
		rec.Partitions = res.partitions
	}
	rec.Shuffle, rec.ShuffleError = res.shuffle, res.shuffleErr
	snap := c.snapshotFor()
	// The tiering policy runs outside c.mu (it may take up to its
	// deadline); its coldness ranks cover every egroup.
	to, tierRun := c.opts.Tier, false
	if c.opts.Tiering {
		to, tierRun = c.tierOptions(snap, res.egroups)
	}
	c.mu.Lock()
	tasks, stats, errs := decide.Plan(snap, res.egroups, c.policy, c.opts.Decide, rng, full)
	if tierRun {
		tasks = append(tasks, c.tieringTasks(snap, res, tasks, to, rng, true)...)
	}
	if full {
		tasks = append(tasks, c.dedupTasks(snap, res, tasks)...)
	}
	c.mu.Unlock()
	for _, e := range errs {
		rec.addErr(e)
	}
	rec.Stats = stats
	rec.Dangling = res.dangling
	if len(res.dangling) > maxRecordList {
		rec.Dangling = res.dangling[:maxRecordList]
	}
	for _, d := range res.dangling {
		c.log.Error("CONSISTENCY: dangling reference", "ref", d)
	}
	c.m.dangling.Set(float64(len(res.dangling)))
	c.m.underReplicated.Set(float64(stats.UnderReplicatedBytes))
	if full {
		c.m.garbage.Set(float64(stats.GarbageBytes))
	}
	// Data removal stage 1 runs first among space tasks: unreferenced
	// extent records, in batches.
	if full && len(res.deadExtents) > 0 {
		rec.Planned[string(decide.KindRemoveExtents)] = len(res.deadExtents)
		c.removeExtents(ctx, res, rec)
	}
	if full && len(res.history) > 0 {
		c.collectHistory(ctx, res, rec)
	}
	if full {
		c.reduceClones(ctx, rec)
		if n, err := c.layer.CollectOrphanParts(ctx); err != nil {
			rec.addErr(fmt.Errorf("collect orphan upload parts: %w", err))
		} else if n > 0 {
			rec.Done["collect-orphan-parts"] += n
		}
	}
	for _, t := range tasks {
		rec.Planned[string(t.Kind)]++
		if len(rec.Sample) < maxRecordList {
			rec.Sample = append(rec.Sample, t.String())
		}
	}
	planned, lp := c.livePlan(snap, res, tasks, rng)
	rec.Plan = lp
	for _, t := range planned {
		rec.Planned[string(t.Kind)]++
		if len(rec.Sample) < maxRecordList {
			rec.Sample = append(rec.Sample, fmt.Sprintf("%s egroup=%016x add=%v remove=%v (%s)", t.Kind, t.Egroup, replicaDevices(t.Add), replicaDevices(t.Remove), t.Reason))
		}
	}
	c.execute(ctx, tasks, planned, res, rec, true)
	if full && c.opts.Scrub {
		c.scrub(ctx, res, rec)
	}
	rec.End = c.now()
	c.scheduleRecheck(rec, ctx.Err() == nil)
	c.m.jobSeconds.WithLabelValues(kind).Observe(rec.End.Sub(rec.Start).Seconds())
	c.m.jobs.WithLabelValues(kind).Inc()
	c.saveRecord(ctx, rec)
	c.log.Info("curator job done", "kind", kind, "trigger", trigger, "took", rec.End.Sub(rec.Start).Round(time.Millisecond),
		"records", rec.Records, "planned", rec.Planned, "done", rec.Done, "stale", rec.Stale, "failed", rec.Failed,
		"moved", rec.Moved, "freed", rec.Freed, "bad_found", rec.BadFound, "dangling", len(res.dangling))
	if rec.BadFound > 0 {
		// Repair what scrubbing found right away.
		go c.Trigger("partial")
	}
	return rec, ctx.Err()
}

// scheduleRecheck arms (or, once a complete scan found nothing
// under-replicated, disarms) the re-check partial scan (RecheckAfter).
func (c *Curator) scheduleRecheck(rec *JobRecord, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case rec.Stats.UnderReplicated > 0:
		if c.recheckDelay == 0 {
			c.recheckDelay = c.opts.RecheckAfter
		} else {
			c.recheckDelay = min(2*c.recheckDelay, max(c.opts.PartialEvery, c.opts.RecheckAfter))
		}
		c.recheckAt = rec.End.Add(c.recheckDelay)
	case complete:
		c.recheckAt, c.recheckDelay = time.Time{}, 0
	}
}

// Status is the Curator's current state.
type Status struct {
	Leader  bool                 `json:"leader"`
	Running *JobRecord           `json:"running,omitempty"`
	LastRun map[string]time.Time `json:"last_run"`
	Options string               `json:"options"`
	Down    map[string]time.Time `json:"nodes_down_since,omitempty"`
	Last    *JobRecord           `json:"last_job,omitempty"`
	// Partitions is the balancer's current scan assignment.
	Partitions map[string]model.NodeID `json:"partitions,omitempty"`
	// ScanNodes is, per node, the map work of the last scan and the
	// tasks queued for it now.
	ScanNodes []NodeScan     `json:"scan_nodes,omitempty"`
	Tiering   *TieringStatus `json:"tiering,omitempty"`
}

// Status returns the current state.
func (c *Curator) Status(ctx context.Context) Status {
	c.mu.Lock()
	st := Status{Leader: c.leader.IsLeader(), LastRun: map[string]time.Time{}, Down: map[string]time.Time{},
		Options: fmt.Sprintf("partial_every=%s full_every=%s node_down_after=%s garbage_grace=%s move_rate=%.0fMB/s scrub=%v",
			c.opts.PartialEvery, c.opts.FullEvery, c.opts.Decide.NodeDownAfter, c.opts.Decide.GarbageGrace, c.opts.MoveBytesPerSec/1e6, c.opts.Scrub)}
	if c.running != nil {
		r := *c.running
		st.Running = &r
	}
	for k, v := range c.last {
		st.LastRun[k] = v
	}
	for k, v := range c.downSince {
		st.Down[string(k)] = v
	}
	if len(c.assigned) > 0 {
		st.Partitions = make(map[string]model.NodeID, len(c.assigned))
		for k, v := range c.assigned {
			st.Partitions[k] = v
		}
	}
	loads := make([]PartitionLoad, 0, len(c.partLoad))
	for _, pl := range c.partLoad {
		if !pl.Start.Before(c.scanStart) {
			loads = append(loads, pl)
		}
	}
	c.mu.Unlock()
	pending := c.runner.PendingByNode()
	if queued, err := c.queues.Counts(ctx); err == nil {
		for n, k := range queued {
			pending[n] += k
		}
	}
	st.ScanNodes = scanNodes(loads, pending)
	if h, err := c.History(ctx, 1); err == nil && len(h) > 0 {
		st.Last = &h[0]
	}
	ts := c.TieringStatus()
	st.Tiering = &ts
	return st
}

// NodeScan is one node's share of the last scan's map work and of the
// tasks queued now.
type NodeScan struct {
	Node       model.NodeID `json:"node"`
	Partitions int          `json:"partitions"`
	Records    int          `json:"records"`
	// RecordsPerS is records over the wall time from the node's first
	// partition start to its last partition end.
	RecordsPerS float64 `json:"records_per_s"`
	TasksQueued int     `json:"tasks_queued"`
}

// scanNodes folds partition loads and queued tasks into one row per node,
// sorted by node.
func scanNodes(loads []PartitionLoad, queued map[model.NodeID]int) []NodeScan {
	type span struct{ start, end time.Time }
	rows := map[model.NodeID]*NodeScan{}
	spans := map[model.NodeID]*span{}
	row := func(n model.NodeID) *NodeScan {
		if rows[n] == nil {
			rows[n] = &NodeScan{Node: n}
		}
		return rows[n]
	}
	for _, pl := range loads {
		if pl.Start.IsZero() {
			continue
		}
		r := row(pl.Node)
		r.Partitions++
		r.Records += pl.Records
		sp := spans[pl.Node]
		if sp == nil {
			sp = &span{pl.Start, pl.End}
			spans[pl.Node] = sp
		}
		if pl.Start.Before(sp.start) {
			sp.start = pl.Start
		}
		if pl.End.After(sp.end) {
			sp.end = pl.End
		}
	}
	for n, sp := range spans {
		if secs := sp.end.Sub(sp.start).Seconds(); secs > 0 {
			rows[n].RecordsPerS = float64(rows[n].Records) / secs
		}
	}
	for n, q := range queued {
		if n != "" {
			row(n).TasksQueued += q
		}
	}
	out := make([]NodeScan, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

func historyKey(id string) []byte { return []byte(meta.PrefixJob + "h/" + id) }

func (c *Curator) saveRecord(ctx context.Context, rec *JobRecord) {
	b, _ := json.Marshal(rec)
	var t meta.Txn
	t.Put(historyKey(rec.ID), b)
	kv := c.kv
	if _, err := kv.Commit(context.WithoutCancel(ctx), &t); err != nil {
		c.log.Warn("curator: save job record", "err", err)
		return
	}
	// Trim history to HistoryLen.
	p := []byte(meta.PrefixJob + "h/")
	items, err := kv.Scan(context.WithoutCancel(ctx), p, meta.PrefixEnd(p), 0)
	if err != nil || len(items) <= c.opts.HistoryLen {
		return
	}
	var del meta.Txn
	for _, it := range items[:min(len(items)-c.opts.HistoryLen, meta.MaxTxnOps)] {
		del.Del(it.Key)
	}
	kv.Commit(context.WithoutCancel(ctx), &del)
}

// History returns up to n job records, newest first.
func (c *Curator) History(ctx context.Context, n int) ([]JobRecord, error) {
	p := []byte(meta.PrefixJob + "h/")
	items, err := c.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	var out []JobRecord
	for i := len(items) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		var r JobRecord
		if json.Unmarshal(items[i].Value, &r) == nil {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.After(out[j].Start) })
	return out, nil
}

// tieringTasks plans tiering and balancing for egroups that no earlier
// task of this job touches (one move per egroup per job keeps every task's
// compare-and-swap meaningful).
func (c *Curator) tieringTasks(snap *model.Snapshot, res *scanResult, planned []decide.Task, base decide.TierOptions, rng *rand.Rand, consume bool) []decide.Task {
	busy := map[uint64]bool{}
	for _, t := range planned {
		busy[t.Egroup] = true
	}
	o := c.schedulerOptions(snap, base, consume)
	o.Skip = busy
	return decide.Tiering(snap, res.egroups, c.policy, o, rng)
}

// DryRun scans and decides without executing: what would the Curator do
// now? It is what `terrace tier policy` shows.
func (c *Curator) DryRun(ctx context.Context, full bool) ([]decide.Task, decide.Stats, error) {
	res, err := c.scan(ctx, full)
	if err != nil {
		return nil, decide.Stats{}, err
	}
	defer res.release()
	snap := c.snapshotFor()
	to, tierRun := c.tierOptions(snap, res.egroups)
	c.mu.Lock()
	defer c.mu.Unlock()
	tasks, stats, _ := decide.Plan(snap, res.egroups, c.policy, c.opts.Decide, c.rng, full)
	if tierRun {
		tasks = append(tasks, c.tieringTasks(snap, res, tasks, to, c.rng, false)...)
	}
	return tasks, stats, nil
}

// ScanTiming is what one scan and the decisions on its result cost
// (terrace sim scan measures the scan with it).
type ScanTiming struct {
	Full    bool
	Records int // metadata records the map stage read
	Egroups int // egroups in the result
	Tasks   int // tasks decided (not executed)
	// Scan is the map, shuffle and reduce; Decide is decide.Plan on the
	// result and, with Options.Tiering, tiering (as DryRun decides;
	// dedup and the live planner are not run).
	Scan, Decide time.Duration
	// Spilled is how many bytes of extent arrays the scan kept in mapped
	// files (Options.ScanMemoryBytes).
	Spilled int64
}

// TimeScan runs one scan and decides on its result as DryRun does,
// without executing anything, and says how long each took.
func (c *Curator) TimeScan(ctx context.Context, full bool) (ScanTiming, error) {
	start := time.Now()
	res, err := c.scan(ctx, full)
	if err != nil {
		return ScanTiming{}, err
	}
	defer res.release()
	t := ScanTiming{Full: full, Records: res.records0, Egroups: len(res.egroups), Scan: time.Since(start), Spilled: res.spilled}
	start = time.Now()
	snap := c.snapshotFor()
	to, tierRun := c.opts.Tier, false
	if c.opts.Tiering {
		to, tierRun = c.tierOptions(snap, res.egroups)
	}
	c.mu.Lock()
	tasks, _, _ := decide.Plan(snap, res.egroups, c.policy, c.opts.Decide, c.rng, full)
	if tierRun {
		tasks = append(tasks, c.tieringTasks(snap, res, tasks, to, c.rng, false)...)
	}
	c.mu.Unlock()
	t.Decide, t.Tasks = time.Since(start), len(tasks)
	return t, nil
}

// Options returns the effective options.
func (c *Curator) Options() Options { return c.opts }
