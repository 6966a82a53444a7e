package policy

import (
	"context"
	"fmt"
	"math"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// The rule hook: a Lua planner objective (Mirador's rules: a cost per
// candidate; +inf violates a hard constraint, negative is an affinity).
//
// Rule mirrors the rule interface of the planner package (internal/plan):
// a name, a scope, parameters, a side-effect-free cost over a read-only
// view and optional hints. It is declared here, where it is used, so the
// Lua adapter does not wait for the planner; connecting them is a small
// adapter from plan's view type to RuleView (see
// docs/design/0005-programmable-policies.md, "Connecting the planner").

// RuleScope is what one cost is computed for.
type RuleScope string

// Scopes.
const (
	// ScopeDevice scores one candidate device for a replica.
	ScopeDevice RuleScope = "device"
	// ScopeReplicaSet scores a whole candidate replica set of an egroup.
	ScopeReplicaSet RuleScope = "replica-set"
	// ScopeEgroup scores an egroup's current placement (what to fix first).
	ScopeEgroup RuleScope = "egroup"
)

func parseScope(x any) (RuleScope, error) {
	switch x {
	case nil:
		return ScopeReplicaSet, nil
	case string(ScopeDevice), string(ScopeReplicaSet), string(ScopeEgroup):
		return RuleScope(x.(string)), nil
	}
	return "", fmt.Errorf("scope = %s: want \"device\", \"replica-set\" or \"egroup\"", describe(x))
}

// RuleView is the read-only input of one evaluation. Which fields are set
// depends on the scope: Device for device scope, Replicas for replica-set
// scope, Egroup for egroup scope (and, when known, for the others).
type RuleView struct {
	Snapshot *model.Snapshot
	Egroup   *decide.Egroup
	Replicas []model.Replica
	Device   *model.Device

	// cluster, when set, is the precomputed cluster summary (the planner
	// adapter computes it once per plan, not once per evaluation);
	// devices, when set, parallels Replicas with the devices' current
	// state (the planner's, after the moves so far).
	cluster map[string]any
	devices []model.Device
}

// RuleHint is a domain hint a rule gives the solver (Mirador §3.3):
// where to look first, e.g. {Kind: "prefer-tier", Target: "ssd"}.
type RuleHint struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
	Weight float64 `json:"weight,omitempty"`
}

// Rule is the planner's view of a rule.
type Rule interface {
	Name() string
	Scope() RuleScope
	Params() map[string]any
	// Cost is side-effect free; +Inf means the candidate violates a hard
	// constraint.
	Cost(v RuleView) (float64, error)
	// Hints may return nil.
	Hints(v RuleView) ([]RuleHint, error)
}

// luaRule is one rule policy bound to the version live when Rules was
// called, so a plan uses one version of each rule from start to end.
type luaRule struct {
	m  *Manager
	sl *slot
	v  *Version
}

var _ Rule = (*luaRule)(nil)

// Rules returns the live rule policies, each bound to its current
// version (or, if that is disabled, its last good version).
func (m *Manager) Rules() []Rule {
	m.mu.RLock()
	var out []Rule
	for _, sl := range m.byName {
		if sl.hook != HookRule {
			continue
		}
		if c := sl.candidates(); len(c) > 0 {
			out = append(out, &luaRule{m: m, sl: sl, v: c[0]})
		}
	}
	m.mu.RUnlock()
	sortRules(out)
	return out
}

func sortRules(rs []Rule) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Name() < rs[j-1].Name(); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func (r *luaRule) Name() string           { return r.v.Name }
func (r *luaRule) Scope() RuleScope       { return r.v.scope }
func (r *luaRule) Params() map[string]any { return r.v.params }

// Version is the policy version the rule runs.
func (r *luaRule) Version() int64 { return r.v.Version }

// Cost implements Rule. A failed evaluation counts towards disabling the
// version, like any hook call; the planner decides what a failed rule
// means for its plan (skip the rule or stop).
func (r *luaRule) Cost(view RuleView) (float64, error) {
	var c float64
	err := r.m.callVersion(r.sl, r.v, func(v *Version) error {
		var err error
		c, _, err = evalRule(context.Background(), v, view, false)
		return err
	})
	return c, err
}

