package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// Scope says which part of the model a rule's cost is about (Mirador's
// rule annotation). The solver re-evaluates a rule only on the instances of
// its scope that a move touches, which is what makes cost updates local.
type Scope uint8

const (
	// ScopeEgroup rules see one egroup and its whole replica set (the
	// "object" and "replica set" scopes). They are mutual objectives: moving
	// one replica re-evaluates the set, so siblings' costs follow.
	ScopeEgroup Scope = iota
	// ScopeDevice rules see one device: its usage, load and replicas.
	ScopeDevice
	// ScopeNode rules see one node: the aggregates over its devices.
	ScopeNode
	// ScopeRack rules see one rack.
	ScopeRack
	// ScopeTier rules see one tier's online totals.
	ScopeTier
	numScopes
)

var scopeNames = [...]string{"egroup", "device", "node", "rack", "tier"}

func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", s)
}

// Rule is an objective function (Mirador §3.2). Cost returns the cost of
// the scope instance the view is bound to (View.Instance): 0 when the rule
// is satisfied, a positive cost when it is not, a negative cost for an
// affinity met, and +Inf when a hard constraint is broken.
//
// Cost must be a pure function of what the view shows about its instance
// (the instance's own aggregates, the egroups and devices it names, and, for
// TierWide rules, the tier totals): the solver caches costs per instance
// and re-evaluates only instances a move touches, so a rule that reads
// anything else gets stale costs. Cost is called many times per move in no
// particular order and must not keep state between calls. A rule written
// in another language (a sandboxed policy hook) implements this interface
// through a small adapter.
type Rule interface {
	// Name is the rule's name in rule sets ("load_balanced").
	Name() string
	// Scope is the kind of instance Cost is evaluated on.
	Scope() Scope
	// Params are the rule's parameters, normalised (defaults filled), in
	// the order ParseRule reads them.
	Params() []Param
	Cost(v *View) float64
}

// HardRule is implemented by rules that return +Inf: Excess says how far
// the instance is from satisfying the rule (≥ 0, e.g. the overfilled
// fraction of a device), so that partial repairs count as progress.
type HardRule interface {
	Excess(v *View) float64
}

// Hinter is implemented by rules that can point the solver at the right
// variables and values (Mirador's domain hints). Hint is called with the
// view bound to a costly instance and must only call h's methods.
type Hinter interface {
	Hint(v *View, h *Hints)
}

// TierWide is implemented by device-scope rules whose cost also reads the
// tier totals (View.TierLoad and friends). When a move changes a tier's
// totals the solver re-evaluates such a rule on every device of the tier.
type TierWide interface {
	TierWide() bool
}

// BucketRule is implemented by rules that read per-domain replica counts of
// buckets (View.BucketReplicas); the solver keeps those counters only for
// the buckets some rule names.
type BucketRule interface {
	Buckets() []string
}

// Param is one normalised rule parameter.
type Param struct {
	Name, Value string
}

// Metric names an egroup or device quantity hints rank by.
type Metric uint8

const (
	MetricNone Metric = iota
	// MetricLoad is Egroup.Load / the device's load.
	MetricLoad
	// MetricSize is Egroup.SizeBytes / the device's used fraction.
	MetricSize
	// MetricWorkingSet is Egroup.WorkingSetBytes.
	MetricWorkingSet
	// MetricColdness ranks the coldest egroups (lowest load) first.
	MetricColdness
)

// Hints is what rules tell the solver about a costly instance: which of its
// replicas to move first and which devices to try as destinations. Hints
// only order and prune the search; the cost decides.
type Hints struct {
	s *state

	offMetric  Metric
	offTarget  float64
	onlyCold   bool
	onlyBucket int32
	offDevs    []int32

	pull       bool
	pullMetric Metric
	pullTarget float64

	tiers     []int8
	prefer    []int32
	avoidDev  []int32
	avoidNode []int32
	avoidRack []int32

	avoidBucket, nearBucket int32
	bucketLevel             Scope

	order Metric
}

func (h *Hints) reset(s *state) {
	*h = Hints{s: s, onlyBucket: -1, avoidBucket: -1, nearBucket: -1,
		offDevs: h.offDevs[:0], tiers: h.tiers[:0], prefer: h.prefer[:0],
		avoidDev: h.avoidDev[:0], avoidNode: h.avoidNode[:0], avoidRack: h.avoidRack[:0]}
}

// Offenders asks for the instance's replicas ranked by m: first those whose
// metric is at most target, largest first (moving one of them repairs the
// most without overshooting), then the rest, smallest first.
// MetricColdness ignores target and ranks the coldest first.
func (h *Hints) Offenders(m Metric, target float64) { h.offMetric, h.offTarget = m, target }

// OnlyCold restricts the replicas the solver may move for this instance to
// cold egroups' replicas that the vector does not pin to their tier.
func (h *Hints) OnlyCold() { h.onlyCold = true }

