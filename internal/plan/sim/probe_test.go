package sim

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/plan"
)

func TestProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROBE_N"))
	if n == 0 {
		t.Skip()
	}
	mdev, _ := strconv.Atoi(os.Getenv("PROBE_M"))
	m, err := Generate(ClusterSpec{Objects: n, Devices: mdev, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rules := table2Rules(t)
	batch, _ := strconv.Atoi(os.Getenv("PROBE_BATCH"))
	rounds, _ := strconv.Atoi(os.Getenv("PROBE_ROUNDS"))
	start := time.Now()
	p, err := plan.Solve(m, rules, plan.Options{Seed: 1, BatchEgroups: batch, NoSecondPass: os.Getenv("PROBE_NO2") != "", MaxRounds: rounds})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %s -> %s, %d moves, stats %+v", time.Since(start), p.Initial, p.Final, len(p.Moves), p.Stats)
	for i, r := range p.Rules {
		t.Logf("rule %d %+v", i, r)
	}
}

func TestProbeSmall(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROBE_SMALL"))
	if n == 0 {
		t.Skip()
	}
	m, _ := Generate(ClusterSpec{Objects: n, Devices: n / 100, Seed: 1})
	rules := table2Rules(t)
	p, err := plan.Solve(m, rules, plan.Options{Seed: 1, NoSecondPass: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s -> %s, %d moves, stats %+v unresolved %+v", p.Initial, p.Final, len(p.Moves), p.Stats, p.Unresolved)
	fin, _ := m.Apply(p.Moves)
	var sum float64
	for _, d := range fin.Devices {
		sum += d.Load
	}
	mean := sum / float64(len(fin.Devices))
	for _, u := range p.Unresolved {
		for _, d := range fin.Devices {
			if string(d.ID) == u.Instance {
				t.Logf("%s load %.4f mean %.4f (band %.4f..%.4f)", d.ID, d.Load, mean, mean*0.9, mean*1.1)
				for _, e := range fin.Egroups {
					if string(e.Replicas[0]) == u.Instance {
						t.Logf("  egroup %d load %.4f", e.ID, e.Load)
					}
				}
			}
		}
	}
	lo, hi := 1e18, 0.0
	for _, d := range fin.Devices {
		lo, hi = min(lo, d.Load), max(hi, d.Load)
	}
	t.Logf("min %.4f max %.4f", lo, hi)
}
