package learn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Paper defaults (Curator §4.3.4).
const (
	DefaultEpsilon = 0.2
	DefaultGamma   = 0.9
	// DefaultAlpha is the online learning rate. The paper tunes it by
	// cross validation and does not report it; Pretrain picks the
	// pre-training rate the same way, and the online rate stays small
	// because one poll's reward is a noisy sample.
	DefaultAlpha = 0.01
	// DefaultTDClip bounds one update's TD error, in reward units
	// (milliseconds): one pathological interval (a device stall) must not
	// swing the model by more than a few typical updates.
	DefaultTDClip = 100.0
	// zClip bounds a standardized feature: an observation far outside
	// what the model was trained on moves the Q values only so far.
	zClip = 5.0
)

// Exploration schedule defaults for new models (docs/design/0006,
// "Exploration and the hold"). A model that leaves these fields out of
// its JSON (one written before they existed) keeps the paper's constant
// ε and explores at any fill: zero means off.
const (
	// DefaultEpsilonFloor is the ε the schedule decays to.
	DefaultEpsilonFloor = 0.0
	// DefaultEpsilonHalfLife is the experience, in transitions (pre-training
	// transitions plus online TD updates, one per 30-second decision),
	// after which ε has come half way from Epsilon down to EpsilonFloor:
	// a fresh model explores at 0.1 after 100 decisions (50 minutes) and
	// at 0.007 after a day.
	DefaultEpsilonHalfLife = 100.0
	// DefaultExploreMinSSD is the fast tier's usage (percent) below which
	// exploration never picks an action that tiers.
	DefaultExploreMinSSD = 70.0
)

// Limits on a model read from JSON: nothing grows without bound.
const (
	MaxFeatures = 16
	MaxActions  = 8
)

// JSON format versions of a model. A binary reads every version up to
// ModelVersion and refuses a newer one with ErrNewerModel, so a field that older binaries
// cannot read (ParseModel refuses unknown fields) comes with a new
// version.
const (
	// modelV1 is the original format.
	modelV1 = 1
	// modelV2 adds last_run.
	modelV2 = 2
	// ModelVersion is the newest format this binary reads and writes.
	ModelVersion = modelV2
)

// ErrNewerModel is ParseModel's error for a model in a format newer than
// ModelVersion: a newer binary's, which this one must leave alone rather
// than replace, as it would a broken one.
var ErrNewerModel = errors.New("learn: model format is newer than this binary reads")

// ActionSpec is one action: its name and how much tiering it asks for,
// as a multiple of the configured reduction h (0: do not tier now).
type ActionSpec struct {
	Name   string  `json:"name"`
	Reduce float64 `json:"reduce"`
}

// PaperActions is A = {0, 1} of §4.3.1: do not run, run Tiering.
var PaperActions = []ActionSpec{{Name: "skip", Reduce: 0}, {Name: "run", Reduce: 1}}

// Model is a linear Q function, one linear model per action over
// standardized features: Q(s, a) = Weights[a]·z(s) + Bias[a], with
// z_i = clamp((s_i − Mean_i) / Scale_i, ±5).
type Model struct {
	Version  int          `json:"version"`
	Features []string     `json:"features"`
	Actions  []ActionSpec `json:"actions"`
	// Mean and Scale standardize features (removing the mean, scaling to
	// unit variance, §4.3.3); they are fixed when the model is created.
	Mean  []float64   `json:"mean"`
	Scale []float64   `json:"scale"`
	W     [][]float64 `json:"weights"`
	Bias  []float64   `json:"bias"`
	// Alpha is the online learning rate, Gamma the discount, Epsilon the
	// exploration probability (the schedule's start, ε0), TDClip the
	// bound on one TD error.
	Alpha   float64 `json:"alpha"`
	Gamma   float64 `json:"gamma"`
	Epsilon float64 `json:"epsilon"`
	TDClip  float64 `json:"td_clip"`
	// EpsilonFloor and EpsilonHalfLife make exploration decay with
	// experience (a GLIE-style schedule): with n = Pretrained + Updates,
	// ε_n = floor + (Epsilon − floor) · H / (H + n), H the half-life. A
	// zero half-life keeps ε constant at Epsilon (the paper's rule).
	// Floor 0 with a half-life is GLIE proper: ε → 0, Σ ε = ∞.
	EpsilonFloor    float64 `json:"epsilon_floor,omitempty"`
	EpsilonHalfLife float64 `json:"epsilon_half_life,omitempty"`
	// Pretrained is the number of transitions the model was fitted on
	// before deployment (Pretrain sets it): experience the exploration
	// schedule counts, since that data was itself collected with random
	// actions.
	Pretrained int64 `json:"pretrained,omitempty"`
	// ExploreMinSSD (percent of the fast tier) gates exploration: below
	// it a random action is drawn only among the actions that do not
	// tier (Reduce 0). Shedding h from a tier that far below full only
	// demotes warm data that promotions bring back. Greedy and forced
	// actions are not gated. Zero: explore at any usage.
	ExploreMinSSD float64 `json:"explore_min_ssd,omitempty"`
	// Updates counts the TD updates applied since creation.
	Updates int64 `json:"updates"`
	// LastRun is when the agent last decided a run, the start of the hold
	// after it (zero: never, or a record from before the field). It is
	// saved with the model so that a new Curator master honours the hold
	// the old master started (Agent.SetModel) instead of tiering again
	// right after it. Since version 2.
	LastRun time.Time `json:"last_run,omitzero"`
}

