package rebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/onoff"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

// Options configure the experiment. Zero values mean defaults sized for a
// 2-core machine (about 3 minutes).
type Options struct {
	Binary   string
	Dir      string // cluster working directory (removed afterwards)
	Out      string // results
	BasePort int
	Nodes    int
	// Devices per node, as tier:NAME:capacity (devcluster.Options).
	Devices []string
	Vector  string
	// EgroupBytes is the servers' egroup size (0: the server default).
	EgroupBytes int64
	Emulate     bool
	// DataBytes of ObjectBytes objects are preloaded with PreloadWorkers.
	DataBytes      int64
	ObjectBytes    int64
	PreloadWorkers int
	// Rate operations per second arrive (Poisson, open loop) at the entry
	// node, ReadFraction of them reads of preloaded objects, the rest
	// writes of new objects; at most MaxInFlight at once.
	Rate         float64
	ReadFraction float64
	MaxInFlight  int
	// Baseline is how long the load runs before the failure; Tail how long
	// it keeps running once every egroup is protected; MaxRebuild bounds
	// the wait for protection.
	Baseline, Tail, MaxRebuild time.Duration
	// FailNode is the victim node's index (default: the last node; never
	// the entry node, index 0); FailDevice the device's NAME (default: the
	// first of Devices).
	FailNode   int
	FailDevice string
	// PartialEvery, when > 0, sets the Curator's periodic partial scan
	// (default: the server's, hourly). The failure itself triggers a
	// partial scan at once and the Curator re-checks under-replication
	// within seconds, so the default is what an operator would run.
	PartialEvery time.Duration
	Seed         uint64
	Log          func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 4
	}
	if o.BasePort == 0 {
		o.BasePort = 19800
	}
	if len(o.Devices) == 0 {
		o.Devices = []string{"ssd:ssd0:1GiB", "ssd:ssd1:1GiB"}
	}
	if o.Vector == "" {
		o.Vector = "any=2"
	}
	if o.DataBytes == 0 {
		o.DataBytes = 400 << 20
	}
	if o.ObjectBytes == 0 {
		o.ObjectBytes = 256 << 10
	}
	if o.PreloadWorkers == 0 {
		o.PreloadWorkers = 8
	}
	if o.Rate == 0 {
		o.Rate = 50
	}
	if o.ReadFraction == 0 {
		o.ReadFraction = 0.8
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 256
	}
	if o.Baseline == 0 {
		o.Baseline = 40 * time.Second
	}
	if o.Tail == 0 {
		o.Tail = 30 * time.Second
	}
	if o.MaxRebuild == 0 {
		o.MaxRebuild = 10 * time.Minute
	}
	if o.FailNode == 0 {
		o.FailNode = o.Nodes - 1
	}
	if o.FailDevice == "" && len(o.Devices) > 0 {
		if parts := strings.Split(o.Devices[0], ":"); len(parts) == 3 {
			o.FailDevice = parts[1]
		}
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
		return fmt.Errorf("rebuild: vector %q: %w", o.Vector, err)
	}
	names := map[string]bool{}
	for _, d := range o.Devices {
		parts := strings.Split(d, ":")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return fmt.Errorf("rebuild: device %q: want tier:NAME:capacity", d)
		}
		names[parts[1]] = true
	}
	switch {
	case o.Nodes < 3 || o.Nodes > 16:
		return fmt.Errorf("rebuild: %d nodes; want 3..16 (an entry node, a victim and somewhere to re-replicate)", o.Nodes)
	case v.Total() < 2:
		return fmt.Errorf("rebuild: vector %s keeps one replica; a failure would lose data, not start a rebuild", o.Vector)
	case v.Total() >= o.Nodes:
		return fmt.Errorf("rebuild: vector %s needs more than %d nodes to be re-protected after a failure", o.Vector, o.Nodes)
	case o.FailNode < 1 || o.FailNode >= o.Nodes:
		return fmt.Errorf("rebuild: fail node index %d: want 1..%d (0 is the entry node the clients use)", o.FailNode, o.Nodes-1)
	case !names[o.FailDevice]:
		return fmt.Errorf("rebuild: fail device %q is not one of the devices %v", o.FailDevice, o.Devices)
	case o.DataBytes <= 0 || o.ObjectBytes <= 0 || o.ObjectBytes > 64<<20:
		return fmt.Errorf("rebuild: data %d and object size %d must be positive (objects at most 64 MiB)", o.DataBytes, o.ObjectBytes)
	case !(o.Rate > 0):
		return fmt.Errorf("rebuild: rate %v must be positive", o.Rate)
	case o.ReadFraction < 0 || o.ReadFraction > 1:
		return fmt.Errorf("rebuild: read fraction %v: want 0..1", o.ReadFraction)
	case o.MaxInFlight < 1 || o.PreloadWorkers < 1:
		return fmt.Errorf("rebuild: max in flight %d and preload workers %d must be at least 1", o.MaxInFlight, o.PreloadWorkers)
	case o.Baseline <= 0 || o.Tail < 0 || o.MaxRebuild <= 0 || o.PartialEvery < 0:
		return fmt.Errorf("rebuild: baseline %s and max rebuild %s must be positive, partial scan period %s and tail %s not negative",
			o.Baseline, o.MaxRebuild, o.PartialEvery, o.Tail)
	case o.EgroupBytes != 0 && o.EgroupBytes < 256<<10:
		return fmt.Errorf("rebuild: egroup size %d below 256 KiB", o.EgroupBytes)
	}
	return nil
}

