package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/onoff"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

// Bucket is the experiment's S3 bucket.
const Bucket = "scaleout"

// DefaultRules are the planner rules the servers run with: the default
// set (space, durability, one replica per node) plus the two balancing
// rules. disk_balanced mean=0, with a band of one point (±0.5 % of a device's
// capacity, 41 MiB of the default 8 GiB device), fills the new node to
// about its share of bytes; load_balanced (Mirador's LOAD_SPREAD, ±10 %
// of the mean read load) makes that share the read-hot data. Bytes alone
// are not enough: new writes land on the emptiest disk, so a plan that
// balances bytes moves less read data onto the new node (in one run it
// ended with 35 % of the read data instead of half, and client throughput
// rose 1.13x instead of 1.34x; docs/perf.md).
var DefaultRules = []string{
	"device_has_space max_fill=0.95",
	"rplset_durable",
	"failure_domain_spread level=node",
	"disk_balanced mean=0 spread=0.01",
	"load_balanced spread=0.2",
}

// Options configure the experiment. Zero values mean defaults sized for a
// 2-core machine (about 3½ minutes).
type Options struct {
	Binary   string
	Dir      string // cluster working directory (removed afterwards)
	Out      string // results
	BasePort int
	// Nodes start the cluster; one more joins it under load.
	Nodes int
	// Devices per node, as tier:NAME:capacity (devcluster.Options).
	Devices []string
	Vector  string
	// EgroupBytes is the servers' egroup size: small egroups give the
	// planner many small moves.
	EgroupBytes int64
	// Emulate throttles the devices like real media. On one machine it is
	// what makes a joining node add capacity: its processes share the same
	// cores, so only its (emulated) disks are new.
	Emulate bool
	// DataBytes of ObjectBytes objects are preloaded with PreloadWorkers.
	DataBytes      int64
	ObjectBytes    int64
	PreloadWorkers int
	// Clients closed-loop S3 clients run the load: each starts its next
	// operation when the last ends, ReadFraction of them verified GETs of
	// preloaded objects, the rest PUTs of new objects, each through a
	// random running node's S3 endpoint.
	Clients      int
	ReadFraction float64
	// NewNodeServesClients adds the new node's S3 endpoint to the
	// clients' rotation once it has joined (Mirador moves client
	// connections as well as data).
	NewNodeServesClients bool
	// Warmup is load not measured; Baseline the measured load before the
	// join; Joined how long the new node runs before the plan is applied
	// (its effect alone); Tail how long the load runs once balanced;
	// MaxBalance bounds the wait for the planned jobs.
	Warmup, Baseline, Joined, Tail, MaxBalance time.Duration
	// MaxRounds bounds plan-apply rounds: after a job finishes the
	// planner is asked again and, if it still wants moves, applied again.
	MaxRounds int
	// Rules are the servers' planner rules (YAML planner: rules:).
	Rules []string
	// MoveMBps is the actuator's maximum move rate (0: the server's).
	MoveMBps float64
	// ReadOrder is the servers' read_order: "locality" (default here: a
	// node reads its own replica, else a random one) or "octopus" (the
	// server default, Eq. 12 over probed device speeds and stream counts;
	// between like devices it herds remote reads onto the one whose probe
	// read fastest, so a new node's disk may get few of them).
	ReadOrder string
	Seed      uint64
	Log       func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.BasePort == 0 {
		o.BasePort = 19900
	}
	if len(o.Devices) == 0 {
		o.Devices = []string{"hdd:hdd0:8GiB"}
	}
	if o.Vector == "" {
		o.Vector = "any=2"
	}
	if o.EgroupBytes == 0 {
		o.EgroupBytes = 2 << 20
	}
	if o.DataBytes == 0 {
		o.DataBytes = 300 << 20
	}
	if o.ObjectBytes == 0 {
		o.ObjectBytes = 1 << 20
	}
	if o.PreloadWorkers == 0 {
		o.PreloadWorkers = 8
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	if o.ReadFraction == 0 {
		o.ReadFraction = 0.97
	}
	if o.Warmup == 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Baseline == 0 {
		o.Baseline = 40 * time.Second
	}
	if o.Joined == 0 {
		o.Joined = 15 * time.Second
	}
	if o.Tail == 0 {
		o.Tail = 40 * time.Second
	}
	if o.MaxBalance == 0 {
		o.MaxBalance = 10 * time.Minute
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = 3
	}
	if len(o.Rules) == 0 {
		o.Rules = append([]string(nil), DefaultRules...)
	}
	if o.ReadOrder == "" {
		o.ReadOrder = "locality"
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Validate rejects options that cannot describe a run (after defaults).
func (o *Options) Validate() error {
	v, err := model.ParseVector(o.Vector)
	if err != nil {
		return fmt.Errorf("scaleout: vector %q: %w", o.Vector, err)
	}
	for _, d := range o.Devices {
		parts := strings.Split(d, ":")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return fmt.Errorf("scaleout: device %q: want tier:NAME:capacity", d)
		}
	}
	switch {
	case o.Nodes < 3 || o.Nodes > 15:
		return fmt.Errorf("scaleout: %d nodes; want 3..15 (three etcd members start the cluster; one more joins)", o.Nodes)
	case v.Total() < 1 || v.Total() > o.Nodes:
		return fmt.Errorf("scaleout: vector %s needs %d nodes; the cluster starts with %d", o.Vector, v.Total(), o.Nodes)
	case o.DataBytes <= 0 || o.ObjectBytes <= 0 || o.ObjectBytes > 64<<20:
		return fmt.Errorf("scaleout: data %d and object size %d must be positive (objects at most 64 MiB)", o.DataBytes, o.ObjectBytes)
	case o.DataBytes/o.ObjectBytes > 1_000_000:
		return fmt.Errorf("scaleout: %d objects is more than the 1,000,000 the end check reads back", o.DataBytes/o.ObjectBytes)
	case o.ReadFraction < 0 || o.ReadFraction > 1:
		return fmt.Errorf("scaleout: read fraction %v: want 0..1", o.ReadFraction)
	case o.Clients < 1 || o.Clients > 1024 || o.PreloadWorkers < 1 || o.PreloadWorkers > 256:
		return fmt.Errorf("scaleout: clients %d (want 1..1024) and preload workers %d (want 1..256)", o.Clients, o.PreloadWorkers)
	case o.Warmup < 0 || o.Baseline <= 0 || o.Joined <= 0 || o.Tail <= 0 || o.MaxBalance <= 0:
		return fmt.Errorf("scaleout: baseline %s, joined %s, tail %s and max balance %s must be positive, warm-up %s not negative",
			o.Baseline, o.Joined, o.Tail, o.MaxBalance, o.Warmup)
	case o.MaxRounds < 1 || o.MaxRounds > 20:
		return fmt.Errorf("scaleout: %d plan rounds: want 1..20", o.MaxRounds)
	case o.EgroupBytes < 256<<10 || o.EgroupBytes > 1<<30:
		return fmt.Errorf("scaleout: egroup size %d: want 256 KiB..1 GiB", o.EgroupBytes)
	case o.MoveMBps < 0:
		return fmt.Errorf("scaleout: move rate %v MB/s must not be negative", o.MoveMBps)
	case o.ReadOrder != "locality" && o.ReadOrder != "octopus":
		return fmt.Errorf("scaleout: read order %q: want locality or octopus", o.ReadOrder)
	}
	for _, r := range o.Rules {
		if strings.ContainsAny(r, "\n\"") {
			return fmt.Errorf("scaleout: planner rule %q: one rule per entry, no quotes", r)
		}
	}
	// The servers would refuse to start on a bad rule; say so before
	// starting them.
	if err := curator.ValidateRules(strings.Join(o.Rules, "\n")); err != nil {
		return fmt.Errorf("scaleout: %w", err)
	}
	return nil
}

// serverConfig is the servers' YAML: egroup size, the planner's rules,
// no Curator tiering or live planning (they would move data onto the new
// node on their own; the planner is under test), no scrubbing (a second
// background load), no scheduled scans during the run.
func serverConfig(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "egroup_max_bytes: %d\nread_order: %s\ncurator:\n  full_every: 6h\n  partial_every: 6h\n  scrub: false\n  tiering: false\n", o.EgroupBytes, o.ReadOrder)
	if o.MoveMBps > 0 {
		fmt.Fprintf(&b, "  move_mbps: %g\n", o.MoveMBps)
	}
	// live_rules off: the scans' own planning stage would balance too.
	b.WriteString("planner:\n  live_rules: [\"off\"]\n  rules:\n")
	for _, r := range o.Rules {
		fmt.Fprintf(&b, "    - %q\n", r)
	}
	return b.String()
}

// Verification is the end-of-run check of every acknowledged object.
type Verification struct {
	Objects int `json:"objects"`
	Lost    int `json:"lost"`
	Corrupt int `json:"corrupt"`
	// OffVector counts extents whose good replicas on distinct nodes are
	// not the vector's count: Under fewer, Over more.
	OffVector int `json:"off_vector_extents"`
	Under     int `json:"under_extents"`
	Over      int `json:"over_extents"`
	// PreloadedOnNew counts preloaded objects (written before the join)
	// with a replica on the new node: only moves put them there.
	PreloadedOnNew int      `json:"preloaded_objects_on_new_node"`
	Examples       []string `json:"examples,omitempty"`
}

// Result is the whole experiment. Times are seconds since the load
// started (the end of the preload).
type Result struct {
	Options         Options            `json:"-"`
	Nodes           []string           `json:"nodes"`
	NewNode         string             `json:"new_node"`
	CuratorMaster   string             `json:"curator_master"`
	Preloaded       int                `json:"preloaded_objects"`
	PreloadBytes    int64              `json:"preload_bytes"`
	PreloadSeconds  float64            `json:"preload_seconds"`
	JoinSeconds     float64            `json:"join_seconds"`
	Marks           Marks              `json:"marks"`
	Balanced        bool               `json:"balanced"`
	TimeToBalance   float64            `json:"time_to_balance_s"`
	Jobs            []actuate.Progress `json:"jobs"`
	Tasks           int                `json:"tasks"`
	TasksDone       int                `json:"tasks_done"`
	TasksStale      int                `json:"tasks_stale"`
	TasksFailed     int                `json:"tasks_failed"`
	BytesMoved      int64              `json:"bytes_moved"`
	ResidualMoves   int                `json:"residual_moves"`
	NodeBytesBefore map[string]int64   `json:"node_bytes_before_join"`
	NodeBytesAfter  map[string]int64   `json:"node_bytes_end"`
	Phases          []PhaseStats       `json:"phases"`
	// ReadMBps is each node's mean disk read rate per phase.
	ReadMBps     map[string]map[string]float64 `json:"disk_read_mb_per_sec"`
	ClientErrors []string                      `json:"client_errors,omitempty"`
	Verify       Verification                  `json:"verification"`
	Seconds      []Second                      `json:"-"`
	Ops          []Op                          `json:"-"`
	Samples      []Sample                      `json:"-"`
}

// Run runs the experiment and writes its outputs under o.Out. On a
// failure after the load started it still writes what it measured and
// returns the partial result with the error.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	os.RemoveAll(o.Dir)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(o.Dir)
	cfg := filepath.Join(o.Dir, "terrace.yaml")
	if err := os.WriteFile(cfg, []byte(serverConfig(o)), 0o644); err != nil {
		return nil, err
	}
	o.Log("scaleout: starting %d nodes, one more held back (devices %v, vector %s, emulated %v)", o.Nodes, o.Devices, o.Vector, o.Emulate)
	cl, err := devcluster.Start(ctx, devcluster.Options{
		Binary: o.Binary, Dir: filepath.Join(o.Dir, "cluster"), Nodes: o.Nodes + 1, Launch: o.Nodes, Members: 3,
		BasePort: o.BasePort, Emulate: o.Emulate, DefaultVector: o.Vector, Devices: o.Devices,
		ExtraArgs: []string{"--config", cfg},
	})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	r := &runner{o: o, cl: cl, hc: devcluster.AdminClient(60 * time.Second), newNode: cl.Nodes[o.Nodes],
		content: bench.NewContentSource(o.Seed), size: bench.MustParseSizeDist(fmt.Sprint(o.ObjectBytes)),
		acked: map[string]bool{}, res: &Result{Options: o, NewNode: cl.Nodes[o.Nodes].ID}}
	for _, n := range cl.Nodes {
		r.res.Nodes = append(r.res.Nodes, n.ID)
	}
	runErr := r.run(ctx)
	if r.loadStart.IsZero() {
		return r.res, runErr
	}
	r.finish()
	if err := writeOutputs(o, r.res); err != nil {
		return r.res, errors.Join(runErr, err)
	}
	return r.res, runErr
}

