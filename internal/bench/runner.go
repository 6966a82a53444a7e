package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Phase names reported by Runner.Status.
const (
	PhaseIdle    = "idle"
	PhaseSetup   = "setup"
	PhasePrepare = "prepare"
	PhaseWarmup  = "warmup"
	PhaseMeasure = "measure"
	PhaseCleanup = "cleanup"
)

// Status is a live view of a running Runner, for progress display.
type Status struct {
	Phase string
	// Done counts requests completed in this phase; Errors the failed ones.
	Done, Errors int64
	// Total is the phase's request count when known, else 0.
	Total int64
	// Duration is the phase's time bound when it has one, else 0.
	Duration time.Duration
	Elapsed  time.Duration
}

// Runner runs one workload against one endpoint, possibly several times (as
// Compare does). It remembers which keyspace objects exist, so a run that
// deleted some re-creates them, untimed, before the next.
//
// Use: NewRunner, then Run any number of times, then Cleanup.
type Runner struct {
	ep      Endpoint
	opts    Options
	client  *s3.Client
	content *ContentSource
	keys    *keyspace
	pick    picker

	setupDone     bool
	createdBucket bool
	runs          int // timed runs so far, to name fresh PUT keys

	mu          sync.Mutex
	phase       string
	phaseStart  time.Time
	phaseTotal  int64
	phaseDur    time.Duration
	phaseDone   atomic.Int64
	phaseErrors atomic.Int64
}

// NewRunner checks the endpoint and options (filling defaults) and builds the
// client. It sends no request.
func NewRunner(ep Endpoint, opts Options) (*Runner, error) {
	if err := ep.Validate(); err != nil {
		return nil, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{
		ep:      ep,
		opts:    opts,
		client:  newS3Client(ep, opts.Concurrency, opts.SignPayload),
		content: NewContentSource(opts.Seed),
		pick:    newPicker(opts.Workload),
		phase:   PhaseIdle,
	}
	if opts.Workload.NeedsKeyspace() {
		r.keys = newKeyspace(opts.Objects)
	}
	return r, nil
}

// Options returns the options with defaults filled in.
func (r *Runner) Options() Options { return r.opts }

// Endpoint returns the endpoint under test.
func (r *Runner) Endpoint() Endpoint { return r.ep }

// Status returns a snapshot of the current phase. Safe to call concurrently
// with Run.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Phase: r.phase, Total: r.phaseTotal, Duration: r.phaseDur,
		Done: r.phaseDone.Load(), Errors: r.phaseErrors.Load()}
	if !r.phaseStart.IsZero() {
		s.Elapsed = time.Since(r.phaseStart)
	}
	return s
}

func (r *Runner) setPhase(name string, total int64, dur time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase, r.phaseTotal, r.phaseDur, r.phaseStart = name, total, dur, time.Now()
	r.phaseDone.Store(0)
	r.phaseErrors.Store(0)
}

