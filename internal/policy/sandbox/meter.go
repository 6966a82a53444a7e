package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// closedDone is returned by meter.Done once the session has expired.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// meter accounts one session's resources. It is installed as the LState's
// context: gopher-lua's main loop selects on ctx.Done() before every
// instruction, so Done is where instructions are counted exactly, the
// clock and the caller's context are checked every clockCheckEvery
// instructions, and an exhausted budget stops the VM at the next
// instruction. Expiry is sticky: once expired, every further instruction
// raises again, so a policy cannot pcall its way past its budget.
//
// A meter is used by one goroutine (the VM's); it is not safe for
// concurrent use, which gopher-lua never needs without coroutines (the
// sandbox removes them).
type meter struct {
	parent   context.Context
	deadline time.Time
	lim      *Limits

	steps     int64
	strBytes  int64
	patSteps  int64
	err       error
	rng       *rand.Rand
	pcg       *rand.PCG
	log       strings.Builder
	logFull   bool
	startedAt time.Time
	// allocBase is the process's cumulative heap allocation at the start.
	allocBase uint64
	sample    [1]metrics.Sample
}

var _ context.Context = (*meter)(nil)

func newMeter(parent context.Context, lim *Limits, seed uint64) *meter {
	now := time.Now()
	m := &meter{parent: parent, lim: lim, startedAt: now, deadline: now.Add(lim.Deadline),
		pcg: rand.NewPCG(seed, rngStream)}
	m.rng = rand.New(m.pcg)
	m.sample[0].Name = "/gc/heap/allocs:bytes"
	m.allocBase = m.allocated()
	if d, ok := parent.Deadline(); ok && d.Before(m.deadline) {
		m.deadline = d
	}
	return m
}

// rngStream is the PCG stream of math.random (any fixed value).
const rngStream = 0x7e77ace

// Errors a meter expires with; errorFrom recognises their text.
var (
	errInstructions = errors.New(msgInstructions)
	errDeadline     = errors.New(msgDeadline)
	errCanceled     = errors.New(msgCanceled)
)

// Deadline implements context.Context.
func (m *meter) Deadline() (time.Time, bool) { return m.deadline, true }

// Done implements context.Context and counts one instruction per call.
func (m *meter) Done() <-chan struct{} {
	if m.err != nil {
		return closedDone
	}
	m.steps++
	if m.steps > m.lim.Instructions {
		m.err = fmt.Errorf("%w (%d instructions)", errInstructions, m.lim.Instructions)
		return closedDone
	}
	if m.steps%clockCheckEvery == 0 && m.checkClock() != nil {
		return closedDone
	}
	return nil // a nil channel: the VM's select takes its default branch
}

// checkClock expires the meter if the deadline passed, the caller gave
// up, or the session allocated more than its memory budget.
func (m *meter) checkClock() error {
	if m.err != nil {
		return m.err
	}
	if time.Now().After(m.deadline) {
		m.err = fmt.Errorf("%w (%s)", errDeadline, m.lim.Deadline)
	} else if m.parent.Err() != nil {
		m.err = fmt.Errorf("%w: %v", errCanceled, m.parent.Err())
	} else if a := m.allocated(); a > m.allocBase && a-m.allocBase > uint64(m.lim.MemoryBudgetBytes) {
		m.err = fmt.Errorf("%s: allocated %d MiB, budget %d MiB", msgMemory, (a-m.allocBase)>>20, m.lim.MemoryBudgetBytes>>20)
	}
	return m.err
}

// allocated reads the process's cumulative heap allocation.
func (m *meter) allocated() uint64 {
	metrics.Read(m.sample[:])
	if m.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m.sample[0].Value.Uint64()
}

// Err implements context.Context.
func (m *meter) Err() error { return m.err }

// Value implements context.Context.
func (m *meter) Value(any) any { return nil }

// meterOf returns the session meter of a running VM.
func meterOf(L *lua.LState) *meter {
	m, _ := L.Context().(*meter)
	if m == nil {
		// Host functions only run inside a session; a nil meter means a
		// sandbox bug, and failing closed is the safe answer.
		L.RaiseError("sandbox: host function called outside a session")
	}
	return m
}

// chargeString accounts a string of n bytes about to be built, raising a
// Lua error if it is over the per-string limit or the session budget.
func (m *meter) chargeString(L *lua.LState, n int) {
	if n > m.lim.MaxStringBytes {
		L.RaiseError("string of %d bytes exceeds the policy limit of %d bytes", n, m.lim.MaxStringBytes)
	}
	m.strBytes += int64(n)
	if m.strBytes > m.lim.StringBudgetBytes {
		m.err = fmt.Errorf("%s (%d bytes built)", msgStringBudget, m.strBytes)
		L.RaiseError("%s", m.err.Error())
	}
	if m.checkClock() != nil {
		L.RaiseError("%s", m.err.Error())
	}
}

// chargeSteps counts n instructions' worth of work a host function does
// for the policy inside one VM instruction (table.sort's comparisons),
// checking the clock, the caller and the memory budget as often as the VM
// does, and raises the meter's error (the same budget or deadline error
// the VM raises) once the session is over a budget or its deadline.
func (m *meter) chargeSteps(L *lua.LState, n int64) {
	if m.err == nil {
		before := m.steps
		m.steps += n
		if m.steps > m.lim.Instructions {
			m.err = fmt.Errorf("%w (%d instructions)", errInstructions, m.lim.Instructions)
		} else if m.steps/clockCheckEvery != before/clockCheckEvery {
			m.checkClock()
		}
	}
	if m.err != nil {
		L.RaiseError("%s", m.err.Error())
	}
}

// logTruncated ends the log once print() output reaches MaxLogBytes.
const logTruncated = "... (log truncated)\n"

// logRoom is how many more bytes of a line the log keeps (its newline
// aside).
func (m *meter) logRoom() int {
	if m.logFull {
		return 0
	}
	return max(m.lim.MaxLogBytes-m.log.Len()-1, 0)
}

// logLine keeps one line of print() output for `policy test`, up to
// MaxLogBytes: the part that fits, and the truncation mark when the line
// was cut (by the caller or here). It returns the bytes written.
func (m *meter) logLine(s string, cut bool) int {
	if m.logFull {
		return 0
	}
	before := m.log.Len()
	room := m.lim.MaxLogBytes - before - 1
	if room < 0 {
		room, cut = 0, true
	}
	if len(s) > room {
		s, cut = s[:room], true
	}
	m.log.WriteString(s)
	if cut {
		m.log.WriteString(logTruncated)
		m.logFull = true
	} else {
		m.log.WriteByte('\n')
	}
	return m.log.Len() - before
}