// entry is one node's S3 endpoint as the clients use it.
type entry struct {
	node string
	s3   *s3.Client
}

type runner struct {
	o       Options
	cl      *devcluster.Cluster
	hc      *http.Client
	newNode *devcluster.Node
	master  *devcluster.Node
	content *bench.ContentSource
	size    bench.SizeDist
	res     *Result

	entries   atomic.Pointer[[]entry]
	loadStart time.Time

	opMu   sync.Mutex
	ops    []Op
	errs   []string
	ackMu  sync.Mutex
	acked  map[string]bool // key → preloaded
	keys   []string
	preKey []string

	sampleMu sync.Mutex
	samples  []Sample
	jobIDs   []string
	jobs     map[string]actuate.Progress
}

func (r *runner) since() float64 { return time.Since(r.loadStart).Seconds() }

func (r *runner) admin(n *devcluster.Node, path string) string { return "http://" + n.Admin + path }

// call sends one admin request and decodes a JSON answer into out (if
// not nil).
func (r *runner) call(ctx context.Context, method, u string, out any) error {
	return devcluster.CallAdmin(ctx, r.hc, method, u, nil, out)
}

func (r *runner) s3For(n *devcluster.Node) *s3.Client {
	return bench.NewS3Client(bench.Endpoint{Name: n.ID, URL: "http://" + n.S3, Access: devcluster.AccessKey,
		Secret: devcluster.SecretKey, Region: bench.DefaultRegion}, r.o.Clients+r.o.PreloadWorkers)
}

