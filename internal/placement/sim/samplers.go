package sim

import (
	"fmt"
	"time"

	"github.com/terrace-storage/terrace/internal/placement"
)

// samplerSets are the thesis's two sampling sets (§3.3.2): low skew, 100
// objects weighted by index (1..100); high skew, 10 objects weighted 1..10
// plus one weighing 1000, the herding target.
func samplerSets() map[string][]float64 {
	low := make([]float64, 100)
	for i := range low {
		low[i] = float64(i + 1)
	}
	high := make([]float64, 11)
	for i := range 10 {
		high[i] = float64(i + 1)
	}
	high[10] = 1000
	return map[string][]float64{"low": low, "high": high}
}

// truncationPercent is T for the sampler experiments: the thesis's 10 %.
const truncationPercent float64 = placement.DefaultTruncationPercent

func runSamplers(o Options, out *output) error {
	rng := o.rng(1)
	tab := newTable("selection", "set", "draws", "object", "weight", "count", "fraction")
	sets := samplerSets()
	type herd struct {
		sel   placement.Selection
		share float64
	}
	var herds []herd
	maxDraws := 0
	for _, n := range o.SamplerDraws {
		maxDraws = max(maxDraws, n)
	}
	for _, sel := range placement.Selections {
		for _, set := range []string{"low", "high"} {
			ws := sets[set]
			idx := make([]int, len(ws))
			for i := range idx {
				idx[i] = i
			}
			wv := placement.NewWeightedVector(func(i int) float64 { return ws[i] }, sel, truncationPercent)
			wv.SetItems(idx)
			var ss []series
			for _, draws := range o.SamplerDraws {
				counts := make([]int, len(ws))
				for range draws {
					wv.Reset()
					x, _ := wv.Sample(rng)
					counts[x]++
				}
				s := series{name: fmt.Sprintf("%d draws", draws)}
				for i, c := range counts {
					f := float64(c) / float64(draws)
					tab.add(string(sel), set, draws, i, ws[i], c, f)
					s.add(float64(i), f)
				}
				ss = append(ss, s)
				if set == "high" && draws == maxDraws {
					herds = append(herds, herd{sel, float64(counts[10]) / float64(draws)})
				}
			}
			title := fmt.Sprintf("%s selection, %s-skew set (Allen Figs 5-12)", sel, set)
			if err := linePlot(out.path(fmt.Sprintf("samplers_%s_%s.png", sel, set)), plotOpts{
				title: title, xlabel: "object index", ylabel: "fraction of selections", points: set == "high",
			}, ss); err != nil {
				return err
			}
		}
	}
	if err := tab.write(out.path("samplers.csv")); err != nil {
		return err
	}
	out.printf("## Sampler distributions and herding (Allen Figs 5-12)\n\n")
	out.printf("High-skew set: weights 1..10 plus one object of weight 1000 (%.1f %% of the total weight). Share of %d single draws that chose the heavy object:\n\n", 100*1000.0/1055, maxDraws)
	out.printf("| selection | heavy-object share | uniform would be |\n|---|---|---|\n")
	for _, h := range herds {
		out.printf("| %s | %.1f %% | %.1f %% |\n", h.sel, 100*h.share, 100.0/11)
	}
	out.printf("\nSUS selects in proportion to weight and herds onto the outlier; two-choice favours it only as the better of two uniform draws (1 − (10/11)² = 17.4 %%), so it stays free of herding while still preferring heavier objects in the low-skew set. Truncation at T = %g %% draws uniformly among the top ceil(1.1) = 2 objects. Files: `samplers.csv`, `samplers_<selection>_<set>.png`.\n\n", truncationPercent)
	return nil
}

func runRuntime(o Options, out *output) error {
	rng := o.rng(2)
	tab := newTable("selection", "pool", "decisions", "ns_per_decision")
	var ss []series
	for _, sel := range placement.Selections {
		s := series{name: string(sel)}
		for _, pool := range o.RuntimePools {
			idx := make([]int, pool)
			for i := range idx {
				idx[i] = i
			}
			// Constant weights, as in the thesis's gen_runtimes; one
			// decision builds the vector (so truncation and SUS pay their
			// preprocessing each time) and draws three distinct items.
			wv := placement.NewWeightedVector(func(int) float64 { return 1 }, sel, truncationPercent)
			n := 0
			start := time.Now()
			for time.Since(start) < o.RuntimeBudget || n < 3 {
				wv.SetItems(idx)
				for range 3 {
					wv.Sample(rng)
				}
				n++
			}
			ns := float64(time.Since(start).Nanoseconds()) / float64(n)
			tab.add(string(sel), pool, n, ns)
			s.add(float64(pool), ns)
		}
		ss = append(ss, s)
	}
	if err := tab.write(out.path("runtime.csv")); err != nil {
		return err
	}
	if err := linePlot(out.path("runtime.png"), plotOpts{
		title:  "Weighted random selection run time (Allen Fig 13): one 3-replica decision",
		xlabel: "pool size (objects)", ylabel: "ns per decision", logX: true, logY: true, points: true,
	}, ss); err != nil {
		return err
	}
	out.printf("## Sampler run time vs pool size (Allen Fig 13)\n\n| selection |")
	for _, p := range o.RuntimePools {
		out.printf(" %d |", p)
	}
	out.printf("\n|---|")
	for range o.RuntimePools {
		out.printf("---|")
	}
	out.printf("\n")
	for _, s := range ss {
		out.printf("| %s |", s.name)
		for _, y := range s.ys {
			out.printf(" %s |", fmtNs(y))
		}
		out.printf("\n")
	}
	out.printf("\nWall-clock time per decision (build the vector, draw three). Two-choice and uniform are O(1) in the pool size; SUS is O(D) and truncation O(D log D), as in the thesis. These numbers vary from run to run. Files: `runtime.csv`, `runtime.png`.\n\n")
	return nil
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
