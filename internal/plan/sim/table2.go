package sim

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/terrace-storage/terrace/internal/plan"
)

// Size is one row of Table 2.
type Size struct{ Objects, Devices int }

// Table2Sizes are the paper's cluster sizes.
var Table2Sizes = []Size{{1_000, 10}, {10_000, 100}, {100_000, 1_000}, {1_000_000, 10_000}}

// Table2Rules is the policy of the benchmark.
const Table2Rules = "device_has_space\nload_balanced spread=0.2\n"

// Options configure a run. Zero values mean the paper's setup.
type Options struct {
	// Sizes to run (default Table2Sizes).
	Sizes []Size
	// Seed of the first cluster; run i of a size uses Seed+i.
	Seed uint64
	// Runs per size, averaged (the paper averages ten; default 3).
	Runs int
	// Replicas per object (default 1).
	Replicas int
	// BatchEgroups is the planner's batch size (default the planner's,
	// 10,000).
	BatchEgroups int
	// Out is the directory for planner-table2.csv and planner-table2.png;
	// empty writes nothing.
	Out string
	// Progress, if set, is called after each run.
	Progress func(size Size, run int, r RunResult)
}

// RunResult is one solve.
type RunResult struct {
	Seconds     float64
	InitialCost float64
	FinalCost   float64
	Moves       int
}

// Result is one size's averages; the JSON field names are the CLI's.
type Result struct {
	Objects     int     `json:"objects"`
	Devices     int     `json:"devices"`
	Runs        int     `json:"runs"`
	Seconds     float64 `json:"seconds"`
	MaxSeconds  float64 `json:"max_seconds"`
	InitialCost float64 `json:"initial_cost"`
	FinalCost   float64 `json:"final_cost"`
	Moves       float64 `json:"moves"`
	// FinalHard is the broken hard rules left (0 in every run the paper's
	// way; non-zero would mean no finite layout was found).
	FinalHard float64 `json:"final_hard"`
}

// Run generates each size's clusters, plans them with the real planner,
// times the solves (generation excluded; validation and the planner's own
// set-up included) and writes the outputs.
func Run(o Options) ([]Result, error) {
	if len(o.Sizes) == 0 {
		o.Sizes = Table2Sizes
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Runs < 1 || o.Runs > 100 {
		return nil, fmt.Errorf("sim: runs must be in [1, 100], got %d", o.Runs)
	}
	rules, err := plan.ParseRuleSet(Table2Rules)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, sz := range o.Sizes {
		res := Result{Objects: sz.Objects, Devices: sz.Devices, Runs: o.Runs}
		for run := range o.Runs {
			m, err := Generate(ClusterSpec{Objects: sz.Objects, Devices: sz.Devices, Seed: o.Seed + uint64(run), Replicas: o.Replicas})
			if err != nil {
				return nil, err
			}
			start := time.Now()
			p, err := plan.Solve(m, rules, plan.Options{Seed: o.Seed + uint64(run), BatchEgroups: o.BatchEgroups})
			if err != nil {
				return nil, err
			}
			r := RunResult{Seconds: time.Since(start).Seconds(), InitialCost: p.Initial.Soft, FinalCost: p.Final.Soft, Moves: len(p.Moves)}
			res.Seconds += r.Seconds / float64(o.Runs)
			res.MaxSeconds = math.Max(res.MaxSeconds, r.Seconds)
			res.InitialCost += r.InitialCost / float64(o.Runs)
			res.FinalCost += r.FinalCost / float64(o.Runs)
			res.Moves += float64(r.Moves) / float64(o.Runs)
			res.FinalHard += p.Final.Hard / float64(o.Runs)
			if o.Progress != nil {
				o.Progress(sz, run, r)
			}
		}
		out = append(out, res)
	}
	if o.Out != "" {
		if err := writeOutputs(o.Out, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func writeOutputs(dir string, rs []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "planner-table2.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"objects", "devices", "runs", "seconds", "max_seconds", "initial_cost", "final_cost", "moves", "final_hard"})
	for _, r := range rs {
		g := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
		_ = w.Write([]string{strconv.Itoa(r.Objects), strconv.Itoa(r.Devices), strconv.Itoa(r.Runs), g(r.Seconds), g(r.MaxSeconds),
			g(r.InitialCost), g(r.FinalCost), g(r.Moves), g(r.FinalHard)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return plotSolveTime(filepath.Join(dir, "planner-table2.png"), rs)
}

// plotSolveTime draws solve time against objects, log-log: a straight
// line of slope ~1 is the O(N log N log M) the paper states.
func plotSolveTime(path string, rs []Result) error {
	p := plot.New()
	p.Title.Text = "Planner solve time (Mirador Table 2: device_has_space + load_balanced 20%)"
	p.X.Label.Text = "objects (devices = objects / 100)"
	p.Y.Label.Text = "seconds to zero cost"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	var xys plotter.XYs
	for _, r := range rs {
		if r.Seconds > 0 && r.Objects > 0 {
			xys = append(xys, plotter.XY{X: float64(r.Objects), Y: r.Seconds})
		}
	}
	if len(xys) >= 2 && xys[0].X != xys[len(xys)-1].X {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	}
	if len(xys) > 0 {
		if err := plotutil.AddLinePoints(p, "greedy solver (Go)", xys); err != nil {
			return err
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