func (r *runner) pick(rng *rand.Rand) entry {
	es := *r.entries.Load()
	return es[rng.IntN(len(es))]
}

func (r *runner) put(ctx context.Context, c *s3.Client, key string) error {
	obj := r.content.Object(key, r.size)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(Bucket), Key: aws.String(key),
		Body: obj.NewReader(), ContentLength: aws.Int64(obj.Size())})
	return err
}

var errCorrupt = errors.New("wrong bytes")

// get reads key and checks every byte; it returns the bytes read.
func (r *runner) get(ctx context.Context, c *s3.Client, key string) (int64, error) {
	obj := r.content.Object(key, r.size)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return 0, err
	}
	if int64(len(b)) != obj.Size() {
		return 0, fmt.Errorf("GET %s: %w: %d bytes, want %d", key, errCorrupt, len(b), obj.Size())
	}
	if err := obj.Verify(b, 0); err != nil {
		return 0, fmt.Errorf("GET %s: %w: %v", key, errCorrupt, err)
	}
	return int64(len(b)), nil
}

func (r *runner) ack(key string, pre bool) {
	r.ackMu.Lock()
	if _, ok := r.acked[key]; !ok {
		r.keys = append(r.keys, key)
	}
	r.acked[key] = pre
	r.ackMu.Unlock()
}

