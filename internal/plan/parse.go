package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// ErrBadRule wraps every rule-set parsing error.
var ErrBadRule = errors.New("plan: bad rule")

// ParamKind is a parameter's type.
type ParamKind uint8

const (
	// ParamFloat is a decimal number within [Min, Max].
	ParamFloat ParamKind = iota
	// ParamTier is a tier name (empty allowed when the default is empty).
	ParamTier
	// ParamName is a bucket or workload name.
	ParamName
	// ParamEnum is one of Enum.
	ParamEnum
)

// ParamSpec describes one rule parameter.
type ParamSpec struct {
	Name     string
	Kind     ParamKind
	Default  string // "" with Required false means "unset"
	Required bool
	Min, Max float64 // ParamFloat bounds, inclusive
	Enum     []string
	Doc      string
}

// RuleSpec describes a rule: how rule sets name it, what it means, its
// parameters and how to build it.
type RuleSpec struct {
	Name string
	// Scope is the rule's scope as documentation ("device", "egroup",
	// "device|node|rack" when a parameter picks it).
	Scope string
	// Hard says the rule returns +Inf when broken.
	Hard   bool
	Doc    string
	Params []ParamSpec
	New    func(p Params) (Rule, error)
}

// Params are a rule's validated parameters with defaults filled.
type Params struct {
	spec *RuleSpec
	vals map[string]string
}

// String returns parameter name's value ("" if unset).
func (p Params) String(name string) string { return p.vals[name] }

// Float returns parameter name as a number (validated by the parser).
func (p Params) Float(name string) float64 {
	f, _ := strconv.ParseFloat(p.vals[name], 64)
	return f
}

// Tier returns parameter name as a tier.
func (p Params) Tier(name string) model.Tier { return model.Tier(p.vals[name]) }

// List returns every parameter in spec order, defaults included, unset
// optional ones left out.
func (p Params) List() []Param {
	var out []Param
	for _, ps := range p.spec.Params {
		if v, ok := p.vals[ps.Name]; ok && v != "" {
			out = append(out, Param{ps.Name, v})
		}
	}
	return out
}

// weightParam is accepted by every rule: it multiplies the rule's finite
// costs (priorities between soft rules).
const weightParam = "weight"

// Builtins returns the built-in rule specs, in documentation order.
func Builtins() []RuleSpec { return builtinSpecs() }

// ParseRule parses one rule: a name followed by key=value parameters,
// e.g. "load_balanced spread=0.2 weight=2". It returns the rule and its
// weight (default 1). A leading "- " (a YAML list item) is ignored.
func ParseRule(line string) (Rule, float64, error) {
	return parseRule(line, builtinSpecs())
}

// ParseRuleWith is ParseRule with extra rule specs (rules defined outside
// this package, e.g. policy hooks), looked up after the built-ins.
func ParseRuleWith(line string, extra []RuleSpec) (Rule, float64, error) {
	return parseRule(line, append(builtinSpecs(), extra...))
}

func parseRule(line string, specs []RuleSpec) (Rule, float64, error) {
	line = strings.TrimSpace(line)
	line = strings.TrimSpace(strings.TrimPrefix(line, "- "))
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, 0, fmt.Errorf("%w: empty rule", ErrBadRule)
	}
	var spec *RuleSpec
	for i := range specs {
		if specs[i].Name == f[0] {
			spec = &specs[i]
			break
		}
	}
	if spec == nil {
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.Name
		}
		return nil, 0, fmt.Errorf("%w: unknown rule %q (want one of %s)", ErrBadRule, f[0], strings.Join(names, ", "))
	}
	p := Params{spec: spec, vals: map[string]string{}}
	weight := 1.0
	seen := map[string]bool{}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, 0, fmt.Errorf("%w: rule %s: %q is not key=value", ErrBadRule, spec.Name, kv)
		}
		if seen[k] {
			return nil, 0, fmt.Errorf("%w: rule %s: parameter %s given twice", ErrBadRule, spec.Name, k)
		}
		seen[k] = true
		if k == weightParam {
			w, err := strconv.ParseFloat(v, 64)
			if err != nil || w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
				return nil, 0, fmt.Errorf("%w: rule %s: weight must be a number ≥ 0, got %q", ErrBadRule, spec.Name, v)
			}
			weight = w
			continue
		}
		var ps *ParamSpec
		for i := range spec.Params {
			if spec.Params[i].Name == k {
				ps = &spec.Params[i]
			}
		}
		if ps == nil {
			names := []string{}
			for _, x := range spec.Params {
				names = append(names, x.Name)
			}
			names = append(names, weightParam)
			return nil, 0, fmt.Errorf("%w: rule %s: unknown parameter %q (want %s)", ErrBadRule, spec.Name, k, strings.Join(names, ", "))
		}
		if err := ps.check(v); err != nil {
			return nil, 0, fmt.Errorf("%w: rule %s: %v", ErrBadRule, spec.Name, err)
		}
		p.vals[k] = v
	}
	for _, ps := range spec.Params {
		if _, ok := p.vals[ps.Name]; ok {
			continue
		}
		if ps.Required {
			return nil, 0, fmt.Errorf("%w: rule %s: parameter %s is required", ErrBadRule, spec.Name, ps.Name)
		}
		if ps.Default != "" {
			p.vals[ps.Name] = ps.Default
		}
	}
	r, err := spec.New(p)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: rule %s: %v", ErrBadRule, spec.Name, err)
	}
	return r, weight, nil
}

func (ps *ParamSpec) check(v string) error {
	switch ps.Kind {
	case ParamFloat:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%s must be a number, got %q", ps.Name, v)
		}
		if x < ps.Min || x > ps.Max {
			return fmt.Errorf("%s must be in [%s, %s], got %s", ps.Name, fmtFloat(ps.Min), fmtFloat(ps.Max), v)
		}
	case ParamTier:
		if !model.ValidTierName(v) || v == string(model.TierAny) {
			return fmt.Errorf("%s must be a tier name, got %q", ps.Name, v)
		}
	case ParamName:
		if v == "" || len(v) > 256 {
			return fmt.Errorf("%s must be a name of 1 to 256 characters", ps.Name)
		}
	case ParamEnum:
		for _, e := range ps.Enum {
			if e == v {
				return nil
			}
		}
		return fmt.Errorf("%s must be one of %s, got %q", ps.Name, strings.Join(ps.Enum, ", "), v)
	}
	return nil
}

// MaxRuleSetBytes bounds a rule-set text (a policy is a few dozen lines).
const MaxRuleSetBytes = 64 << 10

// ParseRuleSet parses a rule set: one rule per line (ParseRule syntax);
// blank lines and text after '#' are ignored. Errors name the line.
func ParseRuleSet(text string) (*RuleSet, error) { return ParseRuleSetWith(text, nil) }

// ParseRuleSetWith is ParseRuleSet with extra rule specs.
func ParseRuleSetWith(text string, extra []RuleSpec) (*RuleSet, error) {
	if len(text) > MaxRuleSetBytes {
		return nil, fmt.Errorf("%w: rule set of %d bytes exceeds %d", ErrBadRule, len(text), MaxRuleSetBytes)
	}
	specs := append(builtinSpecs(), extra...)
	rs := &RuleSet{}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "-")) == "" {
			continue
		}
		r, w, err := parseRule(line, specs)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if err := rs.Add(r, w); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	if rs.Len() == 0 {
		return nil, fmt.Errorf("%w: the rule set is empty", ErrBadRule)
	}
	return rs, nil
}
