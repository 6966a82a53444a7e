package learn

import (
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var propSeed = flag.Uint64("learn.seed", 0, "seed for the randomized learn tests (0: fixed default)")

func seed(t *testing.T) uint64 {
	s := *propSeed
	if s == 0 {
		s = 20260101
	}
	t.Logf("seed %d (replay: go test ./internal/curator/learn -run %s -learn.seed=%d)", s, t.Name(), s)
	return s
}

func randObs(rng *rand.Rand) Observation {
	return Observation{CPU: 100 * rng.Float64(), Mem: 100 * rng.Float64(), SSDUsage: 100 * rng.Float64(),
		IOPS: 5000 * rng.Float64(), ReadIOPS: 3000 * rng.Float64(), WriteIOPS: 2000 * rng.Float64(),
		LatencyMs: 50 * rng.Float64(), Ops: float64(rng.IntN(10000)), HDDUsage: 100 * rng.Float64()}
}

func randModel(rng *rand.Rand) *Model {
	perm := rng.Perm(len(AllFeatures))
	var feats []string
	for _, i := range perm[:1+rng.IntN(len(AllFeatures))] {
		feats = append(feats, AllFeatures[i])
	}
	acts := []ActionSpec{{Name: "skip"}, {Name: "run", Reduce: 1}}
	if rng.IntN(2) == 0 {
		acts = append(acts, ActionSpec{Name: "run2h", Reduce: 2})
	}
	mean, scale := make([]float64, len(feats)), make([]float64, len(feats))
	for i := range feats {
		mean[i], scale[i] = 100*rng.Float64(), 0.1+100*rng.Float64()
	}
	m, err := NewModel(feats, acts, mean, scale)
	if err != nil {
		panic(err)
	}
	for a := range m.W {
		m.Bias[a] = 100 * rng.NormFloat64()
		for i := range m.W[a] {
			m.W[a][i] = 10 * rng.NormFloat64()
		}
	}
	m.Epsilon = rng.Float64()
	m.Alpha = 0.001 + 0.5*rng.Float64()
	m.Gamma = 0.99 * rng.Float64()
	randExplore(rng, m)
	return m
}

// randExplore gives m a random exploration schedule and gate, each off
// (the paper's rule) a quarter of the time.
func randExplore(rng *rand.Rand, m *Model) {
	m.EpsilonFloor, m.EpsilonHalfLife, m.ExploreMinSSD = 0, 0, 0
	if rng.IntN(4) != 0 {
		m.EpsilonFloor = m.Epsilon * rng.Float64()
		m.EpsilonHalfLife = 200 * rng.Float64()
	}
	if rng.IntN(4) != 0 {
		m.ExploreMinSSD = 100 * rng.Float64()
	}
	m.Updates = int64(rng.IntN(3)) * int64(rng.IntN(1000))
	m.Pretrained = int64(rng.IntN(2)) * int64(rng.IntN(5000))
}

// The schedule: ε never increases with experience, stays within
// [floor, ε0], starts at ε0 and tends to the floor; half-life 0 keeps it
// constant.
func TestPropertyEpsilonSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 6))
	for it := range 2000 {
		m := randModel(rng)
		// Pre-trained transitions and online updates are the same
		// experience.
		e := m.EpsilonNow()
		p, u := m.Pretrained, m.Updates
		m.Pretrained, m.Updates = 0, p+u
		if m.EpsilonNow() != e {
			t.Fatalf("iteration %d: ε(%d pre-trained, %d updates) = %v but ε(0, %d) = %v", it, p, u, e, p+u, m.EpsilonNow())
		}
		m.Updates = 0
		if got := m.EpsilonNow(); got != m.Epsilon {
			t.Fatalf("iteration %d: ε after 0 updates %v, want ε0 %v", it, got, m.Epsilon)
		}
		prev := m.Epsilon
		for n := int64(1); n < 1<<40; n = n*3 + int64(rng.IntN(5)) {
			m.Updates = n
			e := m.EpsilonNow()
			if e > prev || e < m.EpsilonFloor || e > m.Epsilon {
				t.Fatalf("iteration %d: ε(%d) = %v after %v (ε0 %v, floor %v, half-life %v)", it, n, e, prev, m.Epsilon, m.EpsilonFloor, m.EpsilonHalfLife)
			}
			if m.EpsilonHalfLife == 0 && e != m.Epsilon {
				t.Fatalf("iteration %d: half-life 0 but ε(%d) = %v ≠ ε0 %v", it, n, e, m.Epsilon)
			}
			prev = e
		}
		if m.EpsilonHalfLife > 0 && prev-m.EpsilonFloor > 1e-6*math.Max(1e-9, m.Epsilon) {
			t.Fatalf("iteration %d: ε(%d) = %v has not reached the floor %v", it, m.Updates, prev, m.EpsilonFloor)
		}
		if m.EpsilonHalfLife > 0 {
			m.Updates = int64(math.Ceil(m.EpsilonHalfLife))
			if e, mid := m.EpsilonNow(), (m.Epsilon+m.EpsilonFloor)/2; e > mid+1e-12 {
				t.Fatalf("iteration %d: ε after the half-life %v > half way %v", it, e, mid)
			}
		}
	}
}

