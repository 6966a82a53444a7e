package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Env is the live model validation and `policy test` run against. Every
// field is optional; missing ones are replaced by small synthetic inputs.
type Env struct {
	// Snapshot returns the current cluster snapshot.
	Snapshot func() *model.Snapshot
	// Egroups scans the egroup map (for tiering and rule tests; never
	// called during validation, which must stay cheap).
	Egroups func(ctx context.Context) ([]decide.Egroup, *model.Snapshot, error)
	// Partitions returns the Curator's scan partitions and their load.
	Partitions func() []curator.PartitionLoad
	// Placement is the built-in placement policy (to compare with).
	Placement placement.Policy
	// Store reads objects for class dry runs.
	Store ObjectStore
	// Self is this node.
	Self model.NodeID
}

func (e Env) snapshot() *model.Snapshot {
	if e.Snapshot != nil {
		if s := e.Snapshot(); s != nil {
			return s
		}
	}
	return model.NewSnapshot(time.Now(), nil, nil)
}

func (e Env) partitions() []curator.PartitionLoad {
	if e.Partitions != nil {
		return e.Partitions()
	}
	return nil
}

// rejection wraps a validation failure so callers see both ErrInvalid and
// the *sandbox.Error with its line.
func rejection(_ string, err error) error {
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// Validate compiles a source for a hook, loads it and runs it against the
// live model as the hook would, with nothing applied. Errors wrap
// ErrInvalid and carry the Lua error and line; warnings are problems that
// depend on inputs the model does not have (a class method that errors
// on an empty object).
func (m *Manager) Validate(ctx context.Context, hook Hook, name, source string, env Env) (*Version, []string, error) {
	if err := CheckName(name); err != nil {
		return nil, nil, err
	}
	v, err := m.load(ctx, Record{Name: name, Hook: hook, Source: source, Time: time.Now()})
	if err != nil {
		return nil, nil, rejection(name, err)
	}
	s := env.snapshot()
	var warnings []string
	switch hook {
	case HookFitness:
		ws, err := fitnessWeights(ctx, v, s, 1)
		if err != nil {
			return nil, nil, rejection(name, err)
		}
		positive := false
		for _, w := range ws {
			positive = positive || w > 0
		}
		if len(ws) > 0 && !positive {
			warnings = append(warnings, "fitness is 0 for every device: placement will ignore the weights and pick uniformly")
		}
	case HookTiering:
		var base decide.TierOptions
		base.EnsureDefaults()
		if _, _, _, err := tune(ctx, v, s, sampleEgroups(s), base); err != nil {
			return nil, nil, rejection(name, err)
		}
	case HookBalancer:
		parts := env.partitions()
		if len(parts) == 0 {
			parts = samplePartitions()
		}
		self := env.Self
		if self == "" && len(s.Nodes) > 0 {
			self = s.Nodes[0].ID
		}
		if _, err := assign(ctx, v, s, self, parts); err != nil {
			return nil, nil, rejection(name, err)
		}
	case HookRule:
		for _, rv := range sampleRuleViews(v.scope, s) {
			if _, _, err := evalRule(ctx, v, rv, false); err != nil {
				return nil, nil, rejection(name, err)
			}
			if hasFunction(v, "hints") {
				if _, _, err := evalRule(ctx, v, rv, true); err != nil {
					return nil, nil, rejection(name, err)
				}
			}
		}
	case HookClass:
		// Methods run on objects validation does not have: run each on an
		// empty object, reject one that cannot finish, and report plain
		// errors as warnings.
		for _, meth := range classMethods(v.functions) {
			st := &objectState{}
			_, _, err := runMethod(ctx, v, st, ExecRequest{Bucket: "validation", Key: "empty", Method: meth, DryRun: true}, objectInfoEmpty)
			switch k := sandbox.KindOf(err); {
			case err == nil:
			case k == sandbox.KindRuntime || k == sandbox.KindType:
				warnings = append(warnings, fmt.Sprintf("%s on an empty object: %v", meth, err))
			default:
				return nil, nil, rejection(name, err)
			}
		}
	}
	return v, warnings, nil
}

// PutRequest is a put through the API.
type PutRequest struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	Author  string `json:"author"`
	Comment string `json:"comment,omitempty"`
	// Hook may be empty: the existing policy's hook, else inferred from
	// the functions the source defines.
	Hook Hook `json:"hook,omitempty"`
	// IfVersion (>= 0) makes the put conditional on the current version.
	IfVersion int64 `json:"if_version"`
}

// PutResult is a committed version.
type PutResult struct {
	Record    Record    `json:"record"`
	Committed time.Time `json:"committed"`
	Warnings  []string  `json:"warnings,omitempty"`
}

