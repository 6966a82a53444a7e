package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/plan"
)

// The adapter between Lua rule policies and the planner (internal/plan):
// each live rule policy becomes a plan.RuleSpec named "lua.NAME", whose
// Cost builds a RuleView from the planner's view of the instance — the
// device or the egroup with its current replica set, as the solver has
// moved them so far — and runs the policy's cost(view). The planner then
// weighs it exactly like a built-in rule.

// LuaRulePrefix starts the rule-set name of a Lua rule policy ("lua.spread"
// for the policy "spread"), so a policy can never shadow a built-in rule.
const LuaRulePrefix = "lua."

// PlanRules binds the live rule policies for one plan: every spec runs the
// version live when PlanRules was called, against snap (the snapshot the
// planner's model was built from: the cluster summary and the device
// fields the planner does not track, such as queue lengths). Errors
// reports the evaluations that failed.
func (m *Manager) PlanRules(snap *model.Snapshot) *PlanRuleSet {
	set := &PlanRuleSet{snap: snap, errs: map[string]*ruleErrors{}}
	if snap != nil {
		set.cluster = clusterSummary(snap)
	}
	for _, r := range m.Rules() {
		lr, ok := r.(*luaRule)
		if !ok {
			continue
		}
		set.specs = append(set.specs, set.spec(lr))
	}
	return set
}

// PlanRuleSet is the Lua rules of one plan.
type PlanRuleSet struct {
	snap    *model.Snapshot
	cluster map[string]any
	specs   []plan.RuleSpec

	mu   sync.Mutex
	errs map[string]*ruleErrors
}

type ruleErrors struct {
	n    int
	last error
}

// Specs are the rule specs to parse rule sets with (plan.ParseRuleSetWith).
func (s *PlanRuleSet) Specs() []plan.RuleSpec { return s.specs }

// Names are the rule-set names of the live rules, sorted.
func (s *PlanRuleSet) Names() []string {
	out := make([]string, len(s.specs))
	for i, sp := range s.specs {
		out[i] = sp.Name
	}
	return out
}

// Errors describes the failed evaluations, one line per rule: a failed
// evaluation counts as cost 0 (the rule is skipped for that instance), and
// counts towards disabling the version like any hook failure.
func (s *PlanRuleSet) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, e := range s.errs {
		out = append(out, fmt.Sprintf("%s: %d evaluations failed (cost 0 used), last: %v", name, e.n, e.last))
	}
	sort.Strings(out)
	return out
}

func (s *PlanRuleSet) failed(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.errs[name]
	if e == nil {
		e = &ruleErrors{}
		s.errs[name] = e
	}
	e.n++
	e.last = err
}

func (s *PlanRuleSet) spec(lr *luaRule) plan.RuleSpec {
	scope, planScope := lr.Scope(), plan.ScopeEgroup
	if scope == ScopeDevice {
		planScope = plan.ScopeDevice
	}
	name := LuaRulePrefix + lr.Name()
	doc := fmt.Sprintf("Lua rule policy %s version %d (%s scope)", lr.Name(), lr.Version(), scope)
	return plan.RuleSpec{
		Name:  name,
		Scope: planScope.String(),
		Doc:   doc,
		New: func(plan.Params) (plan.Rule, error) {
			return &planRule{set: s, lr: lr, name: name, scope: planScope}, nil
		},
	}
}

// planRule is one Lua rule as a plan.Rule.
type planRule struct {
	set   *PlanRuleSet
	lr    *luaRule
	name  string
	scope plan.Scope
}

var (
	_ plan.Rule   = (*planRule)(nil)
	_ plan.Hinter = (*planRule)(nil)
)

func (r *planRule) Name() string         { return r.name }
func (r *planRule) Scope() plan.Scope    { return r.scope }
func (r *planRule) Params() []plan.Param { return nil }

// Cost implements plan.Rule; a failed evaluation is cost 0 (recorded).
func (r *planRule) Cost(v *plan.View) float64 {
	c, err := r.lr.Cost(r.view(v))
	if err != nil {
		r.set.failed(r.name, err)
		return 0
	}
	if math.IsNaN(c) || math.IsInf(c, -1) {
		r.set.failed(r.name, fmt.Errorf("cost returned %v", c))
		return 0
	}
	return c
}

