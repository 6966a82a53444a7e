// Package propbench measures how fast a policy change reaches every node
// (Malacology §6.1.2, interface propagation): it starts a local dev
// cluster, commits a new version of a policy many times through one node,
// and reads back, from every node, when each version went live there. The
// delay per node is the swap time minus the time the version was proposed
// to the metadata store (the record's time, taken just before the
// compare-and-swap), both read from the one clock the local nodes share.
// It therefore includes the consensus commit itself, which the paper
// excluded: an upper bound on commit-to-swap. (Measuring from the moment
// the proposer saw the commit succeed is not sound: followers' watches
// often fire before the proposer's response arrives.) The consensus
// round alone is reported too. It writes a CSV of every sample, a
// CDF plot (PNG) and per-node percentiles.
//
// It owns only the benchmark procedure and its outputs; it drives the
// cluster through its admin API and never reaches into a node.
package propbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/policy"
	"github.com/terrace-storage/terrace/internal/server"
)

// Options configure a run. Zero values mean defaults.
type Options struct {
	Binary string // terrace binary for the cluster
	Dir    string // cluster data directory
	Out    string // where CSV, PNG and summary go
	Nodes  int
	// Updates is the number of versions committed. The paper observed
	// 1,000 updates; 500 keep a run near a minute on a small machine.
	Updates int
	// Interval separates updates, so each propagation is measured alone
	// (a change every 20 ms is far more than operators make).
	Interval time.Duration
	// BasePort is the cluster's first port (0: the first free block from
	// 19600).
	BasePort int
	Log      func(format string, args ...any)
}

// Limits of a run: the swap log each node keeps bounds the updates.
const maxUpdates = 4000