// Run ensures the bucket and keyspace exist (untimed), runs the warm-up if
// any, then the timed phase, and returns its result. On a too-many-errors
// stop it returns the partial result and an error.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	defer r.setPhase(PhaseIdle, 0, 0)
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	r.runs++
	if r.opts.Warmup > 0 {
		r.setPhase(PhaseWarmup, 0, r.opts.Warmup)
		ph := r.newPhase(fmt.Sprintf("r%dw", r.runs), r.opts.Warmup, 0)
		ph.run(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A warm-up that deletes must not leave the timed phase short of
		// objects.
		if err := r.prepare(ctx); err != nil {
			return nil, err
		}
	}
	r.setPhase(PhaseMeasure, r.opts.Count, r.opts.Duration)
	ph := r.newPhase(fmt.Sprintf("r%d", r.runs), r.opts.Duration, r.opts.Count)

	var srvBefore ProcSample
	var srvErr error
	if r.ep.PID > 0 {
		srvBefore, srvErr = readProcs(r.ep.PIDs())
	}
	var metaBefore metaCounters
	var metaErr error
	if len(r.ep.MetricsURLs) > 0 {
		metaBefore, metaErr = scrapeMeta(ctx, r.ep)
	}
	cpu0 := selfCPUSeconds()
	start := time.Now()
	ph.run(ctx)
	elapsed := time.Since(start)
	cpu := selfCPUSeconds() - cpu0

	res := &Result{
		Endpoint:         r.ep.Name,
		URL:              r.ep.URL,
		Workload:         r.opts.Workload.String(),
		Sizes:            r.opts.Sizes.String(),
		Concurrency:      r.opts.Concurrency,
		Options:          r.opts.String(),
		Start:            start.UTC().Truncate(time.Millisecond),
		ElapsedSeconds:   elapsed.Seconds(),
		ClientCPUSeconds: cpu,
		Total:            &OpResult{Op: "total", hist: &Histogram{}},
	}
	for i, op := range AllOps {
		if !r.opts.Workload.Has(op) {
			continue
		}
		o := &OpResult{Op: op, hist: &Histogram{}}
		for _, w := range ph.workers {
			o.merge(&w.acc[i])
		}
		o.finish(elapsed)
		res.Ops = append(res.Ops, o)
		res.Total.merge(o)
	}
	res.Total.ErrorSamples = nil
	res.Total.finish(elapsed)
	if n := res.Total.Count; n > 0 {
		res.ClientCPUPerOpMs = cpu * 1000 / float64(n)
	}
	if r.ep.PID > 0 {
		after, err := readProcs(r.ep.PIDs())
		if srvErr == nil {
			srvErr = err
		}
		if srvErr != nil {
			res.Notes = append(res.Notes, "server stats unavailable: "+srvErr.Error())
		} else {
			s := &ServerResult{PID: r.ep.PID, Processes: len(r.ep.PIDs()), CPUSeconds: after.CPUSeconds - srvBefore.CPUSeconds,
				PeakRSSBytes: after.PeakRSSBytes, RSSBytes: after.RSSBytes}
			if n := res.Total.Count; n > 0 {
				s.CPUPerOpMs = s.CPUSeconds * 1000 / float64(n)
			}
			res.Server = s
		}
	}
	if len(r.ep.MetricsURLs) > 0 {
		after, err := scrapeMeta(ctx, r.ep)
		if metaErr == nil {
			metaErr = err
		}
		switch n := float64(res.Total.Count); {
		case metaErr != nil:
			res.Notes = append(res.Notes, "metadata counters unavailable: "+metaErr.Error())
		case n > 0:
			res.Meta = &MetaResult{ReadsPerOp: (after.reads - metaBefore.reads) / n,
				CommitsPerOp: (after.commits - metaBefore.commits) / n, TxnsPerOp: (after.txns - metaBefore.txns) / n}
		}
	}
	if ph.exhausted.Load() {
		res.Notes = append(res.Notes, fmt.Sprintf("stopped early: no objects left to %s (raise --objects)", r.opts.Workload))
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: run interrupted: %w", err)
	}
	if ph.tooManyErrors.Load() {
		return res, fmt.Errorf("bench: stopped after %d errors (limit %d); first: %s",
			res.Total.Errors, r.opts.MaxErrors, firstErrorSample(res))
	}
	return res, nil
}

func firstErrorSample(r *Result) string {
	for _, o := range r.Ops {
		if len(o.ErrorSamples) > 0 {
			return string(o.Op) + ": " + o.ErrorSamples[0]
		}
	}
	return "none recorded"
}

// setup creates the bucket if it does not exist.
func (r *Runner) setup(ctx context.Context) error {
	if r.setupDone {
		return nil
	}
	r.setPhase(PhaseSetup, 0, 0)
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.client.HeadBucket(cctx, &s3.HeadBucketInput{Bucket: aws.String(r.opts.Bucket)})
	if err != nil {
		_, cerr := r.client.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(r.opts.Bucket)})
		switch code := errorCode(cerr); {
		case cerr == nil:
			r.createdBucket = true
		case code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists":
		default:
			return fmt.Errorf("bench: %s: create bucket %s: %s", r.ep.Name, r.opts.Bucket, shortError(cerr))
		}
	}
	r.setupDone = true
	return nil
}

