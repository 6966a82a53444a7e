package sandbox

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kind classifies a policy failure.
type Kind string

// Failure kinds. Operators see them in `terrace policy` output, logs and
// the terrace_policy_errors_total metric.
const (
	KindSyntax    Kind = "syntax"    // the source does not parse
	KindForbidden Kind = "forbidden" // the source uses something the sandbox removes (os, io, require, ...)
	KindTooLarge  Kind = "too-large" // source or nesting over the limits
	KindRuntime   Kind = "runtime"   // a Lua error while running
	KindBudget    Kind = "budget"    // instruction, string or pattern budget exhausted
	KindDeadline  Kind = "deadline"  // wall-clock deadline passed
	KindType      Kind = "type"      // a hook returned the wrong type
	KindMissing   Kind = "missing"   // a function the hook needs is not defined
	KindCanceled  Kind = "canceled"  // the caller's context ended
)

// Error is a policy failure with the Lua line when one is known.
type Error struct {
	Kind   Kind
	Policy string
	Line   int // 1-based; 0 when unknown
	Msg    string
	// Starved marks a deadline hit while the session had run less than a
	// quarter of its instruction budget: the wall time went to waiting
	// for a CPU (a loaded node, a GC pause), not to the policy's own work.
	// Callers fall back for the decision but should not hold it against
	// the policy.
	Starved bool
}

// Error prints Lua's "chunk:line: message" with the kind in brackets.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s [%s]", e.Policy, e.Line, e.Msg, e.Kind)
	}
	return fmt.Sprintf("%s: %s [%s]", e.Policy, e.Msg, e.Kind)
}

// KindOf returns the Kind of a sandbox error, or "" for other errors.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Sentinel messages raised inside the VM. They travel as Lua error strings
// (the VM only knows strings), and errorFrom maps them back to kinds.
const (
	msgInstructions = "instruction budget exhausted"
	msgDeadline     = "deadline exceeded"
	msgCanceled     = "call canceled"
	msgStringBudget = "string budget exhausted"
	msgPattern      = "pattern too complex"
	msgMemory       = "memory budget exhausted"
)

// luaPos matches the "chunk:LINE:" prefix gopher-lua puts on runtime
// errors, and the "line:N(column:M)" of its parser.
var (
	runtimePos = regexp.MustCompile(`^([^\n:]*):(\d+): `)
	syntaxPos  = regexp.MustCompile(`line:(\d+)\(column:(\d+)\)`)
)

// errorFrom turns a gopher-lua error message into an *Error.
func errorFrom(policy, msg string, defaultKind Kind) *Error {
	// Drop the Go-side traceback gopher-lua appends.
	if i := strings.Index(msg, "\nstack traceback:"); i >= 0 {
		msg = msg[:i]
	}
	e := &Error{Kind: defaultKind, Policy: policy}
	if m := runtimePos.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[2])
		msg = msg[len(m[0]):]
	}
	switch {
	case strings.Contains(msg, msgInstructions), strings.Contains(msg, msgStringBudget), strings.Contains(msg, msgPattern), strings.Contains(msg, msgMemory):
		e.Kind = KindBudget
	case strings.Contains(msg, msgDeadline):
		e.Kind = KindDeadline
	case strings.Contains(msg, msgCanceled):
		e.Kind = KindCanceled
	}
	if strings.Contains(msg, "callstack overflow") {
		// gopher-lua's growing call stack panics without a position.
		msg = "stack overflow (calls nested too deep)"
	}
	e.Msg = strings.TrimSpace(msg)
	return e
}

// syntaxError converts a parser error ("NAME line:3(column:5) near 'x': msg").
func syntaxError(policy string, err error) *Error {
	msg := err.Error()
	e := &Error{Kind: KindSyntax, Policy: policy}
	if m := syntaxPos.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
	}
	msg = strings.TrimPrefix(msg, policy)
	msg = syntaxPos.ReplaceAllString(msg, "")
	e.Msg = strings.Join(strings.Fields(msg), " ")
	return e
}
