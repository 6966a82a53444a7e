package placement

import (
	"fmt"
	"strconv"
	"strings"
)

// Policy names accepted by New.
const (
	NameUniform = "uniform"
	NameFitness = "fitness"
	NameMoop    = "moop"
	NameRules   = "rules"
)

// Names lists the policies New builds.
var Names = []string{NameUniform, NameFitness, NameMoop, NameRules}

// Defaults. Each is justified where it is declared.
const (
	// DefaultName is moop: OctopusFS's default policy, the only built-in
	// one that weighs tiers, load, fullness and fault tolerance together
	// and so the natural choice for vectors with unspecified replicas.
	DefaultName = NameMoop
	// DefaultFitness is f_mult, which the thesis found superior (§4.3.1):
	// its bias toward the emptier disk holds at any fullness.
	DefaultFitness = FitnessMult
	// DefaultSelection is two-choice: O(1) per replica and free of herding
	// (Allen §3.3.5, §6.1), where SUS herds onto an outlier (Fig. 6).
	DefaultSelection = SelectTwoChoice
	// DefaultAggression is a = 1.1 with u in percent: a disk 10 points
	// emptier has 1.1^10 = 2.6x the t_u (a selection bias b_r of 0.72 under
	// proportional sampling, Allen Eq. 8), and a 95 %-full disk keeps a
	// positive t_u of 1.2e-4, so it is still chosen when it is the only one.
	DefaultAggression = 1.1
	// DefaultQueueCeil is q_ceil = 100 in-flight operations: the lower of
	// the two ceilings the thesis measured (100 and 200), which reduced
	// worker-node queues more (§4.4).
	DefaultQueueCeil = 100
	// DefaultTruncationPercent is T = 10, the thesis's top-10 % (Fig. 7).
	DefaultTruncationPercent = 10
)

// Config selects and parameterises a policy. The zero Config is valid and
// means the defaults. Configuration flows from the cluster config to New;
// String prints it in the syntax ParseConfig reads so a run can be logged
// and replayed.
type Config struct {
	// Name is one of Names; empty means DefaultName.
	Name string

	// Fitness parameters (Allen §3.1, §3.3).
	Fitness           FitnessFunc // "mult" or "add"
	Selection         Selection   // "sus", "truncation", "two-choice", "uniform"
	Aggression        float64     // a in t_u = 1/a^u, > 1
	QueueCeil         float64     // q_ceil in t_q = 1 − q/q_ceil, > 0
	TruncationPercent float64     // T in (0, 100]

	// Objectives restricts moop to a subset of {db, lb, ft, tm} (the
	// paper's single-objective policies); empty means all four.
	Objectives []Objective
	// AllowMem lets moop and rules place unspecified replicas in memory,
	// at most a third of a set (OctopusFS §3.3: off by default).
	AllowMem bool
	// IgnoreClient turns off "first replica on the client's node".
	IgnoreClient bool
}

// EnsureDefaults fills zero fields with defaults. Fields that do not apply
// to the named policy are left alone so that Validate can reject them.
func (c *Config) EnsureDefaults() {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Name == NameFitness {
		if c.Fitness == "" {
			c.Fitness = DefaultFitness
		}
		if c.Selection == "" {
			c.Selection = DefaultSelection
		}
		if c.Aggression == 0 {
			c.Aggression = DefaultAggression
		}
		if c.QueueCeil == 0 {
			c.QueueCeil = DefaultQueueCeil
		}
		if c.TruncationPercent == 0 && c.Selection == SelectTruncation {
			c.TruncationPercent = DefaultTruncationPercent
		}
	}
}