// Verification is the end-of-run check of every acknowledged object.
type Verification struct {
	Objects int `json:"objects"`
	// UnderProtected counts extents with fewer good replicas on distinct
	// nodes (off the failed device) than the vector asks.
	UnderProtected int      `json:"under_protected_extents"`
	Lost           int      `json:"lost"`
	Corrupt        int      `json:"corrupt"`
	Examples       []string `json:"examples,omitempty"`
}

// Result is the whole experiment. Times are seconds since the load
// started (the end of the preload).
type Result struct {
	Options          Options             `json:"-"`
	EntryNode        string              `json:"entry_node"`
	FailedDevice     string              `json:"failed_device"`
	FailedDeviceUsed int64               `json:"failed_device_used_bytes"`
	CuratorMaster    string              `json:"curator_master"`
	Preloaded        int                 `json:"preloaded_objects"`
	PreloadBytes     int64               `json:"preload_bytes"`
	PreloadSeconds   float64             `json:"preload_seconds"`
	FailAt           float64             `json:"fail_at_s"`
	DetectedAt       float64             `json:"detected_at_s"`
	Protected        bool                `json:"protected"`
	ProtectedAt      float64             `json:"protected_at_s"`
	ConfirmedAt      float64             `json:"confirmed_at_s"`
	TimeToProtection float64             `json:"time_to_protection_s"`
	EndAt            float64             `json:"end_s"`
	BytesMoved       int64               `json:"bytes_re_replicated"`
	CopyFrom         float64             `json:"copy_from_s"`
	CopySeconds      float64             `json:"copy_seconds"`
	Copying          PhaseStats          `json:"-"`
	RecoverTasks     int                 `json:"recover_tasks"`
	Jobs             int                 `json:"jobs"`
	StaleTasks       int                 `json:"stale_tasks"`
	FailedTasks      int                 `json:"failed_tasks"`
	PeakURBytes      int64               `json:"peak_under_replicated_bytes"`
	PeakURGroups     int                 `json:"peak_under_replicated_egroups"`
	Phases           []PhaseStats        `json:"phases"`
	P99Ratio         float64             `json:"p99_rebuild_over_baseline"`
	ReadFailures     int                 `json:"failed_reads_of_acknowledged_data"`
	WriteFailures    int                 `json:"failed_writes"`
	Verify           Verification        `json:"verification"`
	Seconds          []Second            `json:"-"`
	Ops              []Op                `json:"-"`
	URPoints         []URPoint           `json:"-"`
	JobsAfterFailure []curator.JobRecord `json:"-"`
}

