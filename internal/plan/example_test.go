package plan_test

import (
	"fmt"
	"math"

	"github.com/terrace-storage/terrace/internal/plan"
)

// hotOnSSD is the rule docs/planner.md writes: an egroup with load above
// min_load should have a replica on ssd. It uses only the exported API, as
// a rule defined outside the package (or a script adapter) would.
type hotOnSSD struct{ minLoad float64 }

func (r *hotOnSSD) Name() string      { return "hot_on_ssd" }
func (r *hotOnSSD) Scope() plan.Scope { return plan.ScopeEgroup }
func (r *hotOnSSD) Params() []plan.Param {
	return []plan.Param{{Name: "min_load", Value: fmt.Sprint(r.minLoad)}}
}

func (r *hotOnSSD) Cost(v *plan.View) float64 {
	e := v.Instance()
	if v.EgroupLoad(e) <= r.minLoad {
		return 0
	}
	ssd := v.TierIndex("ssd")
	for i := range v.EgroupSlots(e) {
		if d := v.EgroupReplica(e, i); d >= 0 && v.DeviceTier(d) == ssd {
			return 0
		}
	}
	return 1
}

func (r *hotOnSSD) Hint(v *plan.View, h *plan.Hints) { h.PreferTier("ssd") }

var hotOnSSDSpec = plan.RuleSpec{
	Name: "hot_on_ssd", Scope: "egroup",
	Doc: "an egroup with load above min_load has a replica on ssd",
	Params: []plan.ParamSpec{
		{Name: "min_load", Kind: plan.ParamFloat, Default: "5", Min: 0, Max: math.MaxFloat64, Doc: "load that makes an egroup hot"},
	},
	New: func(p plan.Params) (plan.Rule, error) { return &hotOnSSD{minLoad: p.Float("min_load")}, nil },
}

func Example_customRule() {
	m, err := plan.ParseModel(`
device n1/ssd0 tier=ssd cap=10G
device n1/hdd0 tier=hdd cap=100G
device n2/hdd0 tier=hdd cap=100G
egroup 1 size=1G load=20 vector=2 on=n1/hdd0,n2/hdd0
egroup 2 size=1G load=1 vector=2 on=n1/hdd0,n2/hdd0
`)
	if err != nil {
		panic(err)
	}
	rules, err := plan.ParseRuleSetWith("hot_on_ssd min_load=10\nfailure_domain_spread level=node weight=0.5", []plan.RuleSpec{hotOnSSDSpec})
	if err != nil {
		panic(err)
	}
	p, err := plan.Solve(m, rules, plan.Options{})
	if err != nil {
		panic(err)
	}
	// The hot egroup gains an ssd replica; the solver picks the hdd replica
	// on n1 to move, so the replicas stay on two nodes.
	fmt.Print(rules.String() + p.String())

	// Output:
	// hot_on_ssd min_load=10
	// failure_domain_spread level=node weight=0.5
	// move 1 n1/hdd0 -> n1/ssd0 (hot_on_ssd) cost 1 -> 0
	// cost 1 -> 0, 1 moves
	//   hot_on_ssd            1 (1) -> 0 (0)
	//   failure_domain_spread 0 (0) -> 0 (0)
}
