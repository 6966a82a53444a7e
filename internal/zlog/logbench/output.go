package logbench

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writeOutputs writes results.csv, the plots and summary.md.
func writeOutputs(dir string, res *Result) error {
	f, err := os.Create(outPath(dir, "results.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"experiment", "variant", "clients", "depth", "lease", "ops", "seconds", "per_second", "mb_per_second",
		"p50_ms", "p99_ms", "p999_ms", "max_ms", "lag_p50_ms", "lag_p99_ms", "server_cpu_s", "server_cpu_us_per_op", "errors", "note"})
	for _, r := range res.Rows {
		lag50, lag99 := "", ""
		if r.Lag != nil {
			lag50, lag99 = fmt.Sprintf("%.3f", r.Lag.P50Ms), fmt.Sprintf("%.3f", r.Lag.P99Ms)
		}
		cpuPer := ""
		if r.Ops > 1 && r.ServerCPU > 0 {
			cpuPer = fmt.Sprintf("%.1f", r.ServerCPU/float64(r.Ops)*1e6)
		}
		w.Write([]string{r.Experiment, r.Variant, fmt.Sprint(r.Clients), fmt.Sprint(r.Depth), fmt.Sprint(r.Lease), fmt.Sprint(r.Ops),
			fmt.Sprintf("%.3f", r.Seconds), fmt.Sprintf("%.1f", r.PerSec), fmt.Sprintf("%.2f", r.MBps),
			fmt.Sprintf("%.3f", r.Latency.P50Ms), fmt.Sprintf("%.3f", r.Latency.P99Ms), fmt.Sprintf("%.3f", r.Latency.P999Ms),
			fmt.Sprintf("%.3f", r.Latency.MaxMs), lag50, lag99, fmt.Sprintf("%.2f", r.ServerCPU), cpuPer, fmt.Sprint(r.Errors), r.Note})
	}
	w.Flush()
	f.Close()
	if err := w.Error(); err != nil {
		return err
	}
	if err := plotPositions(dir, res); err != nil {
		return err
	}
	if err := plotFailover(dir, res); err != nil {
		return err
	}
	return os.WriteFile(outPath(dir, "summary.md"), []byte(summary(res)), 0o644)
}

var (
	blue = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}
	red  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}
)

// plotPositions: positions per second by lease size (log-log), with the
// no-lease round-trip rates as reference lines.
func plotPositions(dir string, res *Result) error {
	var pts plotter.XYs
	for _, r := range res.Rows {
		if r.Experiment == "lease" && r.PerSec > 0 {
			pts = append(pts, plotter.XY{X: float64(max(r.Lease, 1)), Y: r.PerSec})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Sequencer: positions per second by lease size (2 clients)"
	p.X.Label.Text = "positions per lease (1 = no lease: one round trip per position)"
	p.Y.Label.Text = "positions / s"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, s.Color = blue, blue
	p.Add(l, s)
	p.Legend.Add("leased batching", l)
	target := plotter.XYs{{X: pts[0].X, Y: 200000}, {X: pts[len(pts)-1].X, Y: 200000}}
	tl, err := plotter.NewLine(target)
	if err != nil {
		return err
	}
	tl.Color = red
	tl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(tl)
	p.Legend.Add("200K positions/s", tl)
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, outPath(dir, "lease.png"))
}

// plotFailover: appends per 100 ms over time, kills marked.
func plotFailover(dir string, res *Result) error {
	if len(res.Timeline) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Appends per 100 ms while the sequencer host is killed (SIGKILL)"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "appends / 100 ms"
	var pts plotter.XYs
	peak := 0.0
	for _, s := range res.Timeline {
		pts = append(pts, plotter.XY{X: s.T, Y: float64(s.Appends)})
		peak = math.Max(peak, float64(s.Appends))
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = blue
	p.Add(l)
	p.Legend.Add("8 appenders, 1 KiB entries", l)
	for i, k := range res.Kills {
		kl, err := plotter.NewLine(plotter.XYs{{X: k, Y: 0}, {X: k, Y: peak}})
		if err != nil {
			return err
		}
		kl.Color = red
		kl.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		p.Add(kl)
		if i == 0 {
			p.Legend.Add("kill -9 of the host", kl)
		}
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, outPath(dir, "failover.png"))
}

func summary(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# terrace bench log\n\n`%s`\n\n", res.Options)
	fmt.Fprintln(&b, "| experiment | variant | ops/s | MB/s | p50 ms | p99 ms | subscriber lag p50/p99 ms | server CPU µs/op | errors |")
	fmt.Fprintln(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range res.Rows {
		if r.Experiment == "failover" {
			continue
		}
		lag := "-"
		if r.Lag != nil {
			lag = fmt.Sprintf("%.1f / %.1f", r.Lag.P50Ms, r.Lag.P99Ms)
		}
		cpu := "-"
		if r.Ops > 0 && r.ServerCPU > 0 {
			cpu = fmt.Sprintf("%.0f", r.ServerCPU/float64(r.Ops)*1e6)
		}
		mb := "-"
		if r.MBps > 0 {
			mb = fmt.Sprintf("%.1f", r.MBps)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %.3f | %.3f | %s | %s | %d |\n", r.Experiment, r.Variant, r.PerSec, mb,
			r.Latency.P50Ms, r.Latency.P99Ms, lag, cpu, r.Errors)
	}
	if len(res.Resumes) > 0 {
		var rs []string
		for _, d := range res.Resumes {
			rs = append(rs, d.Round(time.Millisecond).String())
		}
		fmt.Fprintf(&b, "\nFailover: appends resumed %s after each kill -9 of the sequencer host.\n", strings.Join(rs, ", "))
	}
	return b.String()
}