func (r *runner) run(ctx context.Context) error {
	o := r.o
	running := r.cl.Running()
	es := make([]entry, 0, len(running))
	for _, n := range running {
		es = append(es, entry{node: n.ID, s3: r.s3For(n)})
	}
	r.entries.Store(&es)
	if err := r.cl.WaitViews(ctx); err != nil {
		return fmt.Errorf("scaleout: %w", err)
	}
	if _, err := es[0].s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		return fmt.Errorf("scaleout: create bucket: %w", err)
	}

	// Preload, through every running node.
	n := int((o.DataBytes + o.ObjectBytes - 1) / o.ObjectBytes)
	o.Log("scaleout: preload %d objects of %d KiB (%d MiB)", n, o.ObjectBytes>>10, int64(n)*o.ObjectBytes>>20)
	pstart := time.Now()
	var failed atomic.Int64
	err := onoff.Parallel(ctx, o.PreloadWorkers, n, func(_, i int, rng *rand.Rand) error {
		key := fmt.Sprintf("pre/%07d", i)
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := r.put(pctx, r.pick(rng).s3, key); err != nil {
			failed.Add(1)
			return fmt.Errorf("PUT %s: %w", key, err)
		}
		r.ack(key, true)
		return nil
	})
	if err != nil {
		return fmt.Errorf("scaleout: preload (%d of %d PUTs failed): %w", failed.Load(), n, err)
	}
	r.res.Preloaded, r.res.PreloadBytes = n, int64(n)*o.ObjectBytes
	r.res.PreloadSeconds = time.Since(pstart).Seconds()
	r.preKey = append([]string(nil), r.keys...)
	o.Log("scaleout: preloaded in %.1fs", r.res.PreloadSeconds)
	if r.master = r.curatorMaster(ctx); r.master == nil {
		return fmt.Errorf("scaleout: no Curator master among %d nodes", len(running))
	}
	r.res.CuratorMaster = r.master.ID

	// The load and the sampler, from now until stopped.
	r.jobs = map[string]actuate.Progress{}
	r.loadStart = time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var loadWG sync.WaitGroup
	for w := 0; w < o.Clients; w++ {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			r.client(loadCtx, w)
		}()
	}
	sampleCtx, stopSample := context.WithCancel(ctx)
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for {
			r.sample(sampleCtx)
			if !sleep(sampleCtx, time.Second) {
				return
			}
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopLoad()
		loadWG.Wait()
		r.res.Marks.End = r.since()
		stopSample()
		<-sampleDone
		r.sample(ctx) // the state at the end
	}
	defer stop()

	r.res.Marks.Warmup = o.Warmup.Seconds()
	o.Log("scaleout: load: %d clients, %.0f %% GETs; warm-up %s, baseline %s", o.Clients, 100*o.ReadFraction, o.Warmup, o.Baseline)
	if !sleep(ctx, o.Warmup+o.Baseline) {
		return ctx.Err()
	}

	// The join.
	r.res.Marks.JoinAt = r.since()
	o.Log("scaleout: starting %s", r.newNode.ID)
	jstart := time.Now()
	if err := r.cl.Join(ctx, r.newNode); err != nil {
		return fmt.Errorf("scaleout: join: %w", err)
	}
	r.res.JoinSeconds = time.Since(jstart).Seconds()
	o.Log("scaleout: %s is in the cluster view after %.1fs", r.newNode.ID, r.res.JoinSeconds)
	if o.NewNodeServesClients {
		more := append(append([]entry(nil), es...), entry{node: r.newNode.ID, s3: r.s3For(r.newNode)})
		r.entries.Store(&more)
	}
	if !sleep(ctx, o.Joined) {
		return ctx.Err()
	}

	// The plan, applied until the planner wants nothing more.
	r.res.Marks.ApplyAt = r.since()
	deadline := time.Now().Add(o.MaxBalance)
	for round := 1; round <= o.MaxRounds; round++ {
		job, moves, err := r.apply(ctx)
		if err != nil {
			return err
		}
		if job == "" {
			o.Log("scaleout: round %d: the planner wants no moves", round)
			if round == 1 {
				return fmt.Errorf("scaleout: the planner found nothing to move onto %s (rules %q)", r.newNode.ID, o.Rules)
			}
			break
		}
		o.Log("scaleout: round %d: job %s, %d moves", round, job, moves)
		p, err := r.waitJob(ctx, job, deadline)
		if err != nil {
			return err
		}
		r.res.Marks.BalancedAt = p.Finished.Sub(r.loadStart).Seconds()
		r.res.Balanced = true
		o.Log("scaleout: job %s finished at t=%.1fs: %v, %d MiB moved", job, r.res.Marks.BalancedAt, p.States, p.BytesDone>>20)
		left, err := r.residual(ctx)
		if err != nil {
			return err
		}
		r.res.ResidualMoves = left
		if left == 0 {
			break
		}
		o.Log("scaleout: the planner still wants %d moves", left)
	}
	r.res.TimeToBalance = r.res.Marks.BalancedAt - r.res.Marks.ApplyAt
	o.Log("scaleout: balanced %.1fs after the plan; tail %s", r.res.TimeToBalance, o.Tail)
	if !sleep(ctx, o.Tail) {
		return ctx.Err()
	}
	stop()
	o.Log("scaleout: load stopped; verifying %d acknowledged objects", len(r.keys))
	r.res.Verify = r.verify(ctx)
	return nil
}

