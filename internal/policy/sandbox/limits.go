package sandbox

import (
	"fmt"
	"time"
)

// Limits bound what one policy may consume. The zero Limits is valid and
// means the defaults; EnsureDefaults fills them and Validate rejects
// nonsense. Every limit, when hit, fails the call with an *Error of a
// specific Kind; nothing is ever killed half-way through a host operation.
type Limits struct {
	// Deadline is the wall-clock time one session (a load, or one hook
	// invocation with all its calls) may run. Checked every
	// deadlineCheckEvery instructions and inside long host operations.
	Deadline time.Duration
	// Instructions is the Lua VM instruction budget of one session,
	// counted exactly. It makes a runaway loop fail the same way on a fast
	// and a slow machine, where the deadline alone would not. table.sort,
	// which runs inside one instruction, charges each comparison (one
	// instruction, plus one per 64 bytes of compared strings).
	Instructions int64
	// CallStackFrames caps Lua call depth (deep or infinite recursion
	// fails with "stack overflow"); also bounds Go stack use by metamethods
	// and callbacks, each of which takes at least one frame.
	CallStackFrames int
	// RegistrySlots caps the VM's value stack (arguments, locals,
	// temporaries), so unpack() of a huge range or string.byte of a whole
	// string fail instead of growing memory.
	RegistrySlots int
	// MaxStringBytes caps any one string a policy builds (concatenation,
	// string.rep, format, gsub, table.concat, JSON encoding).
	MaxStringBytes int
	// StringBudgetBytes caps the bytes of all strings built in a session,
	// so a loop that builds many large strings fails before it exhausts
	// memory, whatever the deadline.
	StringBudgetBytes int64
	// PatternSteps caps the work of the pattern matcher (find, match,
	// gmatch, gsub) in a session; one host call cannot be interrupted by
	// the deadline, so the matcher counts its own steps.
	PatternSteps int64
	// MaxSourceBytes caps a policy's source.
	MaxSourceBytes int
	// MaxNesting caps syntactic nesting (blocks, expressions) so compiling
	// a hostile source cannot recurse deeply.
	MaxNesting int
	// MaxResultItems caps the values in a result converted back to Go
	// (table entries, recursively) and MaxResultDepth its nesting.
	MaxResultItems int
	MaxResultDepth int
	// MaxLogBytes caps what print() keeps per session (for `policy test`);
	// arguments past the cap are never copied, and what is kept counts
	// towards the string budget.
	MaxLogBytes int
	// MemoryBudgetBytes caps heap allocation during a session. gopher-lua
	// offers no allocation hook, so the meter samples the process's
	// cumulative allocation counter every clockCheckEvery instructions and
	// fails the session when it grew by more than this. The counter is
	// process-wide: heavy concurrent allocation elsewhere can fail a
	// policy early, which then falls back to its last good version or the
	// built-in default; it never lets a policy allocate without bound.
	MemoryBudgetBytes int64
}

// Defaults. A policy is a short decision function: 64 KiB of source is
// thousands of lines; 5 million instructions is 50–150 ms of gopher-lua on
// one core, far above what a fitness or tiering function needs and
// enough for an object-class method over a few MiB.
const (
	DefaultDeadline          = 250 * time.Millisecond
	DefaultInstructions      = 5_000_000
	DefaultCallStackFrames   = 200 // Lua 5.1's LUAI_MAXCCALLS
	DefaultRegistrySlots     = 64 * 1024
	DefaultMaxStringBytes    = 8 << 20
	DefaultStringBudgetBytes = 64 << 20
	DefaultPatternSteps      = 10_000_000
	DefaultMaxSourceBytes    = 64 << 10
	DefaultMaxNesting        = 200
	DefaultMaxResultItems    = 100_000
	DefaultMaxResultDepth    = 16
	DefaultMaxLogBytes       = 16 << 10
	DefaultMemoryBudgetBytes = 256 << 20

	// clockCheckEvery is how often (in instructions) the clock, the
	// caller's context and the allocation counter are consulted: reading
	// them costs ~70 ns and ~250 ns, ten times an instruction, so every
	// 256th instruction keeps the overhead near 1 ns per instruction. The
	// worst single instruction (a sparse table fill, bounded by
	// lua.MaxArrayIndex to 4 MiB) times 256 bounds the overshoot.
	clockCheckEvery = 256
	// initialRegistrySlots is the VM's starting value stack; it grows on
	// demand up to RegistrySlots.
	initialRegistrySlots = 1024
)

