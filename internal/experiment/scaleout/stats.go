package scaleout

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/terrace-storage/terrace/internal/experiment/rebuild"
)

// Op is one client operation, timed from its start (the load is closed
// loop: a client starts its next operation when the last one ends).
type Op struct {
	T     float64 // start, seconds since the load started
	LatMs float64
	Read  bool
	Bytes int64 // payload bytes moved (0 when it failed)
	Err   bool
}

// Sample is the cluster's state at one moment, polled once a second.
type Sample struct {
	T float64 // seconds since the load started
	// NodeBytes is every node's used bytes (its devices summed, as of
	// its last heartbeat); a node not yet joined is absent.
	NodeBytes map[string]int64
	// Moved is the bytes the planned jobs have moved so far.
	Moved int64
	// NodeReadBytes is every running node's device read bytes since it
	// started (its devices summed, asked of the node itself): where the
	// clients' reads are served, the load a join should spread.
	NodeReadBytes map[string]int64
}

// Phase names, in order.
const (
	PhaseWarmup   = "warmup"
	PhaseBaseline = "baseline"
	PhaseJoined   = "joined"
	PhaseMoving   = "moving"
	PhaseAfter    = "after"
)

// Marks are the experiment's moments, in seconds since the load started.
type Marks struct {
	// Warmup ends the untimed start of the load; JoinAt is when the new
	// node was started; ApplyAt when the plan was applied; BalancedAt
	// when the last planned move finished (negative: never); End when
	// the load stopped.
	Warmup, JoinAt, ApplyAt, BalancedAt, End float64
}

// PhaseOf places a moment in a phase. Without BalancedAt everything from
// the apply on is moving.
func PhaseOf(t float64, m Marks) string {
	switch {
	case t < m.Warmup:
		return PhaseWarmup
	case t < m.JoinAt:
		return PhaseBaseline
	case t < m.ApplyAt:
		return PhaseJoined
	case m.BalancedAt < 0 || t < m.BalancedAt:
		return PhaseMoving
	default:
		return PhaseAfter
	}
}