// client is one closed-loop client: one operation after another until
// ctx ends.
func (r *runner) client(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(w)+1))
	for seq := 0; ctx.Err() == nil; seq++ {
		e := r.pick(rng)
		start := time.Now()
		op := Op{T: start.Sub(r.loadStart).Seconds()}
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		var err error
		if rng.Float64() < r.o.ReadFraction {
			op.Read = true
			key := r.preKey[rng.IntN(len(r.preKey))]
			op.Bytes, err = r.get(octx, e.s3, key)
		} else {
			key := fmt.Sprintf("new/%03d/%07d", w, seq)
			if err = r.put(octx, e.s3, key); err == nil {
				op.Bytes = r.content.ObjectSize(key, r.size)
				r.ack(key, false)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return // stopped mid-operation: not a measurement
		}
		op.LatMs = float64(time.Since(start)) / 1e6
		r.opMu.Lock()
		if err != nil {
			op.Err, op.Bytes = true, 0
			if len(r.errs) < 20 {
				r.errs = append(r.errs, fmt.Sprintf("t=%.1fs via %s: %v", op.T, e.node, err))
			}
		}
		r.ops = append(r.ops, op)
		r.opMu.Unlock()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *runner) curatorMaster(ctx context.Context) *devcluster.Node {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		for _, n := range r.cl.Running() {
			var st curator.Status
			if err := r.call(ctx, "GET", r.admin(n, "/v1/curator/status"), &st); err == nil && st.Leader {
				return n
			}
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return nil
		}
	}
	return nil
}

