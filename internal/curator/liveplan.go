package curator

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/plan"
)

// Live planning (Mirador in the scan): after the Curator's own decisions
// (recovery, garbage, transforms, tiering by f/d/h), every scan job plans
// the rest of the layout with the planner's rules — disk balancing, with
// the Curator's m and s as the disk_balanced rule's parameters, and
// failure-domain spread — over the egroups no other task of the job
// touches. Each planned move carries the rules it lowered and the cost
// before and after; the job record keeps the rules that fired and the
// total cost before and after (terrace curator history).

// LiveRulesOff disables live planning (Options.LiveRules).
const LiveRulesOff = "off"

// DefaultLiveRules is the live rule set for balance thresholds m and s.
func DefaultLiveRules(m, s float64) string {
	return fmt.Sprintf("device_has_space max_fill=0.95\nfailure_domain_spread level=node\ndisk_balanced mean=%g spread=%g", m, s)
}

// LivePlan is what a job's live planning stage decided and did.
type LivePlan struct {
	Rules      string      `json:"rules"`
	Seed       uint64      `json:"seed"`
	Egroups    int         `json:"egroups"`
	CostBefore string      `json:"cost_before"`
	CostAfter  string      `json:"cost_after"`
	PerRule    []RuleDelta `json:"rules_cost,omitempty"`
	Moves      int         `json:"moves"`
	// Fired counts, per rule, the planned moves done that lowered it.
	Fired      map[string]int `json:"fired,omitempty"`
	Unresolved []string       `json:"unresolved,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// liveRules returns the configured live rule set, or "" when disabled.
func (c *Curator) liveRules() string {
	r := strings.TrimSpace(c.opts.LiveRules)
	switch r {
	case LiveRulesOff:
		return ""
	case "":
		to := c.opts.Tier
		to.EnsureDefaults()
		return DefaultLiveRules(to.BalanceMean, to.BalanceSpread)
	}
	return r
}

// livePlan plans the egroups that no task in busy touches and that have
// every replica on a healthy device of a live node (the others are
// recovery's), and returns the moves as actuator tasks.
func (c *Curator) livePlan(snap *model.Snapshot, res *scanResult, busy []decide.Task, rng *rand.Rand) ([]actuate.Task, *LivePlan) {
	rules := c.liveRules()
	if rules == "" {
		return nil, nil
	}
	lp := &LivePlan{Seed: rng.Uint64(), Fired: map[string]int{}}
	rs, lines, err := buildRuleSet(rules, nil, nil)
	if err != nil {
		lp.Error = err.Error()
		return nil, lp
	}
	lp.Rules = lines
	m, revs := c.plannerModel(res, snap)
	liveModel(m, snap, busy)
	lp.Egroups = len(m.Egroups)
	if len(m.Egroups) == 0 {
		return nil, lp
	}
	maxMoves := c.opts.Tier.MaxMoves
	if maxMoves <= 0 {
		maxMoves = 1000
	}
	p, err := plan.Solve(m, rs, plan.Options{Seed: lp.Seed, MaxMoves: maxMoves})
	if err != nil {
		lp.Error = err.Error()
		return nil, lp
	}
	lp.CostBefore, lp.CostAfter, lp.Moves = p.Initial.String(), p.Final.String(), len(p.Moves)
	for _, r := range p.Rules {
		lp.PerRule = append(lp.PerRule, RuleDelta{Rule: r.Rule, Before: r.Before.String(), After: r.After.String()})
	}
	for i, v := range p.Unresolved {
		if i == maxRecordList {
			break
		}
		lp.Unresolved = append(lp.Unresolved, fmt.Sprintf("%s (%s %s): cost %s", v.Rule, v.Scope, v.Instance, v.Cost))
	}
	return planTasks(m, p, revs), lp
}

// liveModel restricts a planner model to what a scan job may plan: the
// devices of down nodes are failed (never destinations), and egroups that
// another task of the job touches, or that have a replica on a device
// that is not healthy, are left out (their bytes stay in the devices'
// used bytes).
func liveModel(m *plan.Model, snap *model.Snapshot, busy []decide.Task) {
	for i := range m.Devices {
		if !snap.NodeUp(m.Devices[i].Node) {
			m.Devices[i].Health = plan.HealthFailed
		}
	}
	health := map[model.DeviceID]plan.Health{}
	for _, d := range m.Devices {
		health[d.ID] = d.Health
	}
	skip := map[uint64]bool{}
	for _, t := range busy {
		skip[t.Egroup] = true
		for _, p := range t.Pack {
			skip[p.ID] = true
		}
	}
	keep := m.Egroups[:0]
	for _, e := range m.Egroups {
		if skip[e.ID] || len(e.Replicas) < e.Vector.Total() {
			continue // another task's, or under-replicated (recovery's)
		}
		ok := true
		for _, d := range e.Replicas {
			if health[d] != plan.HealthOK {
				ok = false
				break
			}
		}
		if ok {
			keep = append(keep, e)
		}
	}
	m.Egroups = keep
}
