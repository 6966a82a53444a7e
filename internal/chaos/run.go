package chaos

import (
	"bytes"
	"context"
	"encoding/json"
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
	"time"

	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/chaos/history/checker"
	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

// Devices of every chaos node: a small ssd, so that tiering moves data
// down while the faults run, and two hdds with room for the garbage the
// load's overwrites and deletes leave until the Curator reclaims it (a
// 1,000-fault run with 2 GiB hdds filled them: docs/reliability.md).
var chaosDevices = []string{"ssd:ssd0:256MiB", "hdd:hdd0:4GiB", "hdd:hdd1:4GiB"}

// Finding is a problem seen on the cluster side (the checker reports what
// the history shows).
type Finding struct {
	Kind   string `json:"kind"` // crash, restart, vector, dangling, bitrot, settle
	Detail string `json:"detail"`
}

// Result is a run's outcome.
type Result struct {
	Seed      uint64              `json:"seed"`
	Options   string              `json:"options"`
	Schedule  []nemesis.Event     `json:"schedule"`
	Executed  []Executed          `json:"executed"`
	Report    *checker.Report     `json:"report"`
	Findings  []Finding           `json:"findings"`
	Degraded  []Availability      `json:"availability"`
	Objects   int                 `json:"objects"`
	Settle    time.Duration       `json:"settle_ns"`
	SettleJob int                 `json:"settle_jobs"`
	Rots      []rot               `json:"bitrot"`
	Took      time.Duration       `json:"took_ns"`
	Counts    map[string]int      `json:"events_by_kind"`
	Ops       int                 `json:"operations"`
	Files     map[string]string   `json:"files"`
	ByKind    map[string][3]int64 `json:"ops_by_kind"` // ok, failed, unknown
}

// Injected is the number of events that took effect.
func (r *Result) Injected() int {
	n := 0
	for _, e := range r.Executed {
		if e.Skipped == "" {
			n++
		}
	}
	return n
}

// Anomalies counts everything wrong besides lost writes and corrupt
// reads: non-linearizable keys, bad listings, resurrections, undecided
// keys and cluster-side findings.
func (r *Result) Anomalies() int {
	return r.Report.Anomalies.Count + r.Report.Resurrected.Count + len(r.Report.Undecided) + len(r.Findings)
}

// OK reports a clean run.
func (r *Result) OK() bool {
	return r.Report.Lost.Count == 0 && r.Report.Corrupt.Count == 0 && r.Anomalies() == 0
}

// Line is the summary's last line.
func (r *Result) Line() string {
	word := "ok"
	if !r.OK() {
		word = "FAIL"
	}
	return fmt.Sprintf("%s: %d events, %d operations, %d lost, %d corrupt, %d anomalies",
		word, r.Injected(), r.Ops, r.Report.Lost.Count, r.Report.Corrupt.Count, r.Anomalies())
}

type runner struct {
	o           Options
	start       time.Time
	cluster     *devcluster.Cluster
	topo        *topology
	hc          *http.Client
	deviceNames []string
	members     map[string]bool
	ld          *load

	mu       sync.Mutex
	findings []Finding
}

func (r *runner) progress(format string, args ...any) {
	r.o.Progress("%7.1fs "+format, append([]any{time.Since(r.start).Seconds()}, args...)...)
}

func (r *runner) finding(kind, format string, args ...any) {
	f := Finding{Kind: kind, Detail: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.findings = append(r.findings, f)
	r.mu.Unlock()
	r.progress("FINDING %s: %s", kind, f.Detail)
}

func (r *runner) isMember(n string) bool { return r.members[n] }

func (r *runner) node(id string) *devcluster.Node {
	for _, n := range r.cluster.Nodes {
		if n.ID == id {
			return n
		}
	}
	panic("chaos: no node " + id) // the schedule only names nodes of the cluster
}

// minority is the side of a partition without a majority of members.
func (r *runner) minority(sides [2][]string) []string {
	k := 0
	for _, n := range sides[0] {
		if r.members[n] {
			k++
		}
	}
	if 2*k > len(r.members) {
		return sides[1]
	}
	return sides[0]
}

// adminTimeout bounds an admin call whose context has no deadline.
const adminTimeout = 30 * time.Second

// admin calls a node's admin API (signed) and decodes a JSON answer.
func (r *runner) admin(ctx context.Context, n *devcluster.Node, method, path string, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, adminTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.Admin+path, nil)
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
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s on %s: HTTP %d: %s", method, path, n.ID, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// anyAdmin calls the first node (from a random start) that answers,
// giving each 10 s.
func (r *runner) anyAdmin(ctx context.Context, method, path string, out any) error {
	return r.anyAdminWithin(ctx, 10*time.Second, method, path, out)
}

// anyAdminWithin is anyAdmin with a per-node time limit (Curator jobs run
// for minutes).
func (r *runner) anyAdminWithin(ctx context.Context, limit time.Duration, method, path string, out any) error {
	var err error
	k := rand.IntN(len(r.cluster.Nodes))
	for i := range r.cluster.Nodes {
		n := r.cluster.Nodes[(k+i)%len(r.cluster.Nodes)]
		if n.PID() == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, limit)
		err = r.admin(cctx, n, method, path, out)
		cancel()
		if err == nil {
			return nil
		}
	}
	if err == nil {
		err = errors.New("no node running")
	}
	return err
}

func (r *runner) etcdLeader(ctx context.Context) (string, error) {
	var st server.Status
	if err := r.anyAdmin(ctx, "GET", "/v1/status", &st); err != nil {
		return "", err
	}
	if st.Cluster != nil {
		for _, m := range st.Cluster.Members {
			if m.Leader {
				return m.Name, nil
			}
		}
	}
	return "", errors.New("no etcd leader")
}

func (r *runner) curatorMaster(ctx context.Context) (string, error) {
	for _, n := range r.cluster.Nodes {
		if n.PID() == 0 {
			continue
		}
		var st struct {
			Leader bool `json:"leader"`
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.admin(cctx, n, "GET", "/v1/curator/status", &st)
		cancel()
		if err == nil && st.Leader {
			return n.ID, nil
		}
	}
	return "", errors.New("no Curator master")
}

// waitAllUp waits until every node sees every node up.
func (r *runner) waitAllUp(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, viewer := range r.cluster.Nodes {
		for {
			var st server.Status
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := r.admin(cctx, viewer, "GET", "/v1/status", &st)
			cancel()
			up := 0
			if err == nil && st.Cluster != nil {
				for _, nv := range st.Cluster.Nodes {
					if nv.Up {
						up++
					}
				}
			}
			if up == len(r.cluster.Nodes) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("chaos: %s sees %d of %d nodes up after %s (%v)", viewer.ID, up, len(r.cluster.Nodes), d, err)
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// chaosConfig is the nodes' YAML: small egroups (more of them to move),
// and a Curator that acts within the run: quick scans, a short
// stabilisation interval so that faults trigger re-replication, and a
// short garbage grace so that overwritten data is reclaimed under fire.
func chaosConfig(o *Options) string {
	return fmt.Sprintf(`egroup_max_bytes: %d
probe_bytes: 262144
curator:
  partial_every: 20s
  full_every: 1m
  node_down_after: %s
  garbage_grace: 1m
  seal_idle: 5s
  job_time_limit: 2m
`, 4<<20, o.NodeDownAfter)
}

// Run performs a chaos run.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if o.Seed == 0 {
		o.Seed = rand.Uint64() >> 12 // short enough to type
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("chaos: %s is not empty; give a new directory", o.Dir)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{o: o, start: time.Now(), members: map[string]bool{}}
	res := &Result{Seed: o.Seed, Options: o.String(), Files: map[string]string{}}
	shape := nemesis.Cluster{}
	for i := 0; i < o.Nodes; i++ {
		shape.Nodes = append(shape.Nodes, nodeName(i))
		if i < o.Members {
			shape.Members = append(shape.Members, nodeName(i))
			r.members[nodeName(i)] = true
		}
	}
	for _, d := range chaosDevices {
		name := strings.SplitN(d, ":", 3)[1] // tier:NAME:capacity; NAME is also the device ID's suffix
		shape.Devices = append(shape.Devices, name)
		r.deviceNames = append(r.deviceNames, name)
	}
	schedule, err := nemesis.Plan(shape, nemesis.Options{Events: o.Events, Interval: o.Interval, Kinds: o.Kinds,
		MaxImpairedNodes: o.MaxImpairedNodes}, o.Seed)
	if err != nil {
		return nil, err
	}
	res.Schedule = schedule
	var sched bytes.Buffer
	fmt.Fprintf(&sched, "# terrace chaos %s\n", o.String())
	for _, e := range schedule {
		fmt.Fprintln(&sched, e.String())
	}
	res.Files["schedule"] = filepath.Join(o.Dir, "schedule.txt")
	if err := os.WriteFile(res.Files["schedule"], sched.Bytes(), 0o644); err != nil {
		return nil, err
	}
	r.progress("seed %d: %d events planned over %.0fs; %s", o.Seed, len(schedule), lastAt(schedule).Seconds(), o.String())

	base := o.BasePort
	if base == 0 {
		if base, err = devcluster.FreeBase(21000, 10*o.Nodes, 500); err != nil {
			return nil, err
		}
	}
	cfgPath := filepath.Join(o.Dir, "chaos.yaml")
	if err := os.WriteFile(cfgPath, []byte(chaosConfig(&o)), 0o644); err != nil {
		return nil, err
	}
	dc := devcluster.Options{Binary: o.Binary, Dir: filepath.Join(o.Dir, "cluster"), Nodes: o.Nodes, Members: o.Members,
		BasePort: base, DefaultVector: o.Vector, Devices: chaosDevices,
		ExtraArgs: []string{"--config", cfgPath, "--fault-injection"}}
	r.topo, err = newTopology(&o, &dc)
	if err != nil {
		return nil, err
	}
	defer r.topo.net.Close()
	r.hc = devcluster.AdminClient(0) // contexts bound every call (Curator jobs take minutes)
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	r.cluster, err = devcluster.Start(sctx, dc)
	cancel()
	if err != nil {
		return nil, err
	}
	defer r.cluster.Stop()
	if err := r.waitAllUp(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	r.progress("%d nodes up (ports from %d; proxies on every link)", o.Nodes, base)
	if err := r.anyAdmin(ctx, "PUT", "/v1/buckets/"+bucket+"?vector="+url.QueryEscape(o.Vector), nil); err != nil {
		return nil, fmt.Errorf("chaos: create bucket: %w", err)
	}

	res.Files["history"] = filepath.Join(o.Dir, "history.jsonl")
	hw, err := history.Create(res.Files["history"])
	if err != nil {
		return nil, err
	}
	hc := newHTTPClient(o.Clients + 8)
	r.ld = &load{seed: o.Seed, timeout: o.OpTimeout, start: r.start, hist: hw}
	for _, n := range r.cluster.Nodes {
		r.ld.eps = append(r.ld.eps, endpoint{node: n.ID, s3: newS3Client("http://"+n.S3, hc)})
	}
	x := newExecutor(r)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go x.watchCrashes(wctx)
	lctx, stopLoad := context.WithCancel(ctx)
	clients := r.ld.run(lctx, o.Clients)
	r.progress("load: %d clients on every node's S3 endpoint; warming up %s", o.Clients, o.Warmup)
	sleep(ctx, o.Warmup)

	faultStart := time.Now()
	x.run(ctx, schedule)
	x.wait()
	if ctx.Err() != nil {
		stopLoad()
		clients.Wait()
		hw.Close()
		return nil, fmt.Errorf("chaos: interrupted: %w", ctx.Err())
	}
	r.progress("faults done in %s; healing everything", time.Since(faultStart).Round(time.Second))
	if err := x.healAll(ctx); err != nil {
		r.finding("heal", "%v", err)
	}
	if err := r.waitAllUp(ctx, 3*time.Minute); err != nil {
		r.finding("heal", "%v", err)
	}
	r.progress("healed; cooldown %s under load", o.Cooldown)
	sleep(ctx, o.Cooldown)
	stopLoad()
	clients.Wait()
	r.progress("load stopped: %d operations", hw.Len())

	if ctx.Err() != nil {
		hw.Close()
		return nil, fmt.Errorf("chaos: interrupted: %w", ctx.Err())
	}
	settleStart := time.Now()
	keys, jobs := r.settle(ctx, time.Now().Add(o.SettleTimeout), false)
	r.progress("Curator: %d objects at vector %s after %s (%d jobs)", keys, o.Vector, time.Since(settleStart).Round(time.Second), jobs)
	r.finalReads(ctx)
	// The final reads may have found (and marked) bad replicas: settle
	// again, and this time every object must be at its vector.
	keys, jobs2 := r.settle(ctx, time.Now().Add(o.SettleTimeout), true)
	res.Objects, res.SettleJob, res.Settle = keys, jobs+jobs2, time.Since(settleStart)
	r.checkDangling(ctx)
	r.checkBitRot(ctx, x)
	r.checkLogs()
	r.progress("cluster checks done")
	stopWatch()

	if err := hw.Close(); err != nil {
		return nil, err
	}
	ops := r.ld.snapshot()
	res.Ops = len(ops)
	r.progress("checking %d operations", len(ops))
	res.Report = checker.Check(ops, checker.Options{})
	if !res.Report.OK() {
		if files, err := res.Report.Visualize(o.Dir); err == nil && len(files) > 0 {
			res.Files["visualizations"] = filepath.Join(o.Dir, "nonlinearizable-*.html")
		}
	}
	res.Executed = x.executed()
	res.Rots = x.rots
	res.Counts = map[string]int{}
	for _, e := range res.Executed {
		if e.Skipped == "" {
			k := string(e.Event.Kind)
			res.Counts[k]++
			if e.Event.Role != "" {
				res.Counts[k+" "+e.Event.Role]++
			}
		}
	}
	res.ByKind = map[string][3]int64{}
	for _, op := range ops {
		c := res.ByKind[string(op.Kind)]
		switch op.Outcome {
		case history.OK:
			c[0]++
		case history.Fail:
			c[1]++
		default:
			c[2]++
		}
		res.ByKind[string(op.Kind)] = c
	}
	res.Degraded = availability(ops, res.Executed)
	res.Files["timeline"] = filepath.Join(o.Dir, "timeline.png")
	if err := plotTimeline(res.Files["timeline"], ops, res.Executed); err != nil {
		r.progress("timeline plot: %v", err)
		delete(res.Files, "timeline")
	}
	r.mu.Lock()
	res.Findings = append([]Finding{}, r.findings...)
	r.mu.Unlock()
	res.Took = time.Since(r.start)
	res.Files["events"] = filepath.Join(o.Dir, "events.jsonl")
	if err := writeExecuted(res.Files["events"], res.Executed); err != nil {
		return nil, err
	}
	res.Files["summary"] = filepath.Join(o.Dir, "summary.json")
	res.Files["logs"] = filepath.Join(dc.Dir, "n*", "server.log")
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(res.Files["summary"], b, 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

func lastAt(evs []nemesis.Event) time.Duration {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].At
}

// listing is the admin API's GET /v1/data/B answer.
type listing struct {
	Objects   []server.ListEntry `json:"objects"`
	Truncated bool               `json:"truncated"`
	Next      string             `json:"next"`
}

// objects lists every object in the bucket.
func (r *runner) objects(ctx context.Context) ([]string, error) {
	var keys []string
	after := ""
	for {
		var l listing
		if err := r.anyAdmin(ctx, "GET", "/v1/data/"+bucket+"?max=1000&after="+url.QueryEscape(after), &l); err != nil {
			return nil, err
		}
		for _, o := range l.Objects {
			keys = append(keys, o.Key)
		}
		if !l.Truncated || l.Next == "" {
			return keys, nil
		}
		after = l.Next
	}
}

// settle runs Curator jobs until every object is at its vector or the
// deadline passes (then, if final, each object off its vector is a
// finding). It returns the number of objects and of jobs run.
func (r *runner) settle(ctx context.Context, deadline time.Time, final bool) (int, int) {
	want, _ := model.ParseVector(r.o.Vector)
	jobs := 0
	lastBad, lastLog := -1, time.Time{}
	kind := "full" // the first job scrubs, seals and collects garbage
	for {
		master, err := r.curatorMaster(ctx)
		path := "/v1/curator/run?wait=1&kind=" + kind
		if err == nil {
			jctx, cancel := context.WithTimeout(ctx, r.o.SettleTimeout)
			err = r.admin(jctx, r.node(master), "POST", path, nil)
			cancel()
		} else {
			err = r.anyAdminWithin(ctx, r.o.SettleTimeout, "POST", path, nil)
		}
		jobs++
		if err != nil {
			r.progress("curator %s job: %v", kind, err)
		}
		kind = "partial"
		if ctx.Err() != nil {
			return 0, jobs
		}
		keys, err := r.objects(ctx)
		if err != nil {
			r.progress("list: %v", err)
			if time.Now().After(deadline) {
				r.finding("settle", "cannot list the bucket: %v", err)
				return 0, jobs
			}
			continue
		}
		bad := r.offVector(ctx, keys, want)
		if len(bad) == 0 {
			return len(keys), jobs
		}
		if time.Now().After(deadline) {
			if final {
				sort.Strings(bad)
				for i, b := range bad {
					if i == 20 {
						r.finding("vector", "... and %d more objects off their vector", len(bad)-20)
						break
					}
					r.finding("vector", "%s", b)
				}
			}
			return len(keys), jobs
		}
		if len(bad) != lastBad || time.Since(lastLog) > 30*time.Second {
			r.progress("%d of %d objects not yet at %s (e.g. %s); running Curator scans", len(bad), len(keys), r.o.Vector, bad[0])
			lastBad, lastLog = len(bad), time.Now()
		}
		sleep(ctx, 2*time.Second)
	}
}

// offVector locates every object and returns those whose extents do not
// have exactly the vector's number of good replicas on live nodes.
func (r *runner) offVector(ctx context.Context, keys []string, want model.Vector) []string {
	var st server.Status
	up := map[model.NodeID]bool{}
	if err := r.anyAdmin(ctx, "GET", "/v1/status", &st); err == nil && st.Cluster != nil {
		for _, n := range st.Cluster.Nodes {
			up[n.ID] = n.Up
		}
	}
	var mu sync.Mutex
	var bad []string
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var loc object.Location
			err := r.anyAdmin(ctx, "GET", "/v1/object/locate?bucket="+bucket+"&key="+url.QueryEscape(k), &loc)
			why := ""
			switch {
			case err != nil && bytes.Contains([]byte(err.Error()), []byte("NoSuchKey")):
				return // deleted meanwhile (cannot happen once the load stopped)
			case err != nil:
				why = err.Error()
			default:
				why = vectorProblem(loc, want, up)
			}
			if why != "" {
				mu.Lock()
				bad = append(bad, k+": "+why)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return bad
}

// vectorProblem says why an object is not at its vector, or "".
func vectorProblem(loc object.Location, want model.Vector, up map[model.NodeID]bool) string {
	for _, x := range loc.Extents {
		if x.Error != "" {
			return fmt.Sprintf("extent %d: %s", x.Extent, x.Error)
		}
		good := map[model.DeviceID]bool{}
		for _, rp := range x.Replicas {
			if !rp.Bad && up[rp.Node] {
				good[rp.Device] = true
			}
		}
		if len(good) != want.Total() || len(x.Replicas) != want.Total() {
			return fmt.Sprintf("extent %d in egroup %d has %d good replicas of %d listed, want %d", x.Extent, x.Egroup, len(good), len(x.Replicas), want.Total())
		}
	}
	return ""
}

// finalReads reads every key ever touched, through random nodes, until
// each read succeeds (up to 8 tries over about half a minute).
func (r *runner) finalReads(ctx context.Context) {
	keys := map[string]bool{}
	for _, op := range r.ld.snapshot() {
		if op.Key != "" {
			keys[op.Key] = true
		}
	}
	names := sortedKeys(keys)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, k := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := &client{l: r.ld, id: r.o.Clients + i%4, rng: rand.New(rand.NewPCG(r.o.Seed, uint64(i)))}
			for try := 0; try < 8; try++ {
				ep := r.ld.eps[(i+try)%len(r.ld.eps)]
				if op := c.get(ctx, ep, k, true); op.Outcome == history.OK {
					return
				}
				sleep(ctx, time.Duration(try+1)*500*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	r.progress("final reads of %d keys done", len(names))
}

// checkDangling runs a full scan and reports dangling references (object
// records pointing at missing extents or egroups: metadata pointing at
// missing data).
func (r *runner) checkDangling(ctx context.Context) {
	var rec struct {
		Dangling []string `json:"dangling"`
	}
	if err := r.anyAdminWithin(ctx, r.o.SettleTimeout, "POST", "/v1/curator/run?wait=1&kind=full", &rec); err != nil {
		r.finding("dangling", "full scan failed: %v", err)
		return
	}
	for _, d := range rec.Dangling {
		r.finding("dangling", "%s", d)
	}
}

// checkBitRot: after full scans (which scrub every sealed replica), no
// replica the nemesis corrupted may still be listed good with its flipped
// byte inside a live extent.
func (r *runner) checkBitRot(ctx context.Context, x *executor) {
	x.mu.Lock()
	rots := append([]rot(nil), x.rots...)
	x.mu.Unlock()
	if len(rots) == 0 {
		return
	}
	keys, err := r.objects(ctx)
	if err != nil {
		r.finding("bitrot", "cannot list the bucket: %v", err)
		return
	}
	type span struct{ from, to int64 }
	live := map[uint64][]span{} // egroup → extent byte ranges in the file
	good := map[uint64]map[model.DeviceID]bool{}
	for _, k := range keys {
		var loc object.Location
		if err := r.anyAdmin(ctx, "GET", "/v1/object/locate?bucket="+bucket+"&key="+url.QueryEscape(k), &loc); err != nil {
			continue
		}
		for _, ex := range loc.Extents {
			// An extent of L bytes is ceil(L/64KiB) slices of 8-byte header
			// plus payload (docs/storage.md).
			slices := (ex.Length + 64<<10 - 1) / (64 << 10)
			live[ex.Egroup] = append(live[ex.Egroup], span{ex.EgroupOff, ex.EgroupOff + ex.Length + 8*slices})
			if good[ex.Egroup] == nil {
				good[ex.Egroup] = map[model.DeviceID]bool{}
			}
			for _, rp := range ex.Replicas {
				if !rp.Bad {
					good[ex.Egroup][rp.Device] = true
				}
			}
		}
	}
	for _, rt := range rots {
		dev := model.DeviceID(rt.Node + "/" + rt.Device)
		if !good[rt.Egroup][dev] {
			continue // repaired away, or the egroup is garbage now
		}
		inLive := false
		for _, s := range live[rt.Egroup] {
			if rt.Offset >= s.from && rt.Offset < s.to {
				inLive = true
			}
		}
		if !inLive {
			continue
		}
		f, err := os.Open(rt.Path)
		if err != nil {
			continue // the file was replaced
		}
		b := make([]byte, 1)
		_, err = f.ReadAt(b, rt.Offset)
		f.Close()
		if err == nil && b[0] == rt.New {
			r.finding("bitrot", "egroup %016x replica on %s still listed good with the flipped byte at %d after full scans", rt.Egroup, dev, rt.Offset)
		}
	}
}

// logAlarms are log lines no run may produce: a consistency violation the
// Curator saw, a Go panic.
var logAlarms = []string{"CONSISTENCY", "panic:"}

// checkLogs reports alarming lines in the node logs.
func (r *runner) checkLogs() {
	for _, n := range r.cluster.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		found := 0
		for _, line := range strings.Split(string(b), "\n") {
			for _, a := range logAlarms {
				if strings.Contains(line, a) {
					found++
					if found <= 5 {
						r.finding("log", "%s: %s", n.ID, line)
					}
				}
			}
		}
		if found > 5 {
			r.finding("log", "%s: %d more alarming lines in %s", n.ID, found-5, n.LogPath)
		}
	}
}
