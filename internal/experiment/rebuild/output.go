package rebuild

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/terrace-storage/terrace/internal/experiment/expplot"
)

// Output file names under Options.Out.
const (
	CSVFile     = "rebuild.csv"
	PNGFile     = "rebuild.png"
	SummaryFile = "summary.txt"
	JSONFile    = "result.json"
	JobsFile    = "curator_jobs.json"
)

func writeOutputs(o Options, res *Result) error {
	if err := writeCSV(filepath.Join(o.Out, CSVFile), res.Seconds); err != nil {
		return err
	}
	if err := writePNG(filepath.Join(o.Out, PNGFile), res); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, SummaryFile), []byte(Summary(res)), 0o644); err != nil {
		return err
	}
	b, err := JSON(res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, JSONFile), b, 0o644); err != nil {
		return err
	}
	jb, err := json.MarshalIndent(res.JobsAfterFailure, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, JobsFile), jb, 0o644)
}

// JSON renders the result for --json; an undefined statistic (an empty
// phase's percentile) is null.
func JSON(res *Result) ([]byte, error) {
	type phase struct {
		PhaseStats
		MeanMs *float64 `json:"mean_ms"`
		P50Ms  *float64 `json:"p50_ms"`
		P99Ms  *float64 `json:"p99_ms"`
		MaxMs  *float64 `json:"max_ms"`
	}
	num := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	out := struct {
		*Result
		Phases   []phase  `json:"phases"`
		Copying  phase    `json:"copying"`
		P99Ratio *float64 `json:"p99_rebuild_over_baseline"`
	}{Result: res, P99Ratio: num(res.P99Ratio)}
	c := res.Copying
	out.Copying = phase{PhaseStats: c, MeanMs: num(c.MeanMs), P50Ms: num(c.P50Ms), P99Ms: num(c.P99Ms), MaxMs: num(c.MaxMs)}
	for _, p := range res.Phases {
		out.Phases = append(out.Phases, phase{PhaseStats: p, MeanMs: num(p.MeanMs), P50Ms: num(p.P50Ms), P99Ms: num(p.P99Ms), MaxMs: num(p.MaxMs)})
	}
	return json.MarshalIndent(out, "", "  ")
}

func writeCSV(path string, secs []Second) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"t_s", "phase", "ops", "errors", "mean_latency_ms", "p99_latency_ms", "throughput_mb_s", "under_replicated_bytes"})
	ms := func(x float64) string {
		if math.IsNaN(x) {
			return ""
		}
		return fmt.Sprintf("%.3f", x)
	}
	for _, s := range secs {
		_ = w.Write([]string{fmt.Sprint(s.T), s.Phase, fmt.Sprint(s.Ops), fmt.Sprint(s.Errors), ms(s.MeanMs), ms(s.P99Ms),
			fmt.Sprintf("%.3f", s.MBps), fmt.Sprint(s.URBytes)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255}
	red    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}
	green  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}
)

// writePNG draws client latency (mean and p99 per second) above the
// under-replicated bytes, with the failure and protection marked.
func writePNG(path string, res *Result) error {
	lat := plot.New()
	lat.Title.Text = "Client latency through a device failure and its rebuild"
	lat.Y.Label.Text = "latency (ms)"
	var mean, p99 plotter.XYs
	maxLat := 0.0
	for _, s := range res.Seconds {
		if !math.IsNaN(s.MeanMs) {
			mean = append(mean, plotter.XY{X: float64(s.T), Y: s.MeanMs})
			p99 = append(p99, plotter.XY{X: float64(s.T), Y: s.P99Ms})
			maxLat = max(maxLat, s.P99Ms)
		}
	}
	if err := expplot.Line(lat, mean, blue, "mean"); err != nil {
		return err
	}
	if err := expplot.Line(lat, p99, orange, "p99"); err != nil {
		return err
	}
	ur := plot.New()
	ur.X.Label.Text = "time since the load started (s)"
	ur.Y.Label.Text = "under-replicated (MiB)"
	var urPts plotter.XYs
	maxUR := 0.0
	for _, s := range res.Seconds {
		if s.URBytes >= 0 {
			y := float64(s.URBytes) / (1 << 20)
			urPts = append(urPts, plotter.XY{X: float64(s.T), Y: y})
			maxUR = max(maxUR, y)
		}
	}
	if err := expplot.Line(ur, urPts, blue, "under-replicated bytes (scans; less recoveries done)"); err != nil {
		return err
	}
	for _, pl := range []struct {
		p   *plot.Plot
		top float64
	}{{lat, maxLat}, {ur, maxUR}} {
		if err := expplot.Mark(pl.p, res.FailAt, 0, max(pl.top, 1), red, "device failed"); err != nil {
			return err
		}
		if res.DetectedAt > 0 {
			if err := expplot.Mark(pl.p, res.DetectedAt, 0, max(pl.top, 1), orange, "node marks it failed"); err != nil {
				return err
			}
		}
		if res.Protected {
			if err := expplot.Mark(pl.p, res.ProtectedAt, 0, max(pl.top, 1), green, "fully protected"); err != nil {
				return err
			}
		}
		pl.p.X.Min, pl.p.X.Max = 0, math.Max(res.EndAt, 1)
		pl.p.Legend.Top = true
	}
	const w, h = 9 * vg.Inch, 7 * vg.Inch
	return expplot.SaveColumn(path, w, h, lat, ur)
}