// sample records every node's used bytes (the first running node's
// cluster view) and the planned jobs' bytes moved.
func (r *runner) sample(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := Sample{T: r.since(), NodeBytes: map[string]int64{}}
	var st server.Status
	if err := r.call(cctx, "GET", r.admin(r.cl.Nodes[0], "/v1/status"), &st); err != nil || st.Cluster == nil {
		return
	}
	for _, n := range st.Cluster.Nodes {
		if n.Heartbeat == nil {
			continue
		}
		var used int64
		for _, d := range n.Heartbeat.Devices {
			used += d.Used
		}
		s.NodeBytes[string(n.ID)] = used
	}
	s.NodeReadBytes = map[string]int64{}
	for _, n := range r.cl.Running() {
		var ns server.Status
		if err := r.call(cctx, "GET", r.admin(n, "/v1/status"), &ns); err != nil {
			continue
		}
		var rb int64
		for _, d := range ns.Devices {
			rb += d.ReadBytes
		}
		s.NodeReadBytes[n.ID] = rb
	}
	r.sampleMu.Lock()
	ids := append([]string(nil), r.jobIDs...)
	r.sampleMu.Unlock()
	if len(ids) > 0 {
		var ps []actuate.Progress
		if err := r.call(cctx, "GET", r.admin(r.master, "/v1/plan/jobs?n=20"), &ps); err == nil {
			r.sampleMu.Lock()
			for _, p := range ps {
				for _, id := range ids {
					if p.ID == id {
						r.jobs[id] = p
					}
				}
			}
			r.sampleMu.Unlock()
		}
	}
	r.sampleMu.Lock()
	for _, p := range r.jobs {
		s.Moved += p.BytesDone
	}
	r.samples = append(r.samples, s)
	r.sampleMu.Unlock()
}

// apply runs `terrace plan apply` on the Curator master: it returns the
// job's ID ("" when the plan has no moves) and the plan's move count.
func (r *runner) apply(ctx context.Context) (string, int, error) {
	var out struct {
		Plan curator.PlanResult `json:"plan"`
		Job  actuate.Progress   `json:"job"`
	}
	if err := r.call(ctx, "POST", r.admin(r.master, "/v1/plan/apply"), &out); err != nil {
		return "", 0, fmt.Errorf("scaleout: plan apply: %w", err)
	}
	if out.Job.Tasks == 0 {
		return "", len(out.Plan.Moves), nil
	}
	r.sampleMu.Lock()
	r.jobIDs = append(r.jobIDs, out.Job.ID)
	r.jobs[out.Job.ID] = out.Job
	r.sampleMu.Unlock()
	return out.Job.ID, len(out.Plan.Moves), nil
}

