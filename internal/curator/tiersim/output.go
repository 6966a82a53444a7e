package tiersim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/terrace-storage/terrace/internal/curator/tiersched"
)

// Write puts the report's files in dir: table1.csv (Table 1's metrics
// and what each scheduler did), series.csv (every run's 30-second time
// series), table1.png, one latency_<workload>.png per workload,
// model.json and pretrain.json (when the run pre-trained), and
// summary.md.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t1 := [][]string{{"workload", "scheduler", "mean_latency_ms", "ssd_read_bytes", "read_bytes", "client_iops", "device_iops",
		"tiering_jobs", "promotions_planned", "demotions_planned", "moved_bytes", "agent_decisions", "agent_explored", "agent_forced", "agent_runs", "agent_forced_starved", "promotions_refused"}}
	ser := [][]string{{"workload", "scheduler", "minutes", "latency_ms", "ssd_usage", "iops", "ssd_read_gb", "move_mbps", "action"}}
	for _, x := range r.Results {
		row := []string{x.Workload, x.Scheduler, f6(x.MeanLatencyMs), i64(x.SSDReadBytes), i64(x.ReadBytes), f6(x.ClientIOPS), f6(x.DeviceIOPS),
			strconv.Itoa(x.Jobs), strconv.Itoa(x.Promotions), strconv.Itoa(x.Demotions), i64(x.MovedBytes)}
		if a := x.Agent; a != nil {
			row = append(row, strconv.Itoa(a.Decisions), strconv.Itoa(a.Explored), strconv.Itoa(a.Forced), strconv.Itoa(a.Runs), strconv.Itoa(a.ForcedBy[tiersched.ForcedStarved]))
		} else {
			row = append(row, "", "", "", "", "")
		}
		row = append(row, strconv.Itoa(x.Refused))
		t1 = append(t1, row)
		for _, s := range x.Series {
			ser = append(ser, []string{x.Workload, x.Scheduler, f6(s.Minutes), f6(s.LatencyMs), f6(s.SSDUsage), f6(s.IOPS), f6(s.SSDReadGB), f6(s.MoveMBps), s.Action})
		}
	}
	if err := writeCSV(filepath.Join(dir, "table1.csv"), t1); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "series.csv"), ser); err != nil {
		return err
	}
	if err := r.plots(dir); err != nil {
		return err
	}
	if r.Pretrain != nil {
		b, err := r.Pretrain.Model.Marshal()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "model.json"), b, 0o644); err != nil {
			return err
		}
		b, _ = json.MarshalIndent(struct {
			Seeds  []uint64 `json:"seeds"`
			Report any      `json:"report"`
		}{r.Pretrain.Seeds, r.Pretrain.Report}, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "pretrain.json"), b, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(r.Summary()), 0o644)
}

