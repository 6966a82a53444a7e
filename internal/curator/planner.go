package curator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/plan"
)

// The live side of the planner (Mirador): the Curator's scan becomes the
// planner's model, the rules come from the configuration, and the plan's
// moves become actuator tasks — one per egroup, the net change of every
// move the plan makes to it — run as a checkpointed job.

// DefaultPlannerRules is the rule set when the configuration names none:
// the hard rules of safety and durability, and spreading replicas over
// failure domains. Tiering stays with the Curator's f/d/h thresholds.
const DefaultPlannerRules = `device_has_space max_fill=0.95
rplset_durable
failure_domain_spread level=node`

// WhatIf changes a copy of the model before planning: nothing moves.
type WhatIf struct {
	// Kind is fail, add, drain or rule.
	Kind string
	// Target is a device ("n2/hdd0") or node ("n2") for fail, a node for
	// add and drain, a rule line for rule.
	Target string
}

// ParseWhatIf parses "fail:n2/hdd0", "fail:n2", "add:n4", "drain:n2" and
// "rule:load_balanced spread=0.1" (the CLI's --what-if).
func ParseWhatIf(s string) (WhatIf, error) {
	kind, target, ok := strings.Cut(s, ":")
	if !ok || target == "" {
		return WhatIf{}, fmt.Errorf("curator: what-if %q: want fail:DEVICE|fail:NODE|add:NODE|drain:NODE|rule:NAME PARAMS", s)
	}
	switch kind {
	case "fail", "add", "drain":
	case "rule":
		target = strings.Replace(target, "=", " ", 1) // rule:NAME=PARAMS is also accepted
		if name, params, ok := strings.Cut(target, " "); ok && !strings.Contains(name, "=") {
			target = name + " " + params
		}
	default:
		return WhatIf{}, fmt.Errorf("curator: what-if kind %q: want fail, add, drain or rule", kind)
	}
	return WhatIf{Kind: kind, Target: target}, nil
}

// PlanResult is a plan on the live cluster.
type PlanResult struct {
	Seed  uint64     `json:"seed"`
	Rules string     `json:"rules"`
	Moves []PlanMove `json:"moves"`
	// Tasks is what applying the plan would run (moves merged per egroup).
	Tasks []actuate.Task `json:"-"`
	// Cost before and after the plan, per rule and in total.
	CostBefore string      `json:"cost_before"`
	CostAfter  string      `json:"cost_after"`
	PerRule    []RuleDelta `json:"rules_cost"`
	Unresolved []string    `json:"unresolved,omitempty"`
	// RuleErrors reports Lua rule evaluations that failed (counted as 0).
	RuleErrors []string `json:"rule_errors,omitempty"`
	Stranded   []string `json:"stranded,omitempty"`
	Egroups    int      `json:"egroups"`
	Devices    int      `json:"devices"`
	Took       string   `json:"took"`
}

// PlanMove is one move as operators see it.
type PlanMove struct {
	Egroup     string   `json:"egroup"`
	From       string   `json:"from"`
	To         string   `json:"to"`
	Rules      []string `json:"rules"`
	CostBefore string   `json:"cost_before"`
	CostAfter  string   `json:"cost_after"`
}

