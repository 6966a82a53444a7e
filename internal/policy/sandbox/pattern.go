package sandbox

import (
	"fmt"
)

// This file is a Go port of the pattern matcher of Lua 5.1's lstrlib.c
// (MIT licence, Copyright © 1994–2012 Lua.org, PUC-Rio), with one change:
// every step of the matcher is charged to a budget, so a pathological
// pattern such as ("a"):rep(1e5):find(".-.-.-b") fails with a clear error
// instead of running for hours inside one host call, where the VM's
// deadline cannot interrupt it. gopher-lua's own matcher has no such bound
// and builds every match of gmatch and gsub up front.

// Pattern limits from lstrlib.c.
const (
	maxCaptures     = 32
	maxMatchDepth   = 200 // MAXCCALLS: recursion depth of match()
	capUnfinished   = -1
	capPosition     = -2
	patternEscape   = '%'
	patternSpecials = "^$*+?.([%-"
)

// patternError aborts a match; the string library turns it into a Lua error.
type patternError struct{ msg string }

func (e *patternError) Error() string { return e.msg }

func perr(format string, args ...any) { panic(&patternError{fmt.Sprintf(format, args...)}) }

type capture struct {
	init int
	len  int // capUnfinished, capPosition or a length
}

// matchState is lstrlib's MatchState over Go strings (indices, not pointers).
type matchState struct {
	src   string
	pat   string
	level int
	depth int
	capt  [maxCaptures]capture
	// steps counts work; budget is the most allowed before the match fails.
	steps  *int64
	budget int64
}

func (ms *matchState) step(n int64) {
	*ms.steps += n
	if *ms.steps > ms.budget {
		perr("pattern too complex: over the budget of %d matcher steps (simplify the pattern or shorten the subject)", ms.budget)
	}
}

func (ms *matchState) checkCapture(l byte) int {
	i := int(l) - '1'
	if i < 0 || i >= ms.level || ms.capt[i].len == capUnfinished {
		perr("invalid capture index")
	}
	return i
}

func (ms *matchState) captureToClose() int {
	level := ms.level - 1
	for ; level >= 0; level-- {
		if ms.capt[level].len == capUnfinished {
			return level
		}
	}
	perr("invalid pattern capture")
	return 0
}

