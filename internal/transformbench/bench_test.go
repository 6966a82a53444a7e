package transformbench

import (
	"context"
	"path/filepath"
	"testing"
)

// TestRunSmall runs the scenario on a small data set: it must finish,
// shrink the data and read every object back (Run verifies them).
func TestRunSmall(t *testing.T) {
	res, err := Run(context.Background(), Options{Dir: t.TempDir(), LogicalBytes: 12 << 20, Reads: 10, Seed: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Summary {
		t.Log(s)
	}
	var plain, comp float64
	for _, r := range res.Rows {
		if r.Class == "all" && r.Metric == "physical_bytes" {
			switch r.Phase {
			case "plain":
				plain = r.Value
			case "compressed":
				comp = r.Value
			}
		}
	}
	if comp <= 0 || comp >= plain*0.8 {
		t.Errorf("physical bytes %.0f → %.0f: want a mixed data set at least 20%% smaller", plain, comp)
	}
	if err := res.WriteCSV(filepath.Join(t.TempDir(), "out.csv")); err != nil {
		t.Fatal(err)
	}
}