// curatorYAML is the servers' configuration: the default move rate,
// per-device limits and scan schedule (under test), no scrubbing (its
// reads would be a second background load), no full scan during the run.
func curatorYAML(o Options) string {
	s := ""
	if o.EgroupBytes > 0 {
		s = fmt.Sprintf("egroup_max_bytes: %d\n", o.EgroupBytes)
	}
	s += "curator:\n  full_every: 6h\n  scrub: false\n"
	if o.PartialEvery > 0 {
		s += fmt.Sprintf("  partial_every: %s\n", o.PartialEvery)
	}
	return s
}

// acked is the set of acknowledged objects and their sizes and payload
// seeds (a write of a new key).
type acked struct {
	mu   sync.Mutex
	keys []string
	size map[string]int64
	seed map[string]uint64
}

func (a *acked) add(key string, size int64, seed uint64) {
	a.mu.Lock()
	if _, ok := a.size[key]; !ok {
		a.keys = append(a.keys, key)
	}
	a.size[key], a.seed[key] = size, seed
	a.mu.Unlock()
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
	if err := os.WriteFile(cfg, []byte(curatorYAML(o)), 0o644); err != nil {
		return nil, err
	}
	o.Log("rebuild: starting %d nodes (devices %v, vector %s)", o.Nodes, o.Devices, o.Vector)
	cl, err := devcluster.Start(ctx, devcluster.Options{
		Binary: o.Binary, Dir: filepath.Join(o.Dir, "cluster"), Nodes: o.Nodes, BasePort: o.BasePort,
		Emulate: o.Emulate, DefaultVector: o.Vector, Devices: o.Devices,
		ExtraArgs: []string{"--config", cfg, "--fault-injection"},
	})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	res := &Result{Options: o, EntryNode: cl.Nodes[0].ID}
	r := &runner{o: o, cl: cl, hc: devcluster.AdminClient(60 * time.Second), res: res,
		entry: cl.Nodes[0], victim: cl.Nodes[o.FailNode],
		acks: &acked{size: map[string]int64{}, seed: map[string]uint64{}}}
	runErr := r.run(ctx)
	if r.loadStart.IsZero() {
		return res, runErr
	}
	r.finish()
	if err := writeOutputs(o, res); err != nil {
		return res, errors.Join(runErr, err)
	}
	return res, runErr
}

type runner struct {
	o             Options
	cl            *devcluster.Cluster
	hc            *http.Client
	res           *Result
	entry, victim *devcluster.Node
	acks          *acked
	loadStart     time.Time
	failTime      time.Time

	opMu sync.Mutex
	ops  []Op

	jobMu sync.Mutex
	jobs  map[string]curator.JobRecord
	prot  Protection
}

func (r *runner) url(n *devcluster.Node, path string) string { return "http://" + n.Admin + path }

// call sends one admin request and decodes a JSON answer into out (if
// not nil).
func (r *runner) call(ctx context.Context, method, u string, out any) error {
	return devcluster.CallAdmin(ctx, r.hc, method, u, nil, out)
}

