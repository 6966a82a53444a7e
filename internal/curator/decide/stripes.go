package decide

import (
	"fmt"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// RecoverStripe decides the rebuild of an erasure-coded egroup's lost
// strips (docs/design/0010): a strip that is marked bad, or whose device
// failed, is draining or is gone, is reconstructed from any K others (a
// good strip on a draining device counts: it is still read) onto
// a new device distinct from every strip's (on distinct nodes where the
// cluster has enough). A strip on a node that is down for less than
// NodeDownAfter is waited for, as replicas are. Fewer than K good strips
// is data loss: an error, never a task.
func RecoverStripe(s *model.Snapshot, eg Egroup, pol placement.Policy, rng *rand.Rand) ([]Task, error) {
	if eg.Open {
		return nil, nil
	}
	var lost, keep []model.Replica
	var all []model.DeviceID
	tiers := map[model.Tier]int{}
	draining := 0 // moved off, yet readable: a source for the rebuild
	for _, r := range eg.Replicas {
		all = append(all, r.Device)
		d, ok := s.Device(r.Device)
		switch {
		case ok && !r.Bad && d.State == model.DeviceDraining && s.NodeUp(d.Node):
			lost = append(lost, r.Replica)
			draining++
		case r.Bad, !ok, d.State == model.DeviceFailed, d.State == model.DeviceDraining:
			lost = append(lost, r.Replica)
		case !s.NodeUp(d.Node):
			return nil, nil // stabilisation interval: wait for the node
		default:
			keep = append(keep, r.Replica)
			tiers[r.Tier]++
		}
	}
	if len(lost) == 0 {
		return nil, nil
	}
	if len(keep)+draining < eg.EC.K {
		return nil, fmt.Errorf("egroup %016x: %d good strips of %s: cannot rebuild", eg.ID, len(keep)+draining, eg.EC)
	}
	// New strips go to the tier most strips are on.
	var tier model.Tier
	for t, n := range tiers {
		if n > tiers[tier] || (n == tiers[tier] && t < tier) {
			tier = t
		}
	}
	req := placement.Request{Vector: model.Vector{Counts: map[model.Tier]int{tier: len(lost)}}, Existing: keep, Exclude: all, Bytes: eg.fileBytes()}
	add, err := pol.Place(s, req, rng)
	if err != nil {
		req.Vector = model.Vector{Counts: map[model.Tier]int{model.TierAny: len(lost)}}
		if add, err = pol.Place(s, req, rng); err != nil {
			return nil, fmt.Errorf("egroup %016x: place %d strips: %w", eg.ID, len(lost), err)
		}
	}
	return []Task{{Kind: KindRebuild, Egroup: eg.ID, ModRev: eg.ModRev, Add: add, Remove: lost, Bytes: eg.fileBytes() * int64(len(add)),
		Reason: fmt.Sprintf("%d of %s strips lost", len(lost), eg.EC)}}, nil
}
