package placement

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
)

// DeviceWeigher supplies fitness values from outside this package: a
// programmable fitness function (internal/policy runs Lua ones). It must
// be pure — the same snapshot gives the same weights — and is called once
// per placement.
type DeviceWeigher interface {
	// Name identifies the weigher and its version, e.g. "lua:myfit@v3".
	Name() string
	// Weights returns one weight per s.Devices entry, each finite and >= 0.
	Weights(s *model.Snapshot) ([]float64, error)
}

// ErrWeigher wraps every failure of a DeviceWeigher (an error, the wrong
// number of weights, a negative or non-finite weight), so a caller can
// tell a failed fitness function, which it may replace with a fallback,
// from a request no device can take (ErrNoSuitableDevices). The weigher's
// own error stays wrapped too, so errors.As still finds it (a starved
// *sandbox.Error must not count towards disabling a Lua policy).
var ErrWeigher = errors.New("placement: device weigher failed")

// Weighted is Fitness with the fitness values computed by a DeviceWeigher
// instead of Allen's t_u and t_q: the same WeightedVector sampling, the
// same suitability rules and preferences (client node, new rack), the same
// fastest-tier pool for unspecified replicas. The weights are computed
// once per Place, over the whole snapshot.
type Weighted struct {
	Weigher DeviceWeigher
	// Selection is the sampling scheme; empty means DefaultSelection.
	Selection         Selection
	TruncationPercent float64
	LocalFirst        bool
}

var _ Policy = Weighted{}

// Name implements Policy.
func (w Weighted) Name() string { return "weighted:" + w.Weigher.Name() }

// Place implements Policy.
func (w Weighted) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	if err := checkRequest(s, req); err != nil {
		return nil, err
	}
	sel := w.Selection
	if sel == "" {
		sel = DefaultSelection
	}
	if !sel.valid() {
		return nil, fmt.Errorf("placement: unknown selection %q (want sus, truncation, two-choice or uniform)", sel)
	}
	trunc := w.TruncationPercent
	if sel == SelectTruncation && trunc == 0 {
		trunc = DefaultTruncationPercent
	}
	ws, err := w.Weigher.Weights(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrWeigher, w.Weigher.Name(), err)
	}
	if len(ws) != len(s.Devices) {
		return nil, fmt.Errorf("%w: %s returned %d weights for %d devices", ErrWeigher, w.Weigher.Name(), len(ws), len(s.Devices))
	}
	for i, x := range ws {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, fmt.Errorf("%w: %s: device %s has weight %v (want a finite number >= 0)", ErrWeigher, w.Weigher.Name(), s.Devices[i].ID, x)
		}
	}
	weight := func(d *model.Device) float64 {
		i, _ := s.DeviceIndex(d.ID)
		return ws[i]
	}
	return placeSampled(s, req, rng, nil, sampledPlan{
		sel:        sel,
		truncPct:   trunc,
		weight:     weight,
		localFirst: w.LocalFirst,
		anyPool:    anyPoolFastestTier,
	})
}
