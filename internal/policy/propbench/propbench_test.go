package propbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStatsNearestRank(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	st := stats("n", xs)
	if st.Samples != 100 || st.P50 != 50 || st.P90 != 90 || st.P99 != 99 || st.Max != 100 {
		t.Fatalf("stats: %+v", st)
	}
	if st := stats("one", []float64{7}); st.P50 != 7 || st.P99 != 7 {
		t.Fatalf("one sample: %+v", st)
	}
	if st := stats("none", nil); st.Samples != 0 || st.Max != 0 {
		t.Fatalf("no samples: %+v", st)
	}
}

func TestWriteOutputs(t *testing.T) {
	now := time.Now()
	res := &Result{Nodes: 2, Updates: 2, Interval: time.Millisecond}
	for _, n := range []string{"n1", "n2"} {
		for v := int64(1); v <= 2; v++ {
			res.Samples = append(res.Samples, Sample{Node: n, Version: v, Commit: now, Swap: now.Add(time.Duration(v) * time.Millisecond), DelayMs: float64(v)})
		}
		res.PerNode = append(res.PerNode, stats(n, []float64{1, 2}))
	}
	dir := t.TempDir()
	if err := WriteOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, CSVFile))
	if err != nil || strings.Count(string(csv), "\n") != 5 {
		t.Fatalf("csv: %q %v", csv, err)
	}
	for _, f := range []string{PNGFile, SummaryFile, JSONFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if (Options{Binary: "x", Nodes: 5, Updates: maxUpdates + 1}).Validate() == nil {
		t.Fatal("too many updates accepted")
	}
}