// NewModel returns a model with zero weights over features and actions,
// standardizing with mean and scale (nil: no standardization), and the
// paper's α, γ, ε.
func NewModel(features []string, actions []ActionSpec, mean, scale []float64) (*Model, error) {
	n := len(features)
	if mean == nil {
		mean = make([]float64, n)
	}
	if scale == nil {
		scale = make([]float64, n)
		for i := range scale {
			scale[i] = 1
		}
	}
	m := &Model{Version: ModelVersion, Features: append([]string(nil), features...), Actions: append([]ActionSpec(nil), actions...),
		Mean: append([]float64(nil), mean...), Scale: append([]float64(nil), scale...),
		Alpha: DefaultAlpha, Gamma: DefaultGamma, Epsilon: DefaultEpsilon, TDClip: DefaultTDClip,
		EpsilonFloor: DefaultEpsilonFloor, EpsilonHalfLife: DefaultEpsilonHalfLife, ExploreMinSSD: DefaultExploreMinSSD}
	m.W = make([][]float64, len(actions))
	for a := range m.W {
		m.W[a] = make([]float64, n)
	}
	m.Bias = make([]float64, len(actions))
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate checks dimensions, names and numbers: a model that passes can
// be evaluated without panicking and yields finite Q values for valid
// observations.
func (m *Model) Validate() error {
	if m == nil {
		return errors.New("learn: nil model")
	}
	if m.Version < modelV1 || m.Version > ModelVersion {
		return fmt.Errorf("learn: model version %d, want %d..%d", m.Version, modelV1, ModelVersion)
	}
	n := len(m.Features)
	if n == 0 || n > MaxFeatures {
		return fmt.Errorf("learn: model has %d features, want 1..%d", n, MaxFeatures)
	}
	seen := map[string]bool{}
	for _, f := range m.Features {
		if !knownFeature(f) {
			return fmt.Errorf("learn: unknown feature %q (want some of %s)", f, strings.Join(AllFeatures, ", "))
		}
		if seen[f] {
			return fmt.Errorf("learn: feature %q listed twice", f)
		}
		seen[f] = true
	}
	if len(m.Actions) < 2 || len(m.Actions) > MaxActions {
		return fmt.Errorf("learn: model has %d actions, want 2..%d", len(m.Actions), MaxActions)
	}
	names := map[string]bool{}
	tiers := false
	for _, a := range m.Actions {
		if a.Name == "" || names[a.Name] {
			return fmt.Errorf("learn: action names must be distinct and non-empty (got %q)", a.Name)
		}
		names[a.Name] = true
		if !finite(a.Reduce) || a.Reduce < 0 || a.Reduce > 10 {
			return fmt.Errorf("learn: action %s reduce=%v: want 0..10 (multiples of h)", a.Name, a.Reduce)
		}
		tiers = tiers || a.Reduce > 0
	}
	if !tiers {
		// The scheduler's safety rules (the ceiling, promotion
		// starvation) force the action that tiers the most; with none,
		// they would force a skip and the fast tier could fill up.
		return errors.New("learn: no action tiers (all have reduce 0): the safety ceiling could not force a run")
	}
	if len(m.Mean) != n || len(m.Scale) != n {
		return fmt.Errorf("learn: mean/scale have %d/%d entries for %d features", len(m.Mean), len(m.Scale), n)
	}
	for i := range n {
		if !finite(m.Mean[i]) || !finite(m.Scale[i]) || m.Scale[i] <= 0 {
			return fmt.Errorf("learn: feature %s: mean %v scale %v: want finite, scale > 0", m.Features[i], m.Mean[i], m.Scale[i])
		}
	}
	if len(m.W) != len(m.Actions) || len(m.Bias) != len(m.Actions) {
		return fmt.Errorf("learn: %d weight rows and %d biases for %d actions", len(m.W), len(m.Bias), len(m.Actions))
	}
	for a, row := range m.W {
		if len(row) != n {
			return fmt.Errorf("learn: action %s has %d weights for %d features", m.Actions[a].Name, len(row), n)
		}
		for _, w := range row {
			if !finite(w) || math.Abs(w) > 1e9 {
				return fmt.Errorf("learn: action %s: weight %v out of range", m.Actions[a].Name, w)
			}
		}
		if !finite(m.Bias[a]) || math.Abs(m.Bias[a]) > 1e9 {
			return fmt.Errorf("learn: action %s: bias %v out of range", m.Actions[a].Name, m.Bias[a])
		}
	}
	if !finite(m.Alpha) || m.Alpha <= 0 || m.Alpha > 1 {
		return fmt.Errorf("learn: alpha %v: want (0, 1]", m.Alpha)
	}
	if !finite(m.Gamma) || m.Gamma < 0 || m.Gamma >= 1 {
		return fmt.Errorf("learn: gamma %v: want [0, 1)", m.Gamma)
	}
	if !finite(m.Epsilon) || m.Epsilon < 0 || m.Epsilon > 1 {
		return fmt.Errorf("learn: epsilon %v: want [0, 1]", m.Epsilon)
	}
	if !finite(m.EpsilonFloor) || m.EpsilonFloor < 0 || m.EpsilonFloor > m.Epsilon {
		return fmt.Errorf("learn: epsilon_floor %v: want [0, epsilon=%v]", m.EpsilonFloor, m.Epsilon)
	}
	if !finite(m.EpsilonHalfLife) || m.EpsilonHalfLife < 0 || m.EpsilonHalfLife > 1e9 {
		return fmt.Errorf("learn: epsilon_half_life %v: want 0 (constant ε) .. 1e9 transitions", m.EpsilonHalfLife)
	}
	if m.Pretrained < 0 || m.Pretrained > 1<<40 {
		return fmt.Errorf("learn: pretrained %d: want 0..2^40 transitions", m.Pretrained)
	}
	if !finite(m.ExploreMinSSD) || m.ExploreMinSSD < 0 || m.ExploreMinSSD > 100 {
		return fmt.Errorf("learn: explore_min_ssd %v: want [0, 100] (percent)", m.ExploreMinSSD)
	}
	if !finite(m.TDClip) || m.TDClip <= 0 {
		return fmt.Errorf("learn: td_clip %v: want > 0", m.TDClip)
	}
	if m.Updates < 0 {
		return fmt.Errorf("learn: updates %d < 0", m.Updates)
	}
	return nil
}

// Clone returns a deep copy.
func (m *Model) Clone() *Model {
	c := *m
	c.Features = append([]string(nil), m.Features...)
	c.Actions = append([]ActionSpec(nil), m.Actions...)
	c.Mean = append([]float64(nil), m.Mean...)
	c.Scale = append([]float64(nil), m.Scale...)
	c.Bias = append([]float64(nil), m.Bias...)
	c.W = make([][]float64, len(m.W))
	for a := range m.W {
		c.W[a] = append([]float64(nil), m.W[a]...)
	}
	return &c
}

// Action returns the index of the named action, or -1.
func (m *Model) Action(name string) int {
	for i, a := range m.Actions {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// Standardize returns z(s) for the model's features.
func (m *Model) Standardize(o Observation) []float64 {
	z := make([]float64, len(m.Features))
	for i, f := range m.Features {
		v := (o.Value(f) - m.Mean[i]) / m.Scale[i]
		z[i] = max(-zClip, min(zClip, v))
	}
	return z
}

func (m *Model) qz(z []float64, a int) float64 {
	q := m.Bias[a]
	for i, w := range m.W[a] {
		q += w * z[i]
	}
	return q
}

// Q returns Q(s, a) for every action.
func (m *Model) Q(o Observation) []float64 {
	z := m.Standardize(o)
	out := make([]float64, len(m.Actions))
	for a := range out {
		out[a] = m.qz(z, a)
	}
	return out
}

// argmax returns the best action; ties go to the lower index, so "skip"
// (index 0 in PaperActions) wins a tie: doing nothing is the cheap choice.
func argmax(q []float64) int {
	best := 0
	for a := 1; a < len(q); a++ {
		if q[a] > q[best] {
			best = a
		}
	}
	return best
}

// Greedy returns the action with the highest Q value.
func (m *Model) Greedy(o Observation) int { return argmax(m.Q(o)) }

// Experience is the number of transitions the model has learned from:
// pre-training plus online updates.
func (m *Model) Experience() int64 { return max(0, m.Pretrained) + max(0, m.Updates) }

// EpsilonNow is the exploration rate after the model's Experience n:
// Epsilon while EpsilonHalfLife is 0, else floor + (Epsilon − floor)·H/(H
// + n). It never increases with n and never goes below EpsilonFloor.
func (m *Model) EpsilonNow() float64 {
	if m.EpsilonHalfLife <= 0 || m.Experience() <= 0 {
		return m.Epsilon
	}
	n := float64(m.Experience())
	e := m.EpsilonFloor + (m.Epsilon-m.EpsilonFloor)*m.EpsilonHalfLife/(m.EpsilonHalfLife+n)
	return min(m.Epsilon, max(m.EpsilonFloor, e)) // no rounding past either end
}

// explorable returns the actions exploration may pick in o: all of them,
// or only those that do not tier while the fast tier is below
// ExploreMinSSD.
func (m *Model) explorable(o Observation) []int {
	out := make([]int, 0, len(m.Actions))
	for a, s := range m.Actions {
		if s.Reduce == 0 || o.SSDUsage >= m.ExploreMinSSD {
			out = append(out, a)
		}
	}
	if len(out) == 0 { // every action tiers: nothing to gate
		for a := range m.Actions {
			out = append(out, a)
		}
	}
	return out
}

// Choose picks an action ε-greedily with ε = EpsilonNow(): with that
// probability a uniformly random action among the explorable ones
// (explored), otherwise the greedy one. It draws exactly one Float64
// from rng, and a second only when exploring, so decisions replay from
// the seed; a model without the schedule and gate draws as it always did.
func (m *Model) Choose(o Observation, rng *rand.Rand) (a int, explored bool) {
	if rng.Float64() < m.EpsilonNow() {
		as := m.explorable(o)
		return as[rng.IntN(len(as))], true
	}
	return m.Greedy(o), false
}

// Transition is one step of experience: in state S the agent took Action,
// received Reward (−mean client latency in ms over the interval that
// followed) and found itself in Next.
type Transition struct {
	S      Observation `json:"s"`
	Action int         `json:"a"`
	Reward float64     `json:"r"`
	Next   Observation `json:"next"`
}

// ErrDiverged is returned by Update when a step would leave the model
// with non-finite or absurd numbers; the model is left unchanged.
var ErrDiverged = errors.New("learn: update would diverge; model unchanged")

// tdTarget is r + γ max_a' Q(s', a').
func (m *Model) tdTarget(t Transition) float64 {
	zn := m.Standardize(t.Next)
	best := math.Inf(-1)
	for a := range m.Actions {
		best = max(best, m.qz(zn, a))
	}
	return t.Reward + m.Gamma*best
}

// Update applies one step of one-step Q-learning (Curator Eq. 2) with the
// linear approximator: δ = r + γ max_a' Q(s', a') − Q(s, a), clipped to
// ±TDClip; W[a] += α δ z(s); Bias[a] += α δ. It returns δ before
// clipping.
func (m *Model) Update(t Transition) (float64, error) {
	return m.updateRate(t, m.Alpha)
}

func (m *Model) updateRate(t Transition, alpha float64) (float64, error) {
	if t.Action < 0 || t.Action >= len(m.Actions) {
		return 0, fmt.Errorf("learn: transition action %d: model has %d actions", t.Action, len(m.Actions))
	}
	if !finite(t.Reward) {
		return 0, fmt.Errorf("learn: transition reward %v is not finite", t.Reward)
	}
	if err := t.S.Validate(); err != nil {
		return 0, err
	}
	if err := t.Next.Validate(); err != nil {
		return 0, err
	}
	z := m.Standardize(t.S)
	delta := m.tdTarget(t) - m.qz(z, t.Action)
	step := alpha * max(-m.TDClip, min(m.TDClip, delta))
	row := m.W[t.Action]
	next := make([]float64, len(row))
	for i := range row {
		next[i] = row[i] + step*z[i]
		if !finite(next[i]) || math.Abs(next[i]) > 1e9 {
			return delta, ErrDiverged
		}
	}
	b := m.Bias[t.Action] + step
	if !finite(b) || math.Abs(b) > 1e9 {
		return delta, ErrDiverged
	}
	copy(row, next)
	m.Bias[t.Action] = b
	m.Updates++
	return delta, nil
}

// MarshalJSON-compatible encoding: Model has plain JSON tags; Marshal is
// json.Marshal with a validation first, so an invalid model is never
// persisted. It writes the oldest format version that holds the model: a
// model without a run recorded (every model file `terrace sim tiering`
// writes) stays readable by binaries that know only version 1.
func (m *Model) Marshal() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := *m
	c.Version = modelV1
	if !m.LastRun.IsZero() {
		c.Version = modelV2
	}
	return json.MarshalIndent(&c, "", "  ")
}

// maxModelBytes bounds the JSON ParseModel reads (a valid model with the
// maximum dimensions is a few KiB).
const maxModelBytes = 1 << 20

// ParseModel decodes and validates a model. Unknown fields are errors, so
// a model written by a newer version is refused rather than half-read. A
// version above ModelVersion is refused with ErrNewerModel before the
// fields are looked at (a newer format may add fields), so that callers
// can tell a newer binary's model from a broken one.
func ParseModel(b []byte) (*Model, error) {
	if len(b) > maxModelBytes {
		return nil, fmt.Errorf("learn: model is %d bytes, limit %d", len(b), maxModelBytes)
	}
	var v struct {
		Version int `json:"version"`
	}
	if json.Unmarshal(b, &v) == nil && v.Version > ModelVersion {
		return nil, fmt.Errorf("%w: version %d, this binary reads up to %d", ErrNewerModel, v.Version, ModelVersion)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var m Model
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("learn: model: %w", err)
	}
	if dec.More() {
		return nil, errors.New("learn: model: trailing data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// String prints the model compactly: per action its bias and weights by
// feature name, then the hyperparameters.
func (m *Model) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model features=%s alpha=%g gamma=%g epsilon=%g updates=%d\n", strings.Join(m.Features, ","), m.Alpha, m.Gamma, m.Epsilon, m.Updates)
	if m.EpsilonHalfLife > 0 || m.ExploreMinSSD > 0 || m.Pretrained > 0 {
		fmt.Fprintf(&b, "  exploration: epsilon now %s (floor %g, half-life %g, experience %d = %d pre-trained + %d updates), runs explored from ssd %g%%\n",
			fmtF(m.EpsilonNow()), m.EpsilonFloor, m.EpsilonHalfLife, m.Experience(), m.Pretrained, m.Updates, m.ExploreMinSSD)
	}
	if !m.LastRun.IsZero() {
		fmt.Fprintf(&b, "  last run %s (the hold after it counts from then)\n", m.LastRun.UTC().Format(time.RFC3339Nano))
	}
	for a, spec := range m.Actions {
		fmt.Fprintf(&b, "  %s (reduce %gh): bias=%s", spec.Name, spec.Reduce, fmtF(m.Bias[a]))
		for i, f := range m.Features {
			fmt.Fprintf(&b, " %s=%s", f, fmtF(m.W[a][i]))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func fmtF(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
