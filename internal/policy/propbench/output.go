package propbench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Output file names under Options.Out.
const (
	CSVFile     = "policy_propagation.csv"
	PNGFile     = "policy_propagation_cdf.png"
	SummaryFile = "policy_propagation.md"
	JSONFile    = "policy_propagation.json"
)

// WriteOutputs writes the CSV of every sample, the CDF plot, the summary
// table (markdown) and the result as JSON.
func WriteOutputs(out string, res *Result) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, CSVFile))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"node", "version", "propose_unix_ns", "commit_unix_ns", "swap_unix_ns", "delay_ms", "after_commit_ms"})
	for _, s := range res.Samples {
		w.Write([]string{s.Node, fmt.Sprint(s.Version), fmt.Sprint(s.Propose.UnixNano()), fmt.Sprint(s.Commit.UnixNano()),
			fmt.Sprint(s.Swap.UnixNano()), fmt.Sprintf("%.3f", s.DelayMs), fmt.Sprintf("%.3f", s.AfterCommitMs)})
	}
	w.Flush()
	f.Close()
	if err := w.Error(); err != nil {
		return err
	}
	if err := plotCDF(filepath.Join(out, PNGFile), res); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, JSONFile), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, SummaryFile), []byte(Summary(res)), 0o644)
}

// Summary is the per-node table in markdown.
func Summary(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d nodes, %d versions committed through n1 every %s; delay from proposal (just before the\n"+
		"compare-and-swap) to the version being live on the node, consensus round included (ms):\n\n", res.Nodes, res.Updates, res.Interval)
	b.WriteString("| node | samples | missed | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|\n")
	rows := append(append([]Stats{}, res.PerNode...), res.Others, res.All)
	for _, s := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", s.Node, s.Samples, s.Missed, s.P50, s.P90, s.P99, s.Max)
	}
	if len(res.AfterCommit) > 0 {
		b.WriteString("\nThe same from the commit returning on the proposer (consensus excluded, as Malacology measured;\n" +
			"negative: the node was live before the proposer heard back):\n\n")
		b.WriteString("| node | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
		for _, s := range res.AfterCommit {
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f |\n", s.Node, s.P50, s.P90, s.P99, s.Max)
		}
	}
	fmt.Fprintf(&b, "\nconsensus round alone (proposal to commit returned, ms): p50 %.2f, p90 %.2f, p99 %.2f, max %.2f\n",
		res.Consensus.P50, res.Consensus.P90, res.Consensus.P99, res.Consensus.Max)
	fmt.Fprintf(&b, "put round trip at the client (validation + commit + local swap, ms): p50 %.2f, p90 %.2f, p99 %.2f, max %.2f\n",
		res.PutRTT.P50, res.PutRTT.P90, res.PutRTT.P99, res.PutRTT.Max)
	return b.String()
}

var palette = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, {R: 0xd6, G: 0x27, B: 0x28, A: 255}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 255},
	{R: 0xff, G: 0x7f, B: 0x0e, A: 255}, {R: 0x94, G: 0x67, B: 0xbd, A: 255}, {R: 0x8c, G: 0x56, B: 0x4b, A: 255},
}

// plotCDF draws one CDF of the delay per node (the paper's Figure 6).
func plotCDF(path string, res *Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Policy propagation, %d nodes: proposal to live (consensus included)", res.Nodes)
	p.X.Label.Text = "delay (ms, log scale)"
	p.Y.Label.Text = "fraction of versions live"
	p.Y.Min, p.Y.Max = 0, 1
	// Delays span 0.1 ms to hundreds of ms: a log axis keeps both the
	// body and the tail readable.
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	byNode := map[string][]float64{}
	var nodes []string
	for _, s := range res.Samples {
		if _, ok := byNode[s.Node]; !ok {
			nodes = append(nodes, s.Node)
		}
		byNode[s.Node] = append(byNode[s.Node], s.DelayMs)
	}
	sort.Strings(nodes)
	for i, n := range nodes {
		ds := byNode[n]
		sort.Float64s(ds)
		pts := make(plotter.XYs, len(ds))
		for j, d := range ds {
			pts[j].X, pts[j].Y = math.Max(d, 0.01), float64(j+1)/float64(len(ds))
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(n, l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(10)
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
