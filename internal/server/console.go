package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/console"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/model"
)

// The web console (internal/console) and what it needs from the node:
// the metric sampler, the Curator's job endpoints and the operations
// metrics Grafana and the alert rules in deploy/ read. Kept in this file
// so the node's wiring only gains a few lines.

// Console defaults.
const (
	DefaultConsoleSampleEvery = 5 * time.Second
	DefaultConsoleSamples     = 720 // an hour at the default interval
	// consoleTierReportEvery bounds how often the sampler scans metadata
	// for the tier report (hot/cold bytes); usage is sampled every tick.
	consoleTierReportEvery = 30 * time.Second
)

// openConsole builds the sampler and registers the operations metrics.
func (n *Node) openConsole() {
	every := n.Config.ConsoleSampleEvery
	if every <= 0 {
		every = DefaultConsoleSampleEvery
	}
	samples := n.Config.ConsoleSamples
	if samples <= 0 {
		samples = DefaultConsoleSamples
	}
	n.sampler = console.NewSampler(nodeSource{n}, every, min(consoleTierReportEvery, 6*every), samples)
	n.Reg.MustRegister(n.sampler.Collector(), n.Layer.LatencyCollector(), newOpsCollector(n))
}

// withConsole serves the console under /console/ (its own login and
// session cookie) next to the signed admin API, and sends / to it.
func (n *Node) withConsole(api, signed http.Handler) http.Handler {
	c, err := console.New(console.Options{Keys: nodeKeys{n}, API: api, Sampler: n.sampler, Node: n.Config.NodeID, Log: n.Log.With("component", "console")})
	if err != nil {
		// The console's assets are embedded: this is a build defect.
		panic(err)
	}
	outer := http.NewServeMux()
	outer.Handle(console.Prefix, c)
	outer.Handle("/console", c)
	outer.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
	outer.Handle("/", signed)
	return outer
}

// ConsoleURL is where a browser finds the console.
func (n *Node) ConsoleURL() string {
	scheme := "http"
	if n.Config.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + n.Config.AdminAddress + console.Prefix
}

// nodeKeys reads the node's admin keyrings at call time (AddAdminKeyring
// may add one after the console is built).
type nodeKeys struct{ n *Node }

func (k nodeKeys) Lookup(ak string) (adminauth.Key, bool) { return k.n.adminKeys.Lookup(ak) }

// nodeSource is what the console's sampler reads.
type nodeSource struct{ n *Node }

// Devices are every device of the cluster's topology snapshot (cached by
// the object layer), with this node's I/O counters on its own.
func (s nodeSource) Devices() []console.DeviceReading {
	local := map[model.DeviceID]device.Stats{}
	for _, d := range s.n.Devices {
		local[d.ID()] = d.Stats()
	}
	snap := s.n.Layer.Snapshot()
	out := make([]console.DeviceReading, 0, len(snap.Devices))
	for _, d := range snap.Devices {
		r := console.DeviceReading{ID: string(d.ID), Tier: string(d.Tier), CapacityBytes: d.CapacityBytes,
			UsedBytes: d.UsedBytes, Failed: d.State == model.DeviceFailed}
		if st, ok := local[d.ID]; ok {
			r.Local, r.ReadBytes, r.WriteBytes = true, st.ReadBytes, st.WriteBytes
			r.UsedBytes, r.Failed = st.UsedBytes, st.Failed // live, not the snapshot's
		}
		out = append(out, r)
	}
	return out
}

func (s nodeSource) Tiers(ctx context.Context) ([]console.TierReading, error) {
	rep, err := s.n.Layer.Report(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.TierReading, 0, len(rep.Tiers))
	for _, t := range rep.Tiers {
		out = append(out, console.TierReading{Tier: string(t.Tier), HotBytes: t.HotBytes, ColdBytes: t.ColdBytes})
	}
	return out, nil
}

func (s nodeSource) Latency() (time.Duration, time.Duration) { return s.n.Layer.ForegroundLatency() }

// JobList is the body of GET /v1/curator/jobs.
type JobList struct {
	Running []actuate.Progress `json:"running"`
	Recent  []actuate.Progress `json:"recent"`
}

// JobTask is one task of a job with its state.
type JobTask struct {
	actuate.Task
	State string `json:"state"`
}

// JobDetail is the body of GET /v1/curator/jobs/{id}: the job's progress
// and its tasks (every move with its reason), optionally filtered.
type JobDetail struct {
	actuate.Progress
	Tasks []JobTask `json:"task_list"`
	// Matched is how many tasks matched the filter (Tasks holds at most
	// max of them).
	Matched int `json:"matched"`
}

// jobRoutes adds the Curator's job endpoints:
//
//	GET /v1/curator/jobs[?n=N]                          running jobs and the N most recent
//	GET /v1/curator/jobs/{id}[?kind=K&state=S&max=M]    one job's progress and tasks
func (n *Node) jobRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/curator/jobs", n.handleJobs)
	mux.HandleFunc("GET /v1/curator/jobs/{id}", n.handleJob)
}

