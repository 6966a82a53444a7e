package plan

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// Options configure a planning run. Zero means default; EnsureDefaults
// fills them, Validate rejects bad values, String prints them so a run can
// be logged and replayed.
type Options struct {
	// Seed feeds the only randomness (the restarts solver; the greedy
	// solver is deterministic and ignores it). Same model, rules, options
	// and seed: same plan.
	Seed uint64
	// Solver searches for moves; nil means Greedy{}.
	Solver Solver
	// BatchEgroups is how many egroups a batch lets move (Mirador §5:
	// ~10,000 keeps each batch's work small so the first moves are ready
	// long before the whole model is solved). Worst offenders go first.
	BatchEgroups int
	// MaxRounds bounds the passes over all batches; a round that moves
	// nothing ends the run early. Default 8.
	MaxRounds int
	// MaxMoves bounds the moves in one plan (default 1,000,000: every
	// replica of a large cluster); the plan says when it stopped there.
	MaxMoves int
	// CandidateReplicas (V) is how many replicas of a costly instance the
	// greedy solver tries per visit, CandidateDevices (K) how many
	// destinations per replica from each domain ordering. Defaults 4 and 4:
	// hints put the right replica and device in the first few, and every
	// candidate costs one delta evaluation.
	CandidateReplicas int
	CandidateDevices  int
	// NoSecondPass disables the second pass.
	NoSecondPass bool
	// SecondPassGroup is how many of the costliest replicas the second
	// pass clears and re-places together (default 12).
	SecondPassGroup int
	// SecondPassBudget bounds the rule evaluations one group's exhaustive
	// re-placement may spend (default 1,000,000: about 50–100 ms, enough
	// to be exhaustive for the few-replica groups of small models).
	SecondPassBudget int
	// SecondPassGroups bounds the groups tried per stuck round (default 8).
	SecondPassGroups int
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Solver == nil {
		o.Solver = Greedy{}
	}
	if o.BatchEgroups == 0 {
		o.BatchEgroups = 10_000
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = 8
	}
	if o.MaxMoves == 0 {
		o.MaxMoves = 1_000_000
	}
	if o.CandidateReplicas == 0 {
		o.CandidateReplicas = 4
	}
	if o.CandidateDevices == 0 {
		o.CandidateDevices = 4
	}
	if o.SecondPassGroup == 0 {
		o.SecondPassGroup = 12
	}
	if o.SecondPassBudget == 0 {
		o.SecondPassBudget = 1_000_000
	}
	if o.SecondPassGroups == 0 {
		o.SecondPassGroups = 8
	}
}

// Validate rejects negative or out-of-range options.
func (o *Options) Validate() error {
	switch {
	case o.BatchEgroups < 1:
		return fmt.Errorf("plan: batch size must be ≥ 1, got %d", o.BatchEgroups)
	case o.MaxRounds < 1 || o.MaxRounds > 1000:
		return fmt.Errorf("plan: max rounds must be in [1, 1000], got %d", o.MaxRounds)
	case o.MaxMoves < 1:
		return fmt.Errorf("plan: max moves must be ≥ 1, got %d", o.MaxMoves)
	case o.CandidateReplicas < 1 || o.CandidateReplicas > 1024:
		return fmt.Errorf("plan: candidate replicas must be in [1, 1024], got %d", o.CandidateReplicas)
	case o.CandidateDevices < 1 || o.CandidateDevices > 1024:
		return fmt.Errorf("plan: candidate devices must be in [1, 1024], got %d", o.CandidateDevices)
	case o.SecondPassGroup < 1 || o.SecondPassGroup > 64:
		return fmt.Errorf("plan: second-pass group must be in [1, 64], got %d", o.SecondPassGroup)
	case o.SecondPassBudget < 1:
		return fmt.Errorf("plan: second-pass budget must be ≥ 1, got %d", o.SecondPassBudget)
	case o.SecondPassGroups < 1:
		return fmt.Errorf("plan: second-pass groups must be ≥ 1, got %d", o.SecondPassGroups)
	}
	return nil
}

