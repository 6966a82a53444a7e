package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// run compiles src and calls fn with args in one session.
func run(t *testing.T, lim Limits, src, fn string, args ...any) ([]any, error) {
	t.Helper()
	p, err := Compile("test.lua", src, lim)
	if err != nil {
		return nil, err
	}
	var res []any
	err = p.Run(context.Background(), RunOptions{Seed: 1}, func(s *Session) error {
		var err error
		res, err = s.Call(fn, args...)
		return err
	})
	return res, err
}

func wantKind(t *testing.T, err error, kind Kind, line int, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got none", kind)
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("want *Error, got %T: %v", err, err)
	}
	if e.Kind != kind {
		t.Fatalf("want kind %s, got %s: %v", kind, e.Kind, err)
	}
	if line > 0 && e.Line != line {
		t.Fatalf("want line %d, got %d: %v", line, e.Line, err)
	}
	if substr != "" && !strings.Contains(err.Error(), substr) {
		t.Fatalf("want %q in %q", substr, err.Error())
	}
}

func TestCallConvertsValues(t *testing.T) {
	src := `
function f(d, xs)
  local sum = 0
  for _, x in ipairs(xs) do sum = sum + x end
  return d.used / d.capacity + sum, d.id .. "!", {a = 1, b = {true, "x"}}, nil
end`
	res, err := run(t, Limits{}, src, "f", map[string]any{"used": 50, "capacity": 100, "id": "n1/ssd0"}, []float64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0] != 3.5 || res[1] != "n1/ssd0!" || res[3] != nil {
		t.Fatalf("got %#v", res)
	}
	m := res[2].(map[string]any)
	if m["a"] != 1.0 || m["b"].([]any)[0] != true || m["b"].([]any)[1] != "x" {
		t.Fatalf("table: %#v", m)
	}
}

func TestForbiddenAtCompileTime(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int
		want string
	}{
		{"function f()\n  os.execute('rm -rf /')\nend", 2, "os"},
		{"local x = 1\nlocal f = io.open('/etc/passwd')", 2, "io"},
		{"local json = require('json')", 1, "require"},
		{"function f() return load('return 1') end", 1, "load"},
		{"function f() return loadstring('return 1') end", 1, "loadstring"},
		{"function f() dofile('/x') end", 1, "dofile"},
		{"function f()\n\n return string.dump(f) end", 3, "string.dump"},
		{"setfenv(1, {})", 1, "setfenv"},
		{"function f() return debug.traceback() end", 1, "debug"},
		{"function f() rawset(_G, 'x', 1) end", 1, "rawset"},
		{"function f() collectgarbage() end", 1, "collectgarbage"},
		{"function f() return coroutine.create(f) end", 1, "coroutine"},
		{"os = {}", 1, "os"},
	} {
		_, err := Compile("p", tc.src, Limits{})
		wantKind(t, err, KindForbidden, tc.line, tc.want)
	}
	// A local of the same name is the policy's own.
	if _, err := run(t, Limits{}, "local os = {x = 1}\nfunction f() local io = 2 return os.x + io end", "f"); err != nil {
		t.Fatal(err)
	}
	// Removed names are nil at run time even when reached dynamically.
	res, err := run(t, Limits{}, `function f() return _G["o".."s"] == nil and _G["req".."uire"] == nil and string["du".."mp"] == nil end`, "f")
	if err != nil || res[0] != true {
		t.Fatalf("dynamic access: %v %v", res, err)
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, err := Compile("p", "function f()\n  return 1 +\nend", Limits{})
	wantKind(t, err, KindSyntax, 3, "")
	_, err = Compile("p", "x = 'unterminated", Limits{})
	wantKind(t, err, KindSyntax, 0, "unterminated")
}

func TestRuntimeErrorHasLine(t *testing.T) {
	_, err := run(t, Limits{}, "function f(d)\n  local x = nil\n  return x + d\nend", "f", 1)
	wantKind(t, err, KindRuntime, 3, "add operation")
	_, err = run(t, Limits{}, "function f()\n  error('bad input')\nend", "f")
	wantKind(t, err, KindRuntime, 2, "bad input")
	_, err = run(t, Limits{}, "x = 1", "nope")
	wantKind(t, err, KindMissing, 0, "nope")
}