func (n *Node) handleJobs(w http.ResponseWriter, r *http.Request) {
	num, _ := strconv.Atoi(r.URL.Query().Get("n"))
	if num <= 0 || num > 200 {
		num = 20
	}
	out := JobList{Running: n.Curator.Runner().Running(), Recent: []actuate.Progress{}}
	if out.Running == nil {
		out.Running = []actuate.Progress{}
	}
	rec, err := n.Curator.Jobs().Recent(r.Context(), num, time.Now())
	if err != nil {
		writeErr(w, err)
		return
	}
	if rec != nil {
		out.Recent = rec
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleJob(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("max"))
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	id := r.PathValue("id")
	j, err := n.Curator.Jobs().Load(r.Context(), id)
	if err != nil {
		writeJSON(w, http.StatusNotFound, APIError{Error: err.Error(), Code: "NoSuchJob"})
		return
	}
	// A running job's in-memory progress is newer than its checkpoint.
	out := JobDetail{Progress: j.Progress(time.Now()), Tasks: []JobTask{}}
	for _, p := range n.Curator.Runner().Running() {
		if p.ID == id {
			out.Progress = p
		}
	}
	for i, t := range j.Tasks {
		st := j.State[i].String()
		if (q.Get("kind") != "" && string(t.Kind) != q.Get("kind")) || (q.Get("state") != "" && st != q.Get("state")) {
			continue
		}
		out.Matched++
		if len(out.Tasks) < limit {
			out.Tasks = append(out.Tasks, JobTask{Task: t, State: st})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// opsCollector exports what alerts and dashboards need beyond the
// per-package metrics: device failure and I/O counters, and the node
// states this node sees.
type opsCollector struct {
	n                           *Node
	failed, readBytes, wrBytes  *prometheus.Desc
	syncs, syncFlushes          *prometheus.Desc
	nodeUp, nodeDraining, nodes *prometheus.Desc
}

func newOpsCollector(n *Node) *opsCollector {
	l := []string{"device", "tier"}
	return &opsCollector{n: n,
		failed:    prometheus.NewDesc("terrace_device_failed", "1 when the device has failed (I/O errors or missing); its replicas are being recovered elsewhere.", l, nil),
		readBytes: prometheus.NewDesc("terrace_device_read_bytes_total", "Bytes read from the device.", l, nil),
		wrBytes:   prometheus.NewDesc("terrace_device_write_bytes_total", "Bytes written to the device.", l, nil),
		syncs:     prometheus.NewDesc("terrace_device_syncs_total", "Syncs writers asked of the device (one per durable append).", l, nil),
		syncFlushes: prometheus.NewDesc("terrace_device_sync_flushes_total",
			"Flushes (fsync of a file, or syncfs in device_sync: fs) that served the syncs: concurrent writers share one, so syncs / flushes is the sharing.", l, nil),
		nodeUp:       prometheus.NewDesc("terrace_node_up", "1 when this node sees the node's heartbeat (cluster membership; a single node reports itself).", []string{"node", "rack"}, nil),
		nodeDraining: prometheus.NewDesc("terrace_node_draining", "1 when the node is being drained.", []string{"node", "rack"}, nil),
		nodes:        prometheus.NewDesc("terrace_nodes", "Nodes registered in the cluster.", nil, nil),
	}
}

func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.failed, c.readBytes, c.wrBytes, c.syncs, c.syncFlushes, c.nodeUp, c.nodeDraining, c.nodes} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.n.Devices {
		s := d.Stats()
		lv := []string{string(s.ID), string(s.Tier)}
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, b2f(s.Failed), lv...)
		ch <- prometheus.MustNewConstMetric(c.readBytes, prometheus.CounterValue, float64(s.ReadBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.wrBytes, prometheus.CounterValue, float64(s.WriteBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(s.Syncs), lv...)
		ch <- prometheus.MustNewConstMetric(c.syncFlushes, prometheus.CounterValue, float64(s.SyncRounds), lv...)
	}
	if c.n.cluster == nil {
		ch <- prometheus.MustNewConstMetric(c.nodeUp, prometheus.GaugeValue, 1, c.n.Config.NodeID, c.n.Config.Rack)
		ch <- prometheus.MustNewConstMetric(c.nodeDraining, prometheus.GaugeValue, 0, c.n.Config.NodeID, c.n.Config.Rack)
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, 1)
		return
	}
	views := c.n.cluster.members.Nodes()
	for _, v := range views {
		ch <- prometheus.MustNewConstMetric(c.nodeUp, prometheus.GaugeValue, b2f(v.Up), string(v.ID), v.Rack)
		ch <- prometheus.MustNewConstMetric(c.nodeDraining, prometheus.GaugeValue, b2f(v.Draining), string(v.ID), v.Rack)
	}
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(len(views)))
}