// PhaseStats summarises the operations that started in one phase.
type PhaseStats struct {
	Name      string  `json:"name"`
	Start     float64 `json:"start_s"`
	End       float64 `json:"end_s"`
	Seconds   float64 `json:"seconds"`
	Ops       int     `json:"ops"`
	Reads     int     `json:"reads"`
	Writes    int     `json:"writes"`
	Errors    int     `json:"errors"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MBps      float64 `json:"mb_per_sec"`
	MeanMs    float64 `json:"mean_ms"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// phaseNames are the measured phases (the warm-up is not one).
var phaseNames = []string{PhaseBaseline, PhaseJoined, PhaseMoving, PhaseAfter}

func (m Marks) bounds(name string) (float64, float64) {
	balanced := m.BalancedAt
	if balanced < 0 {
		balanced = m.End
	}
	switch name {
	case PhaseBaseline:
		return m.Warmup, m.JoinAt
	case PhaseJoined:
		return m.JoinAt, m.ApplyAt
	case PhaseMoving:
		return m.ApplyAt, balanced
	default:
		return balanced, m.End
	}
}

// SplitPhases summarises ops by phase. Throughput counts every operation
// that started in the phase over its length; latencies are those of
// successful operations.
func SplitPhases(ops []Op, m Marks) []PhaseStats {
	lat := map[string][]float64{}
	bytes := map[string]int64{}
	out := map[string]*PhaseStats{}
	for _, name := range phaseNames {
		s, e := m.bounds(name)
		out[name] = &PhaseStats{Name: name, Start: s, End: e, Seconds: max(0, e-s)}
	}
	for _, op := range ops {
		ps, ok := out[PhaseOf(op.T, m)]
		if !ok || op.T >= m.End {
			continue
		}
		ps.Ops++
		if op.Read {
			ps.Reads++
		} else {
			ps.Writes++
		}
		if op.Err {
			ps.Errors++
			continue
		}
		lat[ps.Name] = append(lat[ps.Name], op.LatMs)
		bytes[ps.Name] += op.Bytes
	}
	res := make([]PhaseStats, 0, len(phaseNames))
	for _, name := range phaseNames {
		ps := out[name]
		ls := lat[name]
		sort.Float64s(ls)
		ps.MeanMs = rebuild.Mean(ls)
		ps.P50Ms = rebuild.Percentile(ls, 50)
		ps.P99Ms = rebuild.Percentile(ls, 99)
		ps.MaxMs = math.NaN()
		if len(ls) > 0 {
			ps.MaxMs = ls[len(ls)-1]
		}
		if ps.Seconds > 0 {
			ps.OpsPerSec = float64(ps.Ops-ps.Errors) / ps.Seconds
			ps.MBps = float64(bytes[name]) / ps.Seconds / 1e6
		}
		res = append(res, *ps)
	}
	return res
}

// Phase returns the named phase of a split (zero value if absent).
func Phase(ps []PhaseStats, name string) PhaseStats {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return PhaseStats{Name: name}
}

// Second is one second of the time series.
type Second struct {
	T      int
	Phase  string
	Ops    int // successful operations that started in this second
	Errors int
	MBps   float64
	P50Ms  float64
	P99Ms  float64
	// Moved is the bytes planned jobs had moved by the end of the second
	// (-1: no sample yet); NodeBytes each node's used bytes then, in the
	// order of the nodes given to PerSecond (-1: not in the cluster).
	Moved     int64
	NodeBytes []int64
	// NodeReadMBps is each node's device reads in this second (MB/s,
	// between the samples around it; NaN: not measured).
	NodeReadMBps []float64
}

// PerSecond buckets ops by start second over the whole seconds of
// [0, End) (a last partial second would read as a drop in throughput) and
// attaches the latest sample taken by the end of each second (samples in
// any order).
func PerSecond(ops []Op, samples []Sample, nodes []string, m Marks) []Second {
	n := int(math.Floor(m.End))
	if n <= 0 {
		return nil
	}
	lat := make([][]float64, n)
	bytes := make([]int64, n)
	out := make([]Second, n)
	for i := range out {
		out[i] = Second{T: i, Phase: PhaseOf(float64(i), m), Moved: -1, NodeBytes: make([]int64, len(nodes)),
			NodeReadMBps: make([]float64, len(nodes))}
		for k := range out[i].NodeBytes {
			out[i].NodeBytes[k] = -1
			out[i].NodeReadMBps[k] = math.NaN()
		}
	}
	for _, op := range ops {
		i := int(op.T)
		if op.T < 0 || i >= n {
			continue
		}
		if op.Err {
			out[i].Errors++
			continue
		}
		out[i].Ops++
		lat[i] = append(lat[i], op.LatMs)
		bytes[i] += op.Bytes
	}
	ss := append([]Sample(nil), samples...)
	sort.SliceStable(ss, func(a, b int) bool { return ss[a].T < ss[b].T })
	j := 0
	var cur *Sample
	for i := range out {
		for j < len(ss) && ss[j].T < float64(i+1) {
			cur = &ss[j]
			j++
		}
		readRates(out[i].NodeReadMBps, ss, nodes, float64(i)+0.5)
		if cur != nil {
			out[i].Moved = cur.Moved
			for k, node := range nodes {
				if b, ok := cur.NodeBytes[node]; ok {
					out[i].NodeBytes[k] = b
				}
			}
		}
		sort.Float64s(lat[i])
		out[i].P50Ms = rebuild.Percentile(lat[i], 50)
		out[i].P99Ms = rebuild.Percentile(lat[i], 99)
		out[i].MBps = float64(bytes[i]) / 1e6
	}
	return out
}

// PhaseReadMBps is each node's mean disk read rate (MB/s) over the seconds
// of a phase, by node (nodes without a measured second are left out).
func PhaseReadMBps(secs []Second, nodes []string, phase string) map[string]float64 {
	out := map[string]float64{}
	for k, n := range nodes {
		var sum float64
		var cnt int
		for _, s := range secs {
			if s.Phase == phase && k < len(s.NodeReadMBps) && !math.IsNaN(s.NodeReadMBps[k]) {
				sum += s.NodeReadMBps[k]
				cnt++
			}
		}
		if cnt > 0 {
			out[n] = sum / float64(cnt)
		}
	}
	return out
}

// readRates fills rates[k] with node k's device read rate (MB/s) between
// the two samples that bracket moment t (sorted samples; NaN where a node
// is missing from either, or its counter went back: a restart).
func readRates(rates []float64, ss []Sample, nodes []string, t float64) {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].T > t })
	if i == 0 || i == len(ss) {
		return
	}
	a, b := ss[i-1], ss[i]
	dt := b.T - a.T
	if dt <= 0 {
		return
	}
	for k, n := range nodes {
		x, okA := a.NodeReadBytes[n]
		y, okB := b.NodeReadBytes[n]
		if okA && okB && y >= x {
			rates[k] = float64(y-x) / dt / 1e6
		}
	}
}

