package sim

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/plan"
)

func table2Rules(b testing.TB) *plan.RuleSet {
	rs, err := plan.ParseRuleSet("device_has_space\nload_balanced spread=0.2\n")
	if err != nil {
		b.Fatal(err)
	}
	return rs
}

// BenchmarkTable2 solves Mirador Table 2's 100K objects / 1K devices case
// (generation excluded): go test -bench Table2 ./internal/plan/sim
func BenchmarkTable2(b *testing.B) {
	m, err := Generate(ClusterSpec{Objects: 100_000, Devices: 1_000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	rules := table2Rules(b)
	b.ResetTimer()
	for b.Loop() {
		p, err := plan.Solve(m, rules, plan.Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if !p.Final.IsZero() {
			b.Fatalf("final cost %s, want 0", p.Final)
		}
		b.ReportMetric(float64(len(p.Moves)), "moves")
	}
}