func (o Options) String() string {
	name := "greedy"
	if o.Solver != nil {
		name = o.Solver.Name()
	}
	return fmt.Sprintf("solver=%s seed=%d batch=%d rounds=%d max_moves=%d replicas=%d devices=%d second_pass=%t group=%d budget=%d groups=%d",
		name, o.Seed, o.BatchEgroups, o.MaxRounds, o.MaxMoves, o.CandidateReplicas, o.CandidateDevices,
		!o.NoSecondPass, o.SecondPassGroup, o.SecondPassBudget, o.SecondPassGroups)
}

// Move is one step of a plan: copy egroup's replica to To, verify, switch
// the metadata, then delete the copy on From (From "" adds a missing
// replica, copied from any readable sibling). Executed in plan order, one
// at a time, moves never put a replica on a failed, full or draining
// device and never leave a replica set with fewer replicas than before.
type Move struct {
	Egroup uint64
	From   model.DeviceID
	To     model.DeviceID
	// Lowers names the rules whose cost this move lowers.
	Lowers []string
	// Before and After are the plan's total cost around this move.
	Before, After Cost
	// Batch and Round locate the move in the run; Group is the
	// second-pass group it belongs to (0 for first-pass moves). A group's
	// moves lower the cost together; one of them alone may not.
	Batch, Round, Group int
}

func (m Move) String() string {
	from := string(m.From)
	if from == "" {
		from = "(new)"
	}
	s := fmt.Sprintf("move %d %s -> %s", m.Egroup, from, m.To)
	if len(m.Lowers) > 0 {
		s += " (" + strings.Join(m.Lowers, ",") + ")"
	}
	s += " cost " + m.Before.String() + " -> " + m.After.String()
	if m.Group > 0 {
		s += fmt.Sprintf(" group %d", m.Group)
	}
	return s
}

// RuleCost is one rule's cost before and after the plan.
type RuleCost struct {
	Rule                              string
	Before, After                     Cost
	ViolationsBefore, ViolationsAfter int
}

// Violation is a rule instance the plan leaves costly.
type Violation struct {
	Rule     string
	Scope    Scope
	Instance string // egroup ID, device ID, node ID, rack or tier name
	Cost     Cost
}

// Plan is the planner's output.
type Plan struct {
	Moves          []Move
	Initial, Final Cost
	Rules          []RuleCost
	// Unresolved lists hard-rule violations the plan could not fix — the
	// operator alert of Mirador §3.3 — then up to MaxReported soft ones.
	Unresolved []Violation
	// Stranded lists egroups with no readable replica: nothing can be
	// copied, so no move can help them.
	Stranded []uint64
	// Truncated is set when MaxMoves stopped the plan.
	Truncated bool
	Stats     Stats
}

// MaxReported bounds the soft violations and stranded egroups a plan lists.
const MaxReported = 100

// Stats count the solver's work.
type Stats struct {
	Batches, Rounds   int
	Visits            int
	Evaluations       int
	SecondPassGroups  int
	SecondPassApplied int
}

// Solve plans moves that lower the rule set's cost on the model.
func Solve(m *Model, rules *RuleSet, o Options) (*Plan, error) {
	r, err := Start(m, rules, o)
	if err != nil {
		return nil, err
	}
	for {
		if _, ok := r.Next(); !ok {
			break
		}
	}
	return r.Plan(), nil
}

// Run is a planning run in progress: each Next returns the next batch's
// moves, so an actuator can start moving data before the whole model is
// planned. A Run is not safe for concurrent use.
type Run struct {
	s       *Search
	o       Options
	initial Cost
	before  []RuleCost
	round   int
	batches [][]int32 // egroups of each batch of the current round
	next    int       // next batch to plan
	moved   bool      // the current round planned a move
	done    bool
	emitted int // moves already returned by Next
}

// Batch is one step of a run: the moves planned since the previous batch.
type Batch struct {
	Index, Round int
	Moves        []Move
	Cost         Cost
}

