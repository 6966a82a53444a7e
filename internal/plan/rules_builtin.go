package plan

import (
	"fmt"
	"math"

	"github.com/terrace-storage/terrace/internal/model"
)

// The built-in rules. Each is a few lines of cost function plus hints;
// docs/planner.md explains them with examples and the testdata files
// specify them.

var domainEnum = []string{"device", "node", "rack"}

func builtinSpecs() []RuleSpec {
	return []RuleSpec{
		{
			Name: "device_has_space", Scope: "device", Hard: true,
			Doc: "a device's used bytes stay at or under max_fill of its capacity (hard)",
			Params: []ParamSpec{
				{Name: "max_fill", Kind: ParamFloat, Default: "1", Min: 0.01, Max: 1, Doc: "fraction of capacity a device may fill"},
			},
			New: func(p Params) (Rule, error) { return &deviceHasSpace{p: p, maxFill: p.Float("max_fill")}, nil },
		},
		{
			Name: "load_balanced", Scope: "device",
			Doc: "every ok device's load is within ±spread/2 of its tier's mean load, so the most and least loaded differ by at most spread×mean (Mirador LOAD_SPREAD); cost is the distance outside the band in units of the mean",
			Params: []ParamSpec{
				{Name: "spread", Kind: ParamFloat, Default: "0.2", Min: 0.001, Max: 2, Doc: "allowed max−min load as a fraction of the tier mean"},
				{Name: "tier", Kind: ParamTier, Doc: "balance only this tier (default: every tier, each on its own)"},
			},
			New: func(p Params) (Rule, error) {
				return &loadBalanced{p: p, spread: p.Float("spread"), tier: p.Tier("tier")}, nil
			},
		},
		{
			Name: "disk_balanced", Scope: "device",
			Doc: "Curator disk balancing as a cost: on a tier whose usage exceeds mean, every ok device's used fraction stays within ±spread/2 of the tier's; cost is the distance outside the band (a fraction of capacity)",
			Params: []ParamSpec{
				{Name: "mean", Kind: ParamFloat, Default: "0.5", Min: 0, Max: 1, Doc: "balance a tier only when its usage exceeds this (m)"},
				{Name: "spread", Kind: ParamFloat, Default: "0.1", Min: 0.001, Max: 2, Doc: "allowed max−min used fraction within the tier (s)"},
				{Name: "tier", Kind: ParamTier, Doc: "balance only this tier (default: every tier, each on its own)"},
			},
			New: func(p Params) (Rule, error) {
				return &diskBalanced{p: p, mean: p.Float("mean"), spread: p.Float("spread"), tier: p.Tier("tier")}, nil
			},
		},
		{
			Name: "rplset_durable", Scope: "egroup", Hard: true,
			Doc:    "no replica lives on a failed, bad or draining device (hard); the excess counts such replicas",
			Params: nil,
			New:    func(p Params) (Rule, error) { return &rplsetDurable{p: p}, nil },
		},
		{
			Name: "failure_domain_spread", Scope: "egroup",
			Doc: "an egroup's replicas are on distinct nodes, and with level=rack on distinct racks, as far as the online nodes and racks allow; cost 1 per missing node or rack",
			Params: []ParamSpec{
				{Name: "level", Kind: ParamEnum, Default: "rack", Enum: []string{"node", "rack"}, Doc: "the widest failure domain to spread over"},
			},
			New: func(p Params) (Rule, error) {
				return &failureDomainSpread{p: p, racks: p.String("level") == "rack"}, nil
			},
		},
		{
			Name: "vector_satisfied", Scope: "egroup",
			Doc:    "an egroup has the replicas its vector names on each tier (any tier for \"any\" counts); cost 1 per missing or misplaced replica (surplus replicas are the Curator's to drop)",
			Params: nil,
			New:    func(p Params) (Rule, error) { return &vectorSatisfied{p: p}, nil },
		},
		{
			Name: "tier_fill", Scope: "tier",
			Doc: "Curator ILM as a cost: a tier (not the slowest) that started above f charges its cold unpinned bytes until its usage fell by h; a move may not fill a tier past d (hard)",
			Params: []ParamSpec{
				{Name: "f", Kind: ParamFloat, Default: "0.75", Min: 0, Max: 1, Doc: "a tier above this usage sheds cold data"},
				{Name: "d", Kind: ParamFloat, Default: "0.9", Min: 0, Max: 1, Doc: "a destination tier must stay below this usage"},
				{Name: "h", Kind: ParamFloat, Default: "0.15", Min: 0, Max: 1, Doc: "shed until usage fell by this fraction of capacity"},
			},
			New: func(p Params) (Rule, error) {
				return &tierFill{p: p, f: p.Float("f"), d: p.Float("d"), h: p.Float("h")}, nil
			},
		},
		{
			Name: "working_set_fits", Scope: "node",
			Doc: "a node's hot working set (the WorkingSetBytes of its replicas) fits in fill × its capacity on the fast tier (Mirador §4.3); cost is the overflow in units of the mean node's fast capacity",
			Params: []ParamSpec{
				{Name: "tier", Kind: ParamTier, Default: "ssd", Doc: "the fast tier"},
				{Name: "fill", Kind: ParamFloat, Default: "1", Min: 0.01, Max: 10, Doc: "fraction of the fast capacity the working set may use"},
			},
			New: func(p Params) (Rule, error) {
				return &workingSetFits{p: p, tier: p.Tier("tier"), fill: p.Float("fill")}, nil
			},
		},
		{
			Name: "isolate", Scope: "device|node|rack",
			Doc: "anti-affinity (Mirador §4.4): no domain holds replicas of both bucket and from; cost per domain is the smaller of the two counts",
			Params: []ParamSpec{
				{Name: "bucket", Kind: ParamName, Required: true, Doc: "one bucket or workload"},
				{Name: "from", Kind: ParamName, Required: true, Doc: "the bucket to keep apart from"},
				{Name: "domain", Kind: ParamEnum, Default: "node", Enum: domainEnum, Doc: "the domain that must not be shared"},
			},
			New: func(p Params) (Rule, error) {
				if p.String("bucket") == p.String("from") {
					return nil, fmt.Errorf("bucket and from must differ")
				}
				return &isolate{p: p, a: p.String("bucket"), b: p.String("from"), level: levelOf(p.String("domain"))}, nil
			},
		},
		{
			Name: "co_locate", Scope: "device|node|rack",
			Doc: "affinity (Mirador §4.4): every replica of bucket sits in a domain that holds replicas of with; cost 1 per replica elsewhere",
			Params: []ParamSpec{
				{Name: "bucket", Kind: ParamName, Required: true, Doc: "the bucket or workload to place"},
				{Name: "with", Kind: ParamName, Required: true, Doc: "the bucket to be near"},
				{Name: "domain", Kind: ParamEnum, Default: "node", Enum: domainEnum, Doc: "the domain to share"},
			},
			New: func(p Params) (Rule, error) {
				if p.String("bucket") == p.String("with") {
					return nil, fmt.Errorf("bucket and with must differ")
				}
				return &coLocate{p: p, a: p.String("bucket"), b: p.String("with"), level: levelOf(p.String("domain"))}, nil
			},
		},
	}
}

