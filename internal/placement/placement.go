package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/terrace-storage/terrace/internal/model"
)

// MaxUsage is the fullness above which a device is never a write target
// (Allen §1.1.6: a device over 95 % full is excluded).
const MaxUsage = 0.95

// ErrNoSuitableDevices is wrapped by every "cannot place" error; the message
// names the constraint that failed.
var ErrNoSuitableDevices = errors.New("placement: no suitable devices")

// Request asks for replicas for one new extent group (or for the replicas
// missing from an existing one).
type Request struct {
	// Vector is the replicas to place. For repair it holds only the missing
	// replicas.
	Vector model.Vector
	// Client is the node that issued the write (OctopusFS co-location).
	Client model.NodeID
	// Existing replicas count towards node/rack distinctness and their
	// devices are never chosen again.
	Existing []model.Replica
	// Exclude lists devices that must not be chosen (e.g. one that just
	// failed a write).
	Exclude []model.DeviceID
	// Bytes is the expected size of the data, used for the space check.
	Bytes int64
}

// Policy chooses devices for a request. Implementations are pure.
type Policy interface {
	Name() string
	Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error)
}

// Uniform shuffles the suitable devices and takes the first that fits: the
// baseline policy the fitness thesis replaced.
type Uniform struct{}

var _ Policy = Uniform{}

// Name implements Policy.
func (Uniform) Name() string { return "uniform" }

// Place implements Policy.
func (Uniform) Place(s *model.Snapshot, req Request, rng *rand.Rand) ([]model.Replica, error) {
	if err := req.Vector.Validate(); err != nil {
		return nil, err
	}
	st := newState(s, req)
	var out []model.Replica
	for _, tier := range req.Vector.Tiers() {
		for i := 0; i < req.Vector.Count(tier); i++ {
			cands := st.candidates(tier)
			if len(cands) == 0 {
				return nil, st.explainFailure(tier)
			}
			d := cands[rng.IntN(len(cands))]
			r := model.Replica{Device: d.ID, Node: d.Node, Tier: d.Tier}
			st.take(r)
			out = append(out, r)
		}
	}
	return out, nil
}

// state tracks the replicas chosen so far for one request so that the
// distinctness rules hold across tiers.
type state struct {
	s        *model.Snapshot
	req      Request
	usedDev  map[model.DeviceID]bool
	usedNode map[model.NodeID]int
	excluded map[model.DeviceID]bool
	// strictNodes is true when the cluster has enough nodes to put every
	// replica on a distinct node; on a single node replicas only need
	// distinct devices.
	strictNodes bool
}

func newState(s *model.Snapshot, req Request) *state {
	st := &state{s: s, req: req, usedDev: map[model.DeviceID]bool{}, usedNode: map[model.NodeID]int{}, excluded: map[model.DeviceID]bool{}}
	for _, id := range req.Exclude {
		st.excluded[id] = true
	}
	for _, r := range req.Existing {
		st.usedDev[r.Device] = true
		st.usedNode[r.Node]++
	}
	upNodes := map[model.NodeID]bool{}
	for _, d := range s.Devices {
		if d.State == model.DeviceUp && s.NodeUp(d.Node) {
			upNodes[d.Node] = true
		}
	}
	st.strictNodes = len(upNodes) >= req.Vector.Total()+len(req.Existing)
	return st
}

func (st *state) take(r model.Replica) {
	st.usedDev[r.Device] = true
	st.usedNode[r.Node]++
}

// suitable reports whether d may take a replica of tier t, and if not, why.
func (st *state) suitable(d model.Device, t model.Tier) (bool, string) {
	switch {
	case t != model.TierAny && d.Tier != t:
		return false, "tier"
	case t == model.TierAny && d.Tier == model.TierMem:
		// Memory is volatile; it is only used when a vector asks for it.
		return false, "tier"
	case d.State != model.DeviceUp || !st.s.NodeUp(d.Node):
		return false, "down"
	case st.excluded[d.ID]:
		return false, "excluded"
	case st.usedDev[d.ID]:
		return false, "distinct devices"
	case st.strictNodes && st.usedNode[d.Node] > 0:
		return false, "distinct nodes"
	case d.CapacityBytes <= 0 || float64(d.UsedBytes+st.req.Bytes) > MaxUsage*float64(d.CapacityBytes):
		return false, "space"
	}
	return true, ""
}

func (st *state) candidates(t model.Tier) []model.Device {
	var out []model.Device
	for _, d := range st.s.Devices {
		if ok, _ := st.suitable(d, t); ok {
			out = append(out, d)
		}
	}
	return out
}

// explainFailure names the constraint that eliminated the last candidates.
func (st *state) explainFailure(t model.Tier) error {
	reasons := map[string]int{}
	for _, d := range st.s.Devices {
		if ok, why := st.suitable(d, t); !ok {
			reasons[why]++
		}
	}
	if reasons["tier"] == len(st.s.Devices) {
		return fmt.Errorf("%w: no device on tier %s", ErrNoSuitableDevices, t)
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		if k != "tier" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	msg := ""
	for i, k := range keys {
		if i > 0 {
			msg += ", "
		}
		msg += fmt.Sprintf("%d failed %s", reasons[k], k)
		if k == "space" {
			msg += fmt.Sprintf(" (need %d bytes under %.0f%% full)", st.req.Bytes, MaxUsage*100)
		}
	}
	return fmt.Errorf("%w: tier %s: %s", ErrNoSuitableDevices, t, msg)
}