func f6(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
func i64(x int64) string  { return strconv.FormatInt(x, 10) }

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.WriteAll(rows)
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pair returns the threshold and qlearning results of a workload.
func (r *Report) pair(w string) (th, ql *Result) {
	for i := range r.Results {
		x := &r.Results[i]
		if x.Workload != w {
			continue
		}
		switch x.Scheduler {
		case "threshold":
			th = x
		case "qlearning":
			ql = x
		}
	}
	return th, ql
}

func (r *Report) workloads() []string {
	var ws []string
	seen := map[string]bool{}
	for _, x := range r.Results {
		if !seen[x.Workload] {
			seen[x.Workload] = true
			ws = append(ws, x.Workload)
		}
	}
	return ws
}

// Change is qlearning's relative change against threshold (negative:
// lower).
func Change(th, ql float64) float64 {
	if th == 0 {
		return 0
	}
	return (ql - th) / th
}

// Summary renders Table 1 as markdown with the relative changes.
func (r *Report) Summary() string {
	var b strings.Builder
	b.WriteString("# terrace sim tiering\n\n")
	fmt.Fprintf(&b, "Options: `%s`\n\n", r.Options)
	b.WriteString("Table 1 (execution phase; Δ is Q-learning against fixed thresholds):\n\n")
	b.WriteString("| workload | metric | fixed threshold | q-learning | Δ |\n|---|---|---|---|---|\n")
	for _, w := range r.workloads() {
		th, ql := r.pair(w)
		if th == nil || ql == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | mean latency (ms) | %.3f | %.3f | %+.1f %% |\n", w, th.MeanLatencyMs, ql.MeanLatencyMs, 100*Change(th.MeanLatencyMs, ql.MeanLatencyMs))
		fmt.Fprintf(&b, "| | ssd reads (GB) | %.2f | %.2f | %+.1f %% |\n", float64(th.SSDReadBytes)/1e9, float64(ql.SSDReadBytes)/1e9, 100*Change(float64(th.SSDReadBytes), float64(ql.SSDReadBytes)))
		fmt.Fprintf(&b, "| | device IOPS | %.1f | %.1f | %+.1f %% |\n", th.DeviceIOPS, ql.DeviceIOPS, 100*Change(th.DeviceIOPS, ql.DeviceIOPS))
		fmt.Fprintf(&b, "| | tiering jobs / moved (GB) | %d / %.1f | %d / %.1f | |\n", th.Jobs, float64(th.MovedBytes)/1e9, ql.Jobs, float64(ql.MovedBytes)/1e9)
	}
	for _, x := range r.Results {
		if x.Agent != nil {
			fmt.Fprintf(&b, "\nAgent on %s: %d decisions, %d runs (%d explored, %d forced: %d by the ceiling, %d by promotion starvation), %d updates.", x.Workload, x.Agent.Decisions, x.Agent.Runs, x.Agent.Explored,
				x.Agent.Forced, x.Agent.ForcedBy[tiersched.ForcedCeiling], x.Agent.ForcedBy[tiersched.ForcedStarved], x.Agent.Updates)
		}
	}
	b.WriteString("\n")
	if p := r.Pretrain; p != nil {
		fmt.Fprintf(&b, "\nPre-training (seeds %v, threshold behaviour with random actions): %d transitions (%d train, %d test), actions %v, learning rate %g by 3-fold cross validation, squared TD error train %.3g / test %.3g.\n\n```\n%s```\n",
			p.Seeds, p.Report.Transitions, p.Report.Train, p.Report.Test, p.Report.ActionCounts, p.Report.Alpha, p.Report.TrainLoss, p.Report.TestLoss, p.Model)
	}
	return b.String()
}

func (r *Report) plots(dir string) error {
	ws := r.workloads()
	var th, ql plotter.Values
	var thR, qlR plotter.Values
	for _, w := range ws {
		a, b := r.pair(w)
		if a == nil || b == nil {
			continue
		}
		th, ql = append(th, a.MeanLatencyMs), append(ql, b.MeanLatencyMs)
		thR, qlR = append(thR, float64(a.SSDReadBytes)/1e9), append(qlR, float64(b.SSDReadBytes)/1e9)
		if err := r.latencyPlot(filepath.Join(dir, "latency_"+w+".png"), w); err != nil {
			return err
		}
	}
	if len(th) == 0 {
		return nil
	}
	if err := bars(filepath.Join(dir, "table1.png"), "Mean client latency, execution phase", "ms", ws, th, ql); err != nil {
		return err
	}
	return bars(filepath.Join(dir, "ssd_reads.png"), "Client bytes read from ssd, execution phase", "GB", ws, thR, qlR)
}

func bars(path, title, ylabel string, labels []string, a, b plotter.Values) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	w := vg.Points(22)
	for i, s := range []struct {
		name string
		v    plotter.Values
	}{{"fixed threshold", a}, {"q-learning", b}} {
		bc, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return err
		}
		bc.LineStyle.Width = 0
		bc.Color = plotutil.Color(i)
		bc.Offset = w * vg.Length(float64(i)-0.5)
		p.Add(bc)
		p.Legend.Add(s.name, bc)
	}
	p.NominalX(labels...)
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// latencyPlot draws both schedulers' latency (30 s means) and the ssd's
// usage over the execution phase of one workload.
func (r *Report) latencyPlot(path, w string) error {
	th, ql := r.pair(w)
	p := plot.New()
	p.Title.Text = w + ": client latency (30 s means) and ssd usage"
	p.X.Label.Text = "minutes into the execution phase"
	p.Y.Label.Text = "ms  /  ssd usage × 10"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	var args []any
	for _, x := range []*Result{th, ql} {
		lat := make(plotter.XYs, len(x.Series))
		use := make(plotter.XYs, len(x.Series))
		for i, s := range x.Series {
			lat[i] = plotter.XY{X: s.Minutes, Y: s.LatencyMs}
			use[i] = plotter.XY{X: s.Minutes, Y: 10 * s.SSDUsage}
		}
		args = append(args, x.Scheduler+" latency", lat, x.Scheduler+" ssd usage", use)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return err
	}
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}
