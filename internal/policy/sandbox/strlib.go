package sandbox

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// maxMultiResults bounds how many values string.byte and unpack push at
// once (Lua 5.1 fails with "string slice too long" / "too many results"
// when the C stack cannot hold them; here the registry cap would).
const maxMultiResults = 8192

func init() {
	// gopher-lua fills a table's array part with nils up to any integer
	// key below MaxArrayIndex in one instruction: t[67108863] = 1 would
	// allocate 1 GiB between two budget checks. 2^18 keeps that fill
	// under 4 MiB; larger keys go to the hash part. Arrays built with
	// table.insert or by the host are not limited. This sandbox is the
	// only user of gopher-lua in Terrace.
	lua.MaxArrayIndex = 1 << 18
}

// installLibs trims the base library, replaces every allocating string
// function with a bounded one, and freezes the library tables.
func (v *vm) installLibs() {
	L := v.L
	G := L.Get(lua.GlobalsIndex).(*lua.LTable)
	for name := range forbiddenGlobals {
		G.RawSetString(name, lua.LNil)
	}
	G.RawSetString("_GOPHER_LUA_VERSION", lua.LNil)
	G.RawSetString("print", L.NewFunction(basePrint))
	G.RawSetString("unpack", L.NewFunction(baseUnpack))
	G.RawSetString(concatFunc, L.NewFunction(luaConcat))

	str := G.RawGetString("string").(*lua.LTable)
	for name, fn := range map[string]lua.LGFunction{
		"rep": strRep, "format": strFormat, "upper": strUpper, "lower": strLower,
		"reverse": strReverse, "byte": strByte, "find": strFind, "match": strMatch,
		"gmatch": strGmatch, "gfind": strGmatch, "gsub": strGsub,
	} {
		str.RawSetString(name, L.NewFunction(fn))
	}
	str.RawSetString("dump", lua.LNil)
	// gopher-lua makes the string table the metatable of every string,
	// with __index pointing to itself, so ("").__index would hand a policy
	// the library to change. Strings get their own metatable instead,
	// reading through a read-only proxy, with __metatable set so
	// getmetatable("") cannot reach it either.
	str.RawSetString("__index", lua.LNil)
	strProxy := v.readOnlyProxy(str, "string")
	smt := L.NewTable()
	smt.RawSetString("__index", strProxy)
	smt.RawSetString("__metatable", lua.LString("string"))
	L.SetMetatable(lua.LString(""), smt)
	G.RawSetString("string", strProxy)

	tab := G.RawGetString("table").(*lua.LTable)
	tab.RawSetString("concat", L.NewFunction(tableConcat))
	tab.RawSetString("sort", L.NewFunction(tableSort))
	G.RawSetString("table", v.readOnlyProxy(tab, "table"))

	m := G.RawGetString("math").(*lua.LTable)
	m.RawSetString("random", L.NewFunction(mathRandom))
	m.RawSetString("randomseed", L.NewFunction(mathRandomseed))
	// Lua's math.huge is HUGE_VAL (+inf); gopher-lua sets the largest
	// finite double, which would make "cost = math.huge" a finite cost.
	m.RawSetString("huge", lua.LNumber(math.Inf(1)))
	G.RawSetString("math", v.readOnlyProxy(m, "math"))

	G.RawSetString("terrace", v.readOnlyProxy(v.hostLib(), "terrace"))
}

