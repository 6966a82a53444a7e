// Options and Run: see doc.go for what the simulator owns.

package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Experiment names.
const (
	ExpSamplers  = "samplers"  // Figs 5-12: selection distributions and herding
	ExpRuntime   = "runtime"   // Fig 13: sampler run time vs pool size
	ExpHotTier   = "hottier"   // Figs 14, 17: d_hot_tier, two busy nodes and one idle
	ExpDisparity = "disparity" // §1.2.2: nodes with tier size disparities
	ExpOctopus   = "octopus"   // OctopusFS Figs 3-4: write throughput, remaining capacity
	ExpStale     = "stale"     // Appendix A / §6.1: statistics refresh sweep
)

// Experiments lists every experiment in the order Run performs them.
var Experiments = []string{ExpSamplers, ExpRuntime, ExpHotTier, ExpDisparity, ExpOctopus, ExpStale}

// Options configures a simulator run. The zero value means the defaults;
// EnsureDefaults fills them and String prints the effective options.
type Options struct {
	// Seed drives every random choice. Default 1.
	Seed uint64
	// Experiments selects what to run; empty means all.
	Experiments []string
	// Scale shrinks the thesis's device capacities and bandwidths together
	// (so simulated time, and therefore the number of statistics refreshes
	// per run, is preserved while the number of placements shrinks).
	// Default 0.25: a 300 GB / 400 MB/s SSD becomes 75 GB / 100 MB/s and a
	// full hot-tier run makes about 18,000 placements per policy.
	Scale float64
	// StatsInterval is how often simulated devices report statistics to
	// the placer in the hot-tier, disparity and OctopusFS experiments.
	// Default 10 s, Stargate's refresh period (Allen Appendix A).
	StatsInterval time.Duration
	// StaleIntervals are the refresh periods the stale-statistics sweep
	// compares. Default 1 s, 10 s, 60 s.
	StaleIntervals []time.Duration
	// SamplerDraws are the draw counts of the sampler histograms.
	// Default 10^3, 10^4, 10^5 (Allen §3.3.2).
	SamplerDraws []int
	// RuntimePools are the pool sizes of the run-time experiment. Default
	// 10 to 100,000 by powers of ten.
	RuntimePools []int
	// RuntimeBudget bounds the wall time spent measuring each (selection,
	// pool size) pair. Default 150 ms, which keeps the experiment under
	// 10 s on a loaded 2-core machine.
	RuntimeBudget time.Duration
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if len(o.Experiments) == 0 {
		o.Experiments = append([]string(nil), Experiments...)
	}
	if o.Scale == 0 {
		o.Scale = 0.25
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = 10 * time.Second
	}
	if len(o.StaleIntervals) == 0 {
		o.StaleIntervals = []time.Duration{time.Second, 10 * time.Second, 60 * time.Second}
	}
	if len(o.SamplerDraws) == 0 {
		o.SamplerDraws = []int{1000, 10000, 100000}
	}
	if len(o.RuntimePools) == 0 {
		o.RuntimePools = []int{10, 100, 1000, 10000, 100000}
	}
	if o.RuntimeBudget == 0 {
		o.RuntimeBudget = 150 * time.Millisecond
	}
}

// maxSamplerDraws bounds a histogram's draws: 10^7 samples of an
// 11-object set already take seconds and add nothing to Figs 5-12.
const maxSamplerDraws = 10_000_000

// maxRuntimePool bounds the run-time experiment's pool: truncation ranks
// the pool on every sample, so 10^6 items cost ~100 ms per sample.
const maxRuntimePool = 1_000_000

// Validate rejects bad options.
func (o Options) Validate() error {
	for _, e := range o.Experiments {
		ok := false
		for _, k := range Experiments {
			ok = ok || e == k
		}
		if !ok {
			return fmt.Errorf("sim: unknown experiment %q (want %s)", e, strings.Join(Experiments, ", "))
		}
	}
	if !(o.Scale > 0 && o.Scale <= 1) {
		return fmt.Errorf("sim: scale must be in (0, 1], got %v", o.Scale)
	}
	if o.StatsInterval < 100*time.Millisecond {
		return fmt.Errorf("sim: stats interval %v is below 100ms", o.StatsInterval)
	}
	for _, d := range o.StaleIntervals {
		if d < 100*time.Millisecond {
			return fmt.Errorf("sim: stale interval %v is below 100ms", d)
		}
	}
	for _, n := range o.SamplerDraws {
		if n < 1 || n > maxSamplerDraws {
			return fmt.Errorf("sim: sampler draws %d outside [1, %d]", n, maxSamplerDraws)
		}
	}
	for _, n := range o.RuntimePools {
		if n < 3 || n > maxRuntimePool {
			return fmt.Errorf("sim: runtime pool %d outside [3, %d]", n, maxRuntimePool)
		}
	}
	if o.RuntimeBudget <= 0 {
		return errors.New("sim: runtime budget must be positive")
	}
	return nil
}

// String prints the options so a run can be logged and replayed.
func (o Options) String() string {
	return fmt.Sprintf("seed=%d experiments=%s scale=%g stats-interval=%v stale-intervals=%v sampler-draws=%v runtime-pools=%v runtime-budget=%v",
		o.Seed, strings.Join(o.Experiments, ","), o.Scale, o.StatsInterval, o.StaleIntervals, o.SamplerDraws, o.RuntimePools, o.RuntimeBudget)
}

func (o Options) has(e string) bool {
	for _, x := range o.Experiments {
		if x == e {
			return true
		}
	}
	return false
}

// rng returns the experiment's generator, derived from the seed and a
// per-experiment stream so adding an experiment does not shift others.
func (o Options) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(o.Seed, stream))
}

// Run performs the selected experiments and writes CSV files, PNG plots
// and summary.md into outDir (created if missing).
func Run(opts Options, outDir string) error {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	out := &output{dir: outDir}
	fmt.Fprintf(&out.summary, "# Placement simulator summary\n\nOptions: `%s`\n\n", opts)
	steps := []struct {
		name string
		fn   func(Options, *output) error
	}{
		{ExpSamplers, runSamplers},
		{ExpRuntime, runRuntime},
		{ExpHotTier, runHotTier},
		{ExpDisparity, runDisparity},
		{ExpOctopus, runOctopus},
		{ExpStale, runStale},
	}
	for _, st := range steps {
		if !opts.has(st.name) {
			continue
		}
		if err := st.fn(opts, out); err != nil {
			return fmt.Errorf("sim: %s: %w", st.name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(outDir, "summary.md"), []byte(out.summary.String()), 0o644); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// output collects the files of a run.
type output struct {
	dir     string
	summary strings.Builder
}

func (o *output) path(name string) string { return filepath.Join(o.dir, name) }

func (o *output) printf(format string, args ...any) { fmt.Fprintf(&o.summary, format, args...) }
