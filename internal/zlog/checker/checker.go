// Package checker checks a history of shared-log operations recorded by
// concurrent clients against the log's specification, with a model-based
// linearizability checker (porcupine) plus the whole-log properties a
// per-position model cannot see.
//
// The specification: a log maps positions to at most one entry, set once.
// Append(v) sets some position p that was unset and returns p; Read(p)
// returns p's entry, "filled", or "not written" while p is unset; Fill(p)
// sets an unset p to "filled" and returns what p holds. Appends whose
// outcome the client never learned (an error or a kill) may or may not
// have happened. The checks:
//
//   - linearizability per position (porcupine, partitioned by position:
//     each position is an independent write-once register), including
//     unacknowledged appends whose value was observed at that position;
//   - every acknowledged append is in the final log exactly once, at the
//     position it was acknowledged with (nothing lost, nothing moved);
//   - no value is at two positions (no duplicates, acknowledged or not);
//   - the final log has no holes below its tail (holes were filled);
//   - every append acknowledged before a Tail call is below the tail it
//     returned. (Tails may go back: after a sequencer failover the new
//     sequencer rebuilds its counter from what the replicas hold, so
//     positions the old one handed out but nobody wrote are handed out
//     again, as in CORFU. Write-once arbitrates their writers.)
//
// Dependency: github.com/anishathalye/porcupine (v1.3), the well-kept
// linearizability checker used by MIT 6.824 and the etcd/Jepsen-style Go
// tests; it is pure Go and checks partitioned histories quickly.
package checker

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation kind.
type Kind uint8

// Operation kinds.
const (
	Append Kind = iota
	Read
	Fill
	Tail
)

// Values a read or fill can observe besides an entry.
const (
	NotWritten = "\x00not-written"
	Filled     = "\x00filled"
	Trimmed    = "\x00trimmed"
)

// Op is one completed (or abandoned) operation.
type Op struct {
	Client int
	Kind   Kind
	// Append: the appended value (unique per append). Read/Fill: what was
	// observed (an entry's value, NotWritten, Filled). Tail: unused.
	Value string
	// Append: the acknowledged position. Read/Fill: the position read.
	// Tail: the tail returned.
	Pos uint64
	// OK: the operation returned successfully. An append with OK false
	// has an unknown outcome; reads and fills with OK false are ignored.
	OK           bool
	Call, Return int64 // monotonic nanoseconds
}

// History records operations from many goroutines.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts a history; its clock is monotonic from now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the history's clock.
func (h *History) Now() int64 { return time.Since(h.start).Nanoseconds() }

// Add records an operation.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the recorded operations.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Report is the checker's verdict.
type Report struct {
	Ops, Appends, Acked, Unknown int
	Positions                    uint64 // final log length (tail)
	Filled                       int
	Linearizable                 porcupine.CheckResult
	Violations                   []string
}

// OK reports whether no violation was found.
func (r Report) OK() bool { return len(r.Violations) == 0 && r.Linearizable != porcupine.Illegal }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ops: %d appends (%d acknowledged, %d unknown); final log %d positions (%d filled); linearizable per position: %s",
		r.Ops, r.Appends, r.Acked, r.Unknown, r.Positions, r.Filled, r.Linearizable)
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.Violations)-20)
			break
		}
		b.WriteString("\n  violation: " + v)
	}
	return b.String()
}

type input struct {
	kind  Kind
	value string
}

type output struct {
	value   string
	unknown bool
}

// model is one position: a write-once register whose state is "" (unset),
// an entry's value, or Filled.
var model = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		s, i, o := state.(string), in.(input), out.(output)
		switch i.kind {
		case Append:
			if s != "" {
				return false, s
			}
			return true, i.value
		case Read:
			if s == "" {
				// Recovery and subscribers fill holes without a recorded
				// Fill: a read may be the first to see one.
				if o.value == Filled {
					return true, Filled
				}
				return o.value == NotWritten, s
			}
			return o.value == s || o.value == Trimmed, s
		case Fill:
			if s == "" {
				return o.value == Filled, Filled
			}
			return o.value == s || o.value == Trimmed, s
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		names := []string{"append", "read", "fill"}
		if o.unknown {
			return fmt.Sprintf("%s(%q) -> ?", names[i.kind], i.value)
		}
		return fmt.Sprintf("%s(%q) -> %q", names[i.kind], i.value, o.value)
	},
}