// luaConcat implements `..` (the compiler rewrites every concatenation
// into a call of it): strings and numbers only, the result bounded.
func luaConcat(L *lua.LState) int {
	m := meterOf(L)
	n := L.GetTop()
	total := 0
	for i := 1; i <= n; i++ {
		switch x := L.Get(i).(type) {
		case lua.LString:
			total += len(x)
		case lua.LNumber:
			total += 24
		default:
			L.RaiseError("attempt to concatenate a %s value", x.Type())
		}
		if total > m.lim.MaxStringBytes {
			break
		}
	}
	m.chargeString(L, total)
	var b strings.Builder
	b.Grow(total)
	for i := 1; i <= n; i++ {
		switch x := L.Get(i).(type) {
		case lua.LString:
			b.WriteString(string(x))
		case lua.LNumber:
			b.WriteString(formatNumber(float64(x)))
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// basePrint writes its arguments, tab-separated, into the session log
// (MaxLogBytes) one at a time and stops at the cap: print(unpack(t)) of
// thousands of references to one large string must not join them first.
// Every argument is still converted (a __tostring error is still
// raised). What the log keeps is charged to the string budget.
func basePrint(L *lua.LState) int {
	m := meterOf(L)
	n := L.GetTop()
	var line strings.Builder
	cut := false
	for i := 1; i <= n; i++ {
		s := L.ToStringMeta(L.Get(i)).String()
		if cut {
			continue
		}
		room := m.logRoom() - line.Len()
		if i > 1 {
			if room < 1 {
				cut = true
				continue
			}
			line.WriteByte('\t')
			room--
		}
		if len(s) > room {
			line.WriteString(s[:max(room, 0)])
			cut = true
			continue
		}
		line.WriteString(s)
	}
	if written := m.logLine(line.String(), cut); written > 0 {
		m.chargeString(L, written)
	}
	return 0
}

func baseUnpack(L *lua.LState) int {
	t := L.CheckTable(1)
	i := L.OptInt(2, 1)
	j := L.OptInt(3, t.Len())
	if i > j {
		return 0
	}
	if j-i >= maxMultiResults {
		L.RaiseError("too many results to unpack (%d, limit %d)", j-i+1, maxMultiResults)
	}
	for k := i; k <= j; k++ {
		L.Push(t.RawGetInt(k))
	}
	return j - i + 1
}

func strRep(L *lua.LState) int {
	m := meterOf(L)
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > m.lim.MaxStringBytes/len(s) {
		L.RaiseError("string.rep: %d copies of %d bytes exceed the policy limit of %d bytes", n, len(s), m.lim.MaxStringBytes)
	}
	m.chargeString(L, n*len(s))
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

func strUpper(L *lua.LState) int {
	s := L.CheckString(1)
	meterOf(L).chargeString(L, len(s))
	L.Push(lua.LString(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r - 32
		}
		return r
	}, s)))
	return 1
}

func strLower(L *lua.LState) int {
	s := L.CheckString(1)
	meterOf(L).chargeString(L, len(s))
	L.Push(lua.LString(strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return r
	}, s)))
	return 1
}

func strReverse(L *lua.LState) int {
	s := L.CheckString(1)
	meterOf(L).chargeString(L, len(s))
	b := make([]byte, len(s))
	for i := range b {
		b[i] = s[len(s)-1-i]
	}
	L.Push(lua.LString(b))
	return 1
}

// posrelat is Lua 5.1's: negative positions count from the end.
func posrelat(pos, n int) int {
	if pos < 0 {
		pos += n + 1
	}
	return pos
}

func strByte(L *lua.LState) int {
	s := L.CheckString(1)
	i := posrelat(L.OptInt(2, 1), len(s))
	j := posrelat(L.OptInt(3, i), len(s))
	if i <= 0 {
		i = 1
	}
	if j > len(s) {
		j = len(s)
	}
	if i > j {
		return 0
	}
	if j-i >= maxMultiResults {
		L.RaiseError("string slice too long (%d bytes, limit %d)", j-i+1, maxMultiResults)
	}
	for k := i; k <= j; k++ {
		L.Push(lua.LNumber(s[k-1]))
	}
	return j - i + 1
}

// withMatcher runs fn with a matchState over the session's pattern budget
// and turns matcher failures into Lua errors. A budget overrun expires the
// session.
func withMatcher(L *lua.LState, src, pat string, fn func(ms *matchState)) {
	m := meterOf(L)
	ms := &matchState{src: src, pat: pat, steps: &m.patSteps, budget: m.lim.PatternSteps}
	func() {
		defer func() {
			if r := recover(); r != nil {
				pe, ok := r.(*patternError)
				if !ok {
					panic(r) // a Lua error from a callback: let it propagate
				}
				if m.patSteps > m.lim.PatternSteps && m.err == nil {
					m.err = fmt.Errorf("%s: over the budget of %d matcher steps", msgPattern, m.lim.PatternSteps)
				}
				L.RaiseError("%s", pe.msg)
			}
		}()
		fn(ms)
	}()
}

func (ms *matchState) reset() { ms.level, ms.depth = 0, 0 }

func pushCapture(L *lua.LState, c captureValue) {
	if c.isPos {
		L.Push(lua.LNumber(c.pos))
	} else {
		L.Push(lua.LString(c.s))
	}
}