// Validate rejects unknown names, out-of-range parameters and parameters
// the named policy does not use. Call EnsureDefaults first.
func (c Config) Validate() error {
	known := false
	for _, n := range Names {
		known = known || c.Name == n
	}
	if !known {
		return fmt.Errorf("placement: unknown policy %q (want one of %s)", c.Name, strings.Join(Names, ", "))
	}
	fitnessSet := c.Fitness != "" || c.Selection != "" || c.Aggression != 0 || c.QueueCeil != 0 || c.TruncationPercent != 0
	if c.Name != NameFitness && fitnessSet {
		return fmt.Errorf("placement: policy %s takes no fitness parameters", c.Name)
	}
	if c.Name != NameMoop && len(c.Objectives) > 0 {
		return fmt.Errorf("placement: policy %s takes no objectives", c.Name)
	}
	if c.AllowMem && c.Name != NameMoop && c.Name != NameRules {
		return fmt.Errorf("placement: policy %s never puts unspecified replicas in memory; mem applies to moop and rules", c.Name)
	}
	switch c.Name {
	case NameFitness:
		if c.Fitness != FitnessMult && c.Fitness != FitnessAdd {
			return fmt.Errorf("placement: unknown fitness function %q (want mult or add)", c.Fitness)
		}
		if !c.Selection.valid() {
			return fmt.Errorf("placement: unknown selection %q (want sus, truncation, two-choice or uniform)", c.Selection)
		}
		if !(c.Aggression > 1) {
			return fmt.Errorf("placement: aggression a must be > 1, got %v", c.Aggression)
		}
		if !(c.QueueCeil > 0) {
			return fmt.Errorf("placement: q_ceil must be > 0, got %v", c.QueueCeil)
		}
		if c.Selection == SelectTruncation && !(c.TruncationPercent > 0 && c.TruncationPercent <= 100) {
			return fmt.Errorf("placement: truncation percent must be in (0, 100], got %v", c.TruncationPercent)
		}
		if c.Selection != SelectTruncation && c.TruncationPercent != 0 {
			return fmt.Errorf("placement: truncation percent applies only to selection=truncation")
		}
	case NameMoop:
		seen := map[Objective]bool{}
		for _, o := range c.Objectives {
			if objectiveIndex(o) < 0 {
				return fmt.Errorf("placement: unknown objective %q (want db, lb, ft or tm)", o)
			}
			if seen[o] {
				return fmt.Errorf("placement: objective %s given twice", o)
			}
			seen[o] = true
		}
	}
	return nil
}

// String prints the config in the syntax ParseConfig reads, e.g.
// "fitness fitness=mult selection=two-choice a=1.1 q_ceil=100".
func (c Config) String() string {
	name := c.Name
	if name == "" {
		name = "(default)"
	}
	parts := []string{name}
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if c.Fitness != "" {
		add("fitness", string(c.Fitness))
	}
	if c.Selection != "" {
		add("selection", string(c.Selection))
	}
	if c.Aggression != 0 {
		add("a", num(c.Aggression))
	}
	if c.QueueCeil != 0 {
		add("q_ceil", num(c.QueueCeil))
	}
	if c.TruncationPercent != 0 {
		add("truncation", num(c.TruncationPercent))
	}
	if len(c.Objectives) > 0 {
		os := make([]string, len(c.Objectives))
		for i, o := range c.Objectives {
			os[i] = string(o)
		}
		add("objectives", strings.Join(os, ","))
	}
	if c.AllowMem {
		add("mem", "true")
	}
	if c.IgnoreClient {
		add("client", "ignore")
	}
	return strings.Join(parts, " ")
}

// ParseConfig reads "NAME key=value ...", the syntax String prints. Keys:
// fitness, selection, a, q_ceil, truncation, objectives (comma list), mem
// (true/false), client (prefer/ignore). An empty string is the zero
// Config (all defaults). It does not apply defaults.
func ParseConfig(s string) (Config, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Config{}, nil // the defaults
	}
	c := Config{Name: fields[0]}
	num := func(k, v string) (float64, error) {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("placement: %s=%q is not a number", k, v)
		}
		return x, nil
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Config{}, fmt.Errorf("placement: %q is not key=value", f)
		}
		var err error
		switch k {
		case "fitness":
			c.Fitness = FitnessFunc(v)
		case "selection":
			c.Selection = Selection(v)
		case "a":
			c.Aggression, err = num(k, v)
		case "q_ceil":
			c.QueueCeil, err = num(k, v)
		case "truncation":
			c.TruncationPercent, err = num(k, v)
		case "objectives":
			for _, o := range strings.Split(v, ",") {
				c.Objectives = append(c.Objectives, Objective(o))
			}
		case "mem":
			c.AllowMem, err = strconv.ParseBool(v)
			if err != nil {
				err = fmt.Errorf("placement: mem=%q is not true or false", v)
			}
		case "client":
			switch v {
			case "prefer":
				c.IgnoreClient = false
			case "ignore":
				c.IgnoreClient = true
			default:
				err = fmt.Errorf("placement: client=%q (want prefer or ignore)", v)
			}
		default:
			err = fmt.Errorf("placement: unknown config key %q", k)
		}
		if err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// New builds the policy c names, after EnsureDefaults and Validate.
func New(c Config) (Policy, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	local := !c.IgnoreClient
	switch c.Name {
	case NameUniform:
		return Uniform{LocalFirst: local}, nil
	case NameFitness:
		return &Fitness{
			Func:              c.Fitness,
			Selection:         c.Selection,
			Aggression:        c.Aggression,
			QueueCeil:         c.QueueCeil,
			TruncationPercent: c.TruncationPercent,
			LocalFirst:        local,
		}, nil
	case NameMoop:
		return &Moop{Objectives: append([]Objective(nil), c.Objectives...), AllowMem: c.AllowMem, LocalFirst: local}, nil
	case NameRules:
		return &Rules{AllowMem: c.AllowMem, LocalFirst: local}, nil
	}
	panic("placement: Validate accepted unknown policy " + c.Name)
}
