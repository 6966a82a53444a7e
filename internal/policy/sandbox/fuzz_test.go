package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fuzzLimits are tight so each input runs in milliseconds.
var fuzzLimits = Limits{
	Deadline:          200 * time.Millisecond,
	Instructions:      200_000,
	MaxStringBytes:    64 << 10,
	StringBudgetBytes: 1 << 20,
	PatternSteps:      200_000,
	MemoryBudgetBytes: 64 << 20,
}

// fuzzSeeds are sources that attack each bound.
var fuzzSeeds = []string{
	"function main() return 1 end",
	"while true do end",
	"function main() while true do end end",
	"function main() local s = 'x' while true do s = s .. s end end",
	"function main() return string.rep('x', 2^40) end",
	"function main() return ('a'):rep(5000):find('.-.-.-.-.-b') end",
	"function main(n) return main(n) + 1 end",
	"function main() return unpack({}, 1, 2^31) end",
	"function main() local t = {} t[2^26] = 1 return #t end",
	"function main() os.execute('true') end",
	"local f = _G['lo'..'ad'] return f and f('return 1')()",
	"function main() return setmetatable({}, {__index = function(t, k) return t[k] end}).x end",
	"function main() return tostring(setmetatable({}, {__tostring = function() while true do end end})) end",
	"function main() return pcall(error, setmetatable({}, {__tostring = function() return main() end})) end",
	"function main() return string.format('%99.99f', 1e308) end",
	"function main() return table.concat({1,2,3}, string.rep('-', 60000)) end",
	"function main() local t = {} for i = 1, 1e6 do t[i] = {} end end",
	"function main() return string.gsub(string.rep('a', 60000), '', '%0%0') end",
	"function main() return terrace.json_decode(string.rep('[', 10000)) end",
	"function main() return terrace.json_encode(main) end",
	"function main() goto done ::done:: return 1 end",
	"function main() return select(-1, 1, 2) end",
	"x = " + string(make([]byte, 0)) + "{{{{{{{{{{}}}}}}}}}}",
	"function main() return math.random(1, 2^53) end",
	"function main() table.sort({3, 2, 1}, function(a, b) error('x') end) end",
	"function main() local t = {} for i = 1, 100 do t[i] = i end table.sort(t, function(a, b) return true end) return t[1] end",
	"function main() local s = string.rep('x', 60000) local t = {} for i = 1, 5000 do t[i] = s end return terrace.json_encode(t) end",
	"function main() local s = string.rep('x', 60000) local t = {} for i = 1, 5000 do t[i] = s end print(unpack(t)) end",
	"function main() local a, b = string.rep('x', 60000) .. 'a', string.rep('x', 60000) .. 'b' local t = {} for i = 1, 3000 do t[i] = i % 2 == 0 and a or b end table.sort(t) end",
	"function main() local mt = {__lt = function(a, b) return a.v < b.v end} local t = {} for i = 1, 50 do t[i] = setmetatable({v = -i}, mt) end table.sort(t) return t[1].v end",
	"return",
	"\x1bLua",
	"--[[",
	"function main(...) return ... end",
}

// FuzzSandbox compiles and runs random sources: whatever the input, the
// sandbox returns (never panics, never hangs) and every failure is an
// *Error.
func FuzzSandbox(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile("fuzz.lua", src, fuzzLimits)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("compile error %T is not *Error: %v", err, err)
			}
			return
		}
		start := time.Now()
		err = p.Run(context.Background(), RunOptions{Seed: 1}, func(s *Session) error {
			if !s.Has("main") {
				return nil
			}
			_, err := s.Call("main", 1, "x", map[string]any{"a": 1})
			return err
		})
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("run took %s (limits: %s)", took, fuzzLimits)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("run error %T is not *Error: %v", err, err)
			}
		}
	})
}

// FuzzPattern runs the pattern functions on random subjects and patterns.
func FuzzPattern(f *testing.F) {
	for _, c := range [][2]string{
		{"hello world", "(%w+) (%w+)"},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a-a-a-a-a-a-b"},
		{"x(a(b)c)y", "%b()"},
		{"THE (quick) fox", "%f[%a]%a+"},
		{"abc", "[%"},
		{"abc", "((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))"},
		{"", "^$"},
		{"a]b", "[]]"},
		{"k=v", "(%w+)=(%w*)%1"},
	} {
		f.Add(c[0], c[1])
	}
	p, err := Compile("pattern.lua", `
function main(s, p)
  local a = {pcall(string.find, s, p)}
  local b = {pcall(string.match, s, p)}
  local c = {pcall(string.gsub, s, p, "<%0>")}
  local ok, it = pcall(string.gmatch, s, p)
  if ok then
    local n = 0
    pcall(function() for _ in it do n = n + 1 if n > 100 then break end end end)
  end
  return #a + #b + #c
end`, fuzzLimits)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, subject, pattern string) {
		if len(subject) > 4096 || len(pattern) > 256 {
			return
		}
		err := p.Run(context.Background(), RunOptions{}, func(s *Session) error {
			_, err := s.Call("main", subject, pattern)
			return err
		})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
		}
	})
}
