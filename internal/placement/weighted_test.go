package placement

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// tableWeigher weighs devices from a map (missing devices weigh 0).
type tableWeigher struct {
	w   map[model.DeviceID]float64
	n   int // override the number of weights returned (0: one per device)
	err error
}

func (t tableWeigher) Name() string { return "table" }

func (t tableWeigher) Weights(s *model.Snapshot) ([]float64, error) {
	if t.err != nil {
		return nil, t.err
	}
	n := len(s.Devices)
	if t.n > 0 {
		n = t.n
	}
	out := make([]float64, n)
	for i := range out {
		if i < len(s.Devices) {
			out[i] = t.w[s.Devices[i].ID]
		}
	}
	return out, nil
}

func weightedCluster(t *testing.T) *model.Snapshot {
	t.Helper()
	s, err := parseCluster(`
node n1 rack=r1
node n2 rack=r1
node n3 rack=r1
device n1/ssd0 tier=ssd cap=100G used=10G
device n2/ssd0 tier=ssd cap=100G used=10G
device n3/ssd0 tier=ssd cap=100G used=96G`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWeightedFollowsTheWeigher(t *testing.T) {
	s := weightedCluster(t)
	w := Weighted{Weigher: tableWeigher{w: map[model.DeviceID]float64{"n2/ssd0": 1}}, Selection: SelectSUS}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		rs, err := w.Place(s, Request{Vector: model.MustParseVector("ssd=1"), Bytes: 1 << 20}, rng)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Device != "n2/ssd0" {
			t.Fatalf("placement %d chose %s; only n2/ssd0 has weight", i, rs[0].Device)
		}
	}
	// The weigher cannot override suitability: n3 is over 95 % full.
	w.Weigher = tableWeigher{w: map[model.DeviceID]float64{"n3/ssd0": 1}}
	for i := 0; i < 20; i++ {
		rs, err := w.Place(s, Request{Vector: model.MustParseVector("ssd=2"), Bytes: 1 << 20}, rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Device == "n3/ssd0" {
				t.Fatalf("placed on the full device: %v", rs)
			}
		}
	}
}

func TestWeightedRejectsBadWeights(t *testing.T) {
	s := weightedCluster(t)
	rng := rand.New(rand.NewPCG(1, 2))
	req := Request{Vector: model.MustParseVector("ssd=1")}
	for name, wg := range map[string]tableWeigher{
		"error":    {err: errors.New("lua exploded")},
		"short":    {n: 2},
		"negative": {w: map[model.DeviceID]float64{"n1/ssd0": -1}},
		"nan":      {w: map[model.DeviceID]float64{"n1/ssd0": math.NaN()}},
		"inf":      {w: map[model.DeviceID]float64{"n1/ssd0": math.Inf(1)}},
	} {
		_, err := Weighted{Weigher: wg}.Place(s, req, rng)
		if !errors.Is(err, ErrWeigher) {
			t.Errorf("%s: want ErrWeigher, got %v", name, err)
		}
	}
	_, err := Weighted{Weigher: tableWeigher{}}.Place(s, Request{Vector: model.MustParseVector("hdd=1")}, rng)
	if !errors.Is(err, ErrNoSuitableDevices) || errors.Is(err, ErrWeigher) {
		t.Errorf("unplaceable request: want ErrNoSuitableDevices only, got %v", err)
	}
}

// TestWeightedKeepsTheWeigherError: the weigher's own error stays
// reachable through ErrWeigher (errors.Is / errors.As), so a caller can
// tell a starved deadline from a broken policy (design 0005).
func TestWeightedKeepsTheWeigherError(t *testing.T) {
	s := weightedCluster(t)
	rng := rand.New(rand.NewPCG(1, 2))
	cause := errors.New("lua exploded")
	_, err := Weighted{Weigher: tableWeigher{err: cause}}.Place(s, Request{Vector: model.MustParseVector("ssd=1")}, rng)
	if !errors.Is(err, ErrWeigher) || !errors.Is(err, cause) {
		t.Fatalf("want ErrWeigher wrapping the weigher's error, got %v", err)
	}
}