func (ms *matchState) classEnd(p int) int {
	pat := ms.pat
	c := pat[p]
	p++
	if c == patternEscape {
		if p >= len(pat) {
			perr("malformed pattern (ends with '%%')")
		}
		return p + 1
	}
	if c == '[' {
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for { // look for a ']'
			if p >= len(pat) {
				perr("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == patternEscape && p < len(pat) {
				p++ // skip escapes (e.g. '%]')
			}
			if p < len(pat) && pat[p] == ']' {
				return p + 1
			}
			if p >= len(pat) {
				perr("malformed pattern (missing ']')")
			}
		}
	}
	return p
}

// C-locale character classes, ASCII only.
func isalpha(c byte) bool  { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isdigit(c byte) bool  { return c >= '0' && c <= '9' }
func islower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isupper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isspace(c byte) bool  { return c == ' ' || (c >= '\t' && c <= '\r') }
func iscntrl(c byte) bool  { return c < 32 || c == 127 }
func isalnum(c byte) bool  { return isalpha(c) || isdigit(c) }
func isxdigit(c byte) bool { return isdigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
func ispunct(c byte) bool  { return c > 32 && c < 127 && !isalnum(c) }

func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isalpha(c)
	case 'c':
		res = iscntrl(c)
	case 'd':
		res = isdigit(c)
	case 'l':
		res = islower(c)
	case 'p':
		res = ispunct(c)
	case 's':
		res = isspace(c)
	case 'u':
		res = isupper(c)
	case 'w':
		res = isalnum(c)
	case 'x':
		res = isxdigit(c)
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if isupper(cl) {
		return !res
	}
	return res
}

// matchBracketClass: p is at '[', ec at the closing ']'.
func (ms *matchState) matchBracketClass(c byte, p, ec int) bool {
	pat := ms.pat
	sig := true
	if pat[p+1] == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		if pat[p] == patternEscape {
			p++
			if matchClass(c, pat[p]) {
				return sig
			}
		} else if p+2 < ec && pat[p+1] == '-' {
			if pat[p] <= c && c <= pat[p+2] {
				return sig
			}
			p += 2
		} else if pat[p] == c {
			return sig
		}
	}
	return !sig
}

func (ms *matchState) singleMatch(s, p, ep int) bool {
	if s >= len(ms.src) {
		return false
	}
	c := ms.src[s]
	switch ms.pat[p] {
	case '.':
		return true
	case patternEscape:
		return matchClass(c, ms.pat[p+1])
	case '[':
		return ms.matchBracketClass(c, p, ep-1)
	default:
		return ms.pat[p] == c
	}
}

func (ms *matchState) matchBalance(s, p int) int {
	if p+1 >= len(ms.pat) {
		perr("unbalanced pattern (missing arguments to '%%b')")
	}
	if s >= len(ms.src) || ms.src[s] != ms.pat[p] {
		return -1
	}
	b, e := ms.pat[p], ms.pat[p+1]
	cont := 1
	for s++; s < len(ms.src); s++ {
		ms.step(1)
		switch ms.src[s] {
		case e:
			cont--
			if cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (ms *matchState) maxExpand(s, p, ep int) int {
	i := 0
	for ms.singleMatch(s+i, p, ep) {
		i++
	}
	ms.step(int64(i) + 1)
	// Try with the maximum repetitions, then fewer.
	for i >= 0 {
		if res := ms.match(s+i, ep+1); res != -1 {
			return res
		}
		i--
	}
	return -1
}

func (ms *matchState) minExpand(s, p, ep int) int {
	for {
		ms.step(1)
		if res := ms.match(s, ep+1); res != -1 {
			return res
		}
		if ms.singleMatch(s, p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (ms *matchState) startCapture(s, p, what int) int {
	if ms.level >= maxCaptures {
		perr("too many captures (limit %d)", maxCaptures)
	}
	ms.capt[ms.level] = capture{init: s, len: what}
	ms.level++
	res := ms.match(s, p)
	if res == -1 {
		ms.level-- // undo capture
	}
	return res
}

func (ms *matchState) endCapture(s, p int) int {
	l := ms.captureToClose()
	ms.capt[l].len = s - ms.capt[l].init
	res := ms.match(s, p)
	if res == -1 {
		ms.capt[l].len = capUnfinished
	}
	return res
}

func (ms *matchState) matchCapture(s int, l byte) int {
	i := ms.checkCapture(l)
	c := ms.capt[i]
	if len(ms.src)-s >= c.len && ms.src[c.init:c.init+c.len] == ms.src[s:s+c.len] {
		ms.step(int64(c.len) + 1)
		return s + c.len
	}
	return -1
}

// match returns the end of the match of pat[p:] at src[s:], or -1.
func (ms *matchState) match(s, p int) int {
	ms.depth++
	if ms.depth > maxMatchDepth {
		perr("pattern nests deeper than %d levels of repetitions and captures", maxMatchDepth)
	}
	defer func() { ms.depth-- }()
	pat := ms.pat
	for {
		ms.step(1)
		if p >= len(pat) {
			return s // end of pattern
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case patternEscape:
			if p+1 < len(pat) {
				switch pat[p+1] {
				case 'b':
					s = ms.matchBalance(s, p+2)
					if s == -1 {
						return -1
					}
					p += 4
					continue
				case 'f':
					p += 2
					if p >= len(pat) || pat[p] != '[' {
						perr("missing '[' after '%%f' in pattern")
					}
					ep := ms.classEnd(p)
					var prev byte
					if s > 0 {
						prev = ms.src[s-1]
					}
					var cur byte
					if s < len(ms.src) {
						cur = ms.src[s]
					}
					if ms.matchBracketClass(prev, p, ep-1) || !ms.matchBracketClass(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				default:
					if isdigit(pat[p+1]) {
						s = ms.matchCapture(s, pat[p+1])
						if s == -1 {
							return -1
						}
						p += 2
						continue
					}
				}
			}
		case '$':
			if p+1 == len(pat) {
				if s == len(ms.src) {
					return s
				}
				return -1
			}
		}
		// default: a single character class, maybe with a repetition
		ep := ms.classEnd(p)
		m := ms.singleMatch(s, p, ep)
		if ep < len(pat) {
			switch pat[ep] {
			case '?':
				if m {
					if res := ms.match(s+1, ep+1); res != -1 {
						return res
					}
				}
				p = ep + 1
				continue
			case '*':
				return ms.maxExpand(s, p, ep)
			case '+':
				if m {
					return ms.maxExpand(s+1, p, ep)
				}
				return -1
			case '-':
				return ms.minExpand(s, p, ep)
			}
		}
		if !m {
			return -1
		}
		s++
		p = ep
	}
}

// captureValue is one capture: a substring, or a position (1-based) when
// isPos is set.
type captureValue struct {
	s     string
	pos   int
	isPos bool
}

// getCapture returns capture i; s..e is the whole match, used when the
// pattern has no captures and i is 0.
func (ms *matchState) getCapture(i, s, e int) captureValue {
	if i >= ms.level {
		if i == 0 {
			return captureValue{s: ms.src[s:e]}
		}
		perr("invalid capture index")
	}
	c := ms.capt[i]
	if c.len == capUnfinished {
		perr("unfinished capture")
	}
	if c.len == capPosition {
		return captureValue{pos: c.init + 1, isPos: true}
	}
	return captureValue{s: ms.src[c.init : c.init+c.len]}
}

// captures returns every capture of a match (the whole match if none).
func (ms *matchState) captures(s, e int, wholeIfNone bool) []captureValue {
	n := ms.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	out := make([]captureValue, n)
	for i := range out {
		out[i] = ms.getCapture(i, s, e)
	}
	return out
}

// hasSpecials reports whether a pattern needs the matcher (else a plain
// substring search does).
func hasSpecials(p string) bool {
	for i := 0; i < len(p); i++ {
		for j := 0; j < len(patternSpecials); j++ {
			if p[i] == patternSpecials[j] {
				return true
			}
		}
	}
	return false
}
