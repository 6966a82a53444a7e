package scanbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/server"
)

// Options configure the measurement. Zero values are defaults.
type Options struct {
	Binary   string
	Dir      string // cluster working directories (removed afterwards)
	BasePort int
	// Sizes are the cluster sizes measured (default 1, 3, 5).
	Sizes []int
	// Egroups synthetic egroup records are loaded; AccessFraction of them
	// get an access record too (as egroups that were read).
	Egroups        int
	AccessFraction float64
	// Runs scans are timed per mode (the median is reported).
	Runs int
	// Full times full scans: each egroup also gets Extents extent
	// records, each referenced by one object record in one of four
	// buckets (default: partial scans of the egroup and access maps).
	Full    bool
	Extents int
	Seed    uint64
	Log     func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1, 3, 5}
	}
	if o.BasePort == 0 {
		o.BasePort = 21000
	}
	if o.Egroups == 0 {
		o.Egroups = 100_000
	}
	if o.AccessFraction == 0 {
		o.AccessFraction = 0.5
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Full && o.Extents == 0 {
		o.Extents = 4
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Validate rejects options that cannot describe a run.
func (o *Options) Validate() error {
	switch {
	case o.Binary == "" || o.Dir == "":
		return fmt.Errorf("scanbench: binary and dir are required")
	case o.Egroups < 1 || o.Egroups > 20_000_000:
		return fmt.Errorf("scanbench: %d egroups: want 1..20,000,000", o.Egroups)
	case o.AccessFraction < 0 || o.AccessFraction > 1:
		return fmt.Errorf("scanbench: access fraction %v: want 0..1", o.AccessFraction)
	case o.Runs < 1 || o.Runs > 100:
		return fmt.Errorf("scanbench: %d runs: want 1..100", o.Runs)
	case o.Extents < 0 || o.Extents > 16 || o.Extents > 0 && !o.Full:
		return fmt.Errorf("scanbench: %d extents per egroup: want 1..16, with a full scan", o.Extents)
	}
	for _, n := range o.Sizes {
		if n < 1 || n > 9 {
			return fmt.Errorf("scanbench: cluster of %d nodes: want 1..9", n)
		}
	}
	return nil
}

// Row is one cluster size and mode.
type Row struct {
	Nodes int    `json:"nodes"`
	Mode  string `json:"mode"` // "master alone" or "spread"
	// Seconds are the runs' job times (scan, join, decide; the scans
	// have nothing to execute), Median their median.
	Seconds []float64 `json:"seconds"`
	Median  float64   `json:"median_seconds"`
	// Records is what one scan read (egroup and access records).
	Records       int     `json:"records"`
	EgroupsPerSec float64 `json:"egroups_per_s"`
	RecordsPerSec float64 `json:"records_per_s"`
	// PerNode is the last run's map work per node.
	PerNode []curator.NodeScan `json:"per_node"`
	// CPU is each node process's CPU seconds per scan (user + system,
	// median over the runs), MasterCPU the master's, TotalCPU the sum.
	CPU       map[string]float64 `json:"cpu_seconds_per_scan"`
	MasterCPU float64            `json:"master_cpu_seconds_per_scan"`
	TotalCPU  float64            `json:"total_cpu_seconds_per_scan"`
}

// Result is the whole measurement.
type Result struct {
	Egroups int   `json:"egroups"`
	Full    bool  `json:"full"`
	Extents int   `json:"extents_per_egroup,omitempty"`
	Rows    []Row `json:"rows"`
}

// Run measures every cluster size in turn.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Egroups: o.Egroups, Full: o.Full, Extents: o.Extents}
	for _, n := range o.Sizes {
		rows, err := runSize(ctx, o, n)
		res.Rows = append(res.Rows, rows...)
		if err != nil {
			return res, fmt.Errorf("scanbench: %d nodes: %w", n, err)
		}
	}
	return res, nil
}

// serverConfig keeps the Curator from scanning or moving anything on its
// own: only the measured scans run, and they find nothing to do.
const serverConfig = `curator:
  partial_every: 24h
  full_every: 24h
  scrub: false
  tiering: false
planner:
  live_rules: ["off"]
`

func runSize(ctx context.Context, o Options, nodes int) ([]Row, error) {
	dir := filepath.Join(o.Dir, fmt.Sprintf("n%d", nodes))
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "terrace.yaml")
	if err := os.WriteFile(cfg, []byte(serverConfig), 0o644); err != nil {
		return nil, err
	}
	vector := "any=2"
	if nodes == 1 {
		vector = "any=1"
	}
	o.Log("scan: starting %d node(s)", nodes)
	dopts := devcluster.Options{Binary: o.Binary, Dir: filepath.Join(dir, "cluster"), Nodes: nodes, Members: min(nodes, 3),
		BasePort: o.BasePort, DefaultVector: vector, Devices: []string{"hdd:hdd0:8GiB"}, ExtraArgs: []string{"--config", cfg}}
	cl, err := devcluster.Start(ctx, dopts)
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	if err := cl.WaitViews(ctx); err != nil {
		return nil, err
	}
	r := &runner{o: o, cl: cl, hc: devcluster.AdminClient(5 * time.Minute)}
	devs, err := r.devices(ctx)
	if err != nil {
		return nil, err
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", dopts.Port(0, devcluster.PortEtcdClient))},
		DialTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer etcd.Close()
	start := time.Now()
	if err := Load(ctx, cluster.NewEtcdKV(etcd), o, devs, model.MustParseVector(vector)); err != nil {
		return nil, err
	}
	o.Log("scan: loaded %d egroup records into etcd in %s", o.Egroups, time.Since(start).Round(time.Millisecond))
	master, err := r.master(ctx)
	if err != nil {
		return nil, err
	}
	modes := []string{"master alone"}
	if nodes > 1 {
		modes = append(modes, "spread")
	}
	var rows []Row
	for _, mode := range modes {
		if err := r.setMode(ctx, master, mode); err != nil {
			return rows, err
		}
		row := Row{Nodes: nodes, Mode: mode, CPU: map[string]float64{}}
		cpu := map[string][]float64{}
		for i := 0; i < o.Runs+1; i++ {
			before, err := r.cpu()
			if err != nil {
				return rows, err
			}
			var rec curator.JobRecord
			kind := "partial"
			if o.Full {
				kind = "full"
			}
			if err := r.call(ctx, "POST", master, "/v1/curator/run?wait=1&kind="+kind, nil, &rec); err != nil {
				return rows, err
			}
			after, err := r.cpu()
			if err != nil {
				return rows, err
			}
			if i == 0 {
				continue // warm-up: caches, connections, the first assignment
			}
			for id, c := range after {
				cpu[id] = append(cpu[id], c-before[id])
			}
			if len(rec.Errors) > 0 {
				return rows, fmt.Errorf("scan job errors: %v", rec.Errors)
			}
			if want := mode == "spread"; want != spreadOver(rec.Partitions, nodes) {
				return rows, fmt.Errorf("%s: partitions %v", mode, rec.Partitions)
			}
			row.Seconds = append(row.Seconds, rec.End.Sub(rec.Start).Seconds())
			row.Records = rec.Records
			var st curator.Status
			if err := r.call(ctx, "GET", master, "/v1/curator/status", nil, &st); err != nil {
				return rows, err
			}
			row.PerNode = st.ScanNodes
		}
		row.Median = median(row.Seconds)
		for id, cs := range cpu {
			row.CPU[id] = median(cs)
			row.TotalCPU += row.CPU[id]
		}
		row.MasterCPU = row.CPU[master.ID]
		row.EgroupsPerSec = float64(o.Egroups) / row.Median
		row.RecordsPerSec = float64(row.Records) / row.Median
		o.Log("scan: %d node(s), %s: median %.2fs, %.0f egroup records/s, CPU per scan %.2fs on the master, %.2fs in all",
			nodes, mode, row.Median, row.EgroupsPerSec, row.MasterCPU, row.TotalCPU)
		rows = append(rows, row)
	}
	return rows, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpu reads every node process's CPU seconds so far.
func (r *runner) cpu() (map[string]float64, error) {
	out := map[string]float64{}
	for _, n := range r.cl.Nodes {
		s, err := bench.ReadProc(n.PID())
		if err != nil {
			return nil, err
		}
		out[n.ID] = s.CPUSeconds
	}
	return out, nil
}

// spreadOver reports whether every one of n nodes mapped a partition.
func spreadOver(parts map[string]string, n int) bool {
	seen := map[string]bool{}
	for _, who := range parts {
		if !strings.Contains(who, " ") { // "n1 (n2 failed: …)" is a fallback
			seen[who] = true
		}
	}
	return n > 1 && len(seen) == n
}

// idBase is the first synthetic egroup ID: far above what the servers'
// own sequence hands out in a run, so the two never meet.
const idBase = 1 << 32

// Load writes the synthetic records: sealed egroups of the vector on the
// cluster's real devices (on distinct nodes) with dense IDs, as the egroup
// sequence allocates them, a fraction with access records; for a full
// scan, o.Extents extent records per egroup tiling it, each referenced by
// one object in one of four buckets. Everything is written now, so it is
// younger than the garbage grace period: a full scan finds no garbage to
// remove or egroups to compact or truncate, and times the scan.
func Load(ctx context.Context, kv *cluster.EtcdKV, o Options, devs []model.Replica, v model.Vector) error {
	byNode := map[model.NodeID][]model.Replica{}
	var nodes []model.NodeID
	for _, d := range devs {
		if len(byNode[d.Node]) == 0 {
			nodes = append(nodes, d.Node)
		}
		byNode[d.Node] = append(byNode[d.Node], d)
	}
	slices.Sort(nodes)
	copies := min(v.Total(), len(nodes))
	now := time.Now().UnixNano()
	perTxn := 60 // two puts per egroup at most; etcd refuses more than 128 operations in one transaction
	if o.Full {
		perTxn = 120 / (2 + 2*o.Extents)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for first := 0; first < o.Egroups; first += perTxn {
		first := first
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(o.Seed, uint64(first)))
			var t meta.Txn
			for i := first; i < min(first+perTxn, o.Egroups); i++ {
				id := idBase + uint64(i) // dense, as the egroup sequence hands them out
				eg := meta.Egroup{State: meta.EgroupSealed, Size: 4 << 20, Vector: v, Mtime: now}
				k := rng.IntN(len(nodes))
				for c := 0; c < copies; c++ {
					ds := byNode[nodes[(k+c)%len(nodes)]]
					d := ds[rng.IntN(len(ds))]
					eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: d.Device, Node: d.Node, Tier: d.Tier})
				}
				t.Put(meta.EgroupKey(id), meta.Encode(eg))
				for j := range o.Extents {
					xid := idBase + uint64(i*o.Extents+j)
					xlen := eg.Size / int64(o.Extents)
					t.Put(meta.ExtentKey(xid), meta.Encode(meta.Extent{Egroup: id, Off: int64(j) * xlen, Len: xlen, Ctime: now}))
					t.Put(meta.ObjectKey(fmt.Sprintf("bench-%d", xid%4), fmt.Sprintf("obj/%016x", xid)),
						meta.Encode(meta.Object{Size: xlen, ETag: "x", Mtime: now, Vector: v, Extents: []meta.ExtentRef{{ID: xid, Len: xlen}}}))
				}
				if rng.Float64() < o.AccessFraction {
					t.Put(meta.AccessKey(id), meta.Encode(meta.Access{Atime: now, Reads: int64(1 + rng.IntN(50))}))
				}
			}
			_, err := kv.Commit(ctx, &t)
			return err
		})
	}
	return g.Wait()
}

