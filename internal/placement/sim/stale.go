package sim

import (
	"fmt"
	"sort"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// The stale-statistics sweep (Allen §6.1 and Appendix A). Twelve nodes
// with one SSD each; eleven are 60 % full and one was just added, empty:
// the attractive device every fitness function prefers. All twelve run
// closed-loop writers (`ssd=2`, primary local), so the policy decides
// where every secondary goes. Statistics refresh every 1 s, 10 s or 60 s,
// with and without placement.Pending folding in placements made since the
// refresh. Herding shows up as the new device's queue and as write
// latency, since every write waits for its slowest replica.
const (
	staleNodes    = 12
	staleDepth    = 4
	staleDuration = 180.0 // simulated seconds per configuration
	staleSSDBytes = 1e12
	staleSSDBps   = 400e6
	staleFull     = 0.6
)

func runStale(o Options, out *output) error {
	policies := []hotTierPolicy{
		{"f_mult two-choice", placement.Config{Name: placement.NameFitness}},
		{"f_mult sus", placement.Config{Name: placement.NameFitness, Selection: placement.SelectSUS}},
		{"moop", placement.Config{Name: placement.NameMoop}},
	}
	tab := newTable("policy", "interval_s", "pending", "new_secondary_share", "new_max_queue", "mean_latency_ms", "p99_latency_ms", "egroups_per_s")
	type row struct {
		label, pend     string
		interval        float64
		share           float64
		maxQ            int
		mean, p99, rate float64
	}
	var rows []row
	for pi, hp := range policies {
		for ii, iv := range o.StaleIntervals {
			for _, usePending := range []bool{false, true} {
				p, err := placement.New(hp.cfg)
				if err != nil {
					return err
				}
				var nodes []model.Node
				var devs []model.Device
				for n := range staleNodes {
					id := model.NodeID(fmt.Sprintf("n%02d", n))
					used := int64(staleFull * staleSSDBytes * o.Scale)
					if n == staleNodes-1 {
						id, used = "new", 0
					}
					nodes = append(nodes, model.Node{ID: id, Up: true})
					devs = append(devs, model.Device{ID: model.DeviceID(string(id) + "/ssd0"), Node: id, Tier: model.TierSSD,
						CapacityBytes: int64(staleSSDBytes * o.Scale), UsedBytes: used, WriteBps: staleSSDBps})
				}
				stream := uint64(400 + 100*pi + 10*ii)
				if usePending {
					stream++
				}
				e := newEngine(nodes, devs, p, o.rng(stream), iv, usePending)
				var ws []*worker
				for _, n := range nodes {
					ws = append(ws, &worker{node: n.ID, vector: model.MustParseVector("ssd=2"), depth: staleDepth, quota: 1 << 62})
				}
				e.runClosedLoop(ws, egroupBytes, staleDuration, staleDuration, func(float64) {})
				var lats []float64
				issued := 0
				for _, w := range ws {
					lats = append(lats, w.latencies...)
					issued += w.issued
				}
				sort.Float64s(lats)
				r := row{label: hp.label, pend: map[bool]string{false: "off", true: "on"}[usePending], interval: iv.Seconds()}
				newDev := e.byID["new/ssd0"]
				var newLocal int
				for _, w := range ws {
					if w.node == "new" {
						newLocal = w.issued - w.localMisses
					}
				}
				if issued > 0 {
					r.share = float64(newDev.replicas-newLocal) / float64(issued)
					r.rate = float64(issued) / staleDuration
				}
				r.maxQ = e.maxQueue["new/ssd0"]
				if len(lats) > 0 {
					sum := 0.0
					for _, l := range lats {
						sum += l
					}
					r.mean = 1000 * sum / float64(len(lats))
					r.p99 = 1000 * lats[min(len(lats)-1, len(lats)*99/100)]
				}
				rows = append(rows, r)
				tab.add(r.label, r.interval, r.pend, r.share, r.maxQ, r.mean, r.p99, r.rate)
			}
		}
	}
	if err := tab.write(out.path("stale.csv")); err != nil {
		return err
	}
	// One plot per metric: p99 latency vs refresh interval.
	var ss []series
	for _, hp := range policies {
		for _, pend := range []string{"off", "on"} {
			s := series{name: fmt.Sprintf("%s, pending %s", hp.label, pend)}
			for _, r := range rows {
				if r.label == hp.label && r.pend == pend {
					s.add(r.interval, r.p99)
				}
			}
			ss = append(ss, s)
		}
	}
	if err := linePlot(out.path("stale.png"), plotOpts{
		title:  "Stale statistics: p99 egroup write latency vs refresh interval (one empty device among 60 %-full ones)",
		xlabel: "statistics refresh interval (s)", ylabel: "p99 write latency (ms)", logX: true, points: true,
	}, ss); err != nil {
		return err
	}
	out.printf("## Stale statistics sweep (Allen §6.1, Appendix A)\n\n")
	out.printf("%d nodes with one SSD (%.0f GB, %.0f MB/s); %d are %.0f %% full and one is new and empty. Every node runs a closed-loop writer (`ssd=2`, %d outstanding, primary local) for %.0f simulated seconds; the policy places every secondary. A balanced share of secondaries for the new device is 1/%d = %.1f %%.\n\n",
		staleNodes, staleSSDBytes*o.Scale/1e9, staleSSDBps/1e6, staleNodes-1, 100*staleFull, staleDepth, staleDuration, staleNodes-1, 100.0/float64(staleNodes-1))
	out.printf("| policy | refresh | pending | new device's share of secondaries | its max queue | mean latency | p99 latency | egroups/s |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		out.printf("| %s | %.0f s | %s | %.1f %% | %d | %.0f ms | %.0f ms | %.0f |\n", r.label, r.interval, r.pend, 100*r.share, r.maxQ, r.mean, r.p99, r.rate)
	}
	out.printf("\n")
	return staleHotTier(o, out)
}

// staleHotTier repeats the thesis's high-queue-depth hot-tier run (where
// Appendix A saw herding) at each refresh interval, with and without
// placement.Pending.
func staleHotTier(o Options, out *output) error {
	tab := newTable("policy", "interval_s", "pending", "final_d_hot_tier_pp", "max_d_hot_tier_pp")
	out.printf("The same sweep on the two-busy-one-idle hot-tier scenario at high queue depth (Allen Appendix A saw herding there with 10 s statistics):\n\n")
	out.printf("| policy | refresh | pending | final d_hot_tier | max d_hot_tier |\n|---|---|---|---|---|\n")
	for pi, hp := range hotTierPolicies()[1:] {
		for ii, iv := range o.StaleIntervals {
			for k, pend := range []bool{false, true} {
				r, _, err := hotTierRun(o, hp, highDepth, iv, pend, uint64(700+100*pi+10*ii+k), nil)
				if err != nil {
					return err
				}
				ps := map[bool]string{false: "off", true: "on"}[pend]
				tab.add(hp.label, iv.Seconds(), ps, r.final, r.maxD)
				out.printf("| %s | %v | %s | %.1f pp | %.1f pp |\n", hp.label, iv, ps, r.final, r.maxD)
			}
		}
	}
	if err := tab.write(out.path("stale_hottier.csv")); err != nil {
		return err
	}
	out.printf("\nFiles: `stale.csv`, `stale.png`, `stale_hottier.csv`.\n\n")
	return nil
}
