package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// CompareOptions control a side-by-side comparison.
type CompareOptions struct {
	// Rounds is how many times each endpoint runs the workload, in
	// alternation A B A B …, so slow drift of the machine (thermal, noisy
	// neighbours, page cache) lands on every endpoint alike. Default 3.
	Rounds int
	// Baseline names the endpoint ratios are computed against. Default:
	// the first endpoint.
	Baseline string
	// OnRun, if set, is called before each timed run (for progress display).
	OnRun func(round int, r *Runner)
}

// MaxRounds bounds CompareOptions.Rounds.
const MaxRounds = 100

// Ratio compares one operation of one endpoint with the baseline. Every field
// is endpoint ÷ baseline: above 1 is better for throughput, worse for
// latency and CPU.
type Ratio struct {
	Endpoint  string  `json:"endpoint"`
	Op        Op      `json:"op"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MBPerSec  float64 `json:"mb_per_sec"`
	P50       float64 `json:"p50"`
	P99       float64 `json:"p99"`
	// ServerCPUPerOp is present when both endpoints report server stats.
	ServerCPUPerOp float64 `json:"server_cpu_per_op,omitempty"`
}

// CompareResult is the report of a comparison.
type CompareResult struct {
	Rounds   int    `json:"rounds"`
	Baseline string `json:"baseline"`
	Options  string `json:"options"`
	// Endpoints holds one result per endpoint, summed over all rounds (rates
	// are total operations over total timed seconds).
	Endpoints []*Result `json:"endpoints"`
	// RoundOpsPerSec[i][j] is endpoint i's total ops/s in round j, to show
	// the spread between rounds.
	RoundOpsPerSec [][]float64 `json:"round_ops_per_sec"`
	// PerRound[j][i] is endpoint i's result in round j.
	PerRound [][]*Result `json:"per_round"`
	Ratios   []Ratio     `json:"ratios"`
}

// Compare runs the same workload against every endpoint, alternating between
// them for the given rounds, and reports per-operation ratios against the
// baseline. Each endpoint keeps its objects between rounds and deletes them
// at the end. A failed run stops the comparison and returns what was
// measured so far with the error.
func Compare(ctx context.Context, eps []Endpoint, opts Options, copts CompareOptions) (*CompareResult, error) {
	if len(eps) < 2 {
		return nil, errors.New("bench: compare needs at least two endpoints")
	}
	if copts.Rounds == 0 {
		copts.Rounds = 3
	}
	if copts.Rounds < 1 || copts.Rounds > MaxRounds {
		return nil, fmt.Errorf("bench: rounds %d out of range [1, %d]", copts.Rounds, MaxRounds)
	}
	names := map[string]bool{}
	for _, ep := range eps {
		if names[ep.Name] {
			return nil, fmt.Errorf("bench: endpoint name %q used twice; give each a distinct NAME=", ep.Name)
		}
		names[ep.Name] = true
	}
	if copts.Baseline == "" {
		copts.Baseline = eps[0].Name
	}
	if !names[copts.Baseline] {
		return nil, fmt.Errorf("bench: baseline %q is not one of the endpoints", copts.Baseline)
	}
	runners := make([]*Runner, len(eps))
	for i, ep := range eps {
		r, err := NewRunner(ep, opts)
		if err != nil {
			return nil, err
		}
		runners[i] = r
	}
	cr := &CompareResult{Rounds: copts.Rounds, Baseline: copts.Baseline, Options: runners[0].Options().String(),
		RoundOpsPerSec: make([][]float64, len(eps))}
	var runErr error
rounds:
	for round := range copts.Rounds {
		var row []*Result
		for i, r := range runners {
			if copts.OnRun != nil {
				copts.OnRun(round, r)
			}
			res, err := r.Run(ctx)
			if err != nil {
				runErr = fmt.Errorf("bench: round %d, %s: %w", round+1, r.ep.Name, err)
				break rounds
			}
			row = append(row, res)
			cr.RoundOpsPerSec[i] = append(cr.RoundOpsPerSec[i], res.Total.OpsPerSec)
		}
		cr.PerRound = append(cr.PerRound, row)
	}
	for _, r := range runners {
		if err := r.Cleanup(context.WithoutCancel(ctx)); err != nil && runErr == nil {
			runErr = err
		}
	}
	if len(cr.PerRound) == 0 {
		return nil, runErr
	}
	for i := range eps {
		var rs []*Result
		for _, row := range cr.PerRound {
			rs = append(rs, row[i])
		}
		cr.Endpoints = append(cr.Endpoints, mergeResults(rs))
	}
	cr.Ratios = computeRatios(cr.Endpoints, copts.Baseline)
	return cr, runErr
}

// mergeResults sums results of the same workload on the same endpoint.
func mergeResults(rs []*Result) *Result {
	first := rs[0]
	m := &Result{Endpoint: first.Endpoint, URL: first.URL, Workload: first.Workload, Sizes: first.Sizes,
		Concurrency: first.Concurrency, Options: first.Options, Start: first.Start,
		Total: &OpResult{Op: "total"}}
	byOp := map[Op]*OpResult{}
	for _, r := range rs {
		m.ElapsedSeconds += r.ElapsedSeconds
		m.ClientCPUSeconds += r.ClientCPUSeconds
		for _, o := range r.Ops {
			acc := byOp[o.Op]
			if acc == nil {
				acc = &OpResult{Op: o.Op}
				byOp[o.Op] = acc
				m.Ops = append(m.Ops, acc)
			}
			acc.merge(o)
			m.Total.merge(o)
		}
		if r.Server != nil {
			if m.Server == nil {
				m.Server = &ServerResult{PID: r.Server.PID}
			}
			m.Server.CPUSeconds += r.Server.CPUSeconds
			m.Server.PeakRSSBytes = max(m.Server.PeakRSSBytes, r.Server.PeakRSSBytes)
			m.Server.RSSBytes = r.Server.RSSBytes
		}
		m.Notes = append(m.Notes, r.Notes...)
	}
	elapsed := secondsDuration(m.ElapsedSeconds)
	for _, o := range m.Ops {
		o.finish(elapsed)
	}
	m.Total.ErrorSamples = nil
	m.Total.finish(elapsed)
	if n := m.Total.Count; n > 0 {
		m.ClientCPUPerOpMs = m.ClientCPUSeconds * 1000 / float64(n)
		if m.Server != nil {
			m.Server.CPUPerOpMs = m.Server.CPUSeconds * 1000 / float64(n)
		}
	}
	return m
}

func computeRatios(results []*Result, baseline string) []Ratio {
	var base *Result
	for _, r := range results {
		if r.Endpoint == baseline {
			base = r
		}
	}
	var out []Ratio
	for _, r := range results {
		if r == base {
			continue
		}
		for _, o := range r.Ops {
			b := base.Op(o.Op)
			if b == nil {
				continue
			}
			ra := Ratio{Endpoint: r.Endpoint, Op: o.Op,
				OpsPerSec: div(o.OpsPerSec, b.OpsPerSec),
				MBPerSec:  div(o.MBPerSec, b.MBPerSec),
				P50:       div(o.Latency.P50Ms, b.Latency.P50Ms),
				P99:       div(o.Latency.P99Ms, b.Latency.P99Ms),
			}
			if r.Server != nil && base.Server != nil {
				ra.ServerCPUPerOp = div(r.Server.CPUPerOpMs, base.Server.CPUPerOpMs)
			}
			out = append(out, ra)
		}
	}
	return out
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// WriteCompareTable prints a comparison: one row per operation and endpoint
// with its rates, latencies, server cost, the spread of ops/s between
// rounds, and ratios against the baseline.
func WriteCompareTable(w io.Writer, cr *CompareResult) error {
	fmt.Fprintf(w, "%d rounds, alternating; ratios are endpoint ÷ %s\n", cr.Rounds, cr.Baseline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tendpoint\tops/s\tMB/s\tp50\tp99\terrors\tsrv cpu/op\tpeak rss\tround spread\tops/s ratio\tp50 ratio\t")
	ratio := map[string]Ratio{}
	for _, ra := range cr.Ratios {
		ratio[ra.Endpoint+"/"+string(ra.Op)] = ra
	}
	for _, op := range AllOps {
		for i, r := range cr.Endpoints {
			o := r.Op(op)
			if o == nil {
				continue
			}
			srvCPU, rss := "-", "-"
			if r.Server != nil {
				srvCPU, rss = FormatMs(r.Server.CPUPerOpMs), FormatSize(r.Server.PeakRSSBytes)
			}
			opsRatio, p50Ratio := "1x", "1x"
			if r.Endpoint != cr.Baseline {
				ra := ratio[r.Endpoint+"/"+string(op)]
				opsRatio, p50Ratio = FormatRatio(ra.OpsPerSec), FormatRatio(ra.P50)
			}
			spread := "-"
			if i < len(cr.RoundOpsPerSec) {
				spread = formatSpread(cr.RoundOpsPerSec[i])
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", op, r.Endpoint,
				FormatRate(o.OpsPerSec), FormatRate(o.MBPerSec), FormatMs(o.Latency.P50Ms), FormatMs(o.Latency.P99Ms),
				o.Errors, srvCPU, rss, spread, opsRatio, p50Ratio)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range cr.Endpoints {
		for _, o := range r.Ops {
			for _, e := range o.ErrorSamples {
				fmt.Fprintf(w, "  %s %s error: %s\n", r.Endpoint, o.Op, e)
			}
		}
	}
	return nil
}

// formatSpread prints (max − min) / mean of per-round rates as a percentage.
func formatSpread(v []float64) string {
	if len(v) < 2 {
		return "-"
	}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, x := range v {
		lo, hi, sum = math.Min(lo, x), math.Max(hi, x), sum+x
	}
	if sum == 0 {
		return "-"
	}
	return fmt.Sprintf("±%.0f%%", 50*(hi-lo)/(sum/float64(len(v))))
}
