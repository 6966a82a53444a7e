package learn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// PretrainOptions configure Pretrain. Zero values mean defaults.
type PretrainOptions struct {
	// Features and Actions of the model (default: the paper's).
	Features []string
	Actions  []ActionSpec
	// Gamma and Epsilon are stored in the model (default 0.9 and 0.2).
	Gamma   float64
	Epsilon float64
	// Alphas are the candidate pre-training learning rates, chosen by
	// k-fold cross validation on the training split (default 0.001,
	// 0.003, 0.01, 0.03).
	Alphas []float64
	// OnlineAlpha is the learning rate the deployed model keeps (default
	// DefaultAlpha).
	OnlineAlpha float64
	// Epochs are passes over the training data (default 40); Folds the
	// cross-validation folds (default 3, §4.3.3); TestFraction the share
	// held out for the final test loss (default 0.2).
	Epochs       int
	Folds        int
	TestFraction float64
}

// EnsureDefaults fills zero fields.
func (o *PretrainOptions) EnsureDefaults() {
	if o.Features == nil {
		o.Features = PaperFeatures
	}
	if o.Actions == nil {
		o.Actions = PaperActions
	}
	if o.Gamma == 0 {
		o.Gamma = DefaultGamma
	}
	if o.Epsilon == 0 {
		o.Epsilon = DefaultEpsilon
	}
	if o.Alphas == nil {
		o.Alphas = []float64{0.001, 0.003, 0.01, 0.03}
	}
	if o.OnlineAlpha == 0 {
		o.OnlineAlpha = DefaultAlpha
	}
	if o.Epochs == 0 {
		o.Epochs = 40
	}
	if o.Folds == 0 {
		o.Folds = 3
	}
	if o.TestFraction == 0 {
		o.TestFraction = 0.2
	}
}

// MaxPretrainTransitions bounds a pre-training dataset (the paper's has
// about 32K transitions).
const MaxPretrainTransitions = 1 << 20

// PretrainReport says how pre-training went.
type PretrainReport struct {
	Transitions int `json:"transitions"`
	Train       int `json:"train"`
	Test        int `json:"test"`
	// ActionCounts is how often each action appears in the dataset.
	ActionCounts []int `json:"action_counts"`
	// CVLoss is the mean squared TD error on held-out folds per candidate
	// learning rate; Alpha the one chosen.
	CVLoss    map[string]float64 `json:"cv_loss"`
	Alpha     float64            `json:"alpha"`
	TrainLoss float64            `json:"train_loss"`
	TestLoss  float64            `json:"test_loss"`
}