func levelOf(s string) Scope {
	switch s {
	case "device":
		return ScopeDevice
	case "rack":
		return ScopeRack
	}
	return ScopeNode
}

// --- device_has_space ---

type deviceHasSpace struct {
	p       Params
	maxFill float64
}

func (r *deviceHasSpace) Name() string    { return "device_has_space" }
func (r *deviceHasSpace) Scope() Scope    { return ScopeDevice }
func (r *deviceHasSpace) Params() []Param { return r.p.List() }

func (r *deviceHasSpace) over(v *View) float64 {
	d := v.Instance()
	if v.DeviceHealth(d) == HealthFailed {
		return 0 // its bytes are gone; rplset_durable handles the replicas
	}
	return float64(v.DeviceUsed(d)) - r.maxFill*float64(v.DeviceCapacity(d))
}

func (r *deviceHasSpace) Cost(v *View) float64 {
	if r.over(v) > 0 {
		return math.Inf(1)
	}
	return 0
}

func (r *deviceHasSpace) Excess(v *View) float64 {
	return r.over(v) / math.Max(1, float64(v.DeviceCapacity(v.Instance())))
}

func (r *deviceHasSpace) Hint(v *View, h *Hints) {
	h.Offenders(MetricSize, r.over(v))
	h.OrderBy(MetricSize)
}