type runner struct {
	o  Options
	cl *devcluster.Cluster
	hc *http.Client
}

// devices lists every node's devices from its status.
func (r *runner) devices(ctx context.Context) ([]model.Replica, error) {
	var out []model.Replica
	for _, n := range r.cl.Nodes {
		var st server.Status
		if err := r.call(ctx, "GET", n, "/v1/status", nil, &st); err != nil {
			return nil, err
		}
		for _, d := range st.Devices {
			out = append(out, model.Replica{Device: d.ID, Node: model.NodeID(n.ID), Tier: d.Tier})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no devices")
	}
	return out, nil
}

// master returns the Curator master.
func (r *runner) master(ctx context.Context) (*devcluster.Node, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range r.cl.Nodes {
			var st curator.Status
			if r.call(ctx, "GET", n, "/v1/curator/status", nil, &st) == nil && st.Leader {
				return n, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("no Curator master elected")
}

// setMode installs a balancer policy that keeps every partition on the
// master ("master alone") or removes it (the default spread).
func (r *runner) setMode(ctx context.Context, master *devcluster.Node, mode string) error {
	if mode == "spread" {
		err := r.call(ctx, "DELETE", master, "/v1/policies/scanbench-alone", nil, nil)
		if err != nil && !strings.Contains(err.Error(), "404") {
			return err
		}
		return nil
	}
	if len(r.cl.Nodes) == 1 {
		return nil
	}
	src := fmt.Sprintf("function when() return true end\nfunction where() return {%s = 1} end\n", master.ID)
	return r.call(ctx, "PUT", master, "/v1/policies/scanbench-alone?hook=balancer&author=bench", []byte(src), nil)
}

// call sends one signed admin request and decodes a JSON answer.
func (r *runner) call(ctx context.Context, method string, n *devcluster.Node, path string, body []byte, out any) error {
	return devcluster.CallAdmin(ctx, r.hc, method, "http://"+n.Admin+path, body, out)
}

// Table renders the result for a terminal and docs/perf.md.
func Table(res *Result) string {
	var b strings.Builder
	if res.Full {
		fmt.Fprintf(&b, "full scan of %d egroup records (+ access records, %d extent and %d object records)\n\n", res.Egroups, res.Egroups*res.Extents, res.Egroups*res.Extents)
	} else {
		fmt.Fprintf(&b, "partial scan of %d egroup records (+ access records)\n\n", res.Egroups)
	}
	b.WriteString("| nodes | map stage | scan (median s) | egroup records/s | records/s | CPU s per scan: master / all nodes | per node: records, records/s |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.Rows {
		var per []string
		for _, n := range r.PerNode {
			per = append(per, fmt.Sprintf("%s %d @ %.0f/s", n.Node, n.Records, n.RecordsPerS))
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f | %.0f | %.0f | %.2f / %.2f | %s |\n", r.Nodes, r.Mode, r.Median, r.EgroupsPerSec, r.RecordsPerSec,
			r.MasterCPU, r.TotalCPU, strings.Join(per, "; "))
	}
	return b.String()
}