// Start validates the input and prepares a run.
func Start(m *Model, rules *RuleSet, o Options) (*Run, error) {
	if rules == nil || rules.Len() == 0 {
		return nil, fmt.Errorf("plan: empty rule set")
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	st, err := newState(m, rules)
	if err != nil {
		return nil, err
	}
	s := newSearch(st, rules, o)
	r := &Run{s: s, o: o, initial: s.exactTotal()}
	r.before = s.ruleCosts()
	return r, nil
}

// Next plans the next batch. It returns false when the run is over.
func (r *Run) Next() (Batch, bool) {
	s := r.s
	for !r.done {
		if r.next < len(r.batches) {
			s.startBatch(r.batches[r.next], r.round)
			r.next++
			r.o.Solver.Improve(s)
			s.stats.Batches++
			if len(s.moves) > r.emitted {
				r.moved = true
			}
			if s.full() {
				r.done = true
			}
			return r.emit(), true
		}
		// Between rounds.
		if r.round > 0 && !r.moved {
			// A whole round moved nothing: the first pass is stuck in a
			// local minimum (or done).
			if s.zero() || r.o.NoSecondPass || s.full() {
				r.done = true
				break
			}
			s.startEscape(r.round)
			if !r.o.Solver.Escape(s) {
				r.done = true
				break
			}
			r.moved = true // give the first pass another round from here
			if s.full() {
				r.done = true
			}
			return r.emit(), true
		}
		if s.zero() || r.round >= r.o.MaxRounds || s.full() {
			r.done = true
			break
		}
		r.round++
		r.moved = false
		r.batches = s.orderBatches(r.o.BatchEgroups)
		r.next = 0
		s.stats.Rounds = r.round
	}
	return Batch{}, false
}

func (r *Run) emit() Batch {
	out := Batch{Index: r.s.stats.Batches, Round: r.round, Moves: r.s.materialize(r.emitted), Cost: r.s.exactTotal()}
	r.emitted = len(r.s.moves)
	return out
}

// Plan returns the whole plan so far (call after Next returned false for
// the complete plan).
func (r *Run) Plan() *Plan {
	s := r.s
	p := &Plan{Moves: s.materialize(0), Initial: r.initial, Final: s.exactTotal(), Truncated: s.full(), Stats: s.stats}
	after := s.ruleCosts()
	for i := range after {
		rc := r.before[i]
		rc.After = after[i].Before
		rc.ViolationsAfter = after[i].ViolationsBefore
		p.Rules = append(p.Rules, rc)
	}
	p.Unresolved = s.unresolved()
	p.Stranded = s.stranded()
	return p
}

// Rand returns the run's seeded generator (solvers use it).
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6d697261646f72)) }

// String prints the plan: moves, totals, per-rule costs and what is left.
func (p *Plan) String() string {
	var b strings.Builder
	for _, m := range p.Moves {
		b.WriteString(m.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "cost %s -> %s, %d moves\n", p.Initial, p.Final, len(p.Moves))
	w := 4
	for _, rc := range p.Rules {
		w = max(w, len(rc.Rule))
	}
	for _, rc := range p.Rules {
		fmt.Fprintf(&b, "  %-*s %s (%d) -> %s (%d)\n", w, rc.Rule, rc.Before, rc.ViolationsBefore, rc.After, rc.ViolationsAfter)
	}
	if p.Truncated {
		b.WriteString("truncated: max moves reached\n")
	}
	if len(p.Unresolved) > 0 {
		b.WriteString("unresolved:\n")
		for _, v := range p.Unresolved {
			kind := "soft"
			if v.Cost.Hard > 0 {
				kind = "HARD"
			}
			fmt.Fprintf(&b, "  %s %s %s %s cost %s\n", kind, v.Rule, v.Scope, v.Instance, v.Cost)
		}
	}
	if len(p.Stranded) > 0 {
		ids := make([]string, len(p.Stranded))
		for i, e := range p.Stranded {
			ids[i] = fmt.Sprint(e)
		}
		fmt.Fprintf(&b, "stranded (no readable replica): %s\n", strings.Join(ids, " "))
	}
	return b.String()
}

// sortedUnique sorts and dedupes names.
func sortedUnique(xs []string) []string {
	sort.Strings(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