func TestRunawayLoopHitsInstructionBudget(t *testing.T) {
	start := time.Now()
	_, err := run(t, Limits{Instructions: 100_000}, "function f()\n  while true do end\nend", "f")
	wantKind(t, err, KindBudget, 2, "instruction budget")
	if time.Since(start) > 5*time.Second {
		t.Fatalf("budget took %s", time.Since(start))
	}
	// pcall cannot swallow the budget: expiry is sticky.
	_, err = run(t, Limits{Instructions: 100_000}, `
function f()
  local n = 0
  while true do
    pcall(function() while true do end end)
    n = n + 1
  end
end`, "f")
	wantKind(t, err, KindBudget, 0, "instruction budget")
	_, err = run(t, Limits{Instructions: 100_000}, `
function f()
  return xpcall(function() while true do end end, function(e) while true do end end)
end`, "f")
	wantKind(t, err, KindBudget, 0, "")
	// A loop at load time fails the load.
	p, err := Compile("p", "while true do end", Limits{Instructions: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background(), RunOptions{}, func(s *Session) error { return nil })
	wantKind(t, err, KindBudget, 1, "")
}

func TestDeadline(t *testing.T) {
	_, err := run(t, Limits{Instructions: 1 << 40, Deadline: 20 * time.Millisecond}, "function f() local x = 0 while true do x = x + 1 end end", "f")
	wantKind(t, err, KindDeadline, 1, "deadline")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ := Compile("p", "function f() while true do end end", Limits{Instructions: 1 << 40})
	err = p.Run(ctx, RunOptions{}, func(s *Session) error { _, err := s.Call("f"); return err })
	wantKind(t, err, KindCanceled, 0, "")
}

func TestDeepRecursion(t *testing.T) {
	_, err := run(t, Limits{}, "function f(n) return 1 + f(n + 1) end", "f", 0)
	wantKind(t, err, KindRuntime, 0, "stack overflow")
	// Recursion through metamethods takes frames too.
	_, err = run(t, Limits{}, `
function f()
  local t = setmetatable({}, {})
  getmetatable(t).__index = function(t, k) return t[k] end
  return t.x
end`, "f")
	if err == nil {
		t.Fatal("metamethod recursion did not fail")
	}
	// A tail call loops without growing the stack: the budget stops it.
	_, err = run(t, Limits{Instructions: 100_000}, "function f(n) return f(n + 1) end", "f", 0)
	wantKind(t, err, KindBudget, 0, "")
}

func TestStringLimits(t *testing.T) {
	lim := Limits{MaxStringBytes: 1 << 20, StringBudgetBytes: 4 << 20}
	_, err := run(t, lim, "function f() return string.rep('x', 1e9) end", "f")
	wantKind(t, err, KindRuntime, 1, "exceed the policy limit")
	_, err = run(t, lim, "function f() return ('ab'):rep(1e9) end", "f")
	wantKind(t, err, KindRuntime, 1, "exceed the policy limit")
	_, err = run(t, lim, "function f()\n local s = 'x'\n while true do s = s .. s end\nend", "f")
	wantKind(t, err, KindRuntime, 3, "exceeds the policy limit")
	_, err = run(t, lim, "function f() local t = {} for i = 1, 100 do t[i] = string.rep('y', 500000) end end", "f")
	wantKind(t, err, KindBudget, 1, "string budget")
	_, err = run(t, lim, "function f() local t = {} for i = 1, 1000 do t[i] = 'x' end return table.concat(t, string.rep(',', 2000)) end", "f")
	wantKind(t, err, KindRuntime, 1, "table.concat")
	_, err = run(t, lim, "function f() return string.format('%99999d', 1) end", "f")
	wantKind(t, err, KindRuntime, 1, "too long")
	_, err = run(t, lim, "function f() return (string.rep('a', 1000)):gsub('a', string.rep('b', 2000)) end", "f")
	wantKind(t, err, KindRuntime, 1, "gsub")
	_, err = run(t, lim, "function f() return unpack({}, 1, 1e8) end", "f")
	wantKind(t, err, KindRuntime, 1, "too many results")
	_, err = run(t, lim, "function f() return string.byte(string.rep('a', 100000), 1, -1) end", "f")
	wantKind(t, err, KindRuntime, 1, "too long")
}

func TestPatternBudget(t *testing.T) {
	_, err := run(t, Limits{PatternSteps: 1_000_000}, "function f() return string.find(string.rep('a', 20000), '.-.-.-.-b') end", "f")
	wantKind(t, err, KindBudget, 1, "pattern too complex")
	_, err = run(t, Limits{}, "function f() return string.find('abc', '[a') end", "f")
	wantKind(t, err, KindRuntime, 1, "missing ']'")
	_, err = run(t, Limits{}, "function f() return string.find(string.rep('a', 300), string.rep('a?', 300)) end", "f")
	wantKind(t, err, KindRuntime, 1, "nests deeper")
}

func TestMemoryBudget(t *testing.T) {
	// Sparse stores allocate in one instruction; the sampled allocation
	// counter stops the loop long before memory runs out.
	_, err := run(t, Limits{MemoryBudgetBytes: 32 << 20, Instructions: 1 << 30, Deadline: 10 * time.Second}, `
function f()
  local keep = {}
  for i = 1, 100000 do
    local t = {}
    t[200000] = i
    keep[#keep + 1] = t
  end
end`, "f")
	wantKind(t, err, KindBudget, 0, "memory budget")
}

func TestGlobalsAndInputsAreReadOnly(t *testing.T) {
	_, err := run(t, Limits{}, "function f() counter = 1 end", "f")
	wantKind(t, err, KindRuntime, 1, "read-only")
	_, err = run(t, Limits{}, "x = 1\nfunction f() x = 2 end", "f")
	wantKind(t, err, KindRuntime, 2, "read-only")
	_, err = run(t, Limits{}, "function f(d) d.extra = 1 end", "f", map[string]any{"a": 1})
	wantKind(t, err, KindRuntime, 1, "read-only")
	_, err = run(t, Limits{}, "function f() string.rep = nil end", "f")
	wantKind(t, err, KindRuntime, 1, "read-only")
	_, err = run(t, Limits{}, "function f() getmetatable('').__index.rep = nil end", "f")
	if err == nil {
		t.Fatal("string metatable reachable")
	}
	res, err := run(t, Limits{}, "function f(d) return getmetatable(d), getmetatable(_G) end", "f", map[string]any{})
	if err != nil || res[0] != "read-only" || res[1] != "globals" {
		t.Fatalf("metatables: %v %v", res, err)
	}
	// Locals are the policy's own to change.
	res, err = run(t, Limits{}, "function f() local t = {} t.x = 1 return t.x end", "f")
	if err != nil || res[0] != 1.0 {
		t.Fatalf("locals: %v %v", res, err)
	}
}

func TestConcatSemantics(t *testing.T) {
	res, err := run(t, Limits{}, `
local function two() return "a", "b" end
function f() return 1 .. "x" .. 2.5 .. two(), ("%d"):format(3) .. "" end`, "f")
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != "1x2.5a" || res[1] != "3" {
		t.Fatalf("got %#v", res)
	}
	_, err = run(t, Limits{}, "function f() return 'a' .. {} end", "f")
	wantKind(t, err, KindRuntime, 1, "concatenate a table")
}

func TestRandomIsSeeded(t *testing.T) {
	src := "function f() local t = {} for i = 1, 5 do t[i] = math.random(100) end return table.concat(t, ',') end"
	p, err := Compile("p", src, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	call := func(seed uint64) string {
		var out string
		if err := p.Run(context.Background(), RunOptions{Seed: seed}, func(s *Session) error {
			r, err := s.Call("f")
			if err == nil {
				out = r[0].(string)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b, c := call(7), call(7), call(8)
	if a != b || a == c {
		t.Fatalf("seed 7: %s, %s; seed 8: %s", a, b, c)
	}
}

func TestResultsThatCannotLeave(t *testing.T) {
	_, err := run(t, Limits{}, "function f() return function() end end", "f")
	wantKind(t, err, KindType, 0, "function")
	_, err = run(t, Limits{}, "function f() local t = {} t.self = t return t end", "f")
	wantKind(t, err, KindType, 0, "deeper")
}

func TestHostFunctions(t *testing.T) {
	res, err := run(t, Limits{}, `
function f(obj)
  local v = obj:read()
  obj:write(v .. "!")
  return terrace.sha256("abc"), terrace.json_encode({a = {1, 2}}), terrace.json_decode('{"x":[1,"y"]}').x[2], terrace.crc32c("123456789")
end`, "f", map[string]any{
		"read":  Method(func([]any) ([]any, error) { return []any{"hi"}, nil }),
		"write": Method(func(a []any) ([]any, error) { return nil, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || res[1] != `{"a":[1,2]}` || res[2] != "y" || res[3] != float64(0xe3069283) {
		t.Fatalf("got %#v", res)
	}
}

func TestPrintIsCaptured(t *testing.T) {
	p, _ := Compile("p", "function f(x) print('x is', x) return x end", Limits{})
	var log string
	err := p.Run(context.Background(), RunOptions{}, func(s *Session) error {
		_, err := s.Call("f", 3)
		log = s.Log()
		return err
	})
	if err != nil || log != "x is\t3\n" {
		t.Fatalf("log %q err %v", log, err)
	}
}

func TestDescribeAndReuse(t *testing.T) {
	p, err := Compile("p", "params = {a = 1}\nfunction when() return true end\nfunction where() return {} end\nlocal function hidden() end", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fns, vals, err := p.Describe(context.Background())
	if err != nil || strings.Join(fns, ",") != "when,where" || strings.Join(vals, ",") != "params" {
		t.Fatalf("describe: %v %v %v", fns, vals, err)
	}
	for i := 0; i < 3; i++ {
		if err := p.Run(context.Background(), RunOptions{}, func(s *Session) error {
			_, err := s.Call("when")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.pool) != 1 {
		t.Fatalf("pool holds %d VMs, want 1 reused", len(p.pool))
	}
	// A failed session discards its VM.
	_ = p.Run(context.Background(), RunOptions{}, func(s *Session) error { _, err := s.Call("nope"); return err })
	if len(p.pool) != 0 {
		t.Fatalf("pool holds %d VMs after a failure", len(p.pool))
	}
}

func TestLimitsValidate(t *testing.T) {
	var l Limits
	l.EnsureDefaults()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	l.Deadline = time.Hour
	if l.Validate() == nil {
		t.Fatal("an hour-long deadline passed validation")
	}
	if _, err := Compile("p", strings.Repeat(" ", 70<<10), Limits{}); KindOf(err) != KindTooLarge {
		t.Fatalf("large source: %v", err)
	}
	if _, err := Compile("p", "x = "+strings.Repeat("{", 300)+strings.Repeat("}", 300), Limits{}); KindOf(err) != KindTooLarge {
		t.Fatalf("deep nesting: %v", err)
	}
}

// TestStarvedDeadline: a deadline missed while the session had done
// little of its budget (here a host call that stalls, as a descheduled
// goroutine would) is marked Starved; a loop that burns its instructions
// is not.
func TestStarvedDeadline(t *testing.T) {
	p, err := Compile("p", "function f(stall) stall() for i = 1, 10000 do end end\nfunction g() while true do end end",
		Limits{Deadline: 20 * time.Millisecond, Instructions: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	stall := Func(func([]any) ([]any, error) { time.Sleep(40 * time.Millisecond); return nil, nil })
	err = p.Run(context.Background(), RunOptions{}, func(s *Session) error { _, err := s.Call("f", stall); return err })
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindDeadline || !e.Starved {
		t.Fatalf("stalled session: %#v", err)
	}
	p2, _ := Compile("p", "function g() while true do end end", Limits{Deadline: 20 * time.Millisecond, Instructions: 2000})
	err = p2.Run(context.Background(), RunOptions{}, func(s *Session) error { _, err := s.Call("g"); return err })
	if !errors.As(err, &e) || e.Starved {
		t.Fatalf("busy loop: %#v", err)
	}
}

// allocDuring reports the bytes the process allocated while f ran.
func allocDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// manyRefs is a table holding one 64 KiB string 2000 times (125 MiB if
// copied out); tightLimits allow 64 KiB strings and 4 MiB of heap. With
// the default limits the same source asks for up to 800 GB in one host
// call.
const manyRefs = `
local function many()
  local s = string.rep("x", 65536)
  local t = {}
  for i = 1, 2000 do t[i] = s end
  return t
end
`

var tightLimits = Limits{MaxStringBytes: 64 << 10, StringBudgetBytes: 256 << 10, MemoryBudgetBytes: 4 << 20}

// TestJSONEncodeIsBoundedBeforeItAllocates: json_encode of a table holding
// one large string many times fails on the string limit before the text
// is built.
func TestJSONEncodeIsBoundedBeforeItAllocates(t *testing.T) {
	var err error
	n := allocDuring(func() {
		_, err = run(t, tightLimits, manyRefs+"function f()\n  return terrace.json_encode(many())\nend", "f")
	})
	if n > 32<<20 {
		t.Fatalf("json_encode allocated %d MiB in one call (string limit 64 KiB, memory budget 4 MiB)", n>>20)
	}
	wantKind(t, err, KindRuntime, 9, "json_encode: result exceeds the policy limit of 65536 bytes")
	// Escaping counts: 20 000 '<' are 120 000 bytes of JSON.
	_, err = run(t, tightLimits, `function f() return terrace.json_encode({string.rep("<", 20000)}) end`, "f")
	wantKind(t, err, KindRuntime, 1, "json_encode: result exceeds")
	res, err := run(t, tightLimits, `function f() return terrace.json_encode({string.rep("<", 10000)}) end`, "f")
	if err != nil || len(res[0].(string)) != 60004 {
		t.Fatalf("10 000 escaped bytes: %v", err)
	}
}

// TestJSONSizeMatchesMarshal: JSONSize is never below json.Marshal's
// length (and equal for everything but \b and \f), and fails past the
// limit.
func TestJSONSizeMatchesMarshal(t *testing.T) {
	for _, x := range []any{
		nil, true, false, 0.0, -1.5, 1e21, 1e-7, 1e-300, -2.5e+300, 123456789012345678.0, math.SmallestNonzeroFloat64, -math.MaxFloat64,
		"", "plain", "quote\" back\\slash", "<a href='x'>&</a>", "\n\r\t\x00\x1f\x7f", "\u2028\u2029 é 日本 \xff\xfe bad",
		[]any{}, []any{1.0, "two", nil, []any{true}}, map[string]any{}, map[string]any{"a": 1.0, "<k>": []any{"v", map[string]any{"": false}}},
	} {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		n, err := JSONSize(x, 1<<20)
		if err != nil || n != len(b) {
			t.Errorf("JSONSize(%#v) = %d, %v; json.Marshal gives %d bytes: %s", x, n, err, len(b), b)
		}
		if len(b) > 1 {
			if _, err := JSONSize(x, len(b)-1); !errors.Is(err, ErrJSONTooLarge) {
				t.Errorf("JSONSize(%#v) with limit %d: %v", x, len(b)-1, err)
			}
		}
	}
	// Random bytes: every escape class, invalid UTF-8, multi-byte runes.
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 500; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			if b[j] = byte(rng.IntN(256)); b[j] == '\b' || b[j] == '\f' {
				b[j] = 'b'
			}
		}
		want, _ := json.Marshal(map[string]any{string(b): []any{string(b)}})
		if n, err := JSONSize(map[string]any{string(b): []any{string(b)}}, 1<<20); err != nil || n != len(want) {
			t.Fatalf("JSONSize of %q: %d, %v; json.Marshal gives %d bytes", b, n, err, len(want))
		}
	}
	if n, err := JSONSize("\b\f", 100); err != nil || n < 6 {
		t.Errorf("\\b\\f: %d %v", n, err)
	}
	if _, err := JSONSize(map[string]int{}, 100); err == nil {
		t.Error("a map[string]int was measured")
	}
}

// TestPrintIsBoundedBeforeItAllocates: print() writes its arguments into
// the log one at a time up to MaxLogBytes, so print(unpack(t)) of 2000
// references to one 64 KiB string neither joins them (125 MiB) nor keeps
// more than the cap.
func TestPrintIsBoundedBeforeItAllocates(t *testing.T) {
	p, err := Compile("p", manyRefs+"function f()\n  print('head')\n  print(unpack(many()))\n  print('tail')\n  return 1\nend", tightLimits)
	if err != nil {
		t.Fatal(err)
	}
	var log string
	n := allocDuring(func() {
		err = p.Run(context.Background(), RunOptions{}, func(s *Session) error {
			_, err := s.Call("f")
			log = s.Log()
			return err
		})
	})
	if n > 32<<20 {
		t.Fatalf("print allocated %d MiB in one call (string limit 64 KiB, memory budget 4 MiB, log cap 16 KiB)", n>>20)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(log) > DefaultMaxLogBytes+len(logTruncated) || !strings.HasPrefix(log, "head\nxxxx") || !strings.HasSuffix(log, "x"+logTruncated) {
		t.Fatalf("log of %d bytes: %.40q ... %q", len(log), log, log[max(len(log)-40, 0):])
	}
	// Lines that fit are kept whole; the one that does not is cut at the
	// cap; nothing is kept after it.
	p, _ = Compile("p", "function f() for i = 1, 10 do print(i, string.rep('y', 400)) end end", Limits{MaxLogBytes: 1000})
	_ = p.Run(context.Background(), RunOptions{}, func(s *Session) error {
		_, err = s.Call("f")
		log = s.Log()
		return err
	})
	want := "1\t" + strings.Repeat("y", 400) + "\n2\t" + strings.Repeat("y", 400) + "\n3\t" + strings.Repeat("y", 1000-2*403-3) + logTruncated
	if err != nil || log != want {
		t.Fatalf("log %q (%v), want %q", log, err, want)
	}
}

// TestTableSortIsMetered: table.sort runs inside one VM instruction, so
// its comparisons are charged to the session and the clock is checked
// while it runs. Sorting 4000 strings of 256 KiB that differ only in the
// last byte (gopher-lua's sort compared them byte by byte for hours, the
// 20 ms deadline unchecked) stops within the deadline's order of
// magnitude; without a comparator the instruction budget bounds a sort
// of numbers; a comparator's own instructions count as always.
func TestTableSortIsMetered(t *testing.T) {
	src := `
function f()
  local a = string.rep("x", 256 * 1024) .. "a"
  local b = string.rep("x", 256 * 1024) .. "b"
  local t = {}
  for i = 1, 4000 do if i % 2 == 0 then t[i] = a else t[i] = b end end
  table.sort(t)
  return 1
end`
	start := time.Now()
	_, err := run(t, Limits{Deadline: 20 * time.Millisecond}, src, "f")
	el := time.Since(start)
	if el > 500*time.Millisecond {
		t.Fatalf("a 20 ms session ran for %s inside one table.sort (err %v)", el.Round(time.Millisecond), err)
	}
	var e *Error
	if !errors.As(err, &e) || (e.Kind != KindDeadline && e.Kind != KindBudget) || e.Line != 7 {
		t.Fatalf("want a deadline or budget error at line 7, got %v", err)
	}
	t.Logf("%v after %s", err, el.Round(time.Millisecond))

	numbers := `
function f(cmp)
  local t = {}
  for i = 1, 2000 do t[i] = (i * 7919) % 2003 end
  if cmp then table.sort(t, function(a, b) return a < b end) else table.sort(t) end
  return t[1], t[2000]
end`
	// 2000 numbers take about 25 000 comparisons: within 100 000
	// instructions, not within 20 000.
	res, err := run(t, Limits{Instructions: 100_000}, numbers, "f", false)
	if err != nil || res[0] != 1.0 || res[1] != 2002.0 {
		t.Fatalf("sort of 2000 numbers: %v %v", res, err)
	}
	_, err = run(t, Limits{Instructions: 20_000}, numbers, "f", false)
	wantKind(t, err, KindBudget, 5, "instruction budget exhausted")
	_, err = run(t, Limits{Instructions: 20_000}, numbers, "f", true)
	wantKind(t, err, KindBudget, 0, "instruction budget exhausted")
	// The budget error is sticky: pcall cannot swallow it.
	_, err = run(t, Limits{Instructions: 20_000}, `
function f()
  local t = {}
  for i = 1, 2000 do t[i] = (i * 7919) % 2003 end
  pcall(table.sort, t)
  return 1
end`, "f")
	wantKind(t, err, KindBudget, 0, "instruction budget exhausted")
}
