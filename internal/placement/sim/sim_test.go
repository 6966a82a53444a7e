package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Options{
		{Experiments: []string{"bogus"}},
		{Scale: 2},
		{StatsInterval: time.Millisecond},
		{SamplerDraws: []int{0}},
		{RuntimePools: []int{1}},
	} {
		bad.EnsureDefaults()
		if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: got %v, want a sim: error", bad, err)
		}
	}
}

// TestRunSmall runs every experiment at a small scale and checks that each
// writes its files and that the summary holds the headline findings' rows.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	o := Options{
		Scale:          0.02,
		SamplerDraws:   []int{1000},
		RuntimePools:   []int{10, 1000},
		RuntimeBudget:  5 * time.Millisecond,
		StaleIntervals: []time.Duration{time.Second},
	}
	if err := Run(o, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		"summary.md", "samplers.csv", "samplers_two-choice_high.png", "runtime.csv", "runtime.png",
		"hottier.csv", "hottier_low.png", "hottier_high.png", "disparity.csv", "disparity.png",
		"octopus_throughput.csv", "octopus_throughput.png", "octopus_capacity.png", "stale.csv", "stale.png",
	} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	sum, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	for _, want := range []string{"two-choice", "d_hot_tier", "moop vs uniform", "Stale statistics"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

// TestRunDefault runs the full default simulation when TERRACE_SIM_OUT
// names an output directory (a developer's shortcut for `terrace sim
// placement --out DIR`); TERRACE_SIM_EXPS optionally lists experiments.
func TestRunDefault(t *testing.T) {
	dir := os.Getenv("TERRACE_SIM_OUT")
	if dir == "" {
		t.Skip("set TERRACE_SIM_OUT to run the default simulation")
	}
	var o Options
	if e := os.Getenv("TERRACE_SIM_EXPS"); e != "" {
		o.Experiments = strings.Split(e, ",")
	}
	if iv := os.Getenv("TERRACE_SIM_INTERVAL"); iv != "" {
		d, err := time.ParseDuration(iv)
		if err != nil {
			t.Fatal(err)
		}
		o.StatsInterval = d
	}
	start := time.Now()
	if err := Run(o, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("simulation took %v", time.Since(start))
}
