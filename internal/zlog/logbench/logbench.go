// Package logbench is `terrace bench log`: it starts a dev cluster (N real
// `terrace server` processes) and measures the shared log:
//
//   - next: sequencer round trips per second, one Next per position, with
//     1, 2 and 8 clients (no lease), and their latency;
//   - lease: positions per second with leased batching, by lease size
//     (2 clients, the paper's "2C"), and the latency of a position;
//   - append: appends per second of fixed-size entries (4 KiB) from C
//     clients (16), with leases off and on, append latency, the lag of an
//     in-order subscriber behind the appenders (what a lease's hold time
//     costs readers), and the servers' CPU per append;
//   - failover: the sequencer's host killed with SIGKILL under 8
//     appenders, repeatedly: time until appends resume.
//
// It writes results.csv, PNG plots and summary.md to the output directory.
// It measures through the public client and the real processes only.
package logbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/zlog/client"
)

// Options configure a run. Zero values mean the defaults.
type Options struct {
	Binary   string // terrace binary for the servers
	Dir      string // cluster data (a temporary directory if empty)
	Out      string // results directory
	Nodes    int
	BasePort int
	Emulate  bool // emulate device speeds, as `terrace dev cluster` does
	Vector   string
	Stripes  int
	// Experiments to run: next, lease, append, failover (default all).
	Experiments []string
	Duration    time.Duration // per measured point
	Clients     int           // append clients
	// Depths are the appends each client keeps in flight (each depth is
	// one append point; 1 = synchronous appends).
	Depths     []int
	EntryBytes int
	LeaseSizes []int // lease experiment
	// AppendLease is the lease the append experiment's leased run uses.
	AppendLease     int
	AppendLeaseHold time.Duration
	FailoverRounds  int
	// NoSubscriber runs the append experiment without the in-order
	// subscriber (no lag measured; its reads no longer share the CPU).
	NoSubscriber bool
	// CPUProfile, if set, is where the benchmark process's own CPU
	// profile goes (the clients' share of the cost).
	CPUProfile string
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Out == "" {
		o.Out = "bench-log"
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.BasePort == 0 {
		o.BasePort = 34000
	}
	if o.Vector == "" {
		o.Vector = "ssd=2"
	}
	if o.Stripes == 0 {
		o.Stripes = 8
	}
	if len(o.Experiments) == 0 {
		o.Experiments = []string{"next", "lease", "append", "failover"}
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	if len(o.Depths) == 0 {
		o.Depths = []int{1, 8}
	}
	if o.EntryBytes == 0 {
		o.EntryBytes = 4096
	}
	if len(o.LeaseSizes) == 0 {
		o.LeaseSizes = []int{1, 10, 100, 1000, 10000}
	}
	if o.AppendLease == 0 {
		o.AppendLease = 64
	}
	if o.AppendLeaseHold == 0 {
		o.AppendLeaseHold = 20 * time.Millisecond
	}
	if o.FailoverRounds == 0 {
		o.FailoverRounds = 3
	}
}

// Validate rejects impossible options with a clear error.
func (o *Options) Validate() error {
	if o.Nodes < 1 || o.Nodes > 16 {
		return fmt.Errorf("bench log: --nodes %d outside [1, 16]", o.Nodes)
	}
	if o.Duration < time.Second || o.Duration > time.Hour {
		return fmt.Errorf("bench log: --duration %s outside [1s, 1h]", o.Duration)
	}
	if o.Clients < 1 || o.Clients > 1024 {
		return fmt.Errorf("bench log: --clients %d outside [1, 1024]", o.Clients)
	}
	if o.EntryBytes < 1 || o.EntryBytes > 1<<20 {
		return fmt.Errorf("bench log: --entry-bytes %d outside [1, 1 MiB]", o.EntryBytes)
	}
	for _, d := range o.Depths {
		if d < 1 || d > 256 {
			return fmt.Errorf("bench log: depth %d outside [1, 256]", d)
		}
	}
	for _, n := range o.LeaseSizes {
		if n < 1 || n > 1<<20 {
			return fmt.Errorf("bench log: lease size %d outside [1, 1048576]", n)
		}
	}
	for _, e := range o.Experiments {
		switch e {
		case "next", "lease", "append", "failover":
		default:
			return fmt.Errorf("bench log: unknown experiment %q (next, lease, append, failover)", e)
		}
	}
	if o.FailoverRounds < 0 || o.FailoverRounds > 50 {
		return fmt.Errorf("bench log: --failover-rounds %d outside [0, 50]", o.FailoverRounds)
	}
	return nil
}

func (o Options) String() string {
	return fmt.Sprintf("nodes=%d emulate=%v vector=%s stripes=%d duration=%s clients=%d depths=%v entry=%dB lease_sizes=%v append_lease=%d/%s failover_rounds=%d experiments=%s",
		o.Nodes, o.Emulate, o.Vector, o.Stripes, o.Duration, o.Clients, o.Depths, o.EntryBytes, o.LeaseSizes, o.AppendLease, o.AppendLeaseHold,
		o.FailoverRounds, strings.Join(o.Experiments, ","))
}

// Row is one measured point.
type Row struct {
	Experiment string
	Variant    string // e.g. "clients=2", "lease=1000", "lease off"
	Clients    int
	Depth      int
	Lease      int
	Ops        int64   // positions or appends
	Seconds    float64 // measured wall time
	PerSec     float64
	MBps       float64
	Latency    bench.LatencySummary
	Lag        *bench.LatencySummary // append: subscriber lag behind the ack
	ServerCPU  float64               // seconds, all nodes, during the point
	Errors     int64
	Note       string
}

// Result is a whole run.
type Result struct {
	Options Options
	Rows    []Row
	// Timeline of the failover experiment: appends per 100 ms and kills.
	Timeline []Sample
	Kills    []float64 // seconds into the timeline
	Resumes  []time.Duration
}

// Sample is appends completed in one 100 ms slot of the failover run.
type Sample struct {
	T       float64
	Appends int
}

// Run starts the cluster, runs the experiments and writes the outputs.
func Run(ctx context.Context, o Options, progress io.Writer) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "terrace-bench-log-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	base, err := devcluster.FreeBase(o.BasePort, 10*o.Nodes, 500)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "starting a %d-node cluster under %s (ports %d..) ...\n", o.Nodes, dir, base)
	cl, err := devcluster.Start(ctx, devcluster.Options{Binary: o.Binary, Dir: dir, Nodes: o.Nodes, BasePort: base,
		Emulate: o.Emulate, Devices: []string{"ssd:ssd0:8GiB", "hdd:hdd0:8GiB"}})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	r := &runner{o: o, cl: cl, out: progress, res: &Result{Options: o}}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	// Let membership settle so placement sees every node.
	time.Sleep(3 * time.Second)
	for _, e := range o.Experiments {
		var err error
		switch e {
		case "next":
			err = r.next(ctx)
		case "lease":
			err = r.lease(ctx)
		case "append":
			err = r.appends(ctx)
		case "failover":
			err = r.failover(ctx)
		}
		if err != nil {
			return r.res, fmt.Errorf("bench log: %s: %w", e, err)
		}
	}
	if err := writeOutputs(o.Out, r.res); err != nil {
		return r.res, err
	}
	return r.res, nil
}

type runner struct {
	o    Options
	cl   *devcluster.Cluster
	out  io.Writer
	res  *Result
	logN int
}

// rpcs lists the nodes' RPC addresses starting at node i.
func (r *runner) rpcs(i int) []string {
	var out []string
	for k := range r.cl.Nodes {
		out = append(out, r.cl.Nodes[(i+k)%len(r.cl.Nodes)].RPC)
	}
	return out
}

func (r *runner) newClient(i int) (*client.Client, error) {
	return client.New(client.Config{Endpoints: r.rpcs(i), NodeID: fmt.Sprintf("bench-%d", i), Secret: []byte(r.cl.Secret)})
}

// newLog creates a fresh log for one measurement.
func (r *runner) newLog(ctx context.Context, leasePositions int, hold time.Duration) (string, error) {
	c, err := r.newClient(0)
	if err != nil {
		return "", err
	}
	defer c.Close()
	r.logN++
	name := fmt.Sprintf("bench-%d", r.logN)
	if _, err := c.Create(ctx, name, client.CreateOptions{Vector: r.o.Vector, Stripes: r.o.Stripes,
		MaxLeasePositions: leasePositions, MaxLeaseHold: hold}); err != nil {
		return "", err
	}
	// Wait for the sequencer.
	l := c.Open(name, client.LogOptions{})
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := l.Tail(tctx); err != nil {
		return "", err
	}
	return name, nil
}

// deleteLog drops a measurement's log (nodes reclaim its space).
func (r *runner) deleteLog(ctx context.Context, name string) {
	c, err := r.newClient(0)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.Delete(ctx, name)
}

// serverCPU sums the servers' CPU seconds.
func (r *runner) serverCPU() float64 {
	var s float64
	for _, n := range r.cl.Nodes {
		if pid := n.PID(); pid > 0 {
			if p, err := bench.ReadProc(pid); err == nil {
				s += p.CPUSeconds
			}
		}
	}
	return s
}

func (r *runner) add(row Row) {
	r.res.Rows = append(r.res.Rows, row)
	lat := fmt.Sprintf("p50 %.3f ms, p99 %.3f ms", row.Latency.P50Ms, row.Latency.P99Ms)
	extra := ""
	if row.Lag != nil {
		extra = fmt.Sprintf(", subscriber lag p50 %.1f ms p99 %.1f ms", row.Lag.P50Ms, row.Lag.P99Ms)
	}
	fmt.Fprintf(r.out, "  %-8s %-16s %10.0f /s  %s%s  (%d errors)\n", row.Experiment, row.Variant, row.PerSec, lat, extra, row.Errors)
}

// outPath is a file in the output directory.
func outPath(dir, name string) string { return filepath.Join(dir, name) }