// strFindAux is Lua 5.1's str_find_aux: find returns positions and
// captures, match returns captures.
func strFindAux(L *lua.LState, find bool) int {
	s := L.CheckString(1)
	p := L.CheckString(2)
	init := posrelat(L.OptInt(3, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > len(s) {
		init = len(s)
	}
	if find && (L.ToBool(4) || !hasSpecials(p)) {
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	anchor := strings.HasPrefix(p, "^")
	if anchor {
		p = p[1:]
	}
	nret := -1
	withMatcher(L, s, p, func(ms *matchState) {
		for s1 := init; ; s1++ {
			ms.reset()
			if e := ms.match(s1, 0); e != -1 {
				if find {
					L.Push(lua.LNumber(s1 + 1))
					L.Push(lua.LNumber(e))
					caps := ms.captures(s1, e, false)
					for _, c := range caps {
						pushCapture(L, c)
					}
					nret = 2 + len(caps)
				} else {
					caps := ms.captures(s1, e, true)
					for _, c := range caps {
						pushCapture(L, c)
					}
					nret = len(caps)
				}
				return
			}
			if s1 >= len(s) || anchor {
				return
			}
		}
	})
	if nret < 0 {
		L.Push(lua.LNil)
		return 1
	}
	return nret
}

func strFind(L *lua.LState) int  { return strFindAux(L, true) }
func strMatch(L *lua.LState) int { return strFindAux(L, false) }

// strGmatch returns an iterator that finds the next match lazily (gopher-
// lua's computes every match up front).
func strGmatch(L *lua.LState) int {
	s := L.CheckString(1)
	p := L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		n := 0
		withMatcher(L, s, p, func(ms *matchState) {
			for src := pos; src <= len(s); src++ {
				ms.reset()
				if e := ms.match(src, 0); e != -1 {
					pos = e
					if e == src {
						pos++ // empty match: advance at least one position
					}
					caps := ms.captures(src, e, true)
					for _, c := range caps {
						pushCapture(L, c)
					}
					n = len(caps)
					return
				}
			}
			pos = len(s) + 1
		})
		return n
	}))
	return 1
}

// strGsub is Lua 5.1's str_gsub with the output bounded as it grows.
func strGsub(L *lua.LState) int {
	m := meterOf(L)
	src := L.CheckString(1)
	p := L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	maxN := L.OptInt(4, len(src)+1)
	anchor := strings.HasPrefix(p, "^")
	if anchor {
		p = p[1:]
	}
	var b strings.Builder
	grow := func(n int) {
		if b.Len()+n > m.lim.MaxStringBytes {
			L.RaiseError("string.gsub: result exceeds the policy limit of %d bytes", m.lim.MaxStringBytes)
		}
	}
	count := 0
	withMatcher(L, src, p, func(ms *matchState) {
		s := 0
		for count < maxN {
			ms.reset()
			e := ms.match(s, 0)
			if e != -1 {
				count++
				addValue(L, ms, &b, grow, repl, s, e)
			}
			switch {
			case e != -1 && e > s:
				s = e
			case s < len(src):
				grow(1)
				b.WriteByte(src[s])
				s++
			default:
				s = len(src) + 1
			}
			if s > len(src) || anchor {
				break
			}
		}
		if s <= len(src) {
			grow(len(src) - s)
			b.WriteString(src[s:])
		}
	})
	m.chargeString(L, b.Len())
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(count))
	return 2
}

func addValue(L *lua.LState, ms *matchState, b *strings.Builder, grow func(int), repl lua.LValue, s, e int) {
	var val lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news := lua.LVAsString(r)
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != patternEscape {
				grow(1)
				b.WriteByte(c)
				continue
			}
			i++
			if i >= len(news) {
				break
			}
			c = news[i]
			switch {
			case !isdigit(c):
				grow(1)
				b.WriteByte(c)
			case c == '0':
				grow(e - s)
				b.WriteString(ms.src[s:e])
			default:
				cv := ms.getCapture(int(c-'1'), s, e)
				str := cv.s
				if cv.isPos {
					str = strconv.Itoa(cv.pos)
				}
				grow(len(str))
				b.WriteString(str)
			}
		}
		return
	case *lua.LFunction:
		caps := ms.captures(s, e, true)
		L.Push(r)
		for _, c := range caps {
			pushCapture(L, c)
		}
		L.Call(len(caps), 1)
		val = L.Get(-1)
		L.Pop(1)
	case *lua.LTable:
		c := ms.getCapture(0, s, e)
		var key lua.LValue = lua.LString(c.s)
		if c.isPos {
			key = lua.LNumber(c.pos)
		}
		val = L.GetTable(r, key)
	}
	if !lua.LVAsBool(val) {
		grow(e - s)
		b.WriteString(ms.src[s:e]) // keep the original text
		return
	}
	if !lua.LVCanConvToString(val) {
		L.RaiseError("invalid replacement value (a %s)", val.Type())
	}
	str := lua.LVAsString(val)
	grow(len(str))
	b.WriteString(str)
}

