package rebuild

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
)

// Op is one client operation of the load, timed from its arrival.
type Op struct {
	T     float64 // arrival, seconds since the load started
	LatMs float64
	Read  bool
	Bytes int64 // payload bytes moved (0 when it failed)
	// Err marks a failed operation; for a read of acknowledged data
	// that includes wrong bytes.
	Err bool
}

// Phase names, in order.
const (
	PhaseBaseline = "baseline"
	PhaseRebuild  = "rebuild"
	PhaseAfter    = "after"
)

// PhaseOf places an arrival time into a phase: before the failure is the
// baseline, from the failure until protection the rebuild, after that the
// tail. A negative protectedAt (never protected) keeps everything after
// the failure in the rebuild.
func PhaseOf(t, failAt, protectedAt float64) string {
	switch {
	case t < failAt:
		return PhaseBaseline
	case protectedAt < 0 || t < protectedAt:
		return PhaseRebuild
	default:
		return PhaseAfter
	}
}

// PhaseStats summarises the operations of one phase.
type PhaseStats struct {
	Name        string  `json:"name"`
	Start, End  float64 `json:"-"`
	Seconds     float64 `json:"seconds"`
	Ops         int     `json:"ops"`
	Reads       int     `json:"reads"`
	Writes      int     `json:"writes"`
	ReadErrors  int     `json:"read_errors"`
	WriteErrors int     `json:"write_errors"`
	MeanMs      float64 `json:"mean_ms"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	MBps        float64 `json:"mb_per_sec"`
}

// SplitPhases summarises ops by phase (PhaseOf). Latencies are those of
// successful operations; failed ones are counted as errors. end is the
// time the load stopped (seconds since it started).
func SplitPhases(ops []Op, failAt, protectedAt, end float64) []PhaseStats {
	bounds := map[string][2]float64{
		PhaseBaseline: {0, failAt},
		PhaseRebuild:  {failAt, end},
		PhaseAfter:    {end, end},
	}
	if protectedAt >= 0 {
		bounds[PhaseRebuild] = [2]float64{failAt, protectedAt}
		bounds[PhaseAfter] = [2]float64{protectedAt, end}
	}
	lat := map[string][]float64{}
	out := map[string]*PhaseStats{}
	var bytes = map[string]int64{}
	for _, name := range []string{PhaseBaseline, PhaseRebuild, PhaseAfter} {
		b := bounds[name]
		out[name] = &PhaseStats{Name: name, Start: b[0], End: b[1], Seconds: max(0, b[1]-b[0])}
	}
	for _, op := range ops {
		name := PhaseOf(op.T, failAt, protectedAt)
		ps := out[name]
		ps.Ops++
		if op.Read {
			ps.Reads++
		} else {
			ps.Writes++
		}
		if op.Err {
			if op.Read {
				ps.ReadErrors++
			} else {
				ps.WriteErrors++
			}
			continue
		}
		lat[name] = append(lat[name], op.LatMs)
		bytes[name] += op.Bytes
	}
	res := make([]PhaseStats, 0, 3)
	for _, name := range []string{PhaseBaseline, PhaseRebuild, PhaseAfter} {
		ps := out[name]
		ls := lat[name]
		sort.Float64s(ls)
		ps.MeanMs = Mean(ls)
		ps.P50Ms = Percentile(ls, 50)
		ps.P99Ms = Percentile(ls, 99)
		if len(ls) > 0 {
			ps.MaxMs = ls[len(ls)-1]
		}
		if ps.Seconds > 0 {
			ps.OpsPerSec = float64(ps.Ops) / ps.Seconds
			ps.MBps = float64(bytes[name]) / ps.Seconds / 1e6
		}
		res = append(res, *ps)
	}
	return res
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted
// values: the smallest value with at least p % of the values at or below
// it. Empty input gives NaN, so an empty phase does not read as 0 ms.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Mean of xs; NaN when empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Protection is what the Curator's job records say about re-protection
// after a failure.
type Protection struct {
	// Protected: a scan that started after one had seen the failure's
	// under-replication found nothing under-replicated and planned no
	// recovery or seal.
	Protected bool
	// FirstUR is the first job after the failure that saw
	// under-replicated bytes; Quiet the confirming job.
	FirstUR, Quiet *curator.JobRecord
	// LastCopy is when the last job that copied data (or finished a
	// recover task) between the failure and Quiet ended: the moment the
	// last copy landed. Zero when no job copied anything.
	LastCopy time.Time
	// FirstCopy is when the first job that copied data started, and
	// CopyTime the summed durations of the jobs that copied.
	FirstCopy time.Time
	CopyTime  time.Duration
	// Jobs between the failure and Quiet (inclusive) and their work.
	Jobs          int
	Moved         int64
	Recovered     int
	Stale, Failed int
	// PeakURBytes is the largest under-replicated total a scan reported.
	PeakURBytes  int64
	PeakURGroups int
}

// At is the protection time: the last copy, or the confirming scan's
// start when no job copied (the failed device held nothing).
func (p Protection) At() time.Time {
	if !p.LastCopy.IsZero() {
		return p.LastCopy
	}
	if p.Quiet != nil {
		return p.Quiet.Start
	}
	return time.Time{}
}

// ProtectionAfter applies the protection rule to job records (any order,
// duplicates by ID allowed) for a failure at failAt. It is the rule the
// cluster test of node removal uses.
func ProtectionAfter(jobs []curator.JobRecord, failAt time.Time) Protection {
	byID := map[string]curator.JobRecord{}
	for _, j := range jobs {
		if !j.Start.Before(failAt) && !j.End.IsZero() {
			byID[j.ID] = j
		}
	}
	rs := make([]curator.JobRecord, 0, len(byID))
	for _, j := range byID {
		rs = append(rs, j)
	}
	sort.Slice(rs, func(i, k int) bool { return rs[i].Start.Before(rs[k].Start) })
	var p Protection
	for i := range rs {
		r := rs[i]
		p.Jobs++
		p.Moved += r.Moved
		p.Recovered += r.Done["recover"]
		p.Stale += r.Stale
		p.Failed += r.Failed
		if r.Moved > 0 || r.Done["recover"] > 0 {
			if r.End.After(p.LastCopy) {
				p.LastCopy = r.End
			}
			if p.FirstCopy.IsZero() {
				p.FirstCopy = r.Start
			}
			p.CopyTime += r.End.Sub(r.Start)
		}
		if r.Stats.UnderReplicatedBytes > p.PeakURBytes {
			p.PeakURBytes, p.PeakURGroups = r.Stats.UnderReplicatedBytes, r.Stats.UnderReplicated
		}
		if p.FirstUR == nil {
			if r.Stats.UnderReplicatedBytes > 0 {
				p.FirstUR = &rs[i]
			}
			continue
		}
		if r.Start.After(p.FirstUR.Start) && r.Stats.UnderReplicatedBytes == 0 && r.Planned["recover"] == 0 && r.Planned["seal"] == 0 {
			p.Quiet = &rs[i]
			p.Protected = true
			return p
		}
	}
	return p
}

// Second is one second of the time series.
type Second struct {
	T      int // second since the load started
	Phase  string
	Ops    int
	Errors int
	MeanMs float64
	P99Ms  float64
	MBps   float64
	// URBytes is the under-replicated total of the last scan that ended
	// by the end of this second (-1: none yet).
	URBytes int64
}

// URPoints turns job records into the under-replicated series: the
// scan's total at the job's start (the scan runs first), and at its end
// that total less the share of its planned recover tasks the job
// finished (an estimate: records do not split bytes by task). t0 is the
// series' zero.
func URPoints(jobs []curator.JobRecord, t0 time.Time) []URPoint {
	var pts []URPoint
	for _, j := range jobs {
		ur := j.Stats.UnderReplicatedBytes
		pts = append(pts, URPoint{T: j.Start.Sub(t0).Seconds(), Bytes: ur})
		left := ur
		if planned := j.Planned["recover"]; planned > 0 && ur > 0 {
			done := min(j.Done["recover"], planned)
			left = ur - ur*int64(done)/int64(planned)
		}
		pts = append(pts, URPoint{T: j.End.Sub(t0).Seconds(), Bytes: left})
	}
	return pts
}

// WindowStats summarises the operations arriving in [from, to) as one
// phase named name.
func WindowStats(name string, ops []Op, from, to float64) PhaseStats {
	var in []Op
	for _, op := range ops {
		if op.T >= from && op.T < to {
			in = append(in, Op{T: 0, LatMs: op.LatMs, Read: op.Read, Bytes: op.Bytes, Err: op.Err})
		}
	}
	span := max(to-from, 1e-9)
	ps := SplitPhases(in, span, -1, span)[0] // all at T=0 < span: one phase of span seconds
	ps.Name, ps.Start, ps.End = name, from, to
	return ps
}

// URPoint is the under-replicated total at one moment.
type URPoint struct {
	T     float64 // seconds since the load started
	Bytes int64
}

// PerSecond buckets ops by arrival second over [0, end) and attaches the
// under-replicated bytes of the latest scan (points in any order).
func PerSecond(ops []Op, ur []URPoint, failAt, protectedAt, end float64) []Second {
	n := int(math.Ceil(end))
	if n <= 0 {
		return nil
	}
	lat := make([][]float64, n)
	out := make([]Second, n)
	bytes := make([]int64, n)
	for i := range out {
		out[i] = Second{T: i, Phase: PhaseOf(float64(i), failAt, protectedAt), URBytes: -1}
	}
	for _, op := range ops {
		i := int(op.T)
		if i < 0 || i >= n {
			continue
		}
		out[i].Ops++
		if op.Err {
			out[i].Errors++
			continue
		}
		lat[i] = append(lat[i], op.LatMs)
		bytes[i] += op.Bytes
	}
	pts := append([]URPoint(nil), ur...)
	sort.Slice(pts, func(i, k int) bool { return pts[i].T < pts[k].T })
	j := 0
	cur := int64(-1)
	for i := range out {
		for j < len(pts) && pts[j].T < float64(i+1) {
			cur = pts[j].Bytes
			j++
		}
		out[i].URBytes = cur
		sort.Float64s(lat[i])
		out[i].MeanMs = Mean(lat[i])
		out[i].P99Ms = Percentile(lat[i], 99)
		out[i].MBps = float64(bytes[i]) / 1e6
	}
	return out
}

// Summary renders the result as the text summary.txt holds.
func Summary(r *Result) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Mirador failure experiment (terrace bench rebuild)\n\n")
	fmt.Fprintf(&b, "cluster: %d nodes, devices per node %s, vector %s, emulated media %v, egroup %s\n",
		o.Nodes, strings.Join(o.Devices, ","), o.Vector, o.Emulate, bytesOrDefault(o.EgroupBytes))
	fmt.Fprintf(&b, "preload: %d objects of %s (%s logical); load: %.0f ops/s open loop (%.0f %% reads), entry node %s\n",
		r.Preloaded, mib(o.ObjectBytes), mib(r.PreloadBytes), o.Rate, 100*o.ReadFraction, r.EntryNode)
	fmt.Fprintf(&b, "failure: device %s (%s used at the last heartbeat) failed by injected EIO at t=%.1fs; node saw it failed at t=%.1fs\n",
		r.FailedDevice, mib(r.FailedDeviceUsed), r.FailAt, r.DetectedAt)
	if r.Protected {
		fmt.Fprintf(&b, "time to protection: %.1f s after the failure (last copy at t=%.1fs; confirmed by a quiet scan starting t=%.1fs)\n",
			r.ProtectedAt-r.FailAt, r.ProtectedAt, r.ConfirmedAt)
	} else {
		fmt.Fprintf(&b, "time to protection: NOT reached within %s\n", o.MaxRebuild)
	}
	fmt.Fprintf(&b, "re-replicated: %s in %d recover tasks over %d jobs (%d stale, %d failed); peak under-replicated %s in %d egroups\n",
		mib(r.BytesMoved), r.RecoverTasks, r.Jobs, r.StaleTasks, r.FailedTasks, mib(r.PeakURBytes), r.PeakURGroups)
	if r.Protected && r.ProtectedAt > r.FailAt {
		fmt.Fprintf(&b, "rebuild rate: %.1f MB/s averaged from the failure to the last copy", float64(r.BytesMoved)/(r.ProtectedAt-r.FailAt)/1e6)
		if r.CopySeconds > 0 {
			fmt.Fprintf(&b, "; %.1f MB/s while copying (%.1f s of copying jobs from t=%.1fs)", float64(r.BytesMoved)/r.CopySeconds/1e6, r.CopySeconds, r.CopyFrom)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "\n%-9s %7s %7s %8s %8s %8s %8s %8s %8s %8s\n", "phase", "seconds", "ops", "ops/s", "MB/s", "mean_ms", "p50_ms", "p99_ms", "read_err", "writ_err")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "%-9s %7.1f %7d %8.1f %8.2f %8.2f %8.2f %8.2f %8d %8d\n", p.Name, p.Seconds, p.Ops, p.OpsPerSec, p.MBps,
			p.MeanMs, p.P50Ms, p.P99Ms, p.ReadErrors, p.WriteErrors)
	}
	if c := r.Copying; c.Name != "" {
		fmt.Fprintf(&b, "%-9s %7.1f %7d %8.1f %8.2f %8.2f %8.2f %8.2f %8d %8d   (only the copying jobs' span)\n", c.Name, c.Seconds, c.Ops, c.OpsPerSec, c.MBps,
			c.MeanMs, c.P50Ms, c.P99Ms, c.ReadErrors, c.WriteErrors)
	}
	if len(r.Phases) == 3 {
		base, reb := r.Phases[0], r.Phases[1]
		ratio := reb.P99Ms / base.P99Ms
		verdict := "within"
		if !(ratio <= 2) {
			verdict = "OVER"
		}
		fmt.Fprintf(&b, "\np99 during the rebuild / baseline p99: %.2fx (%s the 2x goal)\n", ratio, verdict)
	}
	fmt.Fprintf(&b, "\nverification after the tail: %d acknowledged objects; %d extents below the vector or on the failed device; %d reads failed, %d corrupt\n",
		r.Verify.Objects, r.Verify.UnderProtected, r.Verify.Lost, r.Verify.Corrupt)
	fmt.Fprintf(&b, "failed reads of acknowledged data during the load: %d\n", r.ReadFailures)
	return b.String()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func bytesOrDefault(n int64) string {
	if n == 0 {
		return "server default"
	}
	return mib(n)
}