func (r *runner) put(ctx context.Context, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", r.url(r.entry, "/v1/data/rebuild/"+key), bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("PUT %s: %d %s", key, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// get reads key through the entry node and checks its bytes.
func (r *runner) get(ctx context.Context, key string, size int64, seed uint64) error {
	req, err := http.NewRequestWithContext(ctx, "GET", r.url(r.entry, "/v1/data/rebuild/"+key), nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", key, resp.StatusCode, bytes.TrimSpace(b))
	}
	if !bytes.Equal(b, onoff.Content(key, int(size), seed)) {
		return fmt.Errorf("GET %s: %w (%d bytes)", key, errCorrupt, len(b))
	}
	return nil
}

var errCorrupt = errors.New("wrong bytes")

func (r *runner) run(ctx context.Context) error {
	o := r.o
	if err := r.call(ctx, "PUT", r.url(r.entry, "/v1/buckets/rebuild"), nil); err != nil {
		return err
	}
	// Preload.
	n := int((o.DataBytes + o.ObjectBytes - 1) / o.ObjectBytes)
	o.Log("rebuild: preload %d objects of %d KiB (%d MiB)", n, o.ObjectBytes>>10, int64(n)*o.ObjectBytes>>20)
	pstart := time.Now()
	var failedPreload atomic.Int64
	err := onoff.Parallel(ctx, o.PreloadWorkers, n, func(_, i int, _ *rand.Rand) error {
		key := fmt.Sprintf("pre/%07d", i)
		if err := r.put(ctx, key, onoff.Content(key, int(o.ObjectBytes), o.Seed)); err != nil {
			failedPreload.Add(1)
			return err
		}
		r.acks.add(key, o.ObjectBytes, o.Seed)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild: preload (%d of %d puts failed): %w", failedPreload.Load(), n, err)
	}
	r.res.Preloaded, r.res.PreloadBytes = n, int64(n)*o.ObjectBytes
	r.res.PreloadSeconds = time.Since(pstart).Seconds()
	o.Log("rebuild: preloaded in %.1fs", r.res.PreloadSeconds)
	preKeys := append([]string(nil), r.acks.keys...)

	// The victim device's ID (its use is read again just before the
	// failure, when heartbeats have caught up with the preload).
	devID, _, err := r.deviceUse(ctx)
	if err != nil {
		return err
	}
	r.res.FailedDevice = devID
	r.res.CuratorMaster = r.curatorMaster(ctx)

	// The load, from now until stopped.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	r.loadStart = time.Now()
	var newSeq atomic.Int64
	op := func(rng *rand.Rand, arrival time.Time) {
		octx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		rec := Op{T: arrival.Sub(r.loadStart).Seconds()}
		if rng.Float64() < o.ReadFraction {
			key := preKeys[rng.IntN(len(preKeys))]
			rec.Read = true
			if err := r.get(octx, key, o.ObjectBytes, o.Seed); err != nil {
				rec.Err = true
				o.Log("rebuild: read of acknowledged %s failed: %v", key, err)
			} else {
				rec.Bytes = o.ObjectBytes
			}
		} else {
			key := fmt.Sprintf("new/%07d", newSeq.Add(1))
			seed := o.Seed + 1
			if err := r.put(octx, key, onoff.Content(key, int(o.ObjectBytes), seed)); err != nil {
				rec.Err = true
			} else {
				rec.Bytes = o.ObjectBytes
				r.acks.add(key, o.ObjectBytes, seed)
			}
		}
		rec.LatMs = float64(time.Since(arrival)) / 1e6
		r.opMu.Lock()
		r.ops = append(r.ops, rec)
		r.opMu.Unlock()
	}
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		onoff.OpenLoop(loadCtx, o.Rate, o.MaxInFlight, o.Seed, time.Now().Add(24*time.Hour), op)
	}()
	stopAndWait := func() {
		stopLoad()
		<-loadDone
		r.res.EndAt = time.Since(r.loadStart).Seconds()
	}
	// Follow the Curator's jobs the whole time (the under-replicated
	// series and the protection rule come from them).
	r.jobs = map[string]curator.JobRecord{}
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		r.pollJobs(pollCtx)
	}()
	defer func() { stopPoll(); <-pollDone }()

	o.Log("rebuild: baseline load %.0f ops/s for %s", o.Rate, o.Baseline)
	if !sleep(ctx, o.Baseline) {
		stopAndWait()
		return ctx.Err()
	}

	if _, used, err := r.deviceUse(ctx); err == nil {
		r.res.FailedDeviceUsed = used
	}
	used := r.res.FailedDeviceUsed
	// The failure: every read and write of the device returns EIO, so
	// the first I/O that touches it marks it failed, as a dying disk.
	o.Log("rebuild: failing device %s (%d MiB used) on %s", devID, used>>20, r.victim.ID)
	r.failTime = time.Now()
	r.res.FailAt = r.failTime.Sub(r.loadStart).Seconds()
	q := url.Values{"device": {devID}, "read_err": {"1"}, "write_err": {"1"}}
	if err := r.call(ctx, "POST", r.url(r.victim, "/v1/debug/fault?"+q.Encode()), nil); err != nil {
		stopAndWait()
		return fmt.Errorf("rebuild: inject the failure: %w", err)
	}
	detected, err := r.waitFailed(ctx, devID, 60*time.Second)
	if err != nil {
		stopAndWait()
		return err
	}
	r.res.DetectedAt = detected.Sub(r.loadStart).Seconds()
	o.Log("rebuild: %s marked failed %.1fs after the injection", devID, detected.Sub(r.failTime).Seconds())

	// Wait for protection, then the tail.
	deadline := r.failTime.Add(o.MaxRebuild)
	for {
		r.jobMu.Lock()
		p := r.prot
		r.jobMu.Unlock()
		if p.Protected {
			o.Log("rebuild: fully protected %.1fs after the failure (%d MiB re-replicated); tail %s",
				p.At().Sub(r.failTime).Seconds(), p.Moved>>20, o.Tail)
			break
		}
		if time.Now().After(deadline) {
			stopAndWait()
			return fmt.Errorf("rebuild: not fully protected within %s of the failure (peak under-replicated %d bytes)", o.MaxRebuild, p.PeakURBytes)
		}
		if !sleep(ctx, time.Second) {
			stopAndWait()
			return ctx.Err()
		}
	}
	if !sleep(ctx, o.Tail) {
		stopAndWait()
		return ctx.Err()
	}
	stopAndWait()
	stopPoll()
	<-pollDone
	pollDone = closed()
	r.fetchJobs(ctx) // the last records
	o.Log("rebuild: load stopped; verifying %d acknowledged objects", len(r.acks.keys))
	r.res.Verify = r.verify(ctx, devID)
	return nil
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
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

// deviceUse finds the victim device's ID and used bytes in the cluster
// view.
func (r *runner) deviceUse(ctx context.Context) (string, int64, error) {
	var st server.Status
	if err := r.call(ctx, "GET", r.url(r.entry, "/v1/status"), &st); err != nil {
		return "", 0, err
	}
	if st.Cluster == nil {
		return "", 0, fmt.Errorf("rebuild: the entry node has no cluster view")
	}
	for _, n := range st.Cluster.Nodes {
		if string(n.ID) != r.victim.ID {
			continue
		}
		for _, d := range n.Devices {
			id := string(d.ID)
			if id != r.victim.ID+"/"+r.o.FailDevice && !strings.HasSuffix(id, "/"+r.o.FailDevice) && id != r.o.FailDevice {
				continue
			}
			var used int64
			if n.Heartbeat != nil {
				for _, h := range n.Heartbeat.Devices {
					if h.ID == d.ID {
						used = h.Used
					}
				}
			}
			return id, used, nil
		}
	}
	return "", 0, fmt.Errorf("rebuild: no device %q on node %s in the cluster view", r.o.FailDevice, r.victim.ID)
}

func (r *runner) curatorMaster(ctx context.Context) string {
	for _, n := range r.cl.Nodes {
		var st curator.Status
		if err := r.call(ctx, "GET", r.url(n, "/v1/curator/status"), &st); err == nil && st.Leader {
			return n.ID
		}
	}
	return ""
}

// waitFailed polls the victim until the device reports failed.
func (r *runner) waitFailed(ctx context.Context, devID string, bound time.Duration) (time.Time, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		var st []server.FaultState
		if err := r.call(ctx, "GET", r.url(r.victim, "/v1/debug/fault"), &st); err == nil {
			for _, d := range st {
				if d.Device == devID && d.Failed {
					return time.Now(), nil
				}
			}
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return time.Time{}, ctx.Err()
		}
	}
	return time.Time{}, fmt.Errorf("rebuild: device %s not failed %s after the injected EIO (no I/O reached it)", devID, bound)
}

