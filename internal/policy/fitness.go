package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Placement is the node's placement policy with the fitness hook: while a
// fitness policy is live, replicas are placed by placement.Weighted with
// the policy's fitness(device, cluster) as Allen's f; if that version
// fails, by its last good version; otherwise, and when no fitness policy
// is set, by the configured built-in policy.
type Placement struct {
	m   *Manager
	def placement.Policy
}

var _ placement.Policy = (*Placement)(nil)

// Placement wraps the configured placement policy with the fitness hook.
func (m *Manager) Placement(def placement.Policy) *Placement { return &Placement{m: m, def: def} }

// Default returns the built-in policy.
func (p *Placement) Default() placement.Policy { return p.def }

// Name implements placement.Policy: "lua-fitness:NAME@vN" while a fitness
// policy decides, else the built-in policy's name.
func (p *Placement) Name() string {
	if sl := p.m.single(HookFitness); sl != nil {
		if c := sl.candidates(); len(c) > 0 {
			return fmt.Sprintf("lua-fitness:%s@v%d", c[0].Name, c[0].Version)
		}
	}
	return p.def.Name()
}

// Place implements placement.Policy.
func (p *Placement) Place(s *model.Snapshot, req placement.Request, rng *rand.Rand) ([]model.Replica, error) {
	sl := p.m.single(HookFitness)
	if sl == nil {
		return p.def.Place(s, req, rng)
	}
	seed := rng.Uint64()
	var out []model.Replica
	var placeErr error
	_, err := p.m.call(sl, func(v *Version) error {
		reps, err := placeWith(v, s, req, rng, seed)
		if errors.Is(err, placement.ErrWeigher) {
			return err // the policy failed: try the next version
		}
		out, placeErr = reps, err // a decision, even "no suitable device"
		return nil
	})
	if err != nil {
		return p.def.Place(s, req, rng)
	}
	return out, placeErr
}

func placeWith(v *Version, s *model.Snapshot, req placement.Request, rng *rand.Rand, seed uint64) ([]model.Replica, error) {
	w := placement.Weighted{Weigher: luaWeigher{v: v, seed: seed}, Selection: v.selection, LocalFirst: true}
	return w.Place(s, req, rng)
}

// luaWeigher computes fitness(device, cluster) for every device in one
// sandbox session.
type luaWeigher struct {
	v    *Version
	seed uint64
}

func (w luaWeigher) Name() string { return fmt.Sprintf("lua:%s@v%d", w.v.Name, w.v.Version) }

func (w luaWeigher) Weights(s *model.Snapshot) ([]float64, error) {
	return fitnessWeights(context.Background(), w.v, s, w.seed)
}

// fitnessWeights runs the fitness function over every device.
func fitnessWeights(ctx context.Context, v *Version, s *model.Snapshot, seed uint64) ([]float64, error) {
	out := make([]float64, len(s.Devices))
	err := v.prog.Run(ctx, sandbox.RunOptions{Seed: seed}, func(sess *sandbox.Session) error {
		// fitness sees the cluster as aggregates (per tier, counts), not
		// lists: the lists would cost a table per node and device on every
		// placement, on the write path, for a per-device decision.
		cl := sess.Ref(clusterSummary(s))
		for i, d := range s.Devices {
			res, err := sess.Call("fitness", deviceView(d), cl)
			if err != nil {
				return err
			}
			f, err := number(v, res, "fitness")
			if err != nil {
				return err
			}
			if f < 0 || math.IsInf(f, 0) {
				return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("fitness(%s) returned %v: want a finite number >= 0", d.ID, f)}
			}
			out[i] = f
		}
		return nil
	})
	return out, err
}

// number checks that a call returned one number.
func number(v *Version, res []any, fn string) (float64, error) {
	if len(res) == 0 {
		return 0, &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fn + " returned nothing: want a number"}
	}
	f, ok := res[0].(float64)
	if !ok || math.IsNaN(f) {
		return 0, &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("%s returned %s: want a number", fn, describe(res[0]))}
	}
	return f, nil
}

// describe names a converted Lua value for error messages.
func describe(x any) string {
	switch v := x.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("a string (%q)", truncate(v, 40))
	case bool:
		return fmt.Sprintf("a boolean (%v)", v)
	case float64:
		return fmt.Sprintf("%v", v)
	case []any, map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", x)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
