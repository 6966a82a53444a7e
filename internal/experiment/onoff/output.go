package onoff

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func writeOutputs(o Options, res *Result) error {
	f, err := os.Create(filepath.Join(o.Out, "curator_onoff.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"mode", "phase", "t_s", "ssd_used_bytes", "ssd_capacity_bytes", "hdd_used_bytes", "hdd_capacity_bytes", "ops", "mean_latency_ms",
		"agent_decision", "agent_q", "starved", "promotions_refused"})
	for _, s := range res.Samples {
		w.Write([]string{s.Mode, s.Phase, fmt.Sprintf("%.1f", s.T), fmt.Sprint(s.SSDUsed), fmt.Sprint(s.SSDCap),
			fmt.Sprint(s.HDDUsed), fmt.Sprint(s.HDDCap), fmt.Sprint(s.Ops), fmt.Sprintf("%.3f", s.MeanLatMs),
			s.Decision, s.AgentQ, fmt.Sprint(s.Starved), fmt.Sprint(s.Refused)})
	}
	w.Flush()
	f.Close()
	if err := w.Error(); err != nil {
		return err
	}
	if err := plotSeries(o, res, "curator_onoff_ssd.png", "SSD tier usage (%)", func(s Sample) float64 {
		if s.SSDCap == 0 {
			return 0
		}
		return 100 * float64(s.SSDUsed) / float64(s.SSDCap)
	}); err != nil {
		return err
	}
	// Latency over the execution phase only: prefill is a bulk load and
	// destroy a burst of deletes; the paper reports execution latency.
	if err := plotSeries(o, res, "curator_onoff_latency.png", "mean client latency, execution (ms)", func(s Sample) float64 {
		if s.Phase != "execute" {
			return math.NaN()
		}
		return s.MeanLatMs
	}); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "summary.md"), []byte(summary(o, res)), 0o644)
}