// --- load_balanced ---

type loadBalanced struct {
	p      Params
	spread float64
	tier   model.Tier
}

func (r *loadBalanced) Name() string    { return "load_balanced" }
func (r *loadBalanced) Scope() Scope    { return ScopeDevice }
func (r *loadBalanced) Params() []Param { return r.p.List() }
func (r *loadBalanced) TierWide() bool  { return true }

// band returns the device's load, the tier mean and the band's bounds; ok
// is false when the rule does not apply to the device.
func (r *loadBalanced) band(v *View) (load, mean, lo, hi float64, ok bool) {
	d := v.Instance()
	if v.DeviceHealth(d) != HealthOK {
		return 0, 0, 0, 0, false
	}
	t := v.DeviceTier(d)
	if r.tier != "" && v.TierName(t) != r.tier {
		return 0, 0, 0, 0, false
	}
	n := v.TierOnlineDevices(t)
	if n < 2 {
		return 0, 0, 0, 0, false
	}
	mean = v.TierLoad(t) / float64(n)
	if mean <= 0 {
		return 0, 0, 0, 0, false
	}
	return v.DeviceLoad(d), mean, mean * (1 - r.spread/2), mean * (1 + r.spread/2), true
}

func (r *loadBalanced) Cost(v *View) float64 {
	load, mean, lo, hi, ok := r.band(v)
	switch {
	case !ok:
		return 0
	case load > hi:
		return (load - hi) / mean
	case load < lo:
		return (lo - load) / mean
	}
	return 0
}

func (r *loadBalanced) Hint(v *View, h *Hints) {
	load, _, lo, hi, ok := r.band(v)
	switch {
	case !ok:
	case load > hi:
		h.Offenders(MetricLoad, load-hi)
		h.OrderBy(MetricLoad)
	case load < lo:
		h.Pull(MetricLoad, lo-load)
	}
}

// --- disk_balanced ---

// diskBalanced is the Curator's m/s disk balancing (§3.2.2) as a planner
// rule: capacity fractions instead of load, and only on tiers that are
// full enough for balance to matter.
type diskBalanced struct {
	p            Params
	mean, spread float64
	tier         model.Tier
}

func (r *diskBalanced) Name() string    { return "disk_balanced" }
func (r *diskBalanced) Scope() Scope    { return ScopeDevice }
func (r *diskBalanced) Params() []Param { return r.p.List() }
func (r *diskBalanced) TierWide() bool  { return true }

// band returns the device's used fraction and the band's bounds; ok is
// false when the rule does not apply to the device.
func (r *diskBalanced) band(v *View) (fill, lo, hi float64, ok bool) {
	d := v.Instance()
	if v.DeviceHealth(d) != HealthOK || v.DeviceCapacity(d) <= 0 {
		return 0, 0, 0, false
	}
	t := v.DeviceTier(d)
	if r.tier != "" && v.TierName(t) != r.tier {
		return 0, 0, 0, false
	}
	if v.TierOnlineDevices(t) < 2 || v.TierCapacity(t) <= 0 {
		return 0, 0, 0, false
	}
	mean := float64(v.TierUsed(t)) / float64(v.TierCapacity(t))
	if mean <= r.mean {
		return 0, 0, 0, false
	}
	fill = float64(v.DeviceUsed(d)) / float64(v.DeviceCapacity(d))
	return fill, mean - r.spread/2, mean + r.spread/2, true
}

func (r *diskBalanced) Cost(v *View) float64 {
	fill, lo, hi, ok := r.band(v)
	switch {
	case !ok:
		return 0
	case fill > hi:
		return fill - hi
	case fill < lo:
		return lo - fill
	}
	return 0
}