// tableConcat is table.concat with the result bounded before it is built.
func tableConcat(L *lua.LState) int {
	m := meterOf(L)
	t := L.CheckTable(1)
	sep := L.OptString(2, "")
	i := L.OptInt(3, 1)
	j := L.OptInt(4, t.Len())
	if i > j {
		L.Push(lua.LString(""))
		return 1
	}
	total := 0
	for k := i; k <= j; k++ {
		v := t.RawGetInt(k)
		if !lua.LVCanConvToString(v) {
			L.RaiseError("invalid value (at index %d) in table for 'concat'", k)
		}
		total += len(lua.LVAsString(v))
		if k < j {
			total += len(sep)
		}
		if total > m.lim.MaxStringBytes {
			L.RaiseError("table.concat: result exceeds the policy limit of %d bytes", m.lim.MaxStringBytes)
		}
	}
	m.chargeString(L, total)
	var b strings.Builder
	b.Grow(total)
	for k := i; k <= j; k++ {
		b.WriteString(lua.LVAsString(t.RawGetInt(k)))
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// mathRandom is Lua 5.1's math.random over the session's seeded generator:
// the same seed and inputs give the same decision.
func mathRandom(L *lua.LState) int {
	r := meterOf(L).rng
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r.Float64()))
	case 1:
		u := L.CheckInt64(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(1 + r.Int64N(u)))
	default:
		lo, up := L.CheckInt64(1), L.CheckInt64(2)
		if lo > up {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(lo + r.Int64N(up-lo+1)))
	}
	return 1
}

func mathRandomseed(L *lua.LState) int {
	m := meterOf(L)
	m.pcg.Seed(uint64(toInt64(float64(L.CheckNumber(1)))), rngStream)
	return 0
}

// strFormat is Lua 5.1's string.format: flags "-+ #0", width and
// precision of at most two digits each, conversions c d i o u x X e E f g
// G q s; the result is bounded.
func strFormat(L *lua.LState) int {
	m := meterOf(L)
	f := L.CheckString(1)
	arg := 1
	var b strings.Builder
	check := func() {
		if b.Len() > m.lim.MaxStringBytes {
			L.RaiseError("string.format: result exceeds the policy limit of %d bytes", m.lim.MaxStringBytes)
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(f) {
			L.RaiseError("invalid option '%%' to 'format' (ends with '%%')")
		}
		if f[i] == '%' {
			b.WriteByte('%')
			continue
		}
		arg++
		start := i
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		if i-start >= 6 {
			L.RaiseError("invalid format (repeated flags)")
		}
		flags := f[start:i]
		wstart := i
		for k := 0; k < 2 && i < len(f) && isdigit(f[i]); k++ {
			i++
		}
		width := f[wstart:i]
		prec, hasPrec := "", false
		if i < len(f) && f[i] == '.' {
			hasPrec = true
			i++
			pstart := i
			for k := 0; k < 2 && i < len(f) && isdigit(f[i]); k++ {
				i++
			}
			prec = f[pstart:i]
		}
		if i < len(f) && isdigit(f[i]) {
			L.RaiseError("invalid format (width or precision too long)")
		}
		if i >= len(f) {
			L.RaiseError("invalid conversion '%%%s' to 'format'", f[start:])
		}
		spec := "%" + flags + width
		if hasPrec {
			spec += "." + prec
		}
		conv := f[i]
		switch conv {
		case 'c':
			n := L.CheckNumber(arg)
			fmt.Fprintf(&b, "%"+flags+width+"s", string([]byte{byte(int64(n))}))
		case 'd', 'i':
			fmt.Fprintf(&b, spec+"d", toInt64(float64(L.CheckNumber(arg))))
		case 'o', 'u', 'x', 'X':
			v := uint64(toInt64(float64(L.CheckNumber(arg))))
			verb := string(conv)
			if conv == 'u' {
				verb = "d"
			}
			fmt.Fprintf(&b, spec+verb, v)
		case 'e', 'E', 'f', 'g', 'G':
			x := float64(L.CheckNumber(arg))
			switch {
			case math.IsInf(x, 0) || math.IsNaN(x):
				s := "inf"
				if math.IsNaN(x) {
					s = "nan"
				} else if x < 0 {
					s = "-inf"
				}
				fmt.Fprintf(&b, "%"+strings.Trim(flags, "0#")+width+"s", s)
			default:
				if (conv == 'g' || conv == 'G') && !hasPrec {
					spec += ".6" // C's default; Go's %g prints all digits
				}
				fmt.Fprintf(&b, spec+string(conv), x)
			}
		case 'q':
			s := L.CheckString(arg)
			b.WriteByte('"')
			for k := 0; k < len(s); k++ {
				switch s[k] {
				case '"', '\\':
					b.WriteByte('\\')
					b.WriteByte(s[k])
				case '\n':
					b.WriteString("\\\n")
				case '\r':
					b.WriteString("\\r")
				case 0:
					b.WriteString("\\000")
				default:
					b.WriteByte(s[k])
				}
			}
			b.WriteByte('"')
		case 's':
			s := L.CheckString(arg)
			if !hasPrec && len(s) >= 100 {
				b.WriteString(s)
			} else {
				fmt.Fprintf(&b, spec+"s", s)
			}
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
		check()
	}
	check()
	m.chargeString(L, b.Len())
	L.Push(lua.LString(b.String()))
	return 1
}

// toInt64 converts like C's cast, saturating instead of being undefined.
func toInt64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