// The gate: below ExploreMinSSD exploration never picks an action that
// tiers, so a run there is always the greedy choice; at or above it, the
// choice is the ungated model's, draw for draw. Same seed, same choice.
func TestPropertyExploreGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 7))
	for it := range 2000 {
		m := randModel(rng)
		if rng.IntN(2) == 0 {
			m.Epsilon, m.EpsilonFloor = 1, 0 // explore on every draw
		}
		o := randObs(rng)
		s := rng.Uint64()
		a, explored := m.Choose(o, rand.New(rand.NewPCG(s, 0)))
		if a2, e2 := m.Choose(o, rand.New(rand.NewPCG(s, 0))); a2 != a || e2 != explored {
			t.Fatalf("iteration %d: Choose does not replay from its seed", it)
		}
		if o.SSDUsage < m.ExploreMinSSD && m.Actions[a].Reduce > 0 && (explored || a != m.Greedy(o)) {
			t.Fatalf("iteration %d: ssd %v below the gate %v but %s (explored %v)", it, o.SSDUsage, m.ExploreMinSSD, m.Actions[a].Name, explored)
		}
		if o.SSDUsage >= m.ExploreMinSSD {
			open := m.Clone()
			open.ExploreMinSSD = 0
			if b, eb := open.Choose(o, rand.New(rand.NewPCG(s, 0))); b != a || eb != explored {
				t.Fatalf("iteration %d: above the gate the choice %d differs from the ungated %d", it, a, b)
			}
		}
	}
}

// Random valid models and observations: Q is finite, Greedy is its
// argmax, Choose replays from its seed, JSON round-trips exactly.
func TestPropertyModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 1))
	for it := range 2000 {
		m := randModel(rng)
		if err := m.Validate(); err != nil {
			t.Fatalf("iteration %d: random model invalid: %v", it, err)
		}
		o := randObs(rng)
		q := m.Q(o)
		g := m.Greedy(o)
		for a, v := range q {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("iteration %d: Q[%d] = %v", it, a, v)
			}
			if v > q[g] {
				t.Fatalf("iteration %d: greedy %d but Q[%d]=%v > %v", it, g, a, v, q[g])
			}
		}
		s := rng.Uint64()
		a1, e1 := m.Choose(o, rand.New(rand.NewPCG(s, 0)))
		a2, e2 := m.Choose(o, rand.New(rand.NewPCG(s, 0)))
		if a1 != a2 || e1 != e2 {
			t.Fatalf("iteration %d: Choose does not replay from its seed", it)
		}
		if !e1 && a1 != g {
			t.Fatalf("iteration %d: exploiting chose %d, greedy is %d", it, a1, g)
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		back, err := ParseModel(b)
		if err != nil {
			t.Fatalf("iteration %d: parse: %v", it, err)
		}
		qb := back.Q(o)
		for a := range q {
			if qb[a] != q[a] {
				t.Fatalf("iteration %d: Q changed across JSON: %v vs %v", it, qb, q)
			}
		}
	}
}