// prepare writes every keyspace object not known to exist, untimed.
func (r *Runner) prepare(ctx context.Context) error {
	if r.keys == nil {
		return nil
	}
	var todo []int
	for i := range r.keys.n {
		if r.keys.get(i) != keyPresent {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	r.setPhase(PhasePrepare, int64(len(todo)), 0)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range min(r.opts.Concurrency, len(todo)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				j := next.Add(1) - 1
				if j >= int64(len(todo)) {
					return
				}
				i := todo[j]
				key := r.keys.name(r.opts.Prefix, i)
				if r.opts.ReuseObjects && r.present(ctx, key) {
					r.keys.set(i, keyPresent)
					r.phaseDone.Add(1)
					continue
				}
				if _, err := r.put(ctx, key); err != nil {
					r.phaseErrors.Add(1)
					errOnce.Do(func() { firstErr = err })
					return
				}
				r.keys.set(i, keyPresent)
				r.phaseDone.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("bench: %s: preparing %d objects: %s", r.ep.Name, len(todo), shortError(firstErr))
	}
	return ctx.Err()
}

// Cleanup deletes every object under the prefix and, if the runner created
// it, the bucket. With KeepObjects it does nothing.
func (r *Runner) Cleanup(ctx context.Context) error {
	defer r.setPhase(PhaseIdle, 0, 0)
	if r.opts.KeepObjects || !r.setupDone {
		return nil
	}
	r.setPhase(PhaseCleanup, 0, 0)
	keys := make(chan string, 1000)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for range r.opts.Concurrency {
		wg.Go(func() {
			for k := range keys {
				cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
				_, err := r.client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String(r.opts.Bucket), Key: aws.String(k)})
				cancel()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, shortError(err))
					r.phaseErrors.Add(1)
				}
				r.phaseDone.Add(1)
			}
		})
	}
	var listErr error
	p := s3.NewListObjectsV2Paginator(r.client, &s3.ListObjectsV2Input{Bucket: aws.String(r.opts.Bucket), Prefix: aws.String(r.opts.Prefix)})
	for p.HasMorePages() && ctx.Err() == nil {
		page, err := p.NextPage(ctx)
		if err != nil {
			listErr = err
			break
		}
		for _, o := range page.Contents {
			keys <- aws.ToString(o.Key)
		}
	}
	close(keys)
	wg.Wait()
	if r.keys != nil {
		for i := range r.keys.n {
			r.keys.set(i, keyAbsent)
		}
	}
	if listErr != nil {
		return fmt.Errorf("bench: %s: cleanup: list: %s", r.ep.Name, shortError(listErr))
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("bench: %s: cleanup: %d deletes failed; first: %v", r.ep.Name, n, firstErr.Load())
	}
	if r.createdBucket {
		cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
		defer cancel()
		if _, err := r.client.DeleteBucket(cctx, &s3.DeleteBucketInput{Bucket: aws.String(r.opts.Bucket)}); err != nil {
			return fmt.Errorf("bench: %s: cleanup: delete bucket %s: %s", r.ep.Name, r.opts.Bucket, shortError(err))
		}
		r.createdBucket = false
		r.setupDone = false
	}
	return ctx.Err()
}