// RuleDelta is one rule's cost before and after a plan.
type RuleDelta struct {
	Rule   string `json:"rule"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Plan scans the cluster, builds the planner's model, applies the
// what-ifs to a copy and plans with the configured rules (rules "" : the
// configured set). Nothing moves.
func (c *Curator) Plan(ctx context.Context, rules string, whatIfs []WhatIf) (*PlanResult, error) {
	start := time.Now()
	if rules == "" {
		rules = c.opts.PlannerRules
	}
	var extra []string
	for _, w := range whatIfs {
		if w.Kind == "rule" {
			extra = append(extra, w.Target)
		}
	}
	res, err := c.scan(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("curator: scan: %w", err)
	}
	defer res.release()
	snap := c.snapshotFor()
	var src RuleSource
	if c.opts.PlannerRuleSource != nil {
		src = c.opts.PlannerRuleSource(snap)
	}
	rs, lines, err := buildRuleSet(rules, extra, src)
	if err != nil {
		return nil, err
	}
	m, revs := c.plannerModel(res, snap)
	for _, w := range whatIfs {
		if err := applyWhatIf(m, w); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	seed := c.rng.Uint64()
	c.mu.Unlock()
	p, err := plan.Solve(m, rs, plan.Options{Seed: seed})
	if err != nil {
		return nil, err
	}
	out := &PlanResult{Seed: seed, Rules: lines, CostBefore: p.Initial.String(), CostAfter: p.Final.String(),
		Egroups: len(m.Egroups), Devices: len(m.Devices)}
	for _, mv := range p.Moves {
		out.Moves = append(out.Moves, PlanMove{Egroup: fmt.Sprintf("%016x", mv.Egroup), From: string(mv.From), To: string(mv.To),
			Rules: mv.Lowers, CostBefore: mv.Before.String(), CostAfter: mv.After.String()})
	}
	for _, r := range p.Rules {
		out.PerRule = append(out.PerRule, RuleDelta{Rule: r.Rule, Before: r.Before.String(), After: r.After.String()})
	}
	for _, v := range p.Unresolved {
		out.Unresolved = append(out.Unresolved, fmt.Sprintf("%s (%s %s): cost %s", v.Rule, v.Scope, v.Instance, v.Cost))
	}
	for _, id := range p.Stranded {
		out.Stranded = append(out.Stranded, fmt.Sprintf("%016x", id))
	}
	if src != nil {
		out.RuleErrors = src.Errors()
	}
	out.Tasks = planTasks(m, p, revs)
	out.Took = time.Since(start).Round(time.Millisecond).String()
	return out, nil
}

// RuleSource supplies rules defined outside the configuration: the live
// Lua rule policies, bound to one version each for the whole plan. Every
// rule it names joins each plan (weight 1) unless the rule set names it,
// e.g. "lua.spread weight=3" (weight=0 keeps only its hard constraints).
type RuleSource interface {
	// Specs are the rules' specs for parsing.
	Specs() []plan.RuleSpec
	// Names are the rule-set names of every live rule.
	Names() []string
	// Errors describes failed evaluations once the plan is done.
	Errors() []string
}

// luaRulePrefix starts the names of Lua rule policies in rule sets; the
// configuration may name them before they are put (checked at plan time).
const luaRulePrefix = "lua."

// buildRuleSet parses the rule lines; extra lines replace a configured
// rule of the same name or add one; src's rules join unless named. It
// returns the rule set and its lines.
func buildRuleSet(rules string, extra []string, src RuleSource) (*plan.RuleSet, string, error) {
	lines := map[string]string{}
	var order []string
	for _, l := range append(strings.Split(rules, "\n"), extra...) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		if _, ok := lines[name]; !ok {
			order = append(order, name)
		}
		lines[name] = l
	}
	var specs []plan.RuleSpec
	if src != nil {
		specs = src.Specs()
		for _, n := range src.Names() {
			if _, ok := lines[n]; !ok {
				order = append(order, n)
				lines[n] = n
			}
		}
	}
	var b strings.Builder
	for _, n := range order {
		b.WriteString(lines[n] + "\n")
	}
	rs, err := plan.ParseRuleSetWith(b.String(), specs)
	if err != nil {
		if src != nil {
			for _, n := range order {
				if strings.HasPrefix(n, luaRulePrefix) && !slices.Contains(src.Names(), n) {
					return nil, "", fmt.Errorf("curator: planner rules: %s names the rule policy %q, which is not live (terrace policy ls): %w",
						n, strings.TrimPrefix(n, luaRulePrefix), err)
				}
			}
		}
		return nil, "", fmt.Errorf("curator: planner rules: %w", err)
	}
	return rs, strings.TrimSpace(b.String()), nil
}

// ValidateRules checks a rule set at start-up. Lines naming Lua rule
// policies ("lua.NAME ...") are checked when a plan runs: the policy may
// be put after the node starts.
func ValidateRules(rules string) error {
	var kept []string
	for _, l := range strings.Split(rules, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")), luaRulePrefix) {
			kept = append(kept, l)
		}
	}
	_, _, err := buildRuleSet(strings.Join(kept, "\n"), nil, nil)
	return err
}

// plannerModel builds the planner's model from a full scan: every device
// of the cluster view (long-down nodes' devices failed), every sealed
// egroup with its good replicas, size, bucket and read load. It returns
// each egroup's record revision for the tasks.
func (c *Curator) plannerModel(res *scanResult, snap *model.Snapshot) (*plan.Model, map[uint64]int64) {
	m := &plan.Model{Devices: plan.FromSnapshot(snap)}
	window := c.opts.Tier.HotWindow.Seconds()
	if window <= 0 {
		window = 600
	}
	revs := map[uint64]int64{}
	known := map[model.DeviceID]bool{}
	for _, d := range m.Devices {
		known[d.ID] = true
	}
	for _, eg := range res.egroups {
		if eg.Open || eg.Size == 0 || eg.EC.K > 0 {
			continue // an open egroup belongs to its writer; strips are not replicas to move
		}
		if demoted(eg) {
			// Tiering put a replica on the remote tier, where the vector's
			// "any" never places one: the planner would see it misplaced
			// and pull it back, undoing the demotion every other job.
			// Tiering owns such an egroup until it promotes it.
			continue
		}
		pe := plan.Egroup{ID: eg.ID, SizeBytes: eg.Size, Vector: eg.Vector, Bucket: res.bucketOf[eg.ID]}
		for _, r := range eg.Replicas {
			if !r.Bad && known[r.Device] {
				pe.Replicas = append(pe.Replicas, r.Device)
			}
		}
		if eg.Reads > 0 {
			pe.Load = float64(eg.Reads) * float64(eg.Size) / window
			pe.WorkingSetBytes = eg.Size
		}
		if len(pe.Replicas) > pe.Vector.Total() {
			pe.Replicas = pe.Replicas[:pe.Vector.Total()] // surplus is the Curator's to drop
		}
		m.Egroups = append(m.Egroups, pe)
		revs[eg.ID] = eg.ModRev
	}
	sort.Slice(m.Egroups, func(i, j int) bool { return m.Egroups[i].ID < m.Egroups[j].ID })
	// A device's load is the sum of its replicas' loads, in the egroups'
	// unit (read bytes/s over the hot window). The snapshot's device
	// ReadBps/WriteBps, which plan.FromSnapshot puts there, are probed
	// device speeds, not load: load_balanced would balance disk speeds
	// (equal on like devices, noise otherwise) plus a little real load.
	idx := make(map[model.DeviceID]int, len(m.Devices))
	for i := range m.Devices {
		m.Devices[i].Load = 0
		idx[m.Devices[i].ID] = i
	}
	for _, e := range m.Egroups {
		for _, d := range e.Replicas {
			m.Devices[idx[d]].Load += e.Load
		}
	}
	return m, revs
}

// applyWhatIf changes the model as the what-if says.
func applyWhatIf(m *plan.Model, w WhatIf) error {
	switch w.Kind {
	case "rule":
		return nil // handled in the rule set
	case "fail", "drain":
		h := plan.HealthFailed
		if w.Kind == "drain" {
			h = plan.HealthDraining
		}
		hit := false
		for i := range m.Devices {
			d := &m.Devices[i]
			if string(d.ID) == w.Target || (w.Kind == "drain" || !strings.Contains(w.Target, "/")) && string(d.Node) == w.Target {
				d.Health = h
				hit = true
			}
		}
		if !hit {
			return fmt.Errorf("curator: what-if %s:%s: no such device or node", w.Kind, w.Target)
		}
	case "add":
		node := model.NodeID(w.Target)
		var tmpl model.NodeID
		for _, d := range m.Devices {
			if d.Node == node {
				return fmt.Errorf("curator: what-if add:%s: the node exists", w.Target)
			}
			if tmpl == "" {
				tmpl = d.Node
			}
		}
		if tmpl == "" {
			return errors.New("curator: what-if add: no node to copy the device layout from")
		}
		for _, d := range append([]plan.Device(nil), m.Devices...) {
			if d.Node != tmpl {
				continue
			}
			name := strings.TrimPrefix(string(d.ID), string(tmpl)+"/")
			m.Devices = append(m.Devices, plan.Device{ID: model.DeviceID(string(node) + "/" + name), Node: node, Rack: d.Rack,
				Tier: d.Tier, CapacityBytes: d.CapacityBytes, Health: plan.HealthOK})
		}
	default:
		return fmt.Errorf("curator: unknown what-if %q", w.Kind)
	}
	return nil
}

// planTasks merges a plan's moves per egroup into actuator tasks: the net
// replicas added and removed, the rules the moves lowered, the cost
// before the first and after the last.
func planTasks(m *plan.Model, p *plan.Plan, revs map[uint64]int64) []actuate.Task {
	devs := map[model.DeviceID]plan.Device{}
	for _, d := range m.Devices {
		devs[d.ID] = d
	}
	egs := map[uint64]plan.Egroup{}
	for _, e := range m.Egroups {
		egs[e.ID] = e
	}
	type acc struct {
		cur    map[model.DeviceID]bool
		rules  map[string]bool
		before plan.Cost
		after  plan.Cost
	}
	byEg := map[uint64]*acc{}
	var order []uint64
	for _, mv := range p.Moves {
		a, ok := byEg[mv.Egroup]
		if !ok {
			a = &acc{cur: map[model.DeviceID]bool{}, rules: map[string]bool{}, before: mv.Before}
			for _, d := range egs[mv.Egroup].Replicas {
				a.cur[d] = true
			}
			byEg[mv.Egroup] = a
			order = append(order, mv.Egroup)
		}
		if mv.From != "" {
			delete(a.cur, mv.From)
		}
		a.cur[mv.To] = true
		for _, r := range mv.Lowers {
			a.rules[r] = true
		}
		a.after = mv.After
	}
	var tasks []actuate.Task
	for _, id := range order {
		a := byEg[id]
		e := egs[id]
		t := actuate.Task{Kind: actuate.KindPlanned, Egroup: id, ModRev: revs[id], Bytes: e.SizeBytes,
			CostBefore: costNumber(a.before), CostAfter: costNumber(a.after)}
		initial := map[model.DeviceID]bool{}
		for _, d := range e.Replicas {
			initial[d] = true
			if !a.cur[d] {
				t.Remove = append(t.Remove, replicaOf(devs[d]))
			}
		}
		for d := range a.cur {
			if !initial[d] {
				t.Add = append(t.Add, replicaOf(devs[d]))
			}
		}
		if len(t.Add) == 0 && len(t.Remove) == 0 {
			continue // the moves cancelled out
		}
		sort.Slice(t.Add, func(i, j int) bool { return t.Add[i].Device < t.Add[j].Device })
		for r := range a.rules {
			t.Rules = append(t.Rules, r)
		}
		sort.Strings(t.Rules)
		t.Reason = "planner: " + strings.Join(t.Rules, ",")
		tasks = append(tasks, t)
	}
	return tasks
}

func replicaOf(d plan.Device) model.Replica {
	return model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}
}

// costNumber folds a cost into one number for job records: hard
// violations dominate.
func costNumber(c plan.Cost) float64 {
	if math.IsInf(c.Hard, 0) {
		return math.Inf(1)
	}
	return c.Hard*1e9 + c.Soft
}

// ApplyPlan plans now and runs the plan as a checkpointed actuator job
// (no deadline: it runs to the end, and a new master resumes it). With
// wait it returns when the job is done.
func (c *Curator) ApplyPlan(ctx context.Context, rules string, wait bool) (*PlanResult, actuate.Progress, error) {
	p, err := c.Plan(ctx, rules, nil)
	if err != nil {
		return nil, actuate.Progress{}, err
	}
	id := fmt.Sprintf("plan-%d", c.jobID())
	job := actuate.NewJob(id, "plan", "operator: terrace plan apply", p.Seed, c.now(), p.Tasks)
	if len(p.Tasks) == 0 {
		return p, job.Progress(c.now()), nil
	}
	run := func(ctx context.Context) {
		if err := c.runner.Run(ctx, job, nil); err != nil && ctx.Err() == nil {
			c.log.Warn("planned job failed", "job", id, "err", err)
		}
	}
	if wait {
		run(ctx)
	} else {
		go run(context.WithoutCancel(ctx))
		// Let the first checkpoint land so `plan jobs` shows it at once.
		time.Sleep(50 * time.Millisecond)
	}
	return p, job.Progress(c.now()), nil
}

// JobProgress returns running jobs and recent ones from the job store.
func (c *Curator) JobProgress(ctx context.Context, n int) ([]actuate.Progress, error) {
	running := c.runner.Running()
	seen := map[string]bool{}
	for _, p := range running {
		seen[p.ID] = true
	}
	recent, err := c.jobs.Recent(ctx, n, c.now())
	if err != nil {
		return running, err
	}
	for _, p := range recent {
		if !seen[p.ID] {
			running = append(running, p)
		}
	}
	return running, nil
}

// demoted reports whether tiering has put a replica of eg on the remote
// tier that its vector does not name.
func demoted(eg decide.Egroup) bool {
	for _, r := range eg.Replicas {
		if r.Tier == model.TierRemote && eg.Vector.Counts[model.TierRemote] == 0 {
			return true
		}
	}
	return false
}