// Check checks the history against final, the log read in full after the
// run (position -> entry value or Filled; every position below tail).
func Check(ops []Op, final map[uint64]string, tail uint64, timeout time.Duration) Report {
	r := Report{Ops: len(ops), Positions: tail}
	var viol []string
	where := map[string][]uint64{}
	for p := uint64(0); p < tail; p++ {
		v, ok := final[p]
		switch {
		case !ok || v == NotWritten:
			viol = append(viol, fmt.Sprintf("hole at position %d below the tail %d", p, tail))
		case v == Filled:
			r.Filled++
		case v == Trimmed:
		default:
			where[v] = append(where[v], p)
		}
	}
	for v, ps := range where {
		if len(ps) > 1 {
			viol = append(viol, fmt.Sprintf("value %q at %d positions %v", short(v), len(ps), ps))
		}
	}
	// Group operations by position for porcupine.
	parts := map[uint64][]porcupine.Operation{}
	var lastEnd int64
	for _, op := range ops {
		lastEnd = max(lastEnd, op.Return)
	}
	var acks []Op
	var tails []Op
	for _, op := range ops {
		switch op.Kind {
		case Append:
			r.Appends++
			if op.OK {
				r.Acked++
				acks = append(acks, op)
				ps := where[op.Value]
				switch {
				case len(ps) == 0:
					viol = append(viol, fmt.Sprintf("acknowledged append %q at %d lost (not in the final log)", short(op.Value), op.Pos))
				case ps[0] != op.Pos:
					viol = append(viol, fmt.Sprintf("acknowledged append %q at %d found at %v", short(op.Value), op.Pos, ps))
				}
				parts[op.Pos] = append(parts[op.Pos], porcupine.Operation{ClientId: op.Client, Input: input{Append, op.Value},
					Call: op.Call, Output: output{value: "ok"}, Return: op.Return})
				continue
			}
			r.Unknown++
			// Unknown outcome: it may have landed; if its value is in the
			// log, it landed there, at some time after its call.
			for _, p := range where[op.Value] {
				parts[p] = append(parts[p], porcupine.Operation{ClientId: op.Client, Input: input{Append, op.Value},
					Call: op.Call, Output: output{unknown: true}, Return: math.MaxInt64 / 2})
			}
		case Read, Fill:
			if !op.OK {
				continue
			}
			parts[op.Pos] = append(parts[op.Pos], porcupine.Operation{ClientId: op.Client, Input: input{op.Kind, ""},
				Call: op.Call, Output: output{value: op.Value}, Return: op.Return})
		case Tail:
			if op.OK {
				tails = append(tails, op)
			}
		}
	}
	// The final read is the last operation on every position.
	for p := uint64(0); p < tail; p++ {
		v, ok := final[p]
		if !ok {
			v = NotWritten
		}
		parts[p] = append(parts[p], porcupine.Operation{ClientId: -1, Input: input{Read, ""},
			Call: lastEnd + 1, Output: output{value: v}, Return: lastEnd + 2})
	}
	// Tails: above every append acknowledged before the call.
	sort.Slice(acks, func(a, b int) bool { return acks[a].Return < acks[b].Return })
	for _, t := range tails {
		for _, a := range acks {
			if a.Return >= t.Call {
				break
			}
			if a.Pos >= t.Pos {
				viol = append(viol, fmt.Sprintf("append acknowledged at %d before a Tail call that returned %d", a.Pos, t.Pos))
				break
			}
		}
	}
	var history []porcupine.Operation
	var keys []uint64
	for p := range parts {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	for _, p := range keys {
		history = append(history, parts[p]...)
	}
	m := model
	m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		var out [][]porcupine.Operation
		for _, p := range keys {
			out = append(out, parts[p])
		}
		return out
	}
	res, info := porcupine.CheckOperationsVerbose(m, history, timeout)
	r.Linearizable = res
	if res == porcupine.Illegal {
		viol = append(viol, describeIllegal(info, keys, parts))
	}
	sort.Strings(viol)
	r.Violations = viol
	return r
}

// describeIllegal names the first position whose history is not
// linearizable and lists its operations.
func describeIllegal(_ porcupine.LinearizationInfo, keys []uint64, parts map[uint64][]porcupine.Operation) string {
	for _, p := range keys {
		if porcupine.CheckOperations(model, parts[p]) {
			continue
		}
		ops := append([]porcupine.Operation(nil), parts[p]...)
		sort.Slice(ops, func(a, b int) bool { return ops[a].Call < ops[b].Call })
		var lines []string
		for _, o := range ops {
			ret := fmt.Sprint(o.Return)
			if o.Return >= math.MaxInt64/2 {
				ret = "never"
			}
			lines = append(lines, fmt.Sprintf("[%d, %s] client %d %s", o.Call, ret, o.ClientId, model.DescribeOperation(o.Input, o.Output)))
		}
		return fmt.Sprintf("position %d is not linearizable:\n    %s", p, strings.Join(lines, "\n    "))
	}
	return "not linearizable (position unknown)"
}

func short(v string) string {
	if len(v) > 40 {
		return v[:40] + "..."
	}
	return v
}