// Hints implements Rule.
func (r *luaRule) Hints(view RuleView) ([]RuleHint, error) {
	if !hasFunction(r.v, "hints") {
		return nil, nil
	}
	var hs []RuleHint
	err := r.m.callVersion(r.sl, r.v, func(v *Version) error {
		var err error
		_, hs, err = evalRule(context.Background(), v, view, true)
		return err
	})
	return hs, err
}

func hasFunction(v *Version, name string) bool {
	for _, f := range v.functions {
		if f == name {
			return true
		}
	}
	return false
}

// callVersion runs fn on one version with failure accounting but no
// fallback: a plan must not mix versions of a rule.
func (m *Manager) callVersion(sl *slot, v *Version, fn func(v *Version) error) error {
	if v.disabled.Load() {
		return fmt.Errorf("policy: %s version %d is disabled on this node", v.Name, v.Version)
	}
	v.calls.Add(1)
	if err := fn(v); err != nil {
		m.failed(sl, v, err)
		return err
	}
	m.succeeded(sl, v)
	return nil
}

// ruleView builds the Lua view: {scope, params, cluster, device, egroup,
// replicas}.
func ruleView(v *Version, rv RuleView) map[string]any {
	out := map[string]any{"scope": string(v.scope)}
	if v.params != nil {
		out["params"] = v.params
	}
	switch {
	case rv.cluster != nil:
		out["cluster"] = rv.cluster
	case rv.Snapshot != nil:
		out["cluster"] = clusterSummary(rv.Snapshot)
	}
	if rv.Device != nil {
		out["device"] = deviceView(*rv.Device)
	}
	if rv.Egroup != nil {
		out["egroup"] = egroupView(*rv.Egroup)
	}
	if rv.Replicas != nil {
		reps := make([]any, 0, len(rv.Replicas))
		for i, r := range rv.Replicas {
			if len(rv.devices) == len(rv.Replicas) {
				reps = append(reps, deviceReplicaView(rv.devices[i]))
			} else if rv.Snapshot != nil {
				reps = append(reps, replicaView(rv.Snapshot, r))
			} else {
				reps = append(reps, map[string]any{"device": string(r.Device), "node": string(r.Node), "tier": string(r.Tier)})
			}
		}
		out["replicas"] = reps
	}
	return out
}

// evalRule runs cost(view) (and hints(view) when asked).
func evalRule(ctx context.Context, v *Version, rv RuleView, withHints bool) (float64, []RuleHint, error) {
	var cost float64
	var hints []RuleHint
	seed := uint64(0)
	if rv.Snapshot != nil {
		seed = uint64(rv.Snapshot.Now.UnixNano())
	}
	err := v.prog.Run(ctx, sandbox.RunOptions{Seed: seed}, func(sess *sandbox.Session) error {
		view := sess.Ref(ruleView(v, rv))
		if !withHints {
			res, err := sess.Call("cost", view)
			if err != nil {
				return err
			}
			if len(res) > 0 {
				if f, ok := res[0].(float64); ok && math.IsInf(f, 1) {
					cost = f // math.huge: a hard constraint
					return nil
				}
			}
			cost, err = number(v, res, "cost")
			return err
		}
		res, err := sess.Call("hints", view)
		if err != nil {
			return err
		}
		if len(res) == 0 || res[0] == nil {
			return nil
		}
		list, ok := res[0].([]any)
		if !ok {
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("hints returned %s: want a list of {kind=, target=}", describe(res[0]))}
		}
		for _, h := range list {
			t, ok := h.(map[string]any)
			kind, _ := t["kind"].(string)
			target, _ := t["target"].(string)
			if !ok || kind == "" {
				return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("hint %s: want {kind = string, target = string, weight = number}", describe(h))}
			}
			w, _ := t["weight"].(float64)
			hints = append(hints, RuleHint{Kind: kind, Target: target, Weight: w})
		}
		return nil
	})
	return cost, hints, err
}