// Put validates a source against the live model and commits it as the
// policy's next version; every node (this one at once) swaps it in.
func (m *Manager) Put(ctx context.Context, req PutRequest, env Env) (PutResult, error) {
	if err := CheckName(req.Name); err != nil {
		return PutResult{}, err
	}
	hook := req.Hook
	if hook == "" {
		cur, _, err := m.reg.Get(ctx, req.Name)
		switch {
		case err == nil && !cur.Deleted:
			hook = cur.Hook
		case err == nil || errors.Is(err, ErrNotFound):
			prog, err := sandbox.Compile(req.Name+".lua", req.Source, HookClass.Limits())
			if err != nil {
				return PutResult{}, rejection(req.Name, err)
			}
			fns, _, err := prog.Describe(ctx)
			if err != nil {
				return PutResult{}, rejection(req.Name, err)
			}
			hook = InferHook(fns)
		default:
			return PutResult{}, err
		}
	}
	if _, err := ParseHook(string(hook)); err != nil {
		return PutResult{}, err
	}
	_, warnings, err := m.Validate(ctx, hook, req.Name, req.Source, env)
	if err != nil {
		return PutResult{}, err
	}
	rec, committed, err := m.reg.Commit(ctx, Change{Name: req.Name, Hook: hook, Source: req.Source, Author: req.Author,
		Comment: req.Comment, IfVersion: req.IfVersion})
	if err != nil {
		return PutResult{}, err
	}
	m.install(rec)
	return PutResult{Record: rec.Summary(), Committed: committed, Warnings: warnings}, nil
}

// Rollback makes an old version current again, as a new version with the
// old source (versions only grow). The old source is validated again:
// the model may have changed since.
func (m *Manager) Rollback(ctx context.Context, name string, version int64, author string, env Env) (PutResult, error) {
	old, err := m.reg.Version(ctx, name, version)
	if err != nil {
		return PutResult{}, err
	}
	if old.Deleted {
		return PutResult{}, fmt.Errorf("policy: %s version %d is a removal; roll back to a version with source", name, version)
	}
	return m.Put(ctx, PutRequest{Name: name, Source: old.Source, Author: author, Hook: old.Hook,
		Comment: fmt.Sprintf("rollback to version %d", version), IfVersion: -1}, env)
}

// Remove writes a tombstone: the hook reverts to its built-in default on
// every node. History is kept; a later put continues the numbering.
func (m *Manager) Remove(ctx context.Context, name, author string, ifVersion int64) (PutResult, error) {
	rec, committed, err := m.reg.Commit(ctx, Change{Name: name, Deleted: true, Author: author, Comment: "removed", IfVersion: ifVersion})
	if err != nil {
		return PutResult{}, err
	}
	m.install(rec)
	return PutResult{Record: rec, Committed: committed}, nil
}

// Synthetic inputs for validation, derived from the snapshot so a policy
// sees realistic tiers and devices.

func sampleEgroups(s *model.Snapshot) []decide.Egroup {
	now := s.Now
	if now.IsZero() {
		now = time.Now()
	}
	var reps []decide.Replica
	for _, d := range s.Devices {
		if len(reps) == 2 {
			break
		}
		reps = append(reps, decide.Replica{Replica: model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}})
	}
	vec := model.MustParseVector("any=2")
	return []decide.Egroup{
		{ID: 1, Size: 16 << 20, LiveBytes: 16 << 20, Vector: vec, Replicas: reps, Reads: 50, Atime: now.Add(-time.Minute), Mtime: now.Add(-time.Hour)},
		{ID: 2, Size: 16 << 20, LiveBytes: 8 << 20, Vector: vec, Replicas: reps, Reads: 0, Atime: now.Add(-30 * 24 * time.Hour), Mtime: now.Add(-30 * 24 * time.Hour)},
		{ID: 3, Size: 1 << 20, LiveBytes: 1 << 20, Vector: vec, Replicas: reps, Open: true, Mtime: now},
	}
}

func samplePartitions() []curator.PartitionLoad {
	var out []curator.PartitionLoad
	for _, m := range []string{"egroups", "extents"} {
		for _, h := range "0123456789abcdef" {
			out = append(out, curator.PartitionLoad{Name: m + "/" + string(h)})
		}
	}
	return out
}

// sampleRuleViews are up to a few views of the rule's scope.
func sampleRuleViews(scope RuleScope, s *model.Snapshot) []RuleView {
	egs := sampleEgroups(s)
	var out []RuleView
	switch scope {
	case ScopeDevice:
		for i := range s.Devices {
			if i == 8 {
				break
			}
			d := s.Devices[i]
			out = append(out, RuleView{Snapshot: s, Device: &d, Egroup: &egs[0]})
		}
		if len(out) == 0 {
			out = append(out, RuleView{Snapshot: s, Device: &model.Device{ID: "n1/ssd0", Node: "n1", Tier: model.TierSSD}, Egroup: &egs[0]})
		}
	default:
		for i := range egs {
			eg := egs[i]
			var reps []model.Replica
			for _, r := range eg.Replicas {
				reps = append(reps, r.Replica)
			}
			out = append(out, RuleView{Snapshot: s, Egroup: &eg, Replicas: reps})
		}
	}
	return out
}