// Summary renders the result as summary.txt holds it: the run's setup,
// the headline line, the phase table and the end check.
func Summary(r *Result) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Mirador scale-out experiment (terrace bench scaleout)\n\n")
	fmt.Fprintf(&b, "cluster: %d nodes, then %s joins; devices per node %s, vector %s, emulated media %v, egroup %s\n",
		o.Nodes, r.NewNode, strings.Join(o.Devices, ","), o.Vector, o.Emulate, mib(o.EgroupBytes))
	fmt.Fprintf(&b, "planner rules: %s; read order: %s\n", strings.Join(o.Rules, "; "), o.ReadOrder)
	fmt.Fprintf(&b, "preload: %d objects of %s (%s logical) in %.1f s; load: %d closed-loop S3 clients, %.0f %% GETs (verified), the rest PUTs of new objects, spread over every running node's S3 endpoint\n",
		r.Preloaded, mib(o.ObjectBytes), mib(r.PreloadBytes), r.PreloadSeconds, o.Clients, 100*o.ReadFraction)
	fmt.Fprintf(&b, "timeline: warm-up until t=%.0fs, %s started t=%.1fs (in the cluster view %.1f s later), plan applied t=%.1fs",
		r.Marks.Warmup, r.NewNode, r.Marks.JoinAt, r.JoinSeconds, r.Marks.ApplyAt)
	if r.Balanced {
		fmt.Fprintf(&b, ", last move t=%.1fs, load stopped t=%.1fs\n", r.Marks.BalancedAt, r.Marks.End)
	} else {
		fmt.Fprintf(&b, ", NOT balanced by t=%.1fs\n", r.Marks.End)
	}
	fmt.Fprintf(&b, "planned moves: %d jobs, %d tasks (%d done, %d stale, %d failed), %s moved",
		len(r.Jobs), r.Tasks, r.TasksDone, r.TasksStale, r.TasksFailed, mib(r.BytesMoved))
	if r.Balanced && r.TimeToBalance > 0 {
		fmt.Fprintf(&b, " at %.1f MB/s", float64(r.BytesMoved)/r.TimeToBalance/1e6)
	}
	fmt.Fprintf(&b, "; planner's moves left afterwards: %d\n", r.ResidualMoves)
	fmt.Fprintf(&b, "used bytes per node before the join: %s; at the end: %s\n", nodeBytes(r.NodeBytesBefore, r.Nodes), nodeBytes(r.NodeBytesAfter, r.Nodes))
	for _, ph := range []string{PhaseBaseline, PhaseAfter} {
		if rates := r.ReadMBps[ph]; len(rates) > 0 {
			var parts []string
			for _, n := range r.Nodes {
				if x, ok := rates[n]; ok {
					parts = append(parts, fmt.Sprintf("%s %.1f", n, x))
				}
			}
			fmt.Fprintf(&b, "disk reads per node (MB/s), %s: %s\n", ph, strings.Join(parts, ", "))
		}
	}
	fmt.Fprintf(&b, "\n%-9s %7s %7s %8s %8s %8s %8s %8s %8s %7s\n", "phase", "seconds", "ops", "ops/s", "MB/s", "mean_ms", "p50_ms", "p99_ms", "max_ms", "errors")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "%-9s %7.1f %7d %8.1f %8.2f %8.2f %8.2f %8.2f %8.2f %7d\n", p.Name, p.Seconds, p.Ops, p.OpsPerSec, p.MBps,
			p.MeanMs, p.P50Ms, p.P99Ms, p.MaxMs, p.Errors)
	}
	fmt.Fprintf(&b, "\n%s\n", Headline(r))
	v := r.Verify
	fmt.Fprintf(&b, "\nend check: %d acknowledged objects read back: %d lost, %d corrupt; %d extents off their vector (%d over, %d under); %d of %d preloaded objects have a replica on %s\n",
		v.Objects, v.Lost, v.Corrupt, v.OffVector, v.Over, v.Under, v.PreloadedOnNew, r.Preloaded, r.NewNode)
	for _, e := range v.Examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// Headline is the one-line result: throughput before and after, the time
// to balance and p99 while moving against the baseline's.
func Headline(r *Result) string {
	base, moving, after := Phase(r.Phases, PhaseBaseline), Phase(r.Phases, PhaseMoving), Phase(r.Phases, PhaseAfter)
	balance := "not balanced"
	if r.Balanced {
		balance = fmt.Sprintf("balanced %.1f s after the plan (%.1f s after the join)", r.TimeToBalance, r.Marks.BalancedAt-r.Marks.JoinAt)
	}
	return fmt.Sprintf("throughput %.1f -> %.1f ops/s (%.2fx, %.1f -> %.1f MB/s); %s, %s moved; p99 while moving %.1f ms vs %.1f ms baseline (%.2fx)",
		base.OpsPerSec, after.OpsPerSec, ratio(after.OpsPerSec, base.OpsPerSec), base.MBps, after.MBps,
		balance, mib(r.BytesMoved), moving.P99Ms, base.P99Ms, ratio(moving.P99Ms, base.P99Ms))
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

func nodeBytes(m map[string]int64, nodes []string) string {
	var parts []string
	for _, n := range nodes {
		if b, ok := m[n]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", n, mib(b)))
		} else {
			parts = append(parts, n+" -")
		}
	}
	return strings.Join(parts, ", ")
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