// policyName is the policy the benchmark rewrites.
const policyName = "propbench"

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.Updates == 0 {
		o.Updates = 500
	}
	if o.Interval == 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.Out == "" {
		o.Out = "bench-out/policy"
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(o.Out, "cluster")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Validate rejects impossible runs.
func (o Options) Validate() error {
	switch {
	case o.Binary == "":
		return fmt.Errorf("propbench: no terrace binary")
	case o.Nodes < 1 || o.Nodes > 64:
		return fmt.Errorf("propbench: %d nodes: want 1..64", o.Nodes)
	case o.Updates < 1 || o.Updates > maxUpdates:
		return fmt.Errorf("propbench: %d updates: want 1..%d", o.Updates, maxUpdates)
	case o.Interval < 0:
		return fmt.Errorf("propbench: negative interval")
	}
	return nil
}

// Sample is one version going live on one node.
type Sample struct {
	Node    string    `json:"node"`
	Version int64     `json:"version"`
	Propose time.Time `json:"propose"` // the record's time, just before the CAS
	Commit  time.Time `json:"commit"`  // when the proposer's CAS returned
	Swap    time.Time `json:"swap"`
	// DelayMs is Swap - Propose (consensus included); AfterCommitMs is
	// Swap - Commit (the paper's measure, which excludes the proposal),
	// negative when the node went live before the proposer heard back.
	DelayMs       float64 `json:"delay_ms"`
	AfterCommitMs float64 `json:"after_commit_ms"`
}

// Stats are percentiles of the commit-to-swap delay, in milliseconds.
type Stats struct {
	Node    string  `json:"node"`
	Samples int     `json:"samples"`
	Missed  int     `json:"missed"` // versions the node never reported live
	P50     float64 `json:"p50_ms"`
	P90     float64 `json:"p90_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

// Result is a run's outcome.
type Result struct {
	Nodes    int           `json:"nodes"`
	Updates  int           `json:"updates"`
	Interval time.Duration `json:"interval_ns"`
	PerNode  []Stats       `json:"per_node"`
	All      Stats         `json:"all"`
	// AfterCommit are the same per node, measured from the commit's return
	// on the proposer (consensus excluded, as the paper measured).
	AfterCommit []Stats `json:"after_commit"`
	// Others is every node but the one the puts went through, whose swap
	// follows its own commit in the same request.
	Others Stats `json:"others"`
	PutRTT Stats `json:"put_rtt"` // client round trip of a put (validation + commit)
	// Consensus is the commit round alone: from the proposal until the
	// proposer's compare-and-swap returned.
	Consensus Stats    `json:"consensus"`
	Samples   []Sample `json:"-"`
}

// Run starts the cluster, commits the updates and collects the swaps.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	base := o.BasePort
	if base == 0 {
		var err error
		if base, err = devcluster.FreeBase(19600, 10*o.Nodes, 100); err != nil {
			return nil, fmt.Errorf("propbench: %w", err)
		}
	}
	o.Log("starting %d nodes on ports %d.. under %s", o.Nodes, base, o.Dir)
	cl, err := devcluster.Start(ctx, devcluster.Options{Binary: o.Binary, Dir: o.Dir, Nodes: o.Nodes, BasePort: base,
		Devices: []string{"ssd:ssd0:256MiB", "hdd:hdd0:1GiB"}})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	hc, err := cl.AdminClient(30 * time.Second)
	if err != nil {
		return nil, err
	}
	admins := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		admins[i] = n.Admin
	}
	if err := waitMembers(ctx, hc, admins[0], o.Nodes); err != nil {
		return nil, err
	}
	o.Log("cluster up; committing %d versions through %s every %s", o.Updates, cl.Nodes[0].ID, o.Interval)
	commits := map[int64]time.Time{}   // version -> proposal time
	committed := map[int64]time.Time{} // version -> CAS returned
	var rtts, rounds []float64
	var last int64
	for i := 1; i <= o.Updates; i++ {
		src := fmt.Sprintf("-- propagation benchmark, update %d\nfunction ping(obj) return %d end\n", i, i)
		start := time.Now()
		res, err := putPolicy(ctx, hc, admins[0], src)
		if err != nil {
			return nil, fmt.Errorf("propbench: update %d: %w", i, err)
		}
		rtts = append(rtts, ms(time.Since(start)))
		commits[res.Record.Version] = res.Record.Time
		committed[res.Record.Version] = res.Committed
		rounds = append(rounds, ms(res.Committed.Sub(res.Record.Time)))
		last = res.Record.Version
		if i%100 == 0 {
			o.Log("%d/%d versions committed", i, o.Updates)
		}
		select {
		case <-time.After(o.Interval):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res := &Result{Nodes: o.Nodes, Updates: o.Updates, Interval: o.Interval}
	var all, others, afterOthers []float64
	for i, n := range cl.Nodes {
		swaps, err := waitSwaps(ctx, hc, admins[i], last)
		if err != nil {
			return nil, fmt.Errorf("propbench: %s: %w", n.ID, err)
		}
		var ds, after []float64
		seen := map[int64]bool{}
		for _, s := range swaps {
			c, ok := commits[s.Version]
			if !ok || s.Error != "" || seen[s.Version] {
				continue
			}
			seen[s.Version] = true
			d, a := ms(s.Swapped.Sub(c)), ms(s.Swapped.Sub(committed[s.Version]))
			ds, after = append(ds, d), append(after, a)
			res.Samples = append(res.Samples, Sample{Node: n.ID, Version: s.Version, Propose: c, Commit: committed[s.Version],
				Swap: s.Swapped, DelayMs: d, AfterCommitMs: a})
		}
		st := stats(n.ID, ds)
		st.Missed = len(commits) - len(ds)
		res.PerNode = append(res.PerNode, st)
		res.AfterCommit = append(res.AfterCommit, stats(n.ID, after))
		all = append(all, ds...)
		if i > 0 {
			others = append(others, ds...)
			afterOthers = append(afterOthers, after...)
		}
	}
	res.All = stats("all", all)
	res.Others = stats("others", others)
	res.AfterCommit = append(res.AfterCommit, stats("others", afterOthers))
	res.PutRTT = stats("put", rtts)
	res.Consensus = stats("consensus", rounds)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// stats computes nearest-rank percentiles.
func stats(node string, xs []float64) Stats {
	st := Stats{Node: node, Samples: len(xs)}
	if len(xs) == 0 {
		return st
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	st.P50, st.P90, st.P99, st.Max = pct(0.50), pct(0.90), pct(0.99), s[len(s)-1]
	return st
}

func putPolicy(ctx context.Context, hc *http.Client, admin, src string) (policy.PutResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+admin+"/v1/policies/"+policyName+"?hook=class&author=propbench",
		strings.NewReader(src))
	if err != nil {
		return policy.PutResult{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return policy.PutResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return policy.PutResult{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var res policy.PutResult
	return res, json.Unmarshal(b, &res)
}

// waitSwaps polls a node until it reports version last live (or 30 s).
func waitSwaps(ctx context.Context, hc *http.Client, admin string, last int64) ([]policy.Swap, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sw server.PolicySwaps
		err := getJSON(ctx, hc, "http://"+admin+"/v1/policies/swaps?name="+policyName, &sw)
		if err == nil {
			for _, s := range sw.Swaps {
				if s.Version == last {
					return sw.Swaps, nil
				}
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("version %d not live after 30 s", last)
			}
			return nil, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// waitMembers waits until a node sees every node up.
func waitMembers(ctx context.Context, hc *http.Client, admin string, n int) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		var st server.Status
		if err := getJSON(ctx, hc, "http://"+admin+"/v1/status", &st); err == nil && st.Cluster != nil {
			up := 0
			for _, nv := range st.Cluster.Nodes {
				if nv.Up {
					up++
				}
			}
			if up == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("propbench: %d nodes not all up after 90 s", n)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func getJSON(ctx context.Context, hc *http.Client, u string, out any) error {
	return devcluster.CallAdmin(ctx, hc, http.MethodGet, u, nil, out)
}