// waitJob polls the master until the job has finished.
func (r *runner) waitJob(ctx context.Context, id string, deadline time.Time) (actuate.Progress, error) {
	for {
		var ps []actuate.Progress
		if err := r.call(ctx, "GET", r.admin(r.master, "/v1/plan/jobs?n=20"), &ps); err == nil {
			for _, p := range ps {
				if p.ID == id {
					r.sampleMu.Lock()
					r.jobs[id] = p
					r.sampleMu.Unlock()
					if !p.Finished.IsZero() {
						return p, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return actuate.Progress{}, fmt.Errorf("scaleout: job %s not finished within %s of the plan", id, r.o.MaxBalance)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return actuate.Progress{}, ctx.Err()
		}
	}
}

// residual asks the planner (a dry run) how many moves it still wants.
func (r *runner) residual(ctx context.Context) (int, error) {
	var p curator.PlanResult
	if err := r.call(ctx, "GET", r.admin(r.master, "/v1/plan"), &p); err != nil {
		return 0, fmt.Errorf("scaleout: plan: %w", err)
	}
	return len(p.Moves), nil
}

// verify reads every acknowledged object back through the first node
// (bytes checked) and locates it: every extent must have the vector's
// number of good replicas on distinct nodes.
func (r *runner) verify(ctx context.Context) Verification {
	want, _ := model.ParseVector(r.o.Vector)
	r.ackMu.Lock()
	keys := append([]string(nil), r.keys...)
	pre := make(map[string]bool, len(keys))
	for k, p := range r.acked {
		pre[k] = p
	}
	r.ackMu.Unlock()
	sort.Strings(keys)
	c := r.s3For(r.cl.Nodes[0])
	var v Verification
	var mu sync.Mutex
	note := func(f string, a ...any) {
		if len(v.Examples) < 10 {
			v.Examples = append(v.Examples, fmt.Sprintf(f, a...))
		}
	}
	v.Objects = len(keys)
	_ = onoff.Parallel(ctx, 4, len(keys), func(_, i int, _ *rand.Rand) error {
		key := keys[i]
		var loc object.Location
		q := url.Values{"bucket": {Bucket}, "key": {key}}
		lerr := r.call(ctx, "GET", r.admin(r.cl.Nodes[0], "/v1/object/locate?"+q.Encode()), &loc)
		_, gerr := r.get(ctx, c, key)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(gerr, errCorrupt):
			v.Corrupt++
			note("%v", gerr)
		case gerr != nil:
			v.Lost++
			note("GET %s: %v", key, gerr)
		}
		if lerr != nil {
			note("locate %s: %v", key, lerr)
			return nil
		}
		onNew := false
		for _, x := range loc.Extents {
			nodes := map[model.NodeID]bool{}
			for _, rep := range x.Replicas {
				if !rep.Bad {
					nodes[rep.Node] = true
				}
			}
			onNew = onNew || nodes[model.NodeID(r.newNode.ID)]
			switch {
			case len(nodes) < want.Total():
				v.OffVector++
				v.Under++
				note("%s egroup %016x: %d good replicas on distinct nodes, want %d: %+v", key, x.Egroup, len(nodes), want.Total(), x.Replicas)
			case len(nodes) > want.Total():
				v.OffVector++
				v.Over++
				note("%s egroup %016x: %d good replicas on distinct nodes, want %d: %+v", key, x.Egroup, len(nodes), want.Total(), x.Replicas)
			}
		}
		if onNew && pre[key] {
			v.PreloadedOnNew++
		}
		return nil
	})
	return v
}

// finish derives the result's numbers from what was recorded.
func (r *runner) finish() {
	res := r.res
	r.opMu.Lock()
	res.Ops = append([]Op(nil), r.ops...)
	res.ClientErrors = append([]string(nil), r.errs...)
	r.opMu.Unlock()
	r.sampleMu.Lock()
	res.Samples = append([]Sample(nil), r.samples...)
	for _, id := range r.jobIDs {
		p := r.jobs[id]
		res.Jobs = append(res.Jobs, p)
		res.Tasks += p.Tasks
		res.TasksDone += p.States["done"]
		res.TasksStale += p.States["stale"]
		res.TasksFailed += p.States["failed"]
		res.BytesMoved += p.BytesDone
	}
	r.sampleMu.Unlock()
	m := &res.Marks
	if m.End == 0 {
		m.End = r.since()
	}
	// Phases that never began end where the run did.
	if m.JoinAt == 0 {
		m.JoinAt = m.End
	}
	if m.ApplyAt == 0 {
		m.ApplyAt = m.End
	}
	if !res.Balanced {
		m.BalancedAt = -1
	}
	for _, s := range res.Samples {
		if s.T < m.JoinAt {
			res.NodeBytesBefore = s.NodeBytes
		}
		res.NodeBytesAfter = s.NodeBytes
	}
	res.Phases = SplitPhases(res.Ops, *m)
	res.Seconds = PerSecond(res.Ops, res.Samples, res.Nodes, *m)
	res.ReadMBps = map[string]map[string]float64{}
	for _, ph := range phaseNames {
		res.ReadMBps[ph] = PhaseReadMBps(res.Seconds, res.Nodes, ph)
	}
}