func (r *diskBalanced) Hint(v *View, h *Hints) {
	fill, lo, hi, ok := r.band(v)
	capacity := float64(v.DeviceCapacity(v.Instance()))
	switch {
	case !ok:
	case fill > hi:
		// The replicas that bring the device back into the band without
		// overshooting, onto the devices with the most free space.
		h.Offenders(MetricSize, (fill-hi)*capacity)
		h.OrderBy(MetricSize)
	case fill < lo:
		h.Pull(MetricSize, (lo-fill)*capacity)
	}
}

// --- rplset_durable ---

type rplsetDurable struct{ p Params }

func (r *rplsetDurable) Name() string    { return "rplset_durable" }
func (r *rplsetDurable) Scope() Scope    { return ScopeEgroup }
func (r *rplsetDurable) Params() []Param { return nil }

func (r *rplsetDurable) unsafe(v *View) int {
	e, n := v.Instance(), 0
	for i := range v.EgroupSlots(e) {
		if d := v.EgroupReplica(e, i); d >= 0 && v.DeviceHealth(d) != HealthOK {
			n++
		}
	}
	return n
}

func (r *rplsetDurable) Cost(v *View) float64 {
	if r.unsafe(v) > 0 {
		return math.Inf(1)
	}
	return 0
}

func (r *rplsetDurable) Excess(v *View) float64 { return float64(r.unsafe(v) - 1) }

func (r *rplsetDurable) Hint(v *View, h *Hints) {
	e := v.Instance()
	for i := range v.EgroupSlots(e) {
		if d := v.EgroupReplica(e, i); d >= 0 && v.DeviceHealth(d) != HealthOK {
			h.MoveFirst(d)
		}
	}
}

// --- failure_domain_spread ---

type failureDomainSpread struct {
	p     Params
	racks bool
}

func (r *failureDomainSpread) Name() string    { return "failure_domain_spread" }
func (r *failureDomainSpread) Scope() Scope    { return ScopeEgroup }
func (r *failureDomainSpread) Params() []Param { return r.p.List() }

