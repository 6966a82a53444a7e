package sandbox

import (
	lua "github.com/yuin/gopher-lua"
)

// sortBytesPerStep prices string comparisons in table.sort: one
// instruction per this many bytes of the shorter string (Go compares
// strings at several bytes per nanosecond; a VM instruction takes 10 to
// 30 ns), on top of one instruction per comparison.
const sortBytesPerStep = 64

// tableSort is Lua 5.1's table.sort — the same quicksort over the same
// raw reads and writes, so the same order and the same "invalid order
// function for sorting" errors — with its work metered. gopher-lua's sort
// is one VM instruction, where neither the instruction budget nor the
// deadline applies: without a comparator, sorting long strings ran for
// hours. Here every comparison is charged to the session (one
// instruction, plus one per sortBytesPerStep bytes compared), before it
// is made, and the clock is checked as often as the VM checks it; a
// comparator's own instructions are counted by the VM as usual.
func tableSort(L *lua.LState) int {
	t := L.CheckTable(1)
	s := &sorter{L: L, m: meterOf(L), t: t}
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		s.fn = L.CheckFunction(2)
	}
	s.auxsort(1, t.Len())
	return 0
}

type sorter struct {
	L  *lua.LState
	m  *meter
	t  *lua.LTable
	fn *lua.LFunction
}

// less is Lua's sort_comp: the comparator, or a < b.
func (s *sorter) less(a, b lua.LValue) bool {
	L := s.L
	if s.fn != nil {
		s.m.chargeSteps(L, 1)
		L.Push(s.fn)
		L.Push(a)
		L.Push(b)
		L.Call(2, 1)
		r := L.Get(-1)
		L.Pop(1)
		return lua.LVAsBool(r)
	}
	if x, ok := a.(lua.LString); ok {
		if y, ok := b.(lua.LString); ok {
			s.m.chargeSteps(L, 1+int64(min(len(x), len(y))/sortBytesPerStep))
			return x < y // bytewise, as Lua's (and gopher-lua's) strCmp
		}
	}
	s.m.chargeSteps(L, 1)
	return L.LessThan(a, b) // numbers; otherwise __lt or "attempt to compare"
}

// auxsort is ltablib.c's auxsort (Lua 5.1) on a[l..u].
func (s *sorter) auxsort(l, u int) {
	t := s.t
	for l < u { // a loop for the larger part, recursion for the smaller
		// Sort a[l], a[(l+u)/2] and a[u].
		al, au := t.RawGetInt(l), t.RawGetInt(u)
		if s.less(au, al) {
			t.RawSetInt(l, au)
			t.RawSetInt(u, al)
		}
		if u-l == 1 {
			break // two elements
		}
		i := (l + u) / 2
		ai, al := t.RawGetInt(i), t.RawGetInt(l)
		if s.less(ai, al) {
			t.RawSetInt(i, al)
			t.RawSetInt(l, ai)
		} else {
			au := t.RawGetInt(u)
			if s.less(au, ai) {
				t.RawSetInt(i, au)
				t.RawSetInt(u, ai)
			}
		}
		if u-l == 2 {
			break // three elements
		}
		p := t.RawGetInt(i) // the pivot, moved to a[u-1]
		t.RawSetInt(i, t.RawGetInt(u-1))
		t.RawSetInt(u-1, p)
		// a[l] <= P == a[u-1] <= a[u]: partition a[l+1..u-2].
		j := u - 1
		i = l
		for { // invariant: a[l..i] <= P <= a[j..u]
			var ai, aj lua.LValue
			for { // repeat ++i until a[i] >= P
				i++
				ai = t.RawGetInt(i)
				if !s.less(ai, p) {
					break
				}
				if i > u {
					s.L.RaiseError("invalid order function for sorting")
				}
			}
			for { // repeat --j until a[j] <= P
				j--
				aj = t.RawGetInt(j)
				if !s.less(p, aj) {
					break
				}
				if j < l {
					s.L.RaiseError("invalid order function for sorting")
				}
			}
			if j < i {
				break
			}
			t.RawSetInt(i, aj)
			t.RawSetInt(j, ai)
		}
		// Swap the pivot (a[u-1]) with a[i].
		x, y := t.RawGetInt(u-1), t.RawGetInt(i)
		t.RawSetInt(u-1, y)
		t.RawSetInt(i, x)
		// a[l..i-1] <= a[i] == P <= a[i+1..u]; recurse into the smaller
		// part [j..i], loop on the larger [l..u].
		if i-l < u-i {
			j, i, l = l, i-1, i+1
		} else {
			j, i, u = i+1, u, i-1
		}
		s.auxsort(j, i)
	}
}