// Updates never leave a model invalid, whatever the transition: either
// the update applies and the model validates, or it is refused and the
// model is unchanged.
func TestPropertyUpdateStaysValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 2))
	for it := range 500 {
		m := randModel(rng)
		for range 200 {
			tr := Transition{S: randObs(rng), Next: randObs(rng), Action: rng.IntN(len(m.Actions)), Reward: -1e3 * rng.ExpFloat64()}
			if rng.IntN(20) == 0 {
				tr.Reward = math.Inf(-1)
			}
			before := m.Clone()
			_, err := m.Update(tr)
			if err != nil {
				if m.String() != before.String() {
					t.Fatalf("iteration %d: a refused update changed the model", it)
				}
				if !errors.Is(err, ErrDiverged) && !math.IsInf(tr.Reward, 0) {
					t.Fatalf("iteration %d: unexpected error %v", it, err)
				}
				continue
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("iteration %d: model invalid after an update: %v", it, err)
			}
		}
	}
}

// A contextual bandit (γ = 0) with rewards linear in one feature: run is
// better above ssd=60, skip below. Online updates from random
// transitions learn the boundary: the greedy action is right wherever
// the two rewards differ by more than the noise.
func TestPropertyLearnsBandit(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 3))
	for it := range 20 {
		m, err := NewModel([]string{FeatSSD}, PaperActions, []float64{50}, []float64{29})
		if err != nil {
			t.Fatal(err)
		}
		m.Gamma, m.Alpha = 0, 0.02
		reward := func(ssd float64, a int) float64 {
			if a == 1 {
				return -(20 - 0.2*ssd) // run: latency falls as the ssd is fuller of cold data to shed
			}
			return -8
		}
		for range 20000 {
			s := Observation{SSDUsage: 100 * rng.Float64()}
			a := rng.IntN(2)
			tr := Transition{S: s, Action: a, Reward: reward(s.SSDUsage, a) + rng.NormFloat64(), Next: Observation{SSDUsage: 100 * rng.Float64()}}
			if _, err := m.Update(tr); err != nil {
				t.Fatal(err)
			}
		}
		for ssd := 0.0; ssd <= 100; ssd += 5 {
			if math.Abs(ssd-60) < 10 {
				continue
			}
			want := 0
			if ssd > 60 {
				want = 1
			}
			if got := m.Greedy(Observation{SSDUsage: ssd}); got != want {
				t.Fatalf("iteration %d: ssd=%v greedy %d, want %d\n%s", it, ssd, got, want, m)
			}
		}
	}
}

// The agent never decides inside a hold (unless forced), credits exactly
// the ops-weighted mean latency since its last decision, and replays from
// its seed.
func TestPropertyAgent(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 4))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for it := range 200 {
		m := randModel(rng)
		hold := time.Duration(1+rng.IntN(10)) * time.Minute
		run := func() ([]Decision, error) {
			a, err := NewAgent(m.Clone(), AgentOptions{Hold: hold})
			if err != nil {
				return nil, err
			}
			r := rand.New(rand.NewPCG(uint64(it), 9))
			or := rand.New(rand.NewPCG(uint64(it), 10))
			var out []Decision
			now := t0
			var sum, ops float64
			var holdUntil time.Time
			for range 300 {
				now = now.Add(30 * time.Second)
				o := randObs(or)
				force := NoForce
				if or.IntN(30) == 0 {
					force = or.IntN(len(m.Actions))
				}
				sum += o.LatencyMs * o.Ops
				ops += o.Ops
				d, err := a.Step(now, o, force, r)
				if err != nil {
					return nil, err
				}
				if now.Before(holdUntil) && force == NoForce {
					if !d.Held {
						t.Fatalf("iteration %d: decided at %s inside a hold until %s", it, now, holdUntil)
					}
				} else {
					if d.Held {
						t.Fatalf("iteration %d: held at %s after the hold", it, now)
					}
					if len(out) > 0 && ops > 0 {
						if !d.HasReward || math.Abs(d.Reward+sum/ops) > 1e-9*math.Max(1, sum/ops) {
							t.Fatalf("iteration %d: reward %v, want %v", it, d.Reward, -sum/ops)
						}
					}
					sum, ops = 0, 0
					if d.Reduce > 0 {
						holdUntil = now.Add(hold)
					}
				}
				out = append(out, d)
			}
			return out, nil
		}
		a1, err := run()
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		a2, _ := run()
		for i := range a1 {
			if a1[i].String() != a2[i].String() {
				t.Fatalf("iteration %d: step %d does not replay: %s vs %s", it, i, a1[i], a2[i])
			}
		}
	}
}

