package actuate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// TaskState is where a task of a job stands.
type TaskState uint8

// Task states.
const (
	Pending  TaskState = iota
	Done               // executed
	Stale              // the egroup changed since the decision: dropped
	Failed             // executed and failed (see the job's errors)
	Deferred           // not started before the job's deadline, or its egroup stayed busy
)

func (s TaskState) String() string {
	return [...]string{"pending", "done", "stale", "failed", "deferred"}[s]
}

// Job is a list of tasks with their progress. Jobs are checkpointed in the
// metadata store while they run, so they outlive the scan or plan that
// made them and resume under a new Curator master after a failover.
type Job struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`    // full, partial, recall, plan, ...
	Trigger string    `json:"trigger"` // why it was created
	Seed    uint64    `json:"seed"`    // seed of the decisions that made it (replays them)
	Created time.Time `json:"created"`
	// Deadline, when set, is when unstarted tasks are deferred (left for
	// the next scan, which re-plans them from fresh metadata). Planned
	// jobs have none: they run to the end.
	Deadline time.Time   `json:"deadline,omitzero"`
	Tasks    []Task      `json:"-"`
	State    []TaskState `json:"-"`

	mu       sync.Mutex
	started  time.Time
	finished time.Time
	owner    string
	bytes    int64 // moved so far
	errs     []string
	dirty    map[int]bool // batches changed since the last checkpoint
	// rev is the header's mod revision as this instance last read or
	// wrote it (0: never stored); every write is guarded by it, so a
	// runner whose job another runner has taken over cannot write it.
	rev int64
	// run names this instance's writes in the header, so that its own
	// write whose commit reported an error but landed is recognised.
	run string
}

// NewJob returns a job over tasks.
func NewJob(id, kind, trigger string, seed uint64, created time.Time, tasks []Task) *Job {
	return &Job{ID: id, Kind: kind, Trigger: trigger, Seed: seed, Created: created,
		Tasks: tasks, State: make([]TaskState, len(tasks)), dirty: map[int]bool{}}
}

// Progress is a job's state for status displays.
type Progress struct {
	ID         string         `json:"id"`
	Kind       string         `json:"kind"`
	Trigger    string         `json:"trigger"`
	Seed       uint64         `json:"seed"`
	Owner      string         `json:"owner,omitempty"`
	Created    time.Time      `json:"created"`
	Started    time.Time      `json:"started,omitzero"`
	Finished   time.Time      `json:"finished,omitzero"`
	Tasks      int            `json:"tasks"`
	States     map[string]int `json:"states"`
	BytesTotal int64          `json:"bytes_total"`
	BytesDone  int64          `json:"bytes_done"`
	// Rate is bytes moved per second since the job started; ETA is the
	// remaining move bytes at that rate (0 when unknown or done).
	Rate   float64       `json:"rate_bytes_per_s"`
	ETA    time.Duration `json:"eta_ns"`
	Errors []string      `json:"errors,omitempty"`
	// Rules counts the planner rules behind the job's moves.
	Rules map[string]int `json:"rules,omitempty"`
}

// Progress returns the job's progress now.
func (j *Job) Progress(now time.Time) Progress {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := Progress{ID: j.ID, Kind: j.Kind, Trigger: j.Trigger, Seed: j.Seed, Owner: j.owner, Created: j.Created,
		Started: j.started, Finished: j.finished, Tasks: len(j.Tasks), States: map[string]int{},
		BytesDone: j.bytes, Errors: append([]string(nil), j.errs...)}
	var pendingBytes int64
	for i, t := range j.Tasks {
		p.States[j.State[i].String()]++
		if t.Kind.IsMove() {
			p.BytesTotal += t.Bytes * int64(len(t.Add))
			if j.State[i] == Pending {
				pendingBytes += t.Bytes * int64(len(t.Add))
			}
		}
		for _, r := range t.Rules {
			if p.Rules == nil {
				p.Rules = map[string]int{}
			}
			p.Rules[r]++
		}
	}
	if !j.started.IsZero() {
		end := now
		if !j.finished.IsZero() {
			end = j.finished
		}
		if secs := end.Sub(j.started).Seconds(); secs > 0 {
			p.Rate = float64(j.bytes) / secs
		}
		if p.Rate > 0 && j.finished.IsZero() {
			p.ETA = time.Duration(float64(pendingBytes) / p.Rate * float64(time.Second))
		}
	}
	return p
}

// Finished reports whether the job has no pending task left.
func (j *Job) Finished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range j.State {
		if s == Pending {
			return false
		}
	}
	return true
}

func (j *Job) set(i int, s TaskState, moved int64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.State[i] = s
	j.bytes += moved
	if err != nil && len(j.errs) < 50 {
		j.errs = append(j.errs, fmt.Sprintf("%s: %v", j.Tasks[i], err))
	}
	if j.dirty == nil {
		j.dirty = map[int]bool{}
	}
	j.dirty[i/batchSize] = true
}

// --- persistence ---

// ErrJobTakenOver is returned by a checkpoint or save of a job whose record
// another runner has taken over since this one last wrote it (a new
// Curator master resumed it), or that was removed: the job is no longer
// this runner's to write or run.
var ErrJobTakenOver = errors.New("actuate: job taken over by another owner")

// batchSize is how many tasks one metadata record holds (well under
// etcd's 1.5 MiB value limit).
const batchSize = 256

const jobPrefix = meta.PrefixJob + "a/"

func jobKey(id string) []byte { return []byte(jobPrefix + id) }
func batchKey(id string, b int) []byte {
	return []byte(fmt.Sprintf("%s%s/%06d", jobPrefix, id, b))
}

type jobHeader struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Trigger  string    `json:"trigger"`
	Seed     uint64    `json:"seed"`
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline,omitzero"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	Owner    string    `json:"owner,omitempty"`
	Run      string    `json:"run,omitempty"` // which run of Owner wrote it
	Tasks    int       `json:"tasks"`
	Batches  int       `json:"batches"`
	Bytes    int64     `json:"bytes"`
	Errors   []string  `json:"errors,omitempty"`
}

type jobBatch struct {
	Tasks []Task      `json:"tasks"`
	State []TaskState `json:"state"`
}

// JobStore keeps jobs in the metadata store under j/a/.
type JobStore struct {
	kv meta.KV
	// Keep is how many finished jobs are kept for history.
	Keep int
}

// NewJobStore returns a store over kv.
func NewJobStore(kv meta.KV) *JobStore { return &JobStore{kv: kv, Keep: 50} }

func (s *JobStore) header(j *Job) jobHeader {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.run == "" {
		j.run = rand.Text()
	}
	return jobHeader{ID: j.ID, Kind: j.Kind, Trigger: j.Trigger, Seed: j.Seed, Created: j.Created, Deadline: j.Deadline,
		Started: j.started, Finished: j.finished, Owner: j.owner, Run: j.run, Tasks: len(j.Tasks),
		Batches: (len(j.Tasks) + batchSize - 1) / batchSize, Bytes: j.bytes, Errors: append([]string(nil), j.errs...)}
}

// Save writes a whole job: batches first, the header (which names them)
// last, so a crash in between leaves no header pointing at missing
// batches. Like Checkpoint it writes only the job as this instance last
// read or wrote it (a job never stored must not exist yet): it fails
// with ErrJobTakenOver if another runner has written the job since.
func (s *JobStore) Save(ctx context.Context, j *Job) error {
	h := s.header(j)
	all := map[int]bool{}
	for b := 0; b < h.Batches; b++ {
		all[b] = true
	}
	return s.write(ctx, j, h, all)
}

// Checkpoint writes the batches whose tasks changed and the header. It
// fails with ErrJobTakenOver, writing nothing, once another runner has
// taken the job over (see write).
func (s *JobStore) Checkpoint(ctx context.Context, j *Job) error {
	j.mu.Lock()
	dirty := j.dirty
	j.dirty = map[int]bool{}
	j.mu.Unlock()
	if err := s.write(ctx, j, s.header(j), dirty); err != nil {
		j.mu.Lock()
		for b := range dirty {
			j.dirty[b] = true
		}
		j.mu.Unlock()
		return err
	}
	return nil
}

// write puts the given batches, then the header. Every transaction of it
// — the batches' as well as the header's — compares the header's mod
// revision with the one this instance last read or wrote (j.rev), so once
// another runner has taken the job over (claim rewrites the header) not
// one record of a deposed runner's checkpoint lands: a new master's task
// states, owner and finish are never overwritten by an old one's.
func (s *JobStore) write(ctx context.Context, j *Job, h jobHeader, batches map[int]bool) error {
	for tries := 0; ; tries++ {
		j.mu.Lock()
		rev := j.rev
		j.mu.Unlock()
		err := s.writeAt(ctx, j, h, batches, rev)
		if !errors.Is(err, meta.ErrConflict) {
			return err
		}
		it, err := s.kv.Get(ctx, jobKey(j.ID))
		if errors.Is(err, meta.ErrNotFound) {
			return fmt.Errorf("%w: job %s was removed (this owner %s)", ErrJobTakenOver, j.ID, h.Owner)
		}
		if err != nil {
			return fmt.Errorf("actuate: checkpoint job %s: %w", j.ID, err)
		}
		var cur jobHeader
		if err := meta.Decode(it.Value, &cur); err != nil {
			return fmt.Errorf("actuate: checkpoint job %s: %w", j.ID, err)
		}
		if cur.Run == h.Run && tries < 3 {
			// This instance's own header write landed though its commit
			// reported an error: the job is still ours, as of that write.
			j.mu.Lock()
			j.rev = max(j.rev, it.ModRev)
			j.mu.Unlock()
			continue
		}
		by := cur.Owner
		if by == h.Owner {
			by = "another run of " + by
		}
		return fmt.Errorf("%w: job %s is owned by %s now (this owner %s)", ErrJobTakenOver, j.ID, by, h.Owner)
	}
}

// writeAt is write guarded by the header's mod revision rev (0: the
// header must not exist).
func (s *JobStore) writeAt(ctx context.Context, j *Job, h jobHeader, batches map[int]bool, rev int64) error {
	keys := make([]int, 0, len(batches))
	for b := range batches {
		keys = append(keys, b)
	}
	sort.Ints(keys)
	const perTxn = 16 // keeps one transaction well under etcd's request size limit
	for len(keys) > 0 {
		n := min(perTxn, len(keys))
		var t meta.Txn
		t.If(jobKey(j.ID), rev)
		for _, b := range keys[:n] {
			lo, hi := b*batchSize, min((b+1)*batchSize, len(j.Tasks))
			j.mu.Lock()
			rec := jobBatch{Tasks: j.Tasks[lo:hi], State: append([]TaskState(nil), j.State[lo:hi]...)}
			j.mu.Unlock()
			v, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			t.Put(batchKey(j.ID, b), v)
		}
		if _, err := s.kv.Commit(ctx, &t); err != nil {
			return fmt.Errorf("actuate: checkpoint job %s: %w", j.ID, err)
		}
		keys = keys[n:]
	}
	var t meta.Txn
	t.If(jobKey(j.ID), rev)
	t.Put(jobKey(j.ID), meta.Encode(h))
	newRev, err := s.kv.Commit(ctx, &t)
	if err != nil {
		return fmt.Errorf("actuate: checkpoint job %s: %w", j.ID, err)
	}
	j.mu.Lock()
	j.rev = max(j.rev, newRev)
	j.mu.Unlock()
	return nil
}

// claim makes this instance of j, owned by owner, the one whose writes the
// store takes: every other runner's checkpoints of the job fail from then
// on. A job never stored is saved (it must not exist yet). A stored job's
// header is rewritten with a compare on its current revision, whoever
// wrote it last; then the task states the previous owner checkpointed
// since this instance was loaded are taken over (a task it finished stays
// finished) and the whole job is saved. It reports done, writing nothing,
// if the stored job has finished meanwhile (j then holds its final state).
func (s *JobStore) claim(ctx context.Context, j *Job, owner string) (done bool, err error) {
	j.mu.Lock()
	j.owner = owner
	j.run = rand.Text()
	rev := j.rev
	j.mu.Unlock()
	if rev == 0 {
		return false, s.Save(ctx, j)
	}
	for tries := 0; ; tries++ {
		it, err := s.kv.Get(ctx, jobKey(j.ID))
		if errors.Is(err, meta.ErrNotFound) {
			return false, fmt.Errorf("%w: job %s was removed (this owner %s)", ErrJobTakenOver, j.ID, owner)
		}
		if err != nil {
			return false, fmt.Errorf("actuate: claim job %s: %w", j.ID, err)
		}
		var cur jobHeader
		if err := meta.Decode(it.Value, &cur); err != nil {
			return false, fmt.Errorf("actuate: claim job %s: %w", j.ID, err)
		}
		if !cur.Finished.IsZero() {
			if err := s.merge(ctx, j, cur); err != nil {
				return false, err
			}
			j.mu.Lock()
			j.owner, j.finished = cur.Owner, cur.Finished
			j.mu.Unlock()
			return true, nil
		}
		var t meta.Txn
		t.If(jobKey(j.ID), it.ModRev)
		t.Put(jobKey(j.ID), meta.Encode(s.header(j)))
		newRev, err := s.kv.Commit(ctx, &t)
		if errors.Is(err, meta.ErrConflict) && tries < 10 {
			continue // the previous owner checkpointed meanwhile
		}
		if err != nil {
			return false, fmt.Errorf("actuate: claim job %s: %w", j.ID, err)
		}
		j.mu.Lock()
		j.rev = newRev
		j.mu.Unlock()
		if err := s.merge(ctx, j, cur); err != nil {
			return false, err
		}
		return false, s.Save(ctx, j)
	}
}

// merge takes into j what the stored job (header h) records beyond it:
// tasks pending in j but settled in the store, and the bytes and errors.
func (s *JobStore) merge(ctx context.Context, j *Job, h jobHeader) error {
	if h.Tasks != len(j.Tasks) {
		return fmt.Errorf("actuate: job %s holds %d tasks, header says %d", j.ID, len(j.Tasks), h.Tasks)
	}
	for b := 0; b < h.Batches; b++ {
		var rec jobBatch
		if _, err := meta.GetRecord(ctx, s.kv, batchKey(j.ID, b), &rec); errors.Is(err, meta.ErrNotFound) {
			// Trimmed since its header was read: it had finished.
			return fmt.Errorf("%w: job %s was removed (batch %d)", ErrJobTakenOver, j.ID, b)
		} else if err != nil {
			return fmt.Errorf("actuate: job %s batch %d: %w", j.ID, b, err)
		}
		j.mu.Lock()
		for k, st := range rec.State {
			if i := b*batchSize + k; i < len(j.State) && j.State[i] == Pending && st != Pending {
				j.State[i] = st
			}
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	j.bytes = max(j.bytes, h.Bytes)
	if len(h.Errors) > len(j.errs) {
		j.errs = append([]string(nil), h.Errors...)
	}
	j.mu.Unlock()
	return nil
}

// Load reads a job.
func (s *JobStore) Load(ctx context.Context, id string) (*Job, error) {
	var h jobHeader
	rev, err := meta.GetRecord(ctx, s.kv, jobKey(id), &h)
	if err != nil {
		return nil, fmt.Errorf("actuate: job %s: %w", id, err)
	}
	j := NewJob(h.ID, h.Kind, h.Trigger, h.Seed, h.Created, nil)
	j.rev = rev
	j.Deadline, j.started, j.finished, j.owner, j.bytes, j.errs = h.Deadline, h.Started, h.Finished, h.Owner, h.Bytes, h.Errors
	for b := 0; b < h.Batches; b++ {
		var rec jobBatch
		if _, err := meta.GetRecord(ctx, s.kv, batchKey(id, b), &rec); err != nil {
			return nil, fmt.Errorf("actuate: job %s batch %d: %w", id, b, err)
		}
		if len(rec.State) != len(rec.Tasks) {
			return nil, fmt.Errorf("actuate: job %s batch %d: %d states for %d tasks", id, b, len(rec.State), len(rec.Tasks))
		}
		j.Tasks = append(j.Tasks, rec.Tasks...)
		j.State = append(j.State, rec.State...)
	}
	if len(j.Tasks) != h.Tasks {
		return nil, fmt.Errorf("actuate: job %s holds %d tasks, header says %d", id, len(j.Tasks), h.Tasks)
	}
	return j, nil
}

// headers lists job headers, oldest first (IDs sort by creation time).
func (s *JobStore) headers(ctx context.Context) ([]jobHeader, error) {
	p := []byte(jobPrefix)
	items, err := s.kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	var out []jobHeader
	for _, it := range items {
		if strings.Contains(string(it.Key[len(p):]), "/") {
			continue // a batch
		}
		var h jobHeader
		if err := meta.Decode(it.Value, &h); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Created.Before(out[b].Created) })
	return out, nil
}

// Unfinished returns the IDs of jobs with pending tasks, oldest first.
func (s *JobStore) Unfinished(ctx context.Context) ([]string, error) {
	hs, err := s.headers(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hs {
		if h.Finished.IsZero() {
			out = append(out, h.ID)
		}
	}
	return out, nil
}

// Recent returns the progress of up to n jobs, newest first.
func (s *JobStore) Recent(ctx context.Context, n int, now time.Time) ([]Progress, error) {
	hs, err := s.headers(ctx)
	if err != nil {
		return nil, err
	}
	var out []Progress
	for i := len(hs) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		j, err := s.Load(ctx, hs[i].ID)
		if err != nil {
			continue
		}
		out = append(out, j.Progress(now))
	}
	return out, nil
}

// Trim deletes the oldest finished jobs beyond Keep.
func (s *JobStore) Trim(ctx context.Context) error {
	hs, err := s.headers(ctx)
	if err != nil {
		return err
	}
	var finished []jobHeader
	for _, h := range hs {
		if !h.Finished.IsZero() {
			finished = append(finished, h)
		}
	}
	for len(finished) > s.Keep {
		h := finished[0]
		finished = finished[1:]
		var t meta.Txn
		t.Del(jobKey(h.ID))
		if _, err := s.kv.Commit(ctx, &t); err != nil {
			return err
		}
		for b := 0; b < h.Batches; b += meta.MaxTxnOps {
			var t meta.Txn
			for k := b; k < min(b+meta.MaxTxnOps, h.Batches); k++ {
				t.Del(batchKey(h.ID, k))
			}
			if _, err := s.kv.Commit(ctx, &t); err != nil {
				return err
			}
		}
	}
	return nil
}

// --- running ---

// Runner executes jobs: tasks grouped into per-node queues (by the node
// that receives data, or owns the egroup), each queue in order, Workers
// queues at once; the Scheduler bounds moves per device and link. With a
// JobStore, progress is checkpointed every CheckpointEvery.
type Runner struct {
	Actuator        *Actuator
	Store           *JobStore // nil: jobs are not persisted
	Workers         int
	CheckpointEvery time.Duration
	Owner           string // this node, recorded as the job's owner
	Log             *slog.Logger
	Now             func() time.Time
	// OnTask, if set, is called after every task of every job (metrics).
	OnTask TaskObserver

	mu      sync.Mutex
	running map[string]*Job
}

func (r *Runner) defaults() {
	if r.Workers == 0 {
		r.Workers = 2
	}
	if r.CheckpointEvery == 0 {
		r.CheckpointEvery = time.Second
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if r.Now == nil {
		r.Now = time.Now
	}
}

// Running returns the progress of the jobs running now.
func (r *Runner) Running() []Progress {
	r.defaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Progress
	for _, j := range r.running {
		out = append(out, j.Progress(r.Now()))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Created.Before(out[b].Created) })
	return out
}

// PendingByNode counts the pending tasks of every running job by the node
// whose queue runs them (the destination of a move).
func (r *Runner) PendingByNode() map[model.NodeID]int {
	r.defaults()
	r.mu.Lock()
	jobs := make([]*Job, 0, len(r.running))
	for _, j := range r.running {
		jobs = append(jobs, j)
	}
	r.mu.Unlock()
	out := map[model.NodeID]int{}
	for _, j := range jobs {
		j.mu.Lock()
		for i, t := range j.Tasks {
			if j.State[i] == Pending {
				out[queueNode(t)]++
			}
		}
		j.mu.Unlock()
	}
	return out
}

// queueNode is the node whose queue runs a task.
func queueNode(t Task) model.NodeID {
	if len(t.Add) > 0 {
		return t.Add[0].Node
	}
	if len(t.Remove) > 0 {
		return t.Remove[0].Node
	}
	return ""
}

// TaskObserver hears about every finished task.
type TaskObserver func(t Task, s TaskState, r Result, err error)

// Run executes a job's pending tasks until they are all done, stale,
// failed or deferred, or ctx ends (a cancelled job stays resumable).
// observe, if set, hears about this job's tasks (after OnTask).
//
// With a Store, Run first claims the job (the owner is this runner; see
// JobStore.claim). If another runner takes the job over later, this run's
// next checkpoint fails: it then starts no further task of the job (one in
// flight has its context cancelled), writes nothing more and returns an
// error wrapping ErrJobTakenOver.
func (r *Runner) Run(ctx context.Context, j *Job, observe TaskObserver) error {
	r.defaults()
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]*Job{}
	}
	if _, dup := r.running[j.ID]; dup {
		r.mu.Unlock()
		return fmt.Errorf("actuate: job %s is already running", j.ID)
	}
	r.running[j.ID] = j
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, j.ID)
		r.mu.Unlock()
	}()
	j.mu.Lock()
	if j.started.IsZero() {
		j.started = r.Now()
	}
	j.owner = r.Owner
	j.mu.Unlock()
	if r.Store != nil {
		done, err := r.Store.claim(ctx, j, r.Owner)
		if err != nil || done {
			return err
		}
	}
	// jctx ends with ctx, or when a checkpoint finds the job taken over.
	jctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	queues := map[model.NodeID][]int{}
	var order []model.NodeID
	for i, t := range j.Tasks {
		if j.State[i] != Pending {
			continue
		}
		n := queueNode(t)
		if _, ok := queues[n]; !ok {
			order = append(order, n)
		}
		queues[n] = append(queues[n], i)
	}
	stopCheckpoints := make(chan struct{})
	var cpWG sync.WaitGroup
	if r.Store != nil {
		cpWG.Add(1)
		go func() {
			defer cpWG.Done()
			tk := time.NewTicker(r.CheckpointEvery)
			defer tk.Stop()
			for {
				select {
				case <-stopCheckpoints:
					return
				case <-tk.C:
					if err := r.Store.Checkpoint(context.WithoutCancel(ctx), j); err != nil {
						if errors.Is(err, ErrJobTakenOver) {
							r.Log.Warn("job taken over: stopping it here", "job", j.ID, "err", err)
							stop(err)
							return
						}
						r.Log.Warn("job checkpoint failed", "job", j.ID, "err", err)
					}
				}
			}
		}()
	}
	sem := make(chan struct{}, r.Workers)
	var wg sync.WaitGroup
	for _, n := range order {
		q := queues[n]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.runQueue(jctx, j, q, observe)
		}()
	}
	wg.Wait()
	close(stopCheckpoints)
	cpWG.Wait()
	if cause := context.Cause(jctx); errors.Is(cause, ErrJobTakenOver) {
		return cause
	}
	if ctx.Err() == nil && j.Finished() {
		j.mu.Lock()
		j.finished = r.Now()
		j.mu.Unlock()
	}
	if r.Store != nil {
		if err := r.Store.Checkpoint(context.WithoutCancel(ctx), j); err != nil {
			return err
		}
		if j.Finished() {
			_ = r.Store.Trim(context.WithoutCancel(ctx))
		}
	}
	return ctx.Err()
}

// busyRetries is how often a task whose egroup is busy (another job's
// task in flight) is put back at the end of its queue before it is
// deferred.
const busyRetries = 3

func (r *Runner) runQueue(ctx context.Context, j *Job, q []int, observe TaskObserver) {
	retries := map[int]int{}
	for len(q) > 0 {
		i := q[0]
		q = q[1:]
		if ctx.Err() != nil {
			return
		}
		if !j.Deadline.IsZero() && r.Now().After(j.Deadline) {
			for _, k := range append([]int{i}, q...) {
				j.set(k, Deferred, 0, nil)
			}
			return
		}
		t := j.Tasks[i]
		res, err := r.Actuator.Execute(ctx, t)
		var st TaskState
		switch {
		case errors.Is(err, ErrBusy):
			if retries[i] < busyRetries {
				retries[i]++
				q = append(q, i)
				if len(q) == 1 {
					time.Sleep(100 * time.Millisecond) // only busy work left: let it finish
				}
				continue
			}
			st, err = Deferred, nil
		case ctx.Err() != nil:
			return // stays pending: the job resumes later
		case errors.Is(err, ErrStale):
			st, err = Stale, nil
		case err != nil:
			st = Failed
		default:
			st = Done
		}
		j.set(i, st, res.Moved, err)
		if r.OnTask != nil {
			r.OnTask(t, st, res, err)
		}
		if observe != nil {
			observe(t, st, res, err)
		}
	}
}

// ResumeUnfinished runs every unfinished job in the store, oldest first,
// and returns when they have run (or ctx ends). A new Curator master calls
// it after winning the election.
func (r *Runner) ResumeUnfinished(ctx context.Context) error {
	r.defaults()
	if r.Store == nil {
		return nil
	}
	ids, err := r.Store.Unfinished(ctx)
	if err != nil {
		return err
	}
	// One job that cannot run (taken over, already running here, a store
	// error) must not keep the later ones waiting for the next election:
	// each is tried, and the first failure is returned at the end.
	var first error
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		j, err := r.Store.Load(ctx, id)
		if err != nil {
			r.Log.Error("cannot resume job", "job", id, "err", err)
			continue
		}
		r.Log.Info("resuming job", "job", id, "kind", j.Kind, "trigger", j.Trigger, "pending", j.Progress(r.Now()).States["pending"])
		err = r.Run(ctx, j, nil)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return err
		case errors.Is(err, ErrJobTakenOver):
			r.Log.Warn("resumed job taken over by another runner", "job", id, "err", err)
		default:
			r.Log.Error("resumed job failed", "job", id, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}
