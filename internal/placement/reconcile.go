package placement

import (
	"fmt"
	"math/rand/v2"

	"github.com/terrace-storage/terrace/internal/model"
)

// Replication management (OctopusFS §5). Reconcile compares an extent
// group's current replicas with its vector and decides what to add and
// what to drop:
//
//   - Replicas on failed or unknown devices are lost: they do not count and
//     are returned in remove (the caller drops them from metadata).
//   - Replicas on draining devices do not count either; they are returned
//     in remove, and the caller must make the additions durable before
//     deleting them (copy, verify, switch metadata, then delete;
//     docs/design/0000 invariant 4).
//   - Replicas on down nodes do not count but are kept: the node may come
//     back, and then the group is over-replicated and the removal rule
//     below picks which copy to drop.
//   - Counting replicas fill the vector's explicit tiers first; the rest
//     fill its unspecified (any) slots. Missing replicas are placed with
//     the given policy in one request whose Existing holds every replica
//     that stays, so distinctness holds against them.
//   - While more replicas count than the vector demands, the one to drop is
//     chosen among those on over-full tiers as "the location whose removal
//     leaves the remaining set with the lowest Eq. 11 score" (§5), scored
//     with the policy's MOOP objectives (all four for non-MOOP policies).

// Reconcile decides the additions and removals that take current to want.
// It is ReconcileRequest with no client, no size and no exclusions.
func Reconcile(s *model.Snapshot, current []model.Replica, want model.Vector, p Policy, rng *rand.Rand) (add, remove []model.Replica, err error) {
	return ReconcileRequest(s, current, Request{Vector: want}, p, rng)
}

// Satisfied reports whether current already meets want on s exactly, so
// that Reconcile would add and remove nothing: as many replicas as the
// vector's total, each on a known device that is neither failed nor
// draining, on a node that is up, and every explicit tier filled (the
// rest then fill the unspecified slots, with none to spare). It allocates
// nothing: the Curator asks it of every egroup of every scan, and nearly
// all are healthy. A false answer says only "ask Reconcile".
func Satisfied(s *model.Snapshot, current []model.Replica, want model.Vector) bool {
	n := len(current)
	if n == 0 || n > model.MaxReplicas {
		return false
	}
	// One device lookup per replica; the snapshot is the source of truth
	// for a device's tier.
	var tiers [model.MaxReplicas]model.Tier
	for i, r := range current {
		d, ok := s.Device(r.Device)
		if !ok || d.State == model.DeviceFailed || d.State == model.DeviceDraining || !s.NodeUp(d.Node) {
			return false
		}
		tiers[i] = d.Tier
	}
	// One pass over the vector: its validity (as Validate: no negative or
	// huge count, a total within [1, MaxReplicas], which n is), its total,
	// and every explicit tier filled.
	total := 0
	for t, c := range want.Counts {
		if c < 0 || c > model.MaxReplicas {
			return false
		}
		total += c
		if t == model.TierAny || c == 0 {
			continue
		}
		have := 0
		for _, x := range tiers[:n] {
			if x == t {
				have++
			}
		}
		if have < c {
			return false
		}
	}
	return total == n
}

// ReconcileRequest is Reconcile with the request's Client, Bytes and
// Exclude applied to the additions; req.Vector is the wanted vector and
// req.Existing is ignored (current replaces it).
func ReconcileRequest(s *model.Snapshot, current []model.Replica, req Request, p Policy, rng *rand.Rand) (add, remove []model.Replica, err error) {
	if err := req.Vector.Validate(); err != nil {
		return nil, nil, fmt.Errorf("placement: %w", err)
	}
	var live, parked []model.Replica // parked: on down nodes, kept, not counted
	for _, r := range current {
		d, ok := s.Device(r.Device)
		switch {
		case !ok || d.State == model.DeviceFailed || d.State == model.DeviceDraining:
			remove = append(remove, r)
		case !s.NodeUp(d.Node):
			parked = append(parked, r)
		default:
			// The snapshot is the source of truth for where a device is.
			live = append(live, model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier})
		}
	}

	// Match live replicas to explicit tiers, the rest to "any".
	want := req.Vector
	have := map[model.Tier]int{}
	for _, r := range live {
		have[r.Tier]++
	}
	missing := model.Vector{Counts: map[model.Tier]int{}}
	surplus := 0
	for _, t := range want.Tiers() {
		if t == model.TierAny {
			continue
		}
		if d := want.Count(t) - have[t]; d > 0 {
			missing.Counts[t] = d
		}
	}
	for t, n := range have {
		if x := n - want.Count(t); x > 0 {
			surplus += x
		}
	}
	if d := want.Count(model.TierAny) - surplus; d > 0 {
		missing.Counts[model.TierAny] = d
	}

	if missing.Total() > 0 {
		exclude := append([]model.DeviceID(nil), req.Exclude...)
		for _, r := range current {
			exclude = append(exclude, r.Device)
		}
		add, err = p.Place(s, Request{
			Vector:   missing,
			Client:   req.Client,
			Existing: append(append([]model.Replica(nil), live...), parked...),
			Exclude:  exclude,
			Bytes:    req.Bytes,
		}, rng)
		if err != nil {
			return nil, nil, err
		}
	}

	// Drop surplus: after the additions, while more replicas count than
	// the vector demands, remove the best removal among over-full tiers.
	set := append(append([]model.Replica(nil), live...), add...)
	scorer := &Moop{}
	if m, ok := p.(*Moop); ok {
		scorer = m
	}
	for len(set) > want.Total() {
		count := map[model.Tier]int{}
		for _, r := range set {
			count[r.Tier]++
		}
		// A replica is removable when its tier holds more than the vector
		// demands explicitly (the unspecified slots are necessarily full,
		// since more replicas count than the vector's total).
		bestK, bestScore := -1, 0.0
		rest := make([]model.Replica, 0, len(set)-1)
		for k, r := range set {
			if count[r.Tier] <= want.Count(r.Tier) {
				continue
			}
			if isIn(add, r.Device) {
				continue // never undo this decision's own additions
			}
			rest = rest[:0]
			rest = append(rest, set[:k]...)
			rest = append(rest, set[k+1:]...)
			sc := scorer.ScoreSet(s, rest)
			if bestK < 0 || sc < bestScore {
				bestK, bestScore = k, sc
			}
		}
		if bestK < 0 {
			break
		}
		remove = append(remove, set[bestK])
		set = append(set[:bestK:bestK], set[bestK+1:]...)
	}
	return add, remove, nil
}

func isIn(rs []model.Replica, id model.DeviceID) bool {
	for _, r := range rs {
		if r.Device == id {
			return true
		}
	}
	return false
}
