package scaleout

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/terrace-storage/terrace/internal/experiment/expplot"
)

// Output file names under Options.Out.
const (
	CSVFile     = "scaleout.csv"
	PNGFile     = "scaleout.png"
	SummaryFile = "summary.txt"
	JSONFile    = "result.json"
)

func writeOutputs(o Options, res *Result) error {
	if err := writeCSV(filepath.Join(o.Out, CSVFile), res); err != nil {
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
	return os.WriteFile(filepath.Join(o.Out, JSONFile), b, 0o644)
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
	out := struct {
		*Result
		Phases   []phase `json:"phases"`
		Headline string  `json:"headline"`
	}{Result: res, Headline: Headline(res)}
	for _, p := range res.Phases {
		out.Phases = append(out.Phases, phase{PhaseStats: p, MeanMs: num(p.MeanMs), P50Ms: num(p.P50Ms), P99Ms: num(p.P99Ms), MaxMs: num(p.MaxMs)})
	}
	return json.MarshalIndent(out, "", "  ")
}

func num(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// writeCSV writes one row per second: client throughput and latency,
// bytes the planned jobs have moved, and every node's used bytes (empty
// before the node is in the cluster view).
func writeCSV(path string, res *Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	head := []string{"t_s", "phase", "ops", "errors", "throughput_mb_s", "p50_latency_ms", "p99_latency_ms", "bytes_moved"}
	for _, n := range res.Nodes {
		head = append(head, n+"_used_bytes")
	}
	for _, n := range res.Nodes {
		head = append(head, n+"_disk_read_mb_s")
	}
	_ = w.Write(head)
	ms := func(x float64) string {
		if math.IsNaN(x) {
			return ""
		}
		return fmt.Sprintf("%.3f", x)
	}
	opt := func(x int64) string {
		if x < 0 {
			return ""
		}
		return fmt.Sprint(x)
	}
	for _, s := range res.Seconds {
		row := []string{fmt.Sprint(s.T), s.Phase, fmt.Sprint(s.Ops), fmt.Sprint(s.Errors), fmt.Sprintf("%.3f", s.MBps),
			ms(s.P50Ms), ms(s.P99Ms), opt(s.Moved)}
		for _, b := range s.NodeBytes {
			row = append(row, opt(b))
		}
		for _, x := range s.NodeReadMBps {
			row = append(row, ms(x))
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 255},
}

// writePNG draws four panels over time: client operations per second,
// p50 and p99 latency, every node's used bytes with the bytes the plan
// moved, and every node's disk reads; the join, the plan and the last
// move are marked.
func writePNG(path string, res *Result) error {
	thr := plot.New()
	thr.Title.Text = "A node joins a loaded cluster (terrace bench scaleout)\n" + strings.ReplaceAll(Headline(res), "; ", "\n")
	thr.Title.TextStyle.Font.Size = vg.Points(8)
	thr.Y.Label.Text = "client ops/s"
	lat := plot.New()
	lat.Y.Label.Text = "latency (ms)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	data := plot.New()
	data.Y.Label.Text = "used MiB"
	reads := plot.New()
	reads.X.Label.Text = "time since the load started (s)"
	reads.Y.Label.Text = "disk reads MB/s"

	var ops, p50, p99 plotter.XYs
	maxOps, maxLat := 1.0, 1.0
	for _, s := range res.Seconds {
		if s.Phase == PhaseWarmup {
			continue
		}
		x := float64(s.T) + 0.5
		ops = append(ops, plotter.XY{X: x, Y: float64(s.Ops)})
		maxOps = max(maxOps, float64(s.Ops))
		if !math.IsNaN(s.P50Ms) && s.P50Ms > 0 {
			p50 = append(p50, plotter.XY{X: x, Y: s.P50Ms})
			p99 = append(p99, plotter.XY{X: x, Y: s.P99Ms})
			maxLat = max(maxLat, s.P99Ms)
		}
	}
	if err := expplot.Line(thr, ops, palette[0], "ops/s (successful)"); err != nil {
		return err
	}
	for _, ph := range res.Phases {
		if ph.Seconds <= 0 || ph.Ops == 0 {
			continue
		}
		if err := expplot.Line(thr, plotter.XYs{{X: ph.Start, Y: ph.OpsPerSec}, {X: ph.End, Y: ph.OpsPerSec}}, palette[4], ""); err != nil {
			return err
		}
	}
	if err := expplot.Line(lat, p50, palette[0], "p50"); err != nil {
		return err
	}
	if err := expplot.Line(lat, p99, palette[1], "p99"); err != nil {
		return err
	}
	maxMiB := 1.0
	for k, node := range res.Nodes {
		var pts plotter.XYs
		for _, s := range res.Seconds {
			if b := s.NodeBytes[k]; b >= 0 {
				y := float64(b) / (1 << 20)
				pts = append(pts, plotter.XY{X: float64(s.T) + 1, Y: y})
				maxMiB = max(maxMiB, y)
			}
		}
		if err := expplot.Line(data, pts, palette[k%len(palette)], node+" used"); err != nil {
			return err
		}
	}
	maxRead := 1.0
	for k, node := range res.Nodes {
		var pts plotter.XYs
		for _, s := range res.Seconds {
			if s.Phase != PhaseWarmup && k < len(s.NodeReadMBps) && !math.IsNaN(s.NodeReadMBps[k]) {
				pts = append(pts, plotter.XY{X: float64(s.T) + 0.5, Y: s.NodeReadMBps[k]})
				maxRead = max(maxRead, s.NodeReadMBps[k])
			}
		}
		if err := expplot.Line(reads, pts, palette[k%len(palette)], node); err != nil {
			return err
		}
	}
	var moved plotter.XYs
	for _, s := range res.Seconds {
		if s.Moved >= 0 {
			moved = append(moved, plotter.XY{X: float64(s.T) + 1, Y: float64(s.Moved) / (1 << 20)})
		}
	}
	if err := expplot.Dashed(data, moved, color.Black, "moved by the plan"); err != nil {
		return err
	}
	m := res.Marks
	for _, pl := range []struct {
		p        *plot.Plot
		lo, top  float64
		withName bool
	}{{thr, 0, maxOps, true}, {lat, 0.1, maxLat, false}, {data, 0, maxMiB, false}, {reads, 0, maxRead, false}} {
		name := func(s string) string {
			if pl.withName {
				return s
			}
			return ""
		}
		if m.JoinAt < m.End {
			if err := expplot.Mark(pl.p, m.JoinAt, pl.lo, pl.top, palette[3], name(res.NewNode+" joins")); err != nil {
				return err
			}
		}
		if m.ApplyAt < m.End {
			if err := expplot.Mark(pl.p, m.ApplyAt, pl.lo, pl.top, palette[1], name("plan applied")); err != nil {
				return err
			}
		}
		if res.Balanced {
			if err := expplot.Mark(pl.p, m.BalancedAt, pl.lo, pl.top, palette[2], name("last move")); err != nil {
				return err
			}
		}
		pl.p.X.Min, pl.p.X.Max = m.Warmup, math.Max(m.End, m.Warmup+1)
		pl.p.Legend.Top = true
		pl.p.Legend.Left = true
		pl.p.Legend.TextStyle.Font.Size = vg.Points(7)
	}
	thr.Y.Min = 0
	data.Y.Min = 0
	reads.Y.Min = 0
	const w, h = 10 * vg.Inch, 11 * vg.Inch
	return expplot.SaveColumn(path, w, h, thr, lat, data, reads)
}