// pollJobs reads the Curator's job history every second.
func (r *runner) pollJobs(ctx context.Context) {
	for sleep(ctx, time.Second) {
		r.fetchJobs(ctx)
	}
}

func (r *runner) fetchJobs(ctx context.Context) {
	var h []curator.JobRecord
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.call(cctx, "GET", r.url(r.entry, "/v1/curator/history?n=50"), &h); err != nil {
		return
	}
	r.jobMu.Lock()
	defer r.jobMu.Unlock()
	for _, j := range h {
		if !j.End.IsZero() {
			r.jobs[j.ID] = j
		}
	}
	if !r.failTime.IsZero() {
		all := make([]curator.JobRecord, 0, len(r.jobs))
		for _, j := range r.jobs {
			all = append(all, j)
		}
		r.prot = ProtectionAfter(all, r.failTime)
	}
}

// verify checks every acknowledged object: each extent has the vector's
// number of good replicas on distinct nodes, none on the failed device,
// and the bytes read back intact.
func (r *runner) verify(ctx context.Context, devID string) Verification {
	want, _ := model.ParseVector(r.o.Vector)
	keys := append([]string(nil), r.acks.keys...)
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
		r.acks.mu.Lock()
		size, seed := r.acks.size[key], r.acks.seed[key]
		r.acks.mu.Unlock()
		var loc object.Location
		lerr := r.call(ctx, "GET", r.url(r.entry, "/v1/object/locate?bucket=rebuild&key="+url.QueryEscape(key)), &loc)
		gerr := r.get(ctx, key, size, seed)
		mu.Lock()
		defer mu.Unlock()
		if lerr != nil {
			v.Lost++
			note("locate %s: %v", key, lerr)
			return nil
		}
		for _, x := range loc.Extents {
			nodes := map[model.NodeID]bool{}
			for _, rep := range x.Replicas {
				if !rep.Bad && string(rep.Device) != devID {
					nodes[rep.Node] = true
				}
			}
			if len(nodes) < want.Total() {
				v.UnderProtected++
				note("%s egroup %d: replicas %+v", key, x.Egroup, x.Replicas)
			}
		}
		switch {
		case errors.Is(gerr, errCorrupt):
			v.Corrupt++
			note("%v", gerr)
		case gerr != nil:
			v.Lost++
			note("%v", gerr)
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
	r.opMu.Unlock()
	r.jobMu.Lock()
	p := r.prot
	for _, j := range r.jobs {
		res.URPoints = append(res.URPoints, URPoints([]curator.JobRecord{j}, r.loadStart)...)
		if !r.failTime.IsZero() && !j.Start.Before(r.failTime) {
			res.JobsAfterFailure = append(res.JobsAfterFailure, j)
		}
	}
	r.jobMu.Unlock()
	if res.EndAt == 0 {
		res.EndAt = time.Since(r.loadStart).Seconds()
	}
	protectedAt := -1.0
	if p.Protected {
		res.Protected = true
		protectedAt = p.At().Sub(r.loadStart).Seconds()
		res.ProtectedAt = protectedAt
		res.ConfirmedAt = p.Quiet.Start.Sub(r.loadStart).Seconds()
		res.TimeToProtection = protectedAt - res.FailAt
	}
	res.BytesMoved, res.RecoverTasks, res.Jobs = p.Moved, p.Recovered, p.Jobs
	if !p.FirstCopy.IsZero() {
		res.CopyFrom, res.CopySeconds = p.FirstCopy.Sub(r.loadStart).Seconds(), p.CopyTime.Seconds()
		res.Copying = WindowStats("copying", res.Ops, res.CopyFrom, p.LastCopy.Sub(r.loadStart).Seconds())
	}
	res.StaleTasks, res.FailedTasks = p.Stale, p.Failed
	res.PeakURBytes, res.PeakURGroups = p.PeakURBytes, p.PeakURGroups
	failAt := res.FailAt
	if r.failTime.IsZero() {
		failAt = res.EndAt
	}
	res.Phases = SplitPhases(res.Ops, failAt, protectedAt, res.EndAt)
	res.P99Ratio = res.Phases[1].P99Ms / res.Phases[0].P99Ms
	for _, ps := range res.Phases {
		res.ReadFailures += ps.ReadErrors
		res.WriteFailures += ps.WriteErrors
	}
	res.Seconds = PerSecond(res.Ops, res.URPoints, failAt, protectedAt, res.EndAt)
}
