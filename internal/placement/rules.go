package placement

import (
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
)

// Rules is OctopusFS's rule-based comparison policy (§7.2): unspecified
// replicas go to the tiers in round-robin order (from a random starting
// tier, so successive extent groups rotate), each on a randomly selected
// node, with the replicas on two racks: the first on the client's node
// when co-located, the second on another rack, the rest on those two. It
// ignores load and fullness beyond the suitability rules.
type Rules struct {
	// AllowMem adds the memory tier to the rotation, for at most a third
	// of a set.
	AllowMem bool
	// LocalFirst puts the first replica on the client's node when possible.
	LocalFirst bool
}

var _ tracedPolicy = (*Rules)(nil)

// Name implements Policy.
func (*Rules) Name() string { return "rules" }

// Place implements Policy.
func (r *Rules) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	return r.placeTraced(s, req, rng, nil)
}

func (r *Rules) placeTraced(s *model.Snapshot, req Request, rng *rand.Rand, tr *tracer) ([]model.Replica, error) {
	if err := checkRequest(s, req); err != nil {
		return nil, err
	}
	st := newState(s, req)
	st.memAny = r.AllowMem
	var rotation []model.Tier
	for _, t := range s.OnlineTiers() {
		if t.ForAny(r.AllowMem) {
			rotation = append(rotation, t)
		}
	}
	offset := 0
	if req.Vector.Count(model.TierAny) > 0 && len(rotation) > 0 {
		offset = rng.IntN(len(rotation))
	}
	wv := NewWeightedVector(func(int) float64 { return 1 }, SelectUniform, 0)
	var rackBuf [model.MaxReplicas * 2]int
	anyK := 0
	for _, t := range slots(req.Vector) {
		var try []model.Tier
		if t != model.TierAny {
			try = []model.Tier{t}
		} else {
			for j := range rotation {
				try = append(try, rotation[(offset+anyK+j)%len(rotation)])
			}
			anyK++
		}
		if tr != nil {
			pools := make([][]int, len(try))
			for j, tt := range try {
				pools[j] = s.TierDevices(tt)
			}
			tr.beginSlot(st, t, pools, nil, nil)
		}
		used := st.racksUsed(rackBuf[:0])
		found := -1
		for _, tt := range try {
			onTier := func(i int) bool { return s.Devices[i].Tier == tt && st.ok(i, t) }
			if r.LocalFirst && st.localWanted() {
				wv.SetItems(st.clientDevs)
				found = drawSuitable(wv, rng, tr, onTier)
			}
			if found < 0 {
				wv.SetItems(s.TierDevices(tt))
				found = drawSuitable(wv, rng, tr, func(i int) bool { return st.twoRackOK(i, used) && onTier(i) })
			}
			if found < 0 {
				wv.SetItems(s.TierDevices(tt))
				found = drawSuitable(wv, rng, tr, onTier)
			}
			if found >= 0 {
				break
			}
		}
		if found < 0 {
			return nil, st.explainFailure(t)
		}
		st.take(found)
		if tr != nil {
			tr.choose(found)
		}
	}
	return st.chosen(), nil
}
