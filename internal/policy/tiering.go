package policy

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Tiering is the tiering hook as the Curator consults it.
type Tiering struct{ m *Manager }

var _ curator.TierTuner = Tiering{}

// Tiering returns the Curator's tiering hook.
func (m *Manager) Tiering() Tiering { return Tiering{m: m} }

// TuneTiering implements curator.TierTuner: thresholds from
// tiering(tiers, cluster) and the coldness order from heat(egroup, now),
// each optional. On any failure the previous good version decides, else
// the configured thresholds.
func (t Tiering) TuneTiering(s *model.Snapshot, egs []decide.Egroup, base decide.TierOptions) (decide.TierOptions, bool) {
	sl := t.m.single(HookTiering)
	if sl == nil {
		return base, true
	}
	var out decide.TierOptions
	var run bool
	_, err := t.m.call(sl, func(v *Version) error {
		var err error
		out, run, _, err = tune(context.Background(), v, s, egs, base)
		return err
	})
	if err != nil {
		return base, true
	}
	return out, run
}

// tierFields are the thresholds tiering() may return, with their ranges.
var tierFields = []struct {
	key    string
	set    func(o *decide.TierOptions, x float64)
	lo, hi float64
}{
	{"down_above", func(o *decide.TierOptions, x float64) { o.DownAbove = x }, 0.01, 1},
	{"dest_below", func(o *decide.TierOptions, x float64) { o.DestBelow = x }, 0.01, 1},
	{"reduce", func(o *decide.TierOptions, x float64) { o.Reduce = x }, 0.001, 1},
	{"balance_mean", func(o *decide.TierOptions, x float64) { o.BalanceMean = x }, 0.01, 1},
	{"balance_spread", func(o *decide.TierOptions, x float64) { o.BalanceSpread = x }, 0.001, 1},
	{"promote_reads", func(o *decide.TierOptions, x float64) { o.PromoteReads = int64(x) }, 1, 1e12},
	{"max_moves", func(o *decide.TierOptions, x float64) { o.MaxMoves = int(x) }, 1, 1e6},
}

// tune evaluates a tiering version. It also returns the heat of every
// egroup (for `policy test`).
func tune(ctx context.Context, v *Version, s *model.Snapshot, egs []decide.Egroup, base decide.TierOptions) (decide.TierOptions, bool, map[uint64]float64, error) {
	o := base
	run := true
	var heat map[uint64]float64
	err := v.prog.Run(ctx, sandbox.RunOptions{Seed: uint64(s.Now.UnixNano())}, func(sess *sandbox.Session) error {
		if sess.Has("tiering") {
			res, err := sess.Call("tiering", tiersView(s), clusterView(s))
			if err != nil {
				return err
			}
			if len(res) == 0 || res[0] == nil {
				return nil // keep the configured thresholds
			}
			tbl, ok := res[0].(map[string]any)
			if !ok {
				return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("tiering returned %s: want a table of thresholds", describe(res[0]))}
			}
			if err := applyTierFields(v, &o, &run, tbl); err != nil {
				return err
			}
		}
		if sess.Has("heat") && len(egs) > 0 {
			heat = make(map[uint64]float64, len(egs))
			now := unixSeconds(s.Now)
			for _, eg := range egs {
				res, err := sess.Call("heat", egroupView(eg), now)
				if err != nil {
					return err
				}
				h, err := number(v, res, "heat")
				if err != nil {
					return err
				}
				if math.IsInf(h, 0) {
					h = math.Copysign(math.MaxFloat64, h)
				}
				heat[eg.ID] = h
			}
			o.Rank = func(eg decide.Egroup) float64 { return heat[eg.ID] }
		}
		return nil
	})
	return o, run, heat, err
}

func applyTierFields(v *Version, o *decide.TierOptions, run *bool, tbl map[string]any) error {
	known := map[string]bool{"run": true}
	for _, f := range tierFields {
		known[f.key] = true
		x, ok := tbl[f.key]
		if !ok {
			continue
		}
		n, isNum := x.(float64)
		if !isNum || math.IsNaN(n) || n < f.lo || n > f.hi {
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("tiering: %s = %s: want a number in [%g, %g]", f.key, describe(x), f.lo, f.hi)}
		}
		f.set(o, n)
	}
	if r, ok := tbl["run"]; ok {
		b, isBool := r.(bool)
		if !isBool {
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("tiering: run = %s: want true or false", describe(r))}
		}
		*run = b
	}
	var unknown []string
	for k := range tbl {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("tiering returned unknown fields %v (known: run, down_above, dest_below, reduce, balance_mean, balance_spread, promote_reads, max_moves)", unknown)}
	}
	return nil
}
