package policy

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Hook is a place in Terrace a policy can fill.
type Hook string

// The hooks. Each has a documented Lua signature (docs/policies.md) and
// an example in examples/policies/.
const (
	// HookRule is a planner objective: cost(view) over a device, a
	// replica set or an egroup's placement (+inf = hard constraint,
	// negative = affinity). Any number of rules may be active.
	HookRule Hook = "rule"
	// HookFitness is the placement fitness function: fitness(device,
	// cluster) >= 0, sampled like Allen's f. One policy at a time.
	HookFitness Hook = "fitness"
	// HookTiering sets when and what to tier: tiering(tiers, cluster)
	// returns thresholds (or run=false), heat(egroup, now) orders egroups.
	// One policy at a time.
	HookTiering Hook = "tiering"
	// HookBalancer is a Mantle balancer over per-node load: when(),
	// where() and optionally howmuch() decide which node scans which
	// Curator partition. One policy at a time.
	HookBalancer Hook = "balancer"
	// HookClass is an object class: named methods that read and modify
	// one object atomically (`terrace object exec B/K CLASS.METHOD`). Any
	// number of classes, each named by its policy.
	HookClass Hook = "class"
)

// Hooks lists every hook.
var Hooks = []Hook{HookRule, HookFitness, HookTiering, HookBalancer, HookClass}

// ParseHook checks a hook name.
func ParseHook(s string) (Hook, error) {
	for _, h := range Hooks {
		if string(h) == s {
			return h, nil
		}
	}
	return "", fmt.Errorf("policy: unknown hook %q (want one of rule, fitness, tiering, balancer, class)", s)
}

// Singleton reports whether at most one policy may fill the hook: there
// is one placement fitness, one tiering decision and one balancer.
func (h Hook) Singleton() bool {
	return h == HookFitness || h == HookTiering || h == HookBalancer
}

// Limits are the sandbox limits of the hook's calls. The instruction
// budget is the bound that decides (it is the same on a fast and a slow
// machine); the deadline is a safety net set several times above the
// budget's run time on one core, because on a busy node a policy's
// goroutine may get a fraction of a core. Sized to the work per
// invocation (one session):
//
//   - fitness runs on the write path, once per new extent group, over
//     every device: 2 M instructions (a thousand devices at a few hundred
//     each, ~15 µs of CPU per device), 100 ms;
//   - rule runs once per cost evaluation: 500 k instructions, 50 ms;
//   - tiering runs once per Curator job, heat() over every egroup: 50 M
//     instructions, 5 s (about 200 k egroups; beyond that a job falls
//     back to the configured order);
//   - balancer runs once per scan over a few dozen nodes and partitions:
//     1 M instructions, 250 ms;
//   - class methods run per `object exec` over an object of up to
//     MaxClassObjectBytes: 20 M instructions, 1 s, strings up to 8 MiB.
func (h Hook) Limits() sandbox.Limits {
	var l sandbox.Limits
	switch h {
	case HookFitness:
		l.Deadline, l.Instructions = 100*time.Millisecond, 2_000_000
	case HookRule:
		l.Deadline, l.Instructions = 50*time.Millisecond, 500_000
	case HookTiering:
		l.Deadline, l.Instructions = 5*time.Second, 50_000_000
	case HookBalancer:
		l.Deadline, l.Instructions = 250*time.Millisecond, 1_000_000
	case HookClass:
		l.Deadline, l.Instructions = time.Second, 20_000_000
		l.MaxStringBytes = 2 * MaxClassObjectBytes
		l.StringBudgetBytes = 16 * MaxClassObjectBytes
	}
	l.EnsureDefaults()
	return l
}

// MaxClassObjectBytes bounds an object a class method reads and writes:
// it is held in memory as one Lua string. 4 MiB keeps a method's memory
// small on a busy node; larger data belongs in ordinary objects.
const MaxClassObjectBytes = 4 << 20

// checkFunctions says what is missing for the hook, given the global
// functions a source defines.
func (h Hook) checkFunctions(fns []string) error {
	has := map[string]bool{}
	for _, f := range fns {
		has[f] = true
	}
	switch h {
	case HookRule:
		if !has["cost"] {
			return fmt.Errorf("a rule policy must define cost(view)")
		}
	case HookFitness:
		if !has["fitness"] {
			return fmt.Errorf("a fitness policy must define fitness(device, cluster)")
		}
	case HookTiering:
		if !has["tiering"] && !has["heat"] {
			return fmt.Errorf("a tiering policy must define tiering(tiers, cluster), heat(egroup, now) or both")
		}
	case HookBalancer:
		if !has["when"] || !has["where"] {
			return fmt.Errorf("a balancer policy must define when(nodes, units, self) and where(nodes, units, self) (howmuch is optional)")
		}
	case HookClass:
		if len(classMethods(fns)) == 0 {
			return fmt.Errorf("a class policy must define at least one method: a global function whose name does not start with '_'")
		}
	}
	return nil
}

// classMethods are a class's public functions.
func classMethods(fns []string) []string {
	var out []string
	for _, f := range fns {
		if !strings.HasPrefix(f, "_") {
			out = append(out, f)
		}
	}
	return out
}

// InferHook guesses the hook from the functions a source defines, for
// `policy put` without --hook.
func InferHook(fns []string) Hook {
	has := map[string]bool{}
	for _, f := range fns {
		has[f] = true
	}
	switch {
	case has["cost"]:
		return HookRule
	case has["fitness"]:
		return HookFitness
	case has["when"] && has["where"]:
		return HookBalancer
	case has["tiering"] || has["heat"]:
		return HookTiering
	}
	return HookClass
}

// nameRE is a policy name: it names classes in CLASS.METHOD and appears
// in metric labels, so it is short and plain.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,47}$`)

// CheckName validates a policy name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("policy: invalid name %q: want a lowercase letter, then up to 47 of a-z 0-9 _ -", name)
	}
	return nil
}
