package sandbox

import (
	"fmt"
	"strings"
	"testing"
)

// show prints results the way a Lua REPL separates them.
func show(res []any) string {
	parts := make([]string, len(res))
	for i, r := range res {
		switch x := r.(type) {
		case nil:
			parts[i] = "nil"
		case float64:
			parts[i] = formatNumber(x)
		case string:
			parts[i] = fmt.Sprintf("%q", x)
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	return strings.Join(parts, " ")
}

// TestStringLibraryMatchesLua51 checks the bounded string library against
// results of the reference Lua 5.1 interpreter.
func TestStringLibraryMatchesLua51(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`string.find("hello world", "o w")`, `5 7`},
		{`string.find("hello", "l+")`, `3 4`},
		{`string.find("abc", "b", 1, true)`, `2 2`},
		{`string.find("a.b", ".", 1, true)`, `2 2`},
		{`string.find("abc", "^b")`, `nil`},
		{`string.find("", "")`, `1 0`},
		{`string.find("abc", "", 10)`, `4 3`},
		{`string.find("aaa", "a-", 2)`, `2 1`},
		{`string.find("THE (quick) fox", "%((%a+)%)")`, `5 11 "quick"`},
		{`string.find("abc", "c", -1)`, `3 3`},
		{`string.match("hello 123", "%d+")`, `"123"`},
		{`string.match("key=val", "(%w+)=(%w+)")`, `"key" "val"`},
		{`string.match("  trim  ", "^%s*(.-)%s*$")`, `"trim"`},
		{`string.match("x(a(b)c)y", "%b()")`, `"(a(b)c)"`},
		{`string.match("hello", "()ll()")`, `3 5`},
		{`string.match("2024-01-15", "(%d+)-(%d+)-(%d+)")`, `"2024" "01" "15"`},
		{`string.match("[[x]]", "%[%[(.*)%]%]")`, `"x"`},
		{`string.match('say "hi" ok', "([\"'])(.-)%1")`, `"\"" "hi"`},
		{`string.match("abc", "[^a]+")`, `"bc"`},
		{`string.match("a-z", "[a%-z]+")`, `"a-z"`},
		{`string.match("x]y", "[]]")`, `"]"`},
		{`string.match("hello", ".-(l+)(.*)")`, `"ll" "o"`},
		{`string.match("abc", "%u")`, `nil`},
		{`string.match("ABC def", "%U+")`, `" def"`},
		{`string.gsub("hello world", "o", "0")`, `"hell0 w0rld" 2`},
		{`string.gsub("abc", "%w", "%0%0")`, `"aabbcc" 3`},
		{`string.gsub("hello world", "(%w+)", "<%1>")`, `"<hello> <world>" 2`},
		{`string.gsub("abc", "", "-")`, `"-a-b-c-" 4`},
		{`string.gsub("abc", "b*", "-")`, `"-a--c-" 4`},
		{`string.gsub("hello world", "%w+", "%0 %0", 1)`, `"hello hello world" 1`},
		{`string.gsub("abc", "%w", {a = "1"})`, `"1bc" 3`},
		{`string.gsub("abc", ".", function(c) return c:upper() end)`, `"ABC" 3`},
		{`string.gsub("a,b,,c", ",", ";")`, `"a;b;;c" 3`},
		{`string.gsub("THE (quick) fox", "%f[%a]%a+", "W")`, `"W (W) W" 3`},
		{`string.gsub("abc", "^a", "x")`, `"xbc" 1`},
		{`string.gsub("100%", "%%", " percent")`, `"100 percent" 1`},
		{`(function() local t = {} for w in string.gmatch("one two three", "%a+") do t[#t+1] = w end return table.concat(t, ",") end)()`, `"one,two,three"`},
		{`(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t, ",") end)()`, `"a1,b2"`},
		{`(function() local n = 0 for _ in ("abc"):gmatch("") do n = n + 1 end return n end)()`, `4`},
		{`string.rep("ab", 3)`, `"ababab"`},
		{`string.rep("ab", 0)`, `""`},
		{`("abc"):upper() .. ("DEF"):lower() .. ("xyz"):reverse()`, `"ABCdefzyx"`},
		{`string.byte("ABC", 1, -1)`, `65 66 67`},
		{`string.byte("ABC")`, `65`},
		{`string.format("%5.2f|%d|%x|%X|%o", 3.14159, 3.7, 255, 255, 8)`, `" 3.14|3|ff|FF|10"`},
		{`string.format("%5s|%-5s|", "a", "b")`, `"    a|b    |"`},
		{`string.format("%q", 'a "b"\n')`, `"\"a \\\"b\\\"\\\n\""`},
		{`string.format("%g %g %g", 1/3, 1e20, 100)`, `"0.333333 1e+20 100"`},
		{`string.format("%c%c", 72, 105)`, `"Hi"`},
		{`string.format("%e", 12345.678)`, `"1.234568e+04"`},
		{`string.format("100%% %5.1s", "abc")`, `"100%     a"`},
		{`string.format("%i %+d %05d", -3, 5, 42)`, `"-3 +5 00042"`},
		{`string.format("%x", -1)`, `"ffffffffffffffff"`},
		{`string.format("%s %s", 1, "x")`, `"1 x"`},
		{`table.concat({1, 2, "x"}, "-")`, `"1-2-x"`},
		{`table.concat({1, 2, 3}, ",", 2, 3)`, `"2,3"`},
		{`table.concat({})`, `""`},
		{`select("#", unpack({1, 2, 3}))`, `3`},
		// table.sort is Lua 5.1's quicksort: the same order of equal
		// keys (it is not stable), the same partial result after an
		// invalid order function (here with the line of the call).
		{`(function() local s = {"b", "a", "ab", "", "B"} table.sort(s) return table.concat(s, ",") end)()`, `",B,a,ab,b"`},
		{`(function() local t = {3, 1, 2} table.sort(t, nil) return table.concat(t, ",") end)()`, `"1,2,3"`},
		{`(function() local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end) return table.concat(t, ",") end)()`, `"3,2,1"`},
		{`(function()
		    local r = {}
		    for i, k in ipairs({3, 1, 2, 1, 3, 2, 1, 2, 3, 1}) do r[i] = {k = k, id = i} end
		    table.sort(r, function(a, b) return a.k < b.k end)
		    local o = {} for i = 1, #r do o[i] = r[i].id end
		    return table.concat(o, ",")
		  end)()`, `"10,2,4,7,3,8,6,5,9,1"`},
		{`(function()
		    local t = {5, 3, 8, 1, 9, 2, 7}
		    local ok, err = pcall(table.sort, t, function(a, b) return true end)
		    return ok, err, table.concat(t, ",")
		  end)()`, `false "test.lua:3: invalid order function for sorting" "1,3,8,2,9,7,5"`},
		{`math.floor(3.7) + math.max(1, 9)`, `12`},
	} {
		src := "function f() return " + tc.expr + " end"
		res, err := run(t, Limits{}, src, "f")
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got := show(res); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

func TestStringLibraryErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`string.find("a", "%")`, "ends with '%'"},
		{`string.find("a", "(")`, "unfinished capture"},
		{`string.match("a", ")")`, "invalid pattern capture"},
		{`string.find("a", "%1")`, "invalid capture index"},
		{`string.match("a", "%b")`, "unbalanced pattern"},
		{`string.match("a", "%fa")`, "missing '['"},
		{`string.gsub("a", "a", "%2")`, "invalid capture index"},
		{`string.gsub("a", "a", {a = true})`, "invalid replacement"},
		{`string.gsub("a", "a", true)`, "string/function/table expected"},
		{`string.format("%d")`, "number expected"},
		{`string.format("%y", 1)`, "invalid option"},
		{`string.format("%------d", 1)`, "repeated flags"},
		{`string.format("%123d", 1)`, "too long"},
		{`table.concat({1, {}, 3})`, "invalid value (at index 2)"},
		{`table.sort({1, "x"})`, "attempt to compare string with number"},
		{`table.sort({2, 1, nil, 3})`, "attempt to compare"},
		{`table.sort({}, 1)`, "function expected"},
		{`math.random(0)`, "interval is empty"},
		{`string.find("a", string.rep("(", 40) .. "a" .. string.rep(")", 40))`, "too many captures"},
	} {
		_, err := run(t, Limits{}, "function f() return "+tc.expr+" end", "f")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want error containing %q, got %v", tc.expr, tc.want, err)
		}
	}
}
