package chaos

import (
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
)

// plotBucket is the timeline's resolution.
const plotBucket = 5.0 // seconds

// faultRows places each kind of fault on its own row above the curves.
var faultRows = []struct {
	kinds []nemesis.Kind
	label string
	color color.RGBA
}{
	{[]nemesis.Kind{nemesis.Kill, nemesis.Pause}, "kill/pause", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}},
	{[]nemesis.Kind{nemesis.Isolate, nemesis.Partition}, "partition", color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255}},
	{[]nemesis.Kind{nemesis.Delay, nemesis.Drop}, "slow/lossy link", color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255}},
	{[]nemesis.Kind{nemesis.DiskEIO, nemesis.DiskFull, nemesis.DiskSlow}, "disk", color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 255}},
}

// plotTimeline draws operations per second (successful, and failed or
// unknown) over the run, with every fault as a bar on its kind's row: a
// picture of what degraded when.
func plotTimeline(path string, ops []history.Op, evs []Executed) error {
	type bucket struct{ ok, bad float64 }
	var bs []bucket
	for _, op := range ops {
		if op.Final {
			continue
		}
		i := int(float64(op.Call) / 1e9 / plotBucket)
		for len(bs) <= i {
			bs = append(bs, bucket{})
		}
		if op.Outcome == history.OK {
			bs[i].ok++
		} else {
			bs[i].bad++
		}
	}
	p := plot.New()
	p.Title.Text = "chaos run: client operations per second and faults"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "operations/s"
	var okPts, badPts plotter.XYs
	top := 1.0
	for i, b := range bs {
		x := (float64(i) + 0.5) * plotBucket
		okPts = append(okPts, plotter.XY{X: x, Y: b.ok / plotBucket})
		badPts = append(badPts, plotter.XY{X: x, Y: b.bad / plotBucket})
		top = max(top, b.ok/plotBucket, b.bad/plotBucket)
	}
	for _, s := range []struct {
		name string
		pts  plotter.XYs
		c    color.RGBA
	}{{"ok", okPts, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}}, {"failed or unknown", badPts, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}}} {
		if len(s.pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.pts)
		if err != nil {
			return err
		}
		l.Color, l.Width = s.c, vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	// Faults: one row per kind group above the curves.
	sorted := append([]Executed(nil), evs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	for row, fr := range faultRows {
		y := top * (1.08 + 0.06*float64(row))
		first := true
		for _, e := range sorted {
			if e.Skipped != "" || !kindIn(e.Event.Kind, fr.kinds) {
				continue
			}
			end := e.Healed
			if end == 0 {
				end = e.Start + 0.5
			}
			l, err := plotter.NewLine(plotter.XYs{{X: e.Start, Y: y}, {X: end, Y: y}})
			if err != nil {
				return err
			}
			l.Color, l.Width = fr.color, vg.Points(4)
			p.Add(l)
			if first {
				p.Legend.Add(fr.label, l)
				first = false
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, top*(1.12+0.06*float64(len(faultRows)))
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.Padding = vg.Points(2)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	return p.Save(10*vg.Inch, 4*vg.Inch, path)
}

func kindIn(k nemesis.Kind, ks []nemesis.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
