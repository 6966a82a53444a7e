package policy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TestRequest asks what a policy would decide now, applying nothing.
type TestRequest struct {
	Name string `json:"name"`
	// Source tests this text instead of a stored version (with Hook, or
	// the stored policy's hook, or the inferred one).
	Source string `json:"source,omitempty"`
	Hook   Hook   `json:"hook,omitempty"`
	// Version tests an older stored version (0: the live one).
	Version int64 `json:"version,omitempty"`
	// WhatIf changes the model first: "DEVICE.FIELD=VALUE" (used, capacity,
	// queue, streams, state), "NODE.FIELD=VALUE" (up, conns) or
	// "tier:TIER.used=VALUE"; used takes bytes (10G) or a percentage.
	WhatIf []string `json:"what_if,omitempty"`
	// Fitness: the vector to place and how many placements to sample.
	Vector  string `json:"vector,omitempty"`
	Samples int    `json:"samples,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// Class: the object, method and argument of a dry run.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	Method string `json:"method,omitempty"`
	Arg    string `json:"arg,omitempty"`
}

// TestReport is the outcome: human text plus the same data as JSON.
type TestReport struct {
	Name    string   `json:"name"`
	Hook    Hook     `json:"hook"`
	Version int64    `json:"version"` // 0: an unsaved source
	WhatIf  []string `json:"what_if,omitempty"`
	Text    string   `json:"text"`
	Log     string   `json:"log,omitempty"`
	Data    any      `json:"data,omitempty"`
}

// Test runs a policy version against the live model (changed by the
// what-ifs) and reports what it would decide.
func (m *Manager) Test(ctx context.Context, req TestRequest, env Env) (TestReport, error) {
	v, err := m.testVersion(ctx, req)
	if err != nil {
		return TestReport{}, err
	}
	s := env.snapshot()
	if len(req.WhatIf) > 0 {
		if s, err = ApplyWhatIf(s, req.WhatIf); err != nil {
			return TestReport{}, err
		}
	}
	rep := TestReport{Name: v.Name, Hook: v.Hook, Version: v.Version, WhatIf: req.WhatIf}
	if req.Source != "" {
		rep.Version = 0
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 2, 2, ' ', 0)
	switch v.Hook {
	case HookFitness:
		rep.Data, err = testFitness(w, v, s, req, env)
	case HookTiering:
		rep.Data, err = testTiering(ctx, w, v, s, env)
	case HookBalancer:
		rep.Data, err = testBalancer(ctx, w, v, s, env)
	case HookRule:
		rep.Data, err = testRule(ctx, w, v, s, env)
	case HookClass:
		var res ExecResult
		res, err = m.testClass(ctx, v, req, env)
		if err == nil {
			rep.Log = res.Log
			rep.Data = res
			fmt.Fprintf(w, "%s.%s on %s/%s (dry run, nothing written)\n", v.Name, req.Method, req.Bucket, req.Key)
			fmt.Fprintf(w, "result:\t%s\n", res.Text)
			if res.Wrote || res.Size > 0 {
				fmt.Fprintf(w, "object after:\t%d bytes\n", res.Size)
			}
		}
	}
	if err != nil {
		return TestReport{}, err
	}
	w.Flush()
	rep.Text = b.String()
	return rep, nil
}

// testVersion loads the version to test.
func (m *Manager) testVersion(ctx context.Context, req TestRequest) (*Version, error) {
	if req.Source != "" {
		hook := req.Hook
		if hook == "" {
			if cur, _, err := m.reg.Get(ctx, req.Name); err == nil && !cur.Deleted {
				hook = cur.Hook
			}
		}
		if hook == "" {
			probe, err := m.load(ctx, Record{Name: req.Name, Hook: HookClass, Source: req.Source})
			if err != nil {
				return nil, rejection(req.Name, err)
			}
			hook = InferHook(probe.functions)
		}
		v, err := m.load(ctx, Record{Name: req.Name, Hook: hook, Source: req.Source})
		if err != nil {
			return nil, rejection(req.Name, err)
		}
		return v, nil
	}
	if req.Version == 0 {
		if sl := m.named(req.Name); sl != nil {
			if v := sl.cur.Load(); v != nil {
				return v, nil
			}
		}
	}
	var rec Record
	var err error
	if req.Version > 0 {
		rec, err = m.reg.Version(ctx, req.Name, req.Version)
	} else {
		rec, _, err = m.reg.Get(ctx, req.Name)
	}
	if err != nil {
		return nil, err
	}
	if rec.Deleted {
		return nil, fmt.Errorf("%w: %s was removed (version %d)", ErrNotFound, req.Name, rec.Version)
	}
	return m.load(ctx, rec)
}

func testFitness(w *tabwriter.Writer, v *Version, s *model.Snapshot, req TestRequest, env Env) (any, error) {
	ws, err := fitnessWeights(context.Background(), v, s, req.Seed)
	if err != nil {
		return nil, err
	}
	vec := model.MustParseVector("any=2")
	if req.Vector != "" {
		if vec, err = model.ParseVector(req.Vector); err != nil {
			return nil, err
		}
	}
	n := req.Samples
	if n <= 0 {
		n = 1000
	}
	n = min(n, 100_000)
	count := func(pol placement.Policy) (map[model.DeviceID]int, int) {
		c := map[model.DeviceID]int{}
		failed := 0
		rng := rand.New(rand.NewPCG(req.Seed, 1))
		for i := 0; i < n; i++ {
			rs, err := pol.Place(s, placement.Request{Vector: vec, Bytes: 16 << 20}, rng)
			if err != nil {
				failed++
				continue
			}
			for _, r := range rs {
				c[r.Device]++
			}
		}
		return c, failed
	}
	lua := placement.Weighted{Weigher: fixedWeights{name: v.Name, ws: ws}, Selection: v.selection, LocalFirst: true}
	got, failed := count(lua)
	var base map[model.DeviceID]int
	baseName := ""
	if env.Placement != nil {
		base, _ = count(env.Placement)
		baseName = env.Placement.Name()
	}
	type row struct {
		Device  string  `json:"device"`
		Tier    string  `json:"tier"`
		Usage   float64 `json:"usage"`
		Queue   int     `json:"queue"`
		Fitness float64 `json:"fitness"`
		Chosen  int     `json:"chosen"`
		Builtin int     `json:"builtin_chosen"`
	}
	var rows []row
	fmt.Fprintf(w, "%d placements of %s (selection %s); built-in policy for comparison: %s\n", n, vec, selectionName(v.selection), baseName)
	fmt.Fprintln(w, "DEVICE\tTIER\tUSAGE\tQUEUE\tFITNESS\tCHOSEN\tBUILT-IN")
	for i, d := range s.Devices {
		r := row{Device: string(d.ID), Tier: string(d.Tier), Usage: d.Usage(), Queue: d.QueueLen, Fitness: ws[i], Chosen: got[d.ID], Builtin: base[d.ID]}
		rows = append(rows, r)
		fmt.Fprintf(w, "%s\t%s\t%.1f%%\t%d\t%.4g\t%d\t%d\n", r.Device, r.Tier, 100*r.Usage, r.Queue, r.Fitness, r.Chosen, r.Builtin)
	}
	if failed > 0 {
		fmt.Fprintf(w, "%d of %d placements found no suitable device\n", failed, n)
	}
	return map[string]any{"vector": vec.String(), "samples": n, "failed": failed, "devices": rows}, nil
}

func selectionName(s placement.Selection) string {
	if s == "" {
		return string(placement.DefaultSelection)
	}
	return string(s)
}

// fixedWeights replays weights computed once.
type fixedWeights struct {
	name string
	ws   []float64
}

func (f fixedWeights) Name() string                               { return f.name }
func (f fixedWeights) Weights(*model.Snapshot) ([]float64, error) { return f.ws, nil }

func (e Env) egroups(ctx context.Context, s *model.Snapshot) ([]decide.Egroup, string, error) {
	if e.Egroups == nil {
		return sampleEgroups(s), "synthetic", nil
	}
	egs, _, err := e.Egroups(ctx)
	if err != nil {
		return nil, "", err
	}
	return egs, "scanned", nil
}

func testTiering(ctx context.Context, w *tabwriter.Writer, v *Version, s *model.Snapshot, env Env) (any, error) {
	egs, src, err := env.egroups(ctx, s)
	if err != nil {
		return nil, err
	}
	var base decide.TierOptions
	base.EnsureDefaults()
	tuned, run, heat, err := tune(ctx, v, s, egs, base)
	if err != nil {
		return nil, err
	}
	pol := env.Placement
	if pol == nil {
		pol, _ = placement.New(placement.Config{})
	}
	plan := func(o decide.TierOptions, on bool) map[string]int {
		c := map[string]int{}
		if !on {
			return c
		}
		for _, t := range decide.Tiering(s, egs, pol, o, rand.New(rand.NewPCG(1, 1))) {
			c[string(t.Kind)]++
		}
		return c
	}
	withPolicy, builtin := plan(tuned, run), plan(base, true)
	fmt.Fprintf(w, "%d egroups (%s); tiering runs: %v\n", len(egs), src, run)
	fmt.Fprintln(w, "THRESHOLD\tPOLICY\tBUILT-IN")
	for _, r := range []struct {
		k    string
		a, b float64
	}{{"down_above", tuned.DownAbove, base.DownAbove}, {"dest_below", tuned.DestBelow, base.DestBelow}, {"reduce", tuned.Reduce, base.Reduce},
		{"balance_mean", tuned.BalanceMean, base.BalanceMean}, {"balance_spread", tuned.BalanceSpread, base.BalanceSpread},
		{"promote_reads", float64(tuned.PromoteReads), float64(base.PromoteReads)}} {
		fmt.Fprintf(w, "%s\t%g\t%g\n", r.k, r.a, r.b)
	}
	fmt.Fprintln(w, "MOVES\tPOLICY\tBUILT-IN")
	for _, k := range []decide.Kind{decide.KindTierDown, decide.KindTierUp, decide.KindBalance} {
		fmt.Fprintf(w, "%s\t%d\t%d\n", k, withPolicy[string(k)], builtin[string(k)])
	}
	type hot struct {
		Egroup string  `json:"egroup"`
		Heat   float64 `json:"heat"`
	}
	var ranked []hot
	for id, h := range heat {
		ranked = append(ranked, hot{meta.FormatID(id), h})
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].Heat != ranked[j].Heat {
			return ranked[i].Heat < ranked[j].Heat
		}
		return ranked[i].Egroup < ranked[j].Egroup
	})
	if len(ranked) > 0 {
		fmt.Fprintln(w, "COLDEST\tHEAT")
		for _, r := range ranked[:min(5, len(ranked))] {
			fmt.Fprintf(w, "%s\t%.4g\n", r.Egroup, r.Heat)
		}
	}
	return map[string]any{"run": run, "egroups": len(egs), "source": src, "thresholds": tuned, "moves": withPolicy,
		"builtin_moves": builtin, "coldest": ranked[:min(20, len(ranked))]}, nil
}

func testBalancer(ctx context.Context, w *tabwriter.Writer, v *Version, s *model.Snapshot, env Env) (any, error) {
	parts := env.partitions()
	if len(parts) == 0 {
		parts = samplePartitions()
	}
	self := env.Self
	a, err := assign(ctx, v, s, self, parts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "when() = %v; %d of %d partitions would move\n", a.Rebalance, a.Moved, len(parts))
	if len(a.Targets) > 0 {
		fmt.Fprintln(w, "NODE\tTARGET SHARE")
		for _, id := range sortedKeysF(a.Targets) {
			fmt.Fprintf(w, "%s\t%.3g\n", id, a.Targets[id])
		}
	}
	fmt.Fprintln(w, "PARTITION\tRECORDS\tNOW\tPOLICY")
	for _, p := range parts {
		now := p.Node
		if now == "" {
			now = self
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Name, p.Records, now, a.Assignment[p.Name])
	}
	return a, nil
}

func sortedKeysF(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func testRule(ctx context.Context, w *tabwriter.Writer, v *Version, s *model.Snapshot, env Env) (any, error) {
	egs, src, err := env.egroups(ctx, s)
	if err != nil {
		return nil, err
	}
	type scored struct {
		Subject string  `json:"subject"`
		Cost    float64 `json:"cost"`
	}
	var out []scored
	eval := func(subject string, rv RuleView) error {
		c, _, err := evalRule(ctx, v, rv, false)
		if err != nil {
			return fmt.Errorf("%s: %w", subject, err)
		}
		out = append(out, scored{subject, c})
		return nil
	}
	const maxEval = 10_000
	switch v.scope {
	case ScopeDevice:
		for i := range s.Devices {
			d := s.Devices[i]
			if err := eval(string(d.ID), RuleView{Snapshot: s, Device: &d}); err != nil {
				return nil, err
			}
		}
	default:
		for i := range egs {
			if i == maxEval {
				break
			}
			eg := egs[i]
			reps := make([]model.Replica, 0, len(eg.Replicas))
			for _, r := range eg.Replicas {
				reps = append(reps, r.Replica)
			}
			if err := eval("egroup "+meta.FormatID(eg.ID), RuleView{Snapshot: s, Egroup: &eg, Replicas: reps}); err != nil {
				return nil, err
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cost > out[j].Cost })
	inf, sum, finite := 0, 0.0, 0
	for _, x := range out {
		if math.IsInf(x.Cost, 1) {
			inf++
		} else {
			sum += x.Cost
			finite++
		}
	}
	mean := 0.0
	if finite > 0 {
		mean = sum / float64(finite)
	}
	fmt.Fprintf(w, "rule %s (scope %s) over %d %s subjects: %d violate a hard constraint (+inf), mean finite cost %.4g\n",
		v.Name, v.scope, len(out), src, inf, mean)
	fmt.Fprintln(w, "SUBJECT\tCOST")
	for _, x := range out[:min(15, len(out))] {
		fmt.Fprintf(w, "%s\t%s\n", x.Subject, costText(x.Cost))
	}
	return map[string]any{"scope": v.scope, "subjects": len(out), "hard_violations": inf, "mean_cost": mean, "worst": out[:min(50, len(out))]}, nil
}

func costText(c float64) string {
	if math.IsInf(c, 1) {
		return "+inf"
	}
	return strconv.FormatFloat(c, 'g', 5, 64)
}

func (m *Manager) testClass(ctx context.Context, v *Version, req TestRequest, env Env) (ExecResult, error) {
	if req.Method == "" {
		return ExecResult{}, fmt.Errorf("policy: testing a class needs --method (methods: %s)", strings.Join(classMethods(v.functions), ", "))
	}
	if env.Store == nil || req.Bucket == "" || req.Key == "" {
		// No object: run on an empty one.
		st := &objectState{}
		out, log, err := runMethod(ctx, v, st, ExecRequest{Bucket: req.Bucket, Key: req.Key, Method: req.Method, Arg: req.Arg, DryRun: true}, objectInfoEmpty)
		return ExecResult{Class: v.Name, Method: req.Method, Version: v.Version, Result: out, Text: resultText(out), Wrote: st.written, Size: int64(len(st.data)), Log: log}, err
	}
	info, data, exists, err := readObject(ctx, env.Store, req.Bucket, req.Key)
	if err != nil {
		return ExecResult{}, err
	}
	st := &objectState{data: string(data), exists: exists}
	out, log, err := runMethod(ctx, v, st, ExecRequest{Bucket: req.Bucket, Key: req.Key, Method: req.Method, Arg: req.Arg, DryRun: true}, info)
	return ExecResult{Class: v.Name, Method: req.Method, Version: v.Version, Result: out, Text: resultText(out), Wrote: st.written,
		Size: int64(len(st.data)), ETag: info.ETag, Log: log}, err
}

// ApplyWhatIf returns a copy of s with the changes applied.
func ApplyWhatIf(s *model.Snapshot, changes []string) (*model.Snapshot, error) {
	nodes := append([]model.Node(nil), s.Nodes...)
	devs := append([]model.Device(nil), s.Devices...)
	for _, c := range changes {
		lhs, val, ok := strings.Cut(c, "=")
		dot := strings.LastIndexByte(lhs, '.')
		if !ok || dot <= 0 {
			return nil, fmt.Errorf("policy: what-if %q: want ID.FIELD=VALUE (e.g. n1/ssd0.used=90%%, n2.up=false, tier:ssd.used=80%%)", c)
		}
		id, field := lhs[:dot], lhs[dot+1:]
		matched := false
		for i := range devs {
			d := &devs[i]
			if string(d.ID) != id && !(strings.HasPrefix(id, "tier:") && string(d.Tier) == id[5:]) {
				continue
			}
			matched = true
			if err := setDeviceField(d, field, val); err != nil {
				return nil, fmt.Errorf("policy: what-if %q: %w", c, err)
			}
		}
		for i := range nodes {
			n := &nodes[i]
			if string(n.ID) != id {
				continue
			}
			matched = true
			switch field {
			case "up":
				b, err := strconv.ParseBool(val)
				if err != nil {
					return nil, fmt.Errorf("policy: what-if %q: up takes true or false", c)
				}
				n.Up = b
			case "conns":
				x, err := strconv.Atoi(val)
				if err != nil || x < 0 {
					return nil, fmt.Errorf("policy: what-if %q: conns takes a count", c)
				}
				n.Conns = x
			default:
				return nil, fmt.Errorf("policy: what-if %q: nodes have fields up, conns", c)
			}
		}
		if !matched {
			return nil, fmt.Errorf("policy: what-if %q: no device, node or tier %q", c, id)
		}
	}
	return model.NewSnapshot(s.Now, nodes, devs), nil
}

func setDeviceField(d *model.Device, field, val string) error {
	switch field {
	case "used", "capacity":
		var x int64
		if p, ok := strings.CutSuffix(val, "%"); ok && field == "used" {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("bad percentage %q", val)
			}
			x = int64(f / 100 * float64(d.CapacityBytes))
		} else {
			b, err := parseBytes(val)
			if err != nil {
				return err
			}
			x = b
		}
		if field == "used" {
			d.UsedBytes = x
		} else {
			d.CapacityBytes = x
		}
	case "queue", "streams":
		x, err := strconv.Atoi(val)
		if err != nil || x < 0 {
			return fmt.Errorf("%s takes a count", field)
		}
		if field == "queue" {
			d.QueueLen = x
		} else {
			d.ActiveStreams = x
		}
	case "state":
		switch val {
		case "up":
			d.State = model.DeviceUp
		case "draining":
			d.State = model.DeviceDraining
		case "failed":
			d.State = model.DeviceFailed
		default:
			return fmt.Errorf("state takes up, draining or failed")
		}
	default:
		return fmt.Errorf("devices have fields used, capacity, queue, streams, state")
	}
	return nil
}

// parseBytes reads 123, 10K, 5M, 2G, 1T (powers of 1024, optional "iB").
func parseBytes(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(f * float64(mult)), nil
}