var modeColor = map[string]color.RGBA{"on": {R: 0x1f, G: 0x77, B: 0xb4, A: 255}, "off": {R: 0xd6, G: 0x27, B: 0x28, A: 255},
	"threshold": {R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, "qlearning": {R: 0x94, G: 0x67, B: 0xbd, A: 255}}

func plotSeries(o Options, res *Result, name, ylabel string, val func(Sample) float64) error {
	p := plot.New()
	p.Title.Text = "Curator ON vs OFF: " + ylabel
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	for _, m := range res.Modes {
		var pts plotter.XYs
		for _, s := range res.Samples {
			if y := val(s); s.Mode == m.Mode && !math.IsNaN(y) {
				pts = append(pts, plotter.XY{X: s.T, Y: y})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = modeColor[m.Mode]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("curator "+m.Mode, l)
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(o.Out, name))
}

func summary(o Options, res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Curator ON/OFF experiment\n\n")
	emulated := fmt.Sprint(o.Emulate)
	if o.HDDProfile != "" {
		emulated += ", hdd profile " + o.HDDProfile
	}
	fmt.Fprintf(&b, "%d nodes; per node ssd %d MiB and hdd %d MiB (emulated: %s); egroups of %d KiB; data section %d MiB of 8 KiB (90 %%) / 32 KiB (10 %%) objects, vector any=2;\n",
		o.Nodes, o.SSDBytes>>20, o.HDDBytes>>20, emulated, o.EgroupBytes>>10, o.DataBytes>>20)
	load := fmt.Sprintf("%d closed-loop clients", o.Concurrency)
	if o.Rate > 0 {
		load = fmt.Sprintf("an open-loop load of %.0f operations/s (Poisson arrivals, at most %d in flight; latency from arrival)", o.Rate, o.MaxInFlight)
	}
	if o.Workload == "oltp-skewed" {
		fmt.Fprintf(&b, "execution %s with %s, oltp-skewed: reads of the data section only (%.0f %% of them to the hottest %.0f %%), 1 %% log-section 32 KiB appends; then every object deleted.\n\n",
			o.Exec, load, 100*o.HotShare, 100*o.HotFraction)
	} else {
		fmt.Fprintf(&b, "execution %s with %s: 40 %% reads and 50 %% overwrites of the data section (%.0f %% of accesses to the hottest %.0f %%), 10 %% log-section 32 KiB appends; then every object deleted.\n\n",
			o.Exec, load, 100*o.HotShare, 100*o.HotFraction)
	}
	get := func(mode string) ModeResult {
		for _, m := range res.Modes {
			if m.Mode == mode {
				return m
			}
		}
		return ModeResult{}
	}
	// Columns: ON and OFF, or the two tiering schedulers.
	left, right, lname, rname := "on", "off", "Curator ON", "Curator OFF"
	if get("on").Mode == "" && get("off").Mode == "" {
		left, right, lname, rname = "threshold", "qlearning", "fixed thresholds", "Q-learning"
	}
	fmt.Fprintf(&b, "| | %s | %s |\n|---|---|---|\n", lname, rname)
	on, off := get(left), get(right)
	row := func(name string, f func(ModeResult) string) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, f(on), f(off))
	}
	if o.Warmup > 0 {
		row(fmt.Sprintf("mean latency, execution after %s warm-up (ms)", o.Warmup), func(m ModeResult) string { return fmt.Sprintf("%.2f", m.ExecMeanLatMs) })
		row("mean latency, whole execution (ms)", func(m ModeResult) string { return fmt.Sprintf("%.2f", m.WholeMeanLatMs) })
	} else {
		row("mean latency, execution (ms)", func(m ModeResult) string { return fmt.Sprintf("%.2f", m.ExecMeanLatMs) })
	}
	row("mean read / write latency (ms)", func(m ModeResult) string { return fmt.Sprintf("%.2f / %.2f", m.ExecReadLatMs, m.ExecWriteLatMs) })
	row("p99 latency, execution (ms)", func(m ModeResult) string { return fmt.Sprintf("%.2f", m.ExecP99LatMs) })
	row("operations, execution", func(m ModeResult) string { return fmt.Sprintf("%d (%d errors)", m.ExecOps, m.ExecErrors) })
	row("peak ssd usage", func(m ModeResult) string { return fmt.Sprintf("%.0f%%", 100*m.PeakSSDUse) })
	row("ssd usage at end of execution", func(m ModeResult) string { return fmt.Sprintf("%.0f%%", 100*m.EndSSDUse) })
	row("tiering moves in execution (up / down), MB moved", func(m ModeResult) string {
		return fmt.Sprintf("%d / %d, %.1f", m.ExecUp, m.ExecDown, float64(m.ExecMovedBytes)/(1<<20))
	})
	row("tiering runs in execution (forced by promotion starvation)", func(m ModeResult) string { return fmt.Sprintf("%d (%d)", m.ExecRuns, m.ExecStarvedRuns) })
	row("space used before destroy (MiB)", func(m ModeResult) string { return fmt.Sprintf("%.1f", float64(m.UsedBeforeDest)/(1<<20)) })
	row("space used after destroy (MiB)", func(m ModeResult) string { return fmt.Sprintf("%.1f", float64(m.UsedAfterDest)/(1<<20)) })
	if left == "threshold" && on.ExecMeanLatMs > 0 && off.ExecMeanLatMs > 0 {
		fmt.Fprintf(&b, "\nQ-learning against fixed thresholds, mean latency: **%+.1f %%** (paper, oltp-skewed: 18.55 → 14.91 ms, −19.6 %%).\n", 100*(off.ExecMeanLatMs-on.ExecMeanLatMs)/on.ExecMeanLatMs)
	} else if on.ExecMeanLatMs > 0 && off.ExecMeanLatMs > 0 {
		fmt.Fprintf(&b, "\nMean latency OFF/ON: **%.1f×** (paper: 61.7 → 12.3 ms, 5.0×)", off.ExecMeanLatMs/on.ExecMeanLatMs)
		if o.Warmup > 0 && on.WholeMeanLatMs > 0 {
			fmt.Fprintf(&b, " after the warm-up; %.1f× over the whole execution", off.WholeMeanLatMs/on.WholeMeanLatMs)
		}
		fmt.Fprintf(&b, ".\n")
	}
	fmt.Fprintf(&b, "\nPlots: `curator_onoff_ssd.png`, `curator_onoff_latency.png`; raw series: `curator_onoff.csv`.\n")
	return b.String()
}
