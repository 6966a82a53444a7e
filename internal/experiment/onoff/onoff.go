package onoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/server"
)

// Options configure the experiment. Zero values mean defaults sized for a
// 2-core machine (about 3 minutes per mode).
type Options struct {
	Binary   string
	Dir      string
	Out      string
	BasePort int
	Nodes    int
	// SSDBytes and HDDBytes size each node's devices.
	SSDBytes, HDDBytes int64
	// HDDProfile, when set, is the hdds' emulation profile instead of the
	// tier's own (device.LookupProfile: "hdd/6" is an hdd with a sixth of
	// the bandwidth). The experiment scales data and ssd down a few
	// hundred times from the paper's; slowing the hdd in step makes
	// background moves take the share of its time they would take there.
	HDDProfile string
	// EgroupBytes is the servers' egroup size (both modes). Default: 1/48
	// of the ssd rounded down to a power of two, at least 256 KiB (1 MiB
	// for the default 48 MiB ssd). The Curator moves whole egroups, so on
	// a scaled-down ssd the production 16 MiB would be a third of the
	// device and open egroups alone could fill it.
	EgroupBytes int64
	// DataBytes is the data section's size (prefill); default 1.5× the
	// cluster's ssd capacity, so the ssd tier comes under pressure.
	DataBytes int64
	// Exec is the execution phase's length.
	Exec        time.Duration
	Concurrency int
	// Rate, when > 0, makes the execution phase open-loop as in the
	// paper's workloads (Appendix C, Table 4: each workload has a fixed
	// IOPS): operations arrive at Rate per second (Poisson) whatever the
	// cluster's speed, up to MaxInFlight at once, and latency is measured
	// from the arrival, so queueing shows. Rate 0 runs Concurrency
	// closed-loop clients instead, where latency is clients/throughput and
	// a CPU-bound machine hides device differences.
	Rate        float64
	MaxInFlight int
	// Warmup is the first part of the execution phase whose latencies are
	// left out of the measured means (both modes alike), so they describe
	// the steady state the paper's hours-long runs report rather than the
	// layout prefill left behind. The whole-execution mean is reported too.
	Warmup time.Duration
	// HotFraction of the data section receives HotShare of the accesses.
	HotFraction, HotShare float64
	Seed                  uint64
	// Modes to run: "on", "off", or the Curator on with one tiering
	// scheduler, "threshold" or "qlearning" (docs/qlearning.md).
	Modes []string
	// Workload is "oltp" (default: reads, overwrites and log appends) or
	// "oltp-skewed" (Curator Appendix D: reads only on the data section,
	// HotShare of them to the hottest HotFraction, plus 1 % log appends).
	Workload string
	Emulate  bool
	Log      func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.BasePort == 0 {
		o.BasePort = 19500
	}
	if o.SSDBytes == 0 {
		o.SSDBytes = 48 << 20
	}
	if o.HDDBytes == 0 {
		o.HDDBytes = 1 << 30
	}
	if o.EgroupBytes == 0 {
		o.EgroupBytes = 256 << 10
		for o.EgroupBytes*2 <= o.SSDBytes/48 {
			o.EgroupBytes *= 2
		}
	}
	if o.DataBytes == 0 {
		o.DataBytes = int64(float64(o.SSDBytes*int64(o.Nodes)) * 0.75)
	}
	if o.Exec == 0 {
		o.Exec = 60 * time.Second
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 256
	}
	if o.HotFraction == 0 {
		o.HotFraction = 0.1
	}
	if o.HotShare == 0 {
		o.HotShare = 0.9
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if len(o.Modes) == 0 {
		o.Modes = []string{"on", "off"}
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Validate rejects options that cannot describe a run (after defaults).
func (o *Options) Validate() error {
	switch {
	case o.Nodes < 2:
		return fmt.Errorf("onoff: %d nodes; the experiment needs at least 2 (vector any=2)", o.Nodes)
	case o.SSDBytes <= 0 || o.HDDBytes <= 0:
		return fmt.Errorf("onoff: device sizes must be positive (ssd %d, hdd %d)", o.SSDBytes, o.HDDBytes)
	case o.Rate < 0:
		return fmt.Errorf("onoff: rate %.1f/s is negative", o.Rate)
	case o.MaxInFlight < 1:
		return fmt.Errorf("onoff: max in flight %d must be at least 1", o.MaxInFlight)
	case o.Exec <= 0:
		return fmt.Errorf("onoff: execution phase %s must be positive", o.Exec)
	case o.Warmup < 0 || o.Warmup >= o.Exec:
		return fmt.Errorf("onoff: warm-up %s must be at least 0 and shorter than the execution phase %s", o.Warmup, o.Exec)
	case o.HDDProfile != "" && !validProfile(o.HDDProfile):
		return fmt.Errorf("onoff: hdd emulation profile %q unknown (a built-in name such as hdd, or NAME/K for its bandwidth divided by K ≥ 1)", o.HDDProfile)
	case o.EgroupBytes < 256<<10:
		return fmt.Errorf("onoff: egroup size %d below 256 KiB", o.EgroupBytes)
	}
	for _, m := range o.Modes {
		if m != "on" && m != "off" && m != "threshold" && m != "qlearning" {
			return fmt.Errorf("onoff: unknown mode %q (want on, off, threshold, qlearning)", m)
		}
	}
	if o.Workload != "" && o.Workload != "oltp" && o.Workload != "oltp-skewed" {
		return fmt.Errorf("onoff: unknown workload %q (want oltp, oltp-skewed)", o.Workload)
	}
	return nil
}

// Sample is one point of the time series.
type Sample struct {
	Mode      string
	Phase     string
	T         float64 // seconds since the mode started
	SSDUsed   int64
	SSDCap    int64
	HDDUsed   int64
	HDDCap    int64
	Ops       int64
	MeanLatMs float64 // mean client latency over the sample interval
	// The Curator master's tiering scheduler as of the sample (empty when
	// no node answered as leader): the agent's last decision, its action
	// values in that state, and the hot egroups promotion-starved at the
	// last check. They show why the scheduler did or did not tier.
	Decision string
	AgentQ   string
	Starved  int
	Refused  int64
}

// ModeResult summarises one mode.
type ModeResult struct {
	Mode            string
	ExecOps         int64
	ExecErrors      int64
	ExecMeanLatMs   float64 // after the warm-up
	WholeMeanLatMs  float64 // the whole execution phase
	ExecP99LatMs    float64
	ExecReadLatMs   float64
	ExecWriteLatMs  float64
	PeakSSDUse      float64
	EndSSDUse       float64
	UsedAfterPrefil int64
	UsedBeforeDest  int64
	UsedAfterDest   int64
	Reclaimed       int64
	// Tiering work of the jobs that started during the execution phase
	// (from the Curator's history): replicas moved up and down, bytes
	// moved, and the tiering runs the scheduler started, of them those
	// forced by promotion starvation.
	ExecUp, ExecDown int
	ExecMovedBytes   int64
	ExecRuns         int
	ExecStarvedRuns  int
}

// Result is the whole experiment.
type Result struct {
	Samples []Sample
	Modes   []ModeResult
}

// object sizes: 90 % 8 KiB, 10 % 32 KiB (Appendix C data section).
func objSize(r *rand.Rand) int {
	if r.IntN(10) == 0 {
		return 32 << 10
	}
	return 8 << 10
}

func content(key string, n int, seed uint64) []byte { return Content(key, n, seed) }

// Content is the deterministic payload of key at size n for a seed, so a
// reader can verify what it gets back without keeping the bytes (the
// rebuild experiment shares it).
func Content(key string, n int, seed uint64) []byte {
	var h uint64 = seed
	for i := 0; i < len(key); i++ {
		h = h*1099511628211 + uint64(key[i])
	}
	r := rand.New(rand.NewPCG(h, seed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

type client struct {
	hc    *http.Client
	nodes []*devcluster.Node
	lat   latencies
}

type latencies struct {
	mu sync.Mutex
	// whole holds the execution phase's latencies (ms); all, reads and
	// writes only those after the warm-up.
	whole   []float64
	measure bool
	all     []float64
	// reads and writes split the execution phase's latencies by kind
	// (data-section GETs; data and log PUTs).
	reads, writes []float64
	win           []float64
	on            bool
	ops           atomic.Int64
	err           atomic.Int64
}

func (l *latencies) add(d time.Duration, read bool) {
	ms := float64(d) / 1e6
	l.mu.Lock()
	l.win = append(l.win, ms)
	if l.on {
		l.whole = append(l.whole, ms)
	}
	if l.on && l.measure {
		l.all = append(l.all, ms)
		if read {
			l.reads = append(l.reads, ms)
		} else {
			l.writes = append(l.writes, ms)
		}
	}
	l.mu.Unlock()
	l.ops.Add(1)
}

func (l *latencies) drainWindow() (float64, int) {
	l.mu.Lock()
	w := l.win
	l.win = nil
	l.mu.Unlock()
	if len(w) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range w {
		s += x
	}
	return s / float64(len(w)), len(w)
}

func (c *client) node(r *rand.Rand) *devcluster.Node { return c.nodes[r.IntN(len(c.nodes))] }

func (c *client) do(method, url string, body []byte) ([]byte, error) {
	return c.doAt(time.Now(), method, url, body)
}

// doAt sends one request and records its latency from start, which is the
// operation's arrival time in open-loop runs (it may be earlier than now
// when the operation waited for a free slot).
func (c *client) doAt(start time.Time, method, url string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.lat.err.Add(1)
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		c.lat.err.Add(1)
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	c.lat.add(time.Since(start), method == "GET")
	return b, nil
}

func (c *client) put(r *rand.Rand, key string, n int, seed uint64) error {
	return c.putAt(time.Now(), r, key, n, seed)
}

func (c *client) putAt(start time.Time, r *rand.Rand, key string, n int, seed uint64) error {
	_, err := c.doAt(start, "PUT", "http://"+c.node(r).Admin+"/v1/data/exp/"+key, content(key, n, seed))
	return err
}

func (c *client) getAt(start time.Time, r *rand.Rand, key string) error {
	_, err := c.doAt(start, "GET", "http://"+c.node(r).Admin+"/v1/data/exp/"+key, nil)
	return err
}

// tierUse reads per-tier used and capacity bytes from the cluster view.
// tieringSample fills s's scheduler fields from the node that answers as
// the Curator leader (errors leave them empty: a sample is never lost to
// a status read).
func tieringSample(hc *http.Client, nodes []*devcluster.Node, s *Sample) {
	for _, n := range nodes {
		resp, err := hc.Get("http://" + n.Admin + "/v1/curator/status")
		if err != nil {
			continue
		}
		var st curator.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || !st.Leader || st.Tiering == nil {
			continue
		}
		s.Starved, s.Refused = st.Tiering.Starved, st.Tiering.PromotionsRefused
		if d := st.Tiering.Agent; d != nil {
			s.Decision = d.Name
			switch {
			case d.Held:
				s.Decision += " (held)"
			case d.ForcedBy != "":
				s.Decision += " (forced: " + d.ForcedBy + ")"
			case d.Explored:
				s.Decision += " (explored)"
			}
			q := make([]string, len(d.Q))
			for i, v := range d.Q {
				q[i] = fmt.Sprintf("%.2f", v)
			}
			s.AgentQ = strings.Join(q, " ")
		}
		return
	}
}

func tierUse(hc *http.Client, admin string) (ssdUsed, ssdCap, hddUsed, hddCap int64, err error) {
	resp, err := hc.Get("http://" + admin + "/v1/status")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var st server.Status
	if err = json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Cluster == nil {
		if err == nil {
			err = fmt.Errorf("no cluster view")
		}
		return
	}
	for _, n := range st.Cluster.Nodes {
		used := map[string]int64{}
		if n.Heartbeat != nil {
			for _, d := range n.Heartbeat.Devices {
				used[string(d.ID)] = d.Used
			}
		}
		for _, d := range n.Devices {
			switch d.Tier {
			case "ssd":
				ssdUsed += used[string(d.ID)]
				ssdCap += d.CapacityBytes
			case "hdd":
				hddUsed += used[string(d.ID)]
				hddCap += d.CapacityBytes
			}
		}
	}
	return
}

// validProfile reports whether name is an emulation profile.
func validProfile(name string) bool {
	_, ok := device.LookupProfile(name)
	return ok
}

// hddSpec is each node's hdd device, with its emulation profile when set.
func hddSpec(o Options) string {
	spec := fmt.Sprintf("hdd:hdd0:%d", o.HDDBytes)
	if o.HDDProfile != "" {
		spec += ":" + o.HDDProfile
	}
	return spec
}

// curatorConfig is the YAML for each mode. ON uses short schedules so a
// few minutes show the steady state the paper reaches in hours.
func curatorConfig(mode string, egroupBytes int64) string {
	eg := fmt.Sprintf("egroup_max_bytes: %d\n", egroupBytes)
	if mode == "off" {
		return eg + "curator:\n  disabled: true\n"
	}
	if mode == "threshold" || mode == "qlearning" {
		eg += "curator:\n  tiering_scheduler: " + mode + "\n" + curatorSchedules
		return eg
	}
	return eg + "curator:\n" + curatorSchedules
}

// curatorSchedules are the short schedules of every Curator-on mode.
const curatorSchedules = `  partial_every: 5s
  full_every: 15s
  garbage_grace: 3s
  tier_check_interval: 3s
  hot_window: 1m
  promote_reads: 10
  move_mbps: 100
  scrub: false
  job_time_limit: 5s
`

// Run runs every mode and writes results under o.Out.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	res := &Result{}
	for i, mode := range o.Modes {
		mr, samples, err := runMode(ctx, o, mode, o.BasePort+i*100)
		if err != nil {
			return res, fmt.Errorf("onoff: mode %s: %w", mode, err)
		}
		res.Modes = append(res.Modes, mr)
		res.Samples = append(res.Samples, samples...)
	}
	if err := writeOutputs(o, res); err != nil {
		return res, err
	}
	return res, nil
}

func runMode(ctx context.Context, o Options, mode string, port int) (ModeResult, []Sample, error) {
	mr := ModeResult{Mode: mode}
	dir := filepath.Join(o.Dir, mode)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mr, nil, err
	}
	cfgPath := filepath.Join(dir, "terrace.yaml")
	if err := os.WriteFile(cfgPath, []byte(curatorConfig(mode, o.EgroupBytes)), 0o644); err != nil {
		return mr, nil, err
	}
	cl, err := devcluster.Start(ctx, devcluster.Options{
		Binary: o.Binary, Dir: filepath.Join(dir, "cluster"), Nodes: o.Nodes, BasePort: port, Emulate: o.Emulate,
		DefaultVector: "any=2",
		Devices:       []string{fmt.Sprintf("ssd:ssd0:%d", o.SSDBytes), hddSpec(o)},
		ExtraArgs:     []string{"--config", cfgPath},
	})
	if err != nil {
		return mr, nil, err
	}
	defer func() { cl.Stop(); os.RemoveAll(dir) }()
	hc := devcluster.AdminClient(60 * time.Second)
	c := &client{hc: hc, nodes: cl.Nodes}
	if _, err := c.do("PUT", "http://"+cl.Nodes[0].Admin+"/v1/buckets/exp", nil); err != nil {
		return mr, nil, err
	}
	start := time.Now()
	var samples []Sample
	var phase atomic.Value
	phase.Store("prefill")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			su, sc, hu, hcap, err := tierUse(hc, cl.Nodes[0].Admin)
			if err != nil {
				continue
			}
			lat, n := c.lat.drainWindow()
			smp := Sample{Mode: mode, Phase: phase.Load().(string), T: time.Since(start).Seconds(),
				SSDUsed: su, SSDCap: sc, HDDUsed: hu, HDDCap: hcap, Ops: int64(n), MeanLatMs: lat}
			tieringSample(hc, cl.Nodes, &smp)
			samples = append(samples, smp)
		}
	}()
	stopped := false
	stopSampler := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopSampler()

	// Prefill: the data section.
	r := rand.New(rand.NewPCG(o.Seed, 11))
	var keys []string
	var sizes []int
	var total int64
	for total < o.DataBytes {
		n := objSize(r)
		keys = append(keys, fmt.Sprintf("data/%07d", len(keys)))
		sizes = append(sizes, n)
		total += int64(n)
	}
	o.Log("%s: prefill %d objects (%d MiB)", mode, len(keys), total>>20)
	if err := parallel(ctx, o.Concurrency, len(keys), func(w, i int, r *rand.Rand) error {
		return c.put(r, keys[i], sizes[i], o.Seed)
	}); err != nil {
		return mr, samples, fmt.Errorf("prefill: %w", err)
	}
	mr.UsedAfterPrefil = used(hc, cl.Nodes[0].Admin)

	// Execution: 50 % reads / 50 % overwrites on the data section, skewed
	// to a hot set, plus a log section of 32 KiB sequential writes.
	phase.Store("execute")
	c.lat.mu.Lock()
	c.lat.on = true
	c.lat.measure = o.Warmup <= 0
	c.lat.mu.Unlock()
	if o.Warmup > 0 {
		warm := time.AfterFunc(o.Warmup, func() {
			c.lat.mu.Lock()
			c.lat.measure = true
			c.lat.mu.Unlock()
		})
		defer warm.Stop()
	}
	o.Log("%s: execute for %s (the first %s is warm-up)", mode, o.Exec, o.Warmup)
	hot := max(1, int(float64(len(keys))*o.HotFraction))
	var logSeq atomic.Int64
	var gen atomic.Uint64
	// op runs one operation of the execution mix, timed from arrival.
	op := func(r *rand.Rand, arrival time.Time) {
		var i int
		if r.Float64() < o.HotShare {
			i = r.IntN(hot)
		} else {
			i = hot + r.IntN(max(1, len(keys)-hot))
		}
		i = min(i, len(keys)-1)
		x := r.IntN(10)
		if o.Workload == "oltp-skewed" {
			// Read-only data section; log appends are ~1 % of operations.
			x = 1 // a read (1..4 below)
			if r.IntN(100) == 0 {
				x = 0 // a log append
			}
		}
		switch {
		case x < 1: // log section
			n := logSeq.Add(1)
			_ = c.putAt(arrival, r, fmt.Sprintf("log/%08d", n), 32<<10, o.Seed)
		case x < 5:
			_ = c.getAt(arrival, r, keys[i])
		default:
			_ = c.putAt(arrival, r, keys[i], sizes[i], o.Seed+gen.Add(1))
		}
	}
	execFrom := time.Now()
	deadline := execFrom.Add(o.Exec)
	execStart := c.lat.ops.Load()
	errStart := c.lat.err.Load()
	if o.Rate > 0 {
		openLoop(ctx, o, deadline, op)
	} else {
		var ewg sync.WaitGroup
		for w := 0; w < o.Concurrency; w++ {
			ewg.Add(1)
			go func() {
				defer ewg.Done()
				r := rand.New(rand.NewPCG(o.Seed+uint64(w)*7919, 13))
				for time.Now().Before(deadline) && ctx.Err() == nil {
					op(r, time.Now())
				}
			}()
		}
		ewg.Wait()
	}
	execTo := time.Now()
	c.lat.mu.Lock()
	c.lat.on = false
	all := append([]float64(nil), c.lat.all...)
	mr.WholeMeanLatMs = mean(c.lat.whole)
	mr.ExecReadLatMs, mr.ExecWriteLatMs = mean(c.lat.reads), mean(c.lat.writes)
	c.lat.mu.Unlock()
	mr.ExecOps = c.lat.ops.Load() - execStart
	mr.ExecErrors = c.lat.err.Load() - errStart
	if len(all) > 0 {
		var s float64
		for _, x := range all {
			s += x
		}
		mr.ExecMeanLatMs = s / float64(len(all))
		sort.Float64s(all)
		mr.ExecP99LatMs = all[len(all)*99/100]
	}
	mr.UsedBeforeDest = used(hc, cl.Nodes[0].Admin)

	// Destroy: delete the workload's data, then give the Curator time.
	phase.Store("destroy")
	o.Log("%s: destroy", mode)
	nlog := int(logSeq.Load())
	all2 := append([]string(nil), keys...)
	for i := 1; i <= nlog; i++ {
		all2 = append(all2, fmt.Sprintf("log/%08d", i))
	}
	_ = parallel(ctx, o.Concurrency, len(all2), func(w, i int, r *rand.Rand) error {
		_, err := c.do("DELETE", "http://"+c.node(r).Admin+"/v1/data/exp/"+all2[i], nil)
		return err
	})
	if mode != "off" {
		// Let the schedules run: grace, a full scan (data removal), and
		// the next one (empty egroups).
		time.Sleep(5 * time.Second)
		for i := 0; i < 3; i++ {
			c.do("POST", "http://"+cl.Nodes[0].Admin+"/v1/curator/run?kind=full&wait=1", nil)
		}
	} else {
		time.Sleep(5 * time.Second)
	}
	time.Sleep(3 * time.Second) // a heartbeat carries the new usage
	mr.UsedAfterDest = used(hc, cl.Nodes[0].Admin)
	mr.Reclaimed = mr.UsedBeforeDest - mr.UsedAfterDest
	stopSampler()
	// Keep the Curator's job history next to the results.
	if h, err := c.do("GET", "http://"+cl.Nodes[0].Admin+"/v1/curator/history?n=1000", nil); err == nil {
		_ = os.WriteFile(filepath.Join(o.Out, "curator_history_"+mode+".json"), h, 0o644)
		execTiering(&mr, h, execFrom, execTo)
	}
	for _, s := range samples {
		if s.SSDCap > 0 {
			u := float64(s.SSDUsed) / float64(s.SSDCap)
			mr.PeakSSDUse = max(mr.PeakSSDUse, u)
			if s.Phase == "execute" {
				mr.EndSSDUse = u
			}
		}
	}
	return mr, samples, nil
}

// execTiering adds up the tiering work of the history's jobs that started
// in [from, to) (a history that does not parse adds nothing).
func execTiering(mr *ModeResult, history []byte, from, to time.Time) {
	var recs []struct {
		Trigger string         `json:"trigger"`
		Start   time.Time      `json:"start"`
		Done    map[string]int `json:"tasks_done"`
		Moved   int64          `json:"bytes_moved"`
	}
	if json.Unmarshal(history, &recs) != nil {
		return
	}
	for _, r := range recs {
		if r.Start.Before(from) || !r.Start.Before(to) {
			continue
		}
		mr.ExecUp += r.Done["tier-up"]
		mr.ExecDown += r.Done["tier-down"]
		mr.ExecMovedBytes += r.Moved
		if strings.HasPrefix(r.Trigger, "q-learning: run") || strings.HasPrefix(r.Trigger, "tier ") {
			mr.ExecRuns++
		}
		if strings.Contains(r.Trigger, "promotion-starved") {
			mr.ExecStarvedRuns++
		}
	}
}

// openLoop issues operations at o.Rate per second with exponential gaps
// (a Poisson arrival process) until deadline, each on its own goroutine
// slot, at most o.MaxInFlight at once. An arrival that finds every slot
// busy waits for one, and that wait counts in its latency: the workload
// does not slow down because the cluster did (no coordinated omission).
func openLoop(ctx context.Context, o Options, deadline time.Time, op func(r *rand.Rand, arrival time.Time)) {
	OpenLoop(ctx, o.Rate, o.MaxInFlight, o.Seed, deadline, op)
}

// OpenLoop is openLoop for other experiments (the rebuild experiment): rate
// operations per second, Poisson arrivals, at most maxInFlight at once,
// each op timed from its arrival; it returns when deadline has passed and
// every started op has finished.
func OpenLoop(ctx context.Context, rate float64, maxInFlight int, seed uint64, deadline time.Time, op func(r *rand.Rand, arrival time.Time)) {
	o := Options{Rate: rate, MaxInFlight: maxInFlight, Seed: seed}
	arrivals := rand.New(rand.NewPCG(o.Seed, 29))
	slots := make(chan struct{}, o.MaxInFlight)
	var wg sync.WaitGroup
	next := time.Now()
	for seq := uint64(0); ctx.Err() == nil; seq++ {
		next = next.Add(time.Duration(arrivals.ExpFloat64() / o.Rate * float64(time.Second)))
		if !next.Before(deadline) {
			break
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(arrival time.Time, seq uint64) {
			defer func() { <-slots; wg.Done() }()
			op(rand.New(rand.NewPCG(o.Seed+seq*7919, 13)), arrival)
		}(next, seq)
	}
	wg.Wait()
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func used(hc *http.Client, admin string) int64 {
	su, _, hu, _, err := tierUse(hc, admin)
	if err != nil {
		return -1
	}
	return su + hu
}

func parallel(ctx context.Context, workers, n int, fn func(w, i int, r *rand.Rand) error) error {
	return Parallel(ctx, workers, n, fn)
}

// Parallel runs fn for i in [0, n) on workers goroutines and returns the
// first error (the others still run).
func Parallel(ctx context.Context, workers, n int, fn func(w, i int, r *rand.Rand) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 17))
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(w, i, r); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