// Run runs one workload against one endpoint: bucket and objects are created
// as needed, the timed phase runs, and everything written is deleted again
// (unless opts.KeepObjects).
func Run(ctx context.Context, ep Endpoint, opts Options) (*Result, error) {
	r, err := NewRunner(ep, opts)
	if err != nil {
		return nil, err
	}
	res, err := r.Run(ctx)
	if cerr := r.Cleanup(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	return res, err
}

// put writes key with its deterministic content.
func (r *Runner) put(ctx context.Context, key string) (int64, error) {
	c := r.content.Object(key, r.opts.Sizes)
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.client.PutObject(cctx, &s3.PutObjectInput{
		Bucket:        aws.String(r.opts.Bucket),
		Key:           aws.String(key),
		Body:          c.NewReader(),
		ContentLength: aws.Int64(c.Size()),
	})
	if err != nil {
		return 0, err
	}
	return c.Size(), nil
}

// present reports whether key exists with the size this run would give
// it (its content is then the same: a function of key and seed, which
// GETs verify).
func (r *Runner) present(ctx context.Context, key string) bool {
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	out, err := r.client.HeadObject(cctx, &s3.HeadObjectInput{Bucket: aws.String(r.opts.Bucket), Key: aws.String(key)})
	return err == nil && out.ContentLength != nil && *out.ContentLength == r.content.Object(key, r.opts.Sizes).Size()
}

// errVerify marks a GET whose body was wrong.
var errVerify = errors.New("bench: verify failed")

// get reads key and checks every byte against its expected content.
func (r *Runner) get(ctx context.Context, key string, buf []byte) (int64, error) {
	c := r.content.Object(key, r.opts.Sizes)
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	out, err := r.client.GetObject(cctx, &s3.GetObjectInput{Bucket: aws.String(r.opts.Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength != c.Size() && !r.opts.NoVerify {
		_, _ = io.Copy(io.Discard, out.Body)
		return 0, fmt.Errorf("%w: %s: content length %d, want %d", errVerify, key, *out.ContentLength, c.Size())
	}
	var off int64
	for {
		n, err := io.ReadFull(out.Body, buf)
		if n > 0 && !r.opts.NoVerify {
			if verr := c.Verify(buf[:n], off); verr != nil {
				_, _ = io.Copy(io.Discard, out.Body)
				return off, fmt.Errorf("%w: %s: %v", errVerify, key, verr)
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return off, err
		}
	}
	if off != c.Size() && !r.opts.NoVerify {
		return off, fmt.Errorf("%w: %s: got %d bytes, want %d", errVerify, key, off, c.Size())
	}
	return off, nil
}

func (r *Runner) head(ctx context.Context, key string) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	out, err := r.client.HeadObject(cctx, &s3.HeadObjectInput{Bucket: aws.String(r.opts.Bucket), Key: aws.String(key)})
	if err != nil {
		return err
	}
	if want := r.content.ObjectSize(key, r.opts.Sizes); !r.opts.NoVerify && aws.ToInt64(out.ContentLength) != want {
		return fmt.Errorf("%w: %s: HEAD content length %d, want %d", errVerify, key, aws.ToInt64(out.ContentLength), want)
	}
	return nil
}

func (r *Runner) list(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.client.ListObjectsV2(cctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(r.opts.Bucket),
		Prefix:  aws.String(keyspacePrefix(r.opts.Prefix)),
		MaxKeys: aws.Int32(int32(r.opts.ListMaxKeys)),
	})
	return err
}

func (r *Runner) del(ctx context.Context, key string) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String(r.opts.Bucket), Key: aws.String(key)})
	return err
}

// readBufBytes is the GET read (and verify) chunk; verification compares
// each chunk with memcmp, so the chunk only needs to amortise call overhead.
const readBufBytes = 256 << 10

// phase is one warm-up or timed phase: workers issuing requests until the
// duration or count bound.
type phase struct {
	r             *Runner
	tag           string
	deadline      time.Time
	count         int64
	issued        atomic.Int64
	errors        atomic.Int64
	tooManyErrors atomic.Bool
	exhausted     atomic.Bool
	workers       []*worker
}

type worker struct {
	id  int
	rng *rand.Rand
	buf []byte
	seq int64
	acc [5]OpResult // indexed like AllOps
}

func (r *Runner) newPhase(tag string, dur time.Duration, count int64) *phase {
	ph := &phase{r: r, tag: tag, count: count}
	if dur > 0 {
		ph.deadline = time.Now().Add(dur)
	}
	for i := range r.opts.Concurrency {
		// Each worker's operation sequence is a function of the seed, the
		// phase and its index, so a run can be repeated exactly.
		w := &worker{id: i, rng: rand.New(rand.NewPCG(r.opts.Seed, mix64(uint64(len(tag))<<56^fnv64(tag))+uint64(i)))}
		if r.opts.Workload.Has(OpGet) {
			w.buf = make([]byte, readBufBytes)
		}
		for j, op := range AllOps {
			w.acc[j].Op = op
		}
		ph.workers = append(ph.workers, w)
	}
	return ph
}

func (ph *phase) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ph.workers {
		wg.Go(func() { ph.loop(ctx, cancel, w) })
	}
	wg.Wait()
}

