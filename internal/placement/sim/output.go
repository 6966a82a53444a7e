package sim

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// table is a CSV file under construction.
type table struct {
	header []string
	rows   [][]string
}

func newTable(header ...string) *table { return &table{header: header} }

func (t *table) add(vals ...any) {
	row := make([]string, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case float64:
			row[i] = strconv.FormatFloat(x, 'g', 6, 64)
		case string:
			row[i] = x
		default:
			row[i] = fmt.Sprint(x)
		}
	}
	t.rows = append(t.rows, row)
}

func (t *table) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(t.header)
	_ = w.WriteAll(t.rows)
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// series is one named line of a plot.
type series struct {
	name   string
	xs, ys []float64
}

func (s *series) add(x, y float64) {
	s.xs = append(s.xs, x)
	s.ys = append(s.ys, y)
}

type plotOpts struct {
	title, xlabel, ylabel string
	logX, logY            bool
	points                bool
}

// linePlot writes a PNG with one line per series.
func linePlot(path string, po plotOpts, ss []series) error {
	p := plot.New()
	p.Title.Text = po.title
	p.X.Label.Text = po.xlabel
	p.Y.Label.Text = po.ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	// A log axis needs a positive, non-degenerate range.
	spread := func(get func(s series) []float64) bool {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range ss {
			for _, v := range get(s) {
				if v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		return hi > lo
	}
	po.logX = po.logX && spread(func(s series) []float64 { return s.xs })
	po.logY = po.logY && spread(func(s series) []float64 { return s.ys })
	if po.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
	}
	if po.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{}
	}
	var args []any
	for _, s := range ss {
		xys := make(plotter.XYs, 0, len(s.xs))
		for i := range s.xs {
			y := s.ys[i]
			if po.logY && y <= 0 || po.logX && s.xs[i] <= 0 || math.IsNaN(y) {
				continue
			}
			xys = append(xys, plotter.XY{X: s.xs[i], Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		args = append(args, s.name, xys)
	}
	if len(args) > 0 {
		var err error
		if po.points {
			err = plotutil.AddLinePoints(p, args...)
		} else {
			err = plotutil.AddLines(p, args...)
		}
		if err != nil {
			return err
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// barPlot writes a grouped bar chart: one group per label, one bar per
// series (series i's ys[j] is its value for labels[j]).
func barPlot(path string, po plotOpts, labels []string, ss []series) error {
	p := plot.New()
	p.Title.Text = po.title
	p.Y.Label.Text = po.ylabel
	p.Legend.Top = true
	w := vg.Points(60 / float64(max(1, len(ss))))
	for i, s := range ss {
		bars, err := plotter.NewBarChart(plotter.Values(s.ys), w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(ss)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.NominalX(labels...)
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}