// OnlyBucket restricts the replicas the solver may move for this instance
// to those of one bucket.
func (h *Hints) OnlyBucket(bucket string) {
	h.onlyBucket = h.s.bucketIndex(bucket)
	if h.onlyBucket < 0 {
		h.onlyBucket = math.MaxInt32 // unknown bucket: nothing qualifies
	}
}

// MoveFirst asks the solver to try the replica on device d first (for
// egroup-scope instances: the replica that breaks the rule).
func (h *Hints) MoveFirst(d int) { h.offDevs = append(h.offDevs, int32(d)) }

// Pull says the instance lacks something (an underloaded device): the
// solver should bring replicas in from the devices highest in m on the
// same tier, ranked as Offenders ranks them against target.
func (h *Hints) Pull(m Metric, target float64) { h.pull, h.pullMetric, h.pullTarget = true, m, target }

// PreferTier asks for destinations on tier t (in the order hinted).
func (h *Hints) PreferTier(t model.Tier) {
	i := h.s.tierIndex(t)
	if i < 0 {
		return
	}
	for _, x := range h.tiers {
		if x == int8(i) {
			return
		}
	}
	h.tiers = append(h.tiers, int8(i))
}

// Prefer asks the solver to try device d as a destination.
func (h *Hints) Prefer(d int) { h.prefer = append(h.prefer, int32(d)) }

// AvoidDevice, AvoidNode and AvoidRack remove destinations from the search
// (a move there cannot help, e.g. a sibling already lives there).
func (h *Hints) AvoidDevice(d int) { h.avoidDev = append(h.avoidDev, int32(d)) }
func (h *Hints) AvoidNode(n int)   { h.avoidNode = append(h.avoidNode, int32(n)) }
func (h *Hints) AvoidRack(r int)   { h.avoidRack = append(h.avoidRack, int32(r)) }

// AvoidBucket skips destinations whose domain (device, node or rack) holds
// replicas of bucket; NearBucket looks for destinations whose domain does.
// Both need the bucket counted (BucketRule).
func (h *Hints) AvoidBucket(bucket string, level Scope) {
	h.avoidBucket, h.bucketLevel = h.s.bucketIndex(bucket), level
}
func (h *Hints) NearBucket(bucket string, level Scope) {
	h.nearBucket, h.bucketLevel = h.s.bucketIndex(bucket), level
}

// OrderBy says which domain ordering to walk first for destinations:
// MetricLoad (least loaded first, the default) or MetricSize (most free
// space first).
func (h *Hints) OrderBy(m Metric) { h.order = m }

// entry is one rule of a rule set with its weight.
type entry struct {
	rule     Rule
	weight   float64
	hard     HardRule
	hinter   Hinter
	tierWide bool
}

// RuleSet is an ordered list of rules with weights: the policy.
type RuleSet struct {
	entries []entry
}

// MaxRules bounds a rule set; the solver tracks per-move which rules a
// move lowered in a 64-bit mask.
const MaxRules = 64

// Add appends a rule with a weight (≥ 0) that multiplies its finite costs.
// Weights set priorities between soft rules (Mirador §5: a high-priority
// rule's cost must outweigh several low-priority violations).
func (rs *RuleSet) Add(r Rule, weight float64) error {
	if r == nil {
		return fmt.Errorf("plan: nil rule")
	}
	if weight < 0 || math.IsNaN(weight) || math.IsInf(weight, 0) {
		return fmt.Errorf("plan: rule %s: weight must be a finite number ≥ 0, got %v", r.Name(), weight)
	}
	if len(rs.entries) >= MaxRules {
		return fmt.Errorf("plan: at most %d rules in a rule set", MaxRules)
	}
	if r.Scope() >= numScopes {
		return fmt.Errorf("plan: rule %s has unknown scope %d", r.Name(), r.Scope())
	}
	e := entry{rule: r, weight: weight}
	e.hard, _ = r.(HardRule)
	e.hinter, _ = r.(Hinter)
	if tw, ok := r.(TierWide); ok && tw.TierWide() {
		if r.Scope() != ScopeDevice {
			return fmt.Errorf("plan: rule %s: only device-scope rules may be tier-wide", r.Name())
		}
		e.tierWide = true
	}
	rs.entries = append(rs.entries, e)
	return nil
}

// Len is the number of rules.
func (rs *RuleSet) Len() int { return len(rs.entries) }

// Rule returns the i'th rule and its weight.
func (rs *RuleSet) Rule(i int) (Rule, float64) { return rs.entries[i].rule, rs.entries[i].weight }

// String prints the rule set in the syntax ParseRuleSet reads, one rule
// per line, with every parameter (defaults included).
func (rs *RuleSet) String() string {
	var b strings.Builder
	for _, e := range rs.entries {
		b.WriteString(e.rule.Name())
		for _, p := range e.rule.Params() {
			fmt.Fprintf(&b, " %s=%s", p.Name, p.Value)
		}
		if e.weight != 1 {
			fmt.Fprintf(&b, " weight=%s", fmtFloat(e.weight))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