func (ph *phase) loop(ctx context.Context, stop context.CancelFunc, w *worker) {
	r := ph.r
	for ctx.Err() == nil {
		if !ph.deadline.IsZero() && !time.Now().Before(ph.deadline) {
			return
		}
		if ph.count > 0 && ph.issued.Add(1) > ph.count {
			return
		}
		op := r.pick.pick(w.rng.Uint64())
		key, slot, ok := ph.chooseKey(w, op)
		if !ok {
			if ph.count > 0 {
				ph.issued.Add(-1) // nothing was issued
			}
			if ph.exhausted.Load() {
				return
			}
			runtime.Gosched()
			continue
		}
		t0 := time.Now()
		var n int64
		var err error
		switch op {
		case OpPut:
			n, err = r.put(ctx, key)
		case OpGet:
			n, err = r.get(ctx, key, w.buf)
		case OpHead:
			err = r.head(ctx, key)
		case OpList:
			err = r.list(ctx)
		case OpDelete:
			err = r.del(ctx, key)
		}
		lat := time.Since(t0)
		if slot >= 0 {
			r.keys.release(slot, op, err)
		}
		if err != nil && ctx.Err() != nil {
			return // interrupted, not a server failure
		}
		acc := &w.acc[slices.Index(AllOps, op)]
		if acc.hist == nil {
			acc.hist = &Histogram{}
		}
		acc.Count++
		acc.hist.Record(lat)
		r.phaseDone.Add(1)
		if err != nil {
			acc.Errors++
			if errors.Is(err, errVerify) {
				acc.VerifyFailures++
			}
			acc.addErrorSample(shortError(err))
			r.phaseErrors.Add(1)
			if ph.errors.Add(1) >= r.opts.MaxErrors {
				ph.tooManyErrors.Store(true)
				stop()
				return
			}
			continue
		}
		acc.Bytes += n
	}
}

// chooseKey picks the key for op and claims its keyspace slot (-1 when the
// op uses no slot). ok is false when no suitable key was found this time.
func (ph *phase) chooseKey(w *worker, op Op) (key string, slot int, ok bool) {
	r := ph.r
	if op == OpList {
		return "", -1, true
	}
	if r.keys == nil { // put-only: every PUT writes a fresh key
		w.seq++
		return fmt.Sprintf("%s%s/w%04d/%010d", r.opts.Prefix, ph.tag, w.id, w.seq), -1, true
	}
	needPresent := op != OpPut
	for range 16 {
		i := int(w.rng.Uint64N(uint64(r.keys.n)))
		st, claimed := r.keys.claim(i)
		if !claimed {
			continue
		}
		if needPresent && st != keyPresent {
			r.keys.unclaim(i, st)
			continue
		}
		return r.keys.name(r.opts.Prefix, i), i, true
	}
	if needPresent && r.keys.present.Load() == 0 && !r.opts.Workload.Has(OpPut) {
		ph.exhausted.Store(true)
	}
	return "", -1, false
}

// keyspace tracks, per key, whether the object exists, so that GET, HEAD and
// DELETE only target objects that must exist and any failure is real. A
// worker claims a key for the duration of one request, so the state is
// never raced.
type keyspace struct {
	n       int
	state   []atomic.Uint32
	present atomic.Int64
}

const (
	keyAbsent  uint32 = 0
	keyPresent uint32 = 1
	// keyUnknown follows a failed PUT or DELETE: only a PUT or DELETE may
	// touch the key until one succeeds.
	keyUnknown uint32 = 2
	keyBusy    uint32 = 1 << 31
)

func newKeyspace(n int) *keyspace {
	return &keyspace{n: n, state: make([]atomic.Uint32, n)}
}

func keyspacePrefix(prefix string) string { return prefix + "k/" }

func (k *keyspace) name(prefix string, i int) string {
	return fmt.Sprintf("%s%08d", keyspacePrefix(prefix), i)
}

func (k *keyspace) get(i int) uint32 { return k.state[i].Load() &^ keyBusy }

// set is for single-threaded use (prepare marks keys it alone writes).
func (k *keyspace) set(i int, st uint32) {
	old := k.state[i].Swap(st) &^ keyBusy
	k.count(old, st)
}

func (k *keyspace) count(old, st uint32) {
	if old == keyPresent && st != keyPresent {
		k.present.Add(-1)
	} else if old != keyPresent && st == keyPresent {
		k.present.Add(1)
	}
}

func (k *keyspace) claim(i int) (uint32, bool) {
	s := k.state[i].Load()
	if s&keyBusy != 0 || !k.state[i].CompareAndSwap(s, s|keyBusy) {
		return 0, false
	}
	return s, true
}

func (k *keyspace) unclaim(i int, st uint32) { k.state[i].Store(st) }

// release ends a claim, recording what the request did to the object.
func (k *keyspace) release(i int, op Op, err error) {
	old := k.state[i].Load() &^ keyBusy
	st := old
	switch {
	case op == OpPut && err == nil:
		st = keyPresent
	case op == OpDelete && err == nil:
		st = keyAbsent
	case (op == OpPut || op == OpDelete) && err != nil:
		st = keyUnknown
	}
	k.count(old, st)
	k.state[i].Store(st)
}