// EnsureDefaults fills zero fields with the defaults.
func (l *Limits) EnsureDefaults() {
	if l.Deadline == 0 {
		l.Deadline = DefaultDeadline
	}
	if l.Instructions == 0 {
		l.Instructions = DefaultInstructions
	}
	if l.CallStackFrames == 0 {
		l.CallStackFrames = DefaultCallStackFrames
	}
	if l.RegistrySlots == 0 {
		l.RegistrySlots = DefaultRegistrySlots
	}
	if l.MaxStringBytes == 0 {
		l.MaxStringBytes = DefaultMaxStringBytes
	}
	if l.StringBudgetBytes == 0 {
		l.StringBudgetBytes = DefaultStringBudgetBytes
	}
	if l.PatternSteps == 0 {
		l.PatternSteps = DefaultPatternSteps
	}
	if l.MaxSourceBytes == 0 {
		l.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if l.MaxNesting == 0 {
		l.MaxNesting = DefaultMaxNesting
	}
	if l.MaxResultItems == 0 {
		l.MaxResultItems = DefaultMaxResultItems
	}
	if l.MaxResultDepth == 0 {
		l.MaxResultDepth = DefaultMaxResultDepth
	}
	if l.MaxLogBytes == 0 {
		l.MaxLogBytes = DefaultMaxLogBytes
	}
	if l.MemoryBudgetBytes == 0 {
		l.MemoryBudgetBytes = DefaultMemoryBudgetBytes
	}
}

// Validate rejects limits that would make every policy fail or that
// remove a bound. Call EnsureDefaults first.
func (l Limits) Validate() error {
	switch {
	case l.Deadline < time.Millisecond || l.Deadline > time.Minute:
		return fmt.Errorf("sandbox: deadline %s outside [1ms, 1m]", l.Deadline)
	case l.Instructions < 1000:
		return fmt.Errorf("sandbox: instruction budget %d below 1000", l.Instructions)
	case l.CallStackFrames < 8 || l.CallStackFrames > 10_000:
		return fmt.Errorf("sandbox: call stack of %d frames outside [8, 10000]", l.CallStackFrames)
	case l.RegistrySlots < initialRegistrySlots:
		return fmt.Errorf("sandbox: registry of %d slots below %d", l.RegistrySlots, initialRegistrySlots)
	case l.MaxStringBytes < 1024:
		return fmt.Errorf("sandbox: string limit %d below 1 KiB", l.MaxStringBytes)
	case l.StringBudgetBytes < int64(l.MaxStringBytes):
		return fmt.Errorf("sandbox: string budget %d below the string limit %d", l.StringBudgetBytes, l.MaxStringBytes)
	case l.PatternSteps < 1000:
		return fmt.Errorf("sandbox: pattern budget %d below 1000", l.PatternSteps)
	case l.MaxSourceBytes < 64 || l.MaxSourceBytes > 1<<20:
		return fmt.Errorf("sandbox: source limit %d outside [64, 1 MiB]", l.MaxSourceBytes)
	case l.MaxNesting < 10 || l.MaxNesting > 1000:
		return fmt.Errorf("sandbox: nesting limit %d outside [10, 1000]", l.MaxNesting)
	case l.MemoryBudgetBytes < 1<<20:
		return fmt.Errorf("sandbox: memory budget %d below 1 MiB", l.MemoryBudgetBytes)
	case l.MaxResultItems < 1 || l.MaxResultDepth < 1:
		return fmt.Errorf("sandbox: result limits must be positive")
	}
	return nil
}

// String prints the limits so a run can be logged.
func (l Limits) String() string {
	return fmt.Sprintf("deadline=%s instructions=%d frames=%d registry=%d max_string=%d string_budget=%d pattern_steps=%d source=%d nesting=%d memory=%d",
		l.Deadline, l.Instructions, l.CallStackFrames, l.RegistrySlots, l.MaxStringBytes, l.StringBudgetBytes, l.PatternSteps, l.MaxSourceBytes, l.MaxNesting, l.MemoryBudgetBytes)
}
