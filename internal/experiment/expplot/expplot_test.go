package expplot

import (
	"bytes"
	"image/color"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestSaveColumnWritesAPNG(t *testing.T) {
	a, b := plot.New(), plot.New()
	if err := Line(a, plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 2}}, color.Black, "ops/s"); err != nil {
		t.Fatal(err)
	}
	if err := Dashed(b, plotter.XYs{{X: 0, Y: 3}, {X: 1, Y: 1}}, color.Black, "p99"); err != nil {
		t.Fatal(err)
	}
	if err := Mark(b, 0.5, 0, 3, color.Black, "event"); err != nil {
		t.Fatal(err)
	}
	if err := Line(a, nil, color.Black, "empty"); err != nil {
		t.Fatal(err) // no points: nothing drawn, no error
	}
	path := filepath.Join(t.TempDir(), "x.png")
	if err := SaveColumn(path, 4*vg.Inch, 4*vg.Inch, a, b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(got, []byte("\x89PNG")) {
		t.Fatalf("not a PNG (%v)", err)
	}
}