// Pretrain fits a model to transitions collected under another policy
// (the threshold policy, §4.3.3) by fitted Q-iteration with SGD: features
// are standardized with the training split's mean and standard
// deviation; every epoch replays the shuffled training transitions
// through the Q-learning update, so targets r + γ max Q(s') use the
// current weights. The learning rate is chosen by k-fold cross validation
// on the training split; the report gives the squared TD error on the
// held-out test split. Biases start at the mean reward / (1 − γ), the
// value of a state if every future interval were average.
func Pretrain(ds []Transition, o PretrainOptions, rng *rand.Rand) (*Model, PretrainReport, error) {
	o.EnsureDefaults()
	var rep PretrainReport
	if len(ds) < 10*o.Folds {
		return nil, rep, fmt.Errorf("learn: pretrain needs at least %d transitions, got %d", 10*o.Folds, len(ds))
	}
	if len(ds) > MaxPretrainTransitions {
		return nil, rep, fmt.Errorf("learn: pretrain got %d transitions, limit %d", len(ds), MaxPretrainTransitions)
	}
	if o.TestFraction <= 0 || o.TestFraction >= 1 || o.Folds < 2 || o.Epochs < 1 {
		return nil, rep, errors.New("learn: pretrain wants 0 < test fraction < 1, folds ≥ 2, epochs ≥ 1")
	}
	if _, err := NewModel(o.Features, o.Actions, nil, nil); err != nil {
		return nil, rep, err
	}
	rep.ActionCounts = make([]int, len(o.Actions))
	for i, t := range ds {
		if t.Action < 0 || t.Action >= len(o.Actions) {
			return nil, rep, fmt.Errorf("learn: transition %d: action %d out of range", i, t.Action)
		}
		if !finite(t.Reward) {
			return nil, rep, fmt.Errorf("learn: transition %d: reward %v", i, t.Reward)
		}
		if err := t.S.Validate(); err != nil {
			return nil, rep, fmt.Errorf("transition %d: %w", i, err)
		}
		if err := t.Next.Validate(); err != nil {
			return nil, rep, fmt.Errorf("transition %d: %w", i, err)
		}
		rep.ActionCounts[t.Action]++
	}
	idx := rng.Perm(len(ds))
	nTest := int(math.Round(o.TestFraction * float64(len(ds))))
	test, train := pick(ds, idx[:nTest]), pick(ds, idx[nTest:])
	rep.Transitions, rep.Train, rep.Test = len(ds), len(train), len(test)

	rep.CVLoss = map[string]float64{}
	best, bestLoss := o.Alphas[0], math.Inf(1)
	for _, alpha := range o.Alphas {
		var loss float64
		for k := range o.Folds {
			var fit, val []Transition
			for i, t := range train {
				if i%o.Folds == k {
					val = append(val, t)
				} else {
					fit = append(fit, t)
				}
			}
			m, err := fitQ(fit, o, alpha, rng)
			if err != nil {
				loss = math.Inf(1)
				break
			}
			loss += tdLoss(m, val) / float64(o.Folds)
		}
		rep.CVLoss[fmt.Sprint(alpha)] = loss
		if loss < bestLoss {
			best, bestLoss = alpha, loss
		}
	}
	if math.IsInf(bestLoss, 1) {
		return nil, rep, errors.New("learn: pretrain diverged for every learning rate")
	}
	rep.Alpha = best
	m, err := fitQ(train, o, best, rng)
	if err != nil {
		return nil, rep, err
	}
	rep.TrainLoss, rep.TestLoss = tdLoss(m, train), tdLoss(m, test)
	m.Alpha = o.OnlineAlpha
	m.Updates = 0
	// The fitted transitions are the model's experience: its exploration
	// schedule continues from there (docs/design/0006, "Exploration").
	m.Pretrained = int64(len(train))
	return m, rep, m.Validate()
}

func pick(ds []Transition, idx []int) []Transition {
	out := make([]Transition, len(idx))
	for i, j := range idx {
		out[i] = ds[j]
	}
	return out
}

// standardization returns each feature's mean and standard deviation over
// the states of ds (a constant feature gets scale 1: it carries no
// information and standardizes to 0).
func standardization(ds []Transition, features []string) (mean, scale []float64) {
	n := float64(len(ds))
	mean = make([]float64, len(features))
	scale = make([]float64, len(features))
	for i, f := range features {
		for _, t := range ds {
			mean[i] += t.S.Value(f) / n
		}
		var ss float64
		for _, t := range ds {
			d := t.S.Value(f) - mean[i]
			ss += d * d
		}
		scale[i] = math.Sqrt(ss / n)
		if !(scale[i] > 1e-9) {
			scale[i] = 1
		}
	}
	return mean, scale
}

// fitQ trains a fresh model on ds with learning rate alpha.
func fitQ(ds []Transition, o PretrainOptions, alpha float64, rng *rand.Rand) (*Model, error) {
	mean, scale := standardization(ds, o.Features)
	m, err := NewModel(o.Features, o.Actions, mean, scale)
	if err != nil {
		return nil, err
	}
	m.Gamma, m.Epsilon = o.Gamma, o.Epsilon
	var r float64
	for _, t := range ds {
		r += t.Reward / float64(len(ds))
	}
	for a := range m.Bias {
		m.Bias[a] = r / (1 - m.Gamma)
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	for range o.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			if _, err := m.updateRate(ds[i], alpha); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// tdLoss is the mean squared TD error of m over ds.
func tdLoss(m *Model, ds []Transition) float64 {
	if len(ds) == 0 {
		return 0
	}
	var s float64
	for _, t := range ds {
		d := m.tdTarget(t) - m.qz(m.Standardize(t.S), t.Action)
		s += d * d
	}
	return s / float64(len(ds))
}

// SortedAlphas returns the report's candidate learning rates in order
// (for printing).
func (r PretrainReport) SortedAlphas() []string {
	var ks []string
	for k := range r.CVLoss {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