// shortfall returns how many more distinct nodes and racks the egroup's
// live replicas could use.
func (r *failureDomainSpread) shortfall(v *View) (nodes, racks int) {
	e := v.Instance()
	var ns, rs [model.MaxReplicas]int
	n, dn, dr := 0, 0, 0
	for i := range v.EgroupSlots(e) {
		d := v.EgroupReplica(e, i)
		if d < 0 || v.DeviceHealth(d) == HealthFailed {
			continue
		}
		n++
		node, rack := v.DeviceNode(d), v.DeviceRack(d)
		if !containsInt(ns[:dn], node) {
			ns[dn] = node
			dn++
		}
		if !containsInt(rs[:dr], rack) {
			rs[dr] = rack
			dr++
		}
	}
	nodes = max(0, min(n, v.OnlineNodes())-dn)
	if r.racks {
		racks = max(0, min(n, v.OnlineRacks())-dr)
	}
	return nodes, racks
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (r *failureDomainSpread) Cost(v *View) float64 {
	n, k := r.shortfall(v)
	return float64(n + k)
}

func (r *failureDomainSpread) Hint(v *View, h *Hints) {
	shortNodes, shortRacks := r.shortfall(v)
	e := v.Instance()
	var ns, rs [model.MaxReplicas]int
	dn, dr := 0, 0
	for i := range v.EgroupSlots(e) {
		d := v.EgroupReplica(e, i)
		if d < 0 || v.DeviceHealth(d) == HealthFailed {
			continue
		}
		node, rack := v.DeviceNode(d), v.DeviceRack(d)
		sharesNode, sharesRack := containsInt(ns[:dn], node), containsInt(rs[:dr], rack)
		if (shortNodes > 0 && sharesNode) || (shortRacks > 0 && sharesRack) {
			h.MoveFirst(d)
		}
		if !sharesNode {
			ns[dn] = node
			dn++
			if shortNodes > 0 {
				h.AvoidNode(node)
			}
		}
		if !sharesRack {
			rs[dr] = rack
			dr++
			if shortRacks > 0 {
				h.AvoidRack(rack)
			}
		}
	}
}

// --- vector_satisfied ---

type vectorSatisfied struct{ p Params }

func (r *vectorSatisfied) Name() string    { return "vector_satisfied" }
func (r *vectorSatisfied) Scope() Scope    { return ScopeEgroup }
func (r *vectorSatisfied) Params() []Param { return nil }

// tally counts the egroup's live replicas per tier (replicas on failed
// devices are lost and do not count).
func tally(v *View, e int) (tiers, counts [model.MaxReplicas]int, n int) {
	for i := range v.EgroupSlots(e) {
		d := v.EgroupReplica(e, i)
		if d < 0 || v.DeviceHealth(d) == HealthFailed {
			continue
		}
		t := v.DeviceTier(d)
		j := 0
		for j < n && tiers[j] != t {
			j++
		}
		if j == n {
			tiers[n] = t
			n++
		}
		counts[j]++
	}
	return tiers, counts, n
}

func (r *vectorSatisfied) Cost(v *View) float64 {
	e := v.Instance()
	tiers, counts, n := tally(v, e)
	matched, extra := 0, 0
	for j := range n {
		want := v.EgroupVectorCount(e, tiers[j])
		matched += min(want, counts[j])
		extra += max(0, counts[j]-want)
	}
	matched += min(extra, v.EgroupVectorAny(e))
	return float64(v.EgroupVectorTotal(e) - matched)
}

func (r *vectorSatisfied) Hint(v *View, h *Hints) {
	e := v.Instance()
	tiers, counts, n := tally(v, e)
	extra := 0
	short := false
	for t := range v.Tiers() {
		want := v.EgroupVectorCount(e, t)
		have := 0
		for j := range n {
			if tiers[j] == t {
				have = counts[j]
			}
		}
		if want > have {
			h.PreferTier(v.TierName(t))
			short = true
		}
		extra += max(0, have-want)
	}
	// Replicas on tiers with more than their count are the ones to move
	// when explicit tiers are short.
	if short {
		for i := range v.EgroupSlots(e) {
			d := v.EgroupReplica(e, i)
			if d < 0 || v.DeviceHealth(d) == HealthFailed {
				continue
			}
			t := v.DeviceTier(d)
			have := 0
			for j := range n {
				if tiers[j] == t {
					have = counts[j]
				}
			}
			if have > v.EgroupVectorCount(e, t) {
				h.MoveFirst(d)
			}
		}
	}
	if extra < v.EgroupVectorAny(e) {
		// "any" replicas missing: the tiers already used, then any tier a
		// write may use.
		for j := range n {
			h.PreferTier(v.TierName(tiers[j]))
		}
		for t := range v.Tiers() {
			if v.TierName(t).ForAny(false) {
				h.PreferTier(v.TierName(t))
			}
		}
	}
}

// --- tier_fill ---

type tierFill struct {
	p       Params
	f, d, h float64
}

func (r *tierFill) Name() string    { return "tier_fill" }
func (r *tierFill) Scope() Scope    { return ScopeTier }
func (r *tierFill) Params() []Param { return r.p.List() }

// overfilled returns how far the plan pushed the tier past d (bytes), or
// ≤ 0 when it did not.
func (r *tierFill) overfilled(v *View) float64 {
	t := v.Instance()
	used, used0 := float64(v.TierUsed(t)), float64(v.TierInitialUsed(t))
	return used - math.Max(r.d*float64(v.TierCapacity(t)), used0)
}

// shedding reports whether the tier started above f and is still above
// its target (initial usage minus h).
func (r *tierFill) shedding(v *View) bool {
	t := v.Instance()
	capacity := float64(v.TierCapacity(t))
	if capacity <= 0 || t == v.SlowestOnlineTier() {
		return false
	}
	used0 := float64(v.TierInitialUsed(t))
	return used0 > r.f*capacity && float64(v.TierUsed(t)) > used0-r.h*capacity
}

func (r *tierFill) Cost(v *View) float64 {
	t := v.Instance()
	capacity := float64(v.TierCapacity(t))
	if capacity <= 0 {
		return 0
	}
	if r.overfilled(v) > 0 {
		return math.Inf(1)
	}
	if r.shedding(v) {
		return float64(v.TierColdBytes(t)) / capacity
	}
	return 0
}

func (r *tierFill) Excess(v *View) float64 {
	return r.overfilled(v) / math.Max(1, float64(v.TierCapacity(v.Instance())))
}

func (r *tierFill) Hint(v *View, h *Hints) {
	t := v.Instance()
	if !r.shedding(v) {
		return
	}
	h.OnlyCold()
	h.Offenders(MetricColdness, 0)
	h.OrderBy(MetricSize)
	for s := t + 1; s < v.Tiers(); s++ {
		if c := float64(v.TierCapacity(s)); v.TierOnlineDevices(s) > 0 && float64(v.TierUsed(s)) < r.d*c {
			h.PreferTier(v.TierName(s))
		}
	}
}

// --- working_set_fits ---

type workingSetFits struct {
	p    Params
	tier model.Tier
	fill float64
}

func (r *workingSetFits) Name() string    { return "working_set_fits" }
func (r *workingSetFits) Scope() Scope    { return ScopeNode }
func (r *workingSetFits) Params() []Param { return r.p.List() }

// overflow returns the node's working set beyond its allowance and the
// normalisation (the mean node's fast capacity); ok is false when the
// model has no capacity on the fast tier.
func (r *workingSetFits) overflow(v *View) (over, norm float64, ok bool) {
	t := v.TierIndex(r.tier)
	if t < 0 || v.TierCapacity(t) <= 0 || v.OnlineNodes() == 0 {
		return 0, 0, false
	}
	n := v.Instance()
	norm = float64(v.TierCapacity(t)) / float64(v.OnlineNodes())
	return float64(v.NodeWorkingSet(n)) - r.fill*float64(v.NodeTierCapacity(n, t)), norm, true
}

func (r *workingSetFits) Cost(v *View) float64 {
	over, norm, ok := r.overflow(v)
	if !ok || over <= 0 {
		return 0
	}
	return over / norm
}

func (r *workingSetFits) Hint(v *View, h *Hints) {
	over, _, ok := r.overflow(v)
	if !ok || over <= 0 {
		return
	}
	h.Offenders(MetricWorkingSet, over)
	h.AvoidNode(v.Instance())
}

// --- isolate ---

type isolate struct {
	p     Params
	a, b  string
	level Scope
}

func (r *isolate) Name() string      { return "isolate" }
func (r *isolate) Scope() Scope      { return r.level }
func (r *isolate) Params() []Param   { return r.p.List() }
func (r *isolate) Buckets() []string { return []string{r.a, r.b} }

func (r *isolate) Cost(v *View) float64 {
	d := v.Instance()
	return float64(min(v.BucketReplicas(r.level, d, r.a), v.BucketReplicas(r.level, d, r.b)))
}

func (r *isolate) Hint(v *View, h *Hints) {
	d := v.Instance()
	if v.BucketReplicas(r.level, d, r.a) <= v.BucketReplicas(r.level, d, r.b) {
		h.OnlyBucket(r.a)
		h.AvoidBucket(r.b, r.level)
	} else {
		h.OnlyBucket(r.b)
		h.AvoidBucket(r.a, r.level)
	}
}

// --- co_locate ---

type coLocate struct {
	p     Params
	a, b  string
	level Scope
}

func (r *coLocate) Name() string      { return "co_locate" }
func (r *coLocate) Scope() Scope      { return r.level }
func (r *coLocate) Params() []Param   { return r.p.List() }
func (r *coLocate) Buckets() []string { return []string{r.a, r.b} }

func (r *coLocate) Cost(v *View) float64 {
	d := v.Instance()
	a := v.BucketReplicas(r.level, d, r.a)
	if a == 0 || v.BucketReplicas(r.level, d, r.b) > 0 {
		return 0
	}
	return float64(a)
}

func (r *coLocate) Hint(v *View, h *Hints) {
	h.OnlyBucket(r.a)
	h.NearBucket(r.b, r.level)
}