// Hint implements plan.Hinter: the policy's hints become the solver's.
// Kinds: prefer-tier (target a tier), prefer-distinct (target node or
// rack: avoid domains the egroup's other replicas are in), avoid-device
// and prefer-device (target a device ID), move-first (target a device ID
// holding one of the egroup's replicas). Other kinds are ignored.
func (r *planRule) Hint(v *plan.View, h *plan.Hints) {
	hs, err := r.lr.Hints(r.view(v))
	if err != nil {
		r.set.failed(r.name, err)
		return
	}
	for _, x := range hs {
		switch x.Kind {
		case "prefer-tier":
			h.PreferTier(model.Tier(x.Target))
		case "prefer-distinct":
			if r.scope != plan.ScopeEgroup {
				continue
			}
			e := v.Instance()
			for i := 0; i < v.EgroupSlots(e); i++ {
				d := v.EgroupReplica(e, i)
				if d < 0 {
					continue
				}
				switch x.Target {
				case "node":
					h.AvoidNode(v.DeviceNode(d))
				case "rack":
					h.AvoidRack(v.DeviceRack(d))
				}
			}
		case "avoid-device", "prefer-device", "move-first":
			d := deviceIndex(v, model.DeviceID(x.Target))
			if d < 0 {
				continue
			}
			switch x.Kind {
			case "avoid-device":
				h.AvoidDevice(d)
			case "prefer-device":
				h.Prefer(d)
			default:
				h.MoveFirst(d)
			}
		}
	}
}

func deviceIndex(v *plan.View, id model.DeviceID) int {
	for d := 0; d < v.Devices(); d++ {
		if v.DeviceID(d) == id {
			return d
		}
	}
	return -1
}

// view builds the policy's RuleView for the instance v is bound to.
func (r *planRule) view(v *plan.View) RuleView {
	rv := RuleView{Snapshot: r.set.snap, cluster: r.set.cluster}
	if r.scope == plan.ScopeDevice {
		d := r.device(v, v.Instance())
		rv.Device = &d
		return rv
	}
	e := v.Instance()
	eg := &decide.Egroup{ID: v.EgroupID(e), Size: v.EgroupSize(e), Vector: v.EgroupVector(e)}
	for i := 0; i < v.EgroupSlots(e); i++ {
		d := v.EgroupReplica(e, i)
		if d < 0 {
			continue
		}
		dev := r.device(v, d)
		rep := model.Replica{Device: dev.ID, Node: dev.Node, Tier: dev.Tier}
		eg.Replicas = append(eg.Replicas, decide.Replica{Replica: rep})
		rv.Replicas = append(rv.Replicas, rep)
		rv.devices = append(rv.devices, dev)
	}
	if rv.Replicas == nil {
		rv.Replicas = []model.Replica{}
	}
	rv.Egroup = eg
	return rv
}

// device is device d as the planner has it now (usage after the moves so
// far), with the fields the planner does not track from the snapshot.
func (r *planRule) device(v *plan.View, d int) model.Device {
	id := v.DeviceID(d)
	var dev model.Device
	if r.set.snap != nil {
		dev, _ = r.set.snap.Device(id)
	}
	dev.ID = id
	dev.Node = v.NodeID(v.DeviceNode(d))
	dev.Rack = v.RackName(v.DeviceRack(d))
	dev.Tier = v.TierName(v.DeviceTier(d))
	dev.CapacityBytes = v.DeviceCapacity(d)
	dev.UsedBytes = v.DeviceUsed(d)
	switch v.DeviceHealth(d) {
	case plan.HealthOK:
		dev.State = model.DeviceUp
	case plan.HealthDraining:
		dev.State = model.DeviceDraining
	default:
		dev.State = model.DeviceFailed
	}
	return dev
}

// IsLuaRule reports whether a rule-set line names a Lua rule policy.
func IsLuaRule(line string) bool {
	return strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), LuaRulePrefix)
}
