package expplot

import (
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Line adds a solid line (nothing for no points) with a legend entry
// unless name is empty.
func Line(p *plot.Plot, pts plotter.XYs, c color.Color, name string) error {
	return line(p, pts, c, name, vg.Points(1.2), nil)
}

// Dashed adds a dashed line, as Line.
func Dashed(p *plot.Plot, pts plotter.XYs, c color.Color, name string) error {
	return line(p, pts, c, name, vg.Points(1.2), []vg.Length{vg.Points(2), vg.Points(2)})
}

// Mark draws a dashed vertical line at x from lo to top (an event: a
// kill, a join, a plan applied).
func Mark(p *plot.Plot, x, lo, top float64, c color.Color, name string) error {
	return line(p, plotter.XYs{{X: x, Y: lo}, {X: x, Y: top}}, c, name, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(3)})
}

func line(p *plot.Plot, pts plotter.XYs, c color.Color, name string, width vg.Length, dashes []vg.Length) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = width
	l.Dashes = dashes
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

// SaveColumn draws panels one above the other, x axes aligned, into a
// w × h PNG at path.
func SaveColumn(path string, w, h vg.Length, panels ...*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