// Pre-training on transitions of a known bandit recovers its policy, and
// the report is consistent.
func TestPropertyPretrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 5))
	for it := range 5 {
		var ds []Transition
		for range 3000 {
			s := randObs(rng)
			a := rng.IntN(2)
			r := -8.0
			if a == 1 {
				r = -(20 - 0.2*s.SSDUsage)
			}
			ds = append(ds, Transition{S: s, Action: a, Reward: r + rng.NormFloat64(), Next: randObs(rng)})
		}
		m, rep, err := Pretrain(ds, PretrainOptions{}, rng)
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if rep.Train+rep.Test != len(ds) || rep.Test != 600 || rep.ActionCounts[0]+rep.ActionCounts[1] != len(ds) {
			t.Fatalf("iteration %d: report %+v", it, rep)
		}
		if m.Alpha != DefaultAlpha || m.Updates != 0 || m.Gamma != DefaultGamma || m.Epsilon != DefaultEpsilon {
			t.Fatalf("iteration %d: deployed model hyperparameters %v %v %v %v", it, m.Alpha, m.Gamma, m.Epsilon, m.Updates)
		}
		wrong := 0
		for ssd := 0.0; ssd <= 100; ssd += 2 {
			if math.Abs(ssd-60) < 10 {
				continue
			}
			o := Observation{SSDUsage: ssd, CPU: 50, Mem: 50, IOPS: 2500, ReadIOPS: 1500, WriteIOPS: 1000}
			want := 0
			if ssd > 60 {
				want = 1
			}
			if m.Greedy(o) != want {
				wrong++
			}
		}
		if wrong > 2 {
			t.Fatalf("iteration %d: pre-trained policy wrong in %d states\n%s\nreport %+v", it, wrong, m, rep)
		}
	}
}

func TestPretrainRefusesBadData(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	if _, _, err := Pretrain(nil, PretrainOptions{}, rng); err == nil {
		t.Fatal("empty dataset accepted")
	}
	ds := make([]Transition, 100)
	ds[7].Action = 5
	if _, _, err := Pretrain(ds, PretrainOptions{}, rng); err == nil {
		t.Fatal("out-of-range action accepted")
	}
	ds[7].Action = 0
	ds[9].Reward = math.NaN()
	if _, _, err := Pretrain(ds, PretrainOptions{}, rng); err == nil {
		t.Fatal("NaN reward accepted")
	}
}

func TestPretrainedModel(t *testing.T) {
	m, err := Pretrained()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Features) != len(PaperFeatures) || len(m.Actions) != 2 || m.Epsilon != DefaultEpsilon || m.Gamma != DefaultGamma {
		t.Fatalf("built-in model is not the paper's setup:\n%s", m)
	}
	// It carries the exploration schedule and counts its pre-training as
	// experience, so it starts well below ε0.
	if m.EpsilonHalfLife != DefaultEpsilonHalfLife || m.EpsilonFloor != DefaultEpsilonFloor || m.ExploreMinSSD != DefaultExploreMinSSD ||
		m.Pretrained < 1000 || m.Updates != 0 || m.EpsilonNow() >= m.Epsilon/10 {
		t.Fatalf("built-in model's exploration schedule:\n%s", m)
	}
	m.W[0][0] = 1234
	m2, _ := Pretrained()
	if m2.W[0][0] == 1234 {
		t.Fatal("Pretrained shares state between calls")
	}
}
