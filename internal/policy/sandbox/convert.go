package sandbox

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// Func is a host function a policy may call. It receives its arguments
// converted to Go (see Session.Call for the mapping) and returns results
// or an error, which becomes a Lua error at the call site. Host functions
// must be pure with respect to the decision (no I/O that affects other
// callers) unless the hook documents otherwise (object-class methods).
type Func func(args []any) ([]any, error)

// Method is a Func called with colon syntax (obj:method(...)); the
// receiver is dropped from args.
type Method func(args []any) ([]any, error)

// Ref is a value converted once and passed to many calls of a session
// (a cluster view shared by every per-device call). It is valid only in
// the session that made it.
type Ref struct{ v lua.LValue }

// Ref converts x (read-only) for reuse across calls in this session.
func (s *Session) Ref(x any) Ref { return Ref{s.v.toLua(x, true)} }

// Field is the value under key in a referenced table (nil otherwise),
// shared, not copied: hooks that call once per element pass the elements
// of one converted list instead of converting each again.
func (r Ref) Field(key string) Ref {
	if t, ok := r.v.(*lua.LTable); ok {
		return Ref{t.RawGetString(key)}
	}
	return Ref{lua.LNil}
}

// Index is element i (1-based) of a referenced list (nil otherwise).
func (r Ref) Index(i int) Ref {
	if t, ok := r.v.(*lua.LTable); ok {
		return Ref{t.RawGetInt(i)}
	}
	return Ref{lua.LNil}
}

// Fields is a table with named fields in a fixed order: the cheap form of
// map[string]any for views built many times per decision (no map, no key
// sort, no boxing of the container).
type Fields []Field

// Field is one named value of Fields.
type Field struct {
	Key string
	Val any
}

// Record is a read-only host object a policy reads field by field (a
// device in a fitness call): no table is built, only the fields the policy
// reads are converted, and it cannot be changed at all. Get returns a
// value of an accepted argument type, or false for an unknown field (nil
// in Lua). pairs() and # do not apply; the fields are documented.
type Record interface {
	Get(field string) (any, bool)
}

// Go values accepted as arguments:
//
//	nil, bool, string, []byte (as a string), int, int64, uint64, float64,
//	[]any, []string, []float64, map[string]any, map[string]float64,
//	map[string]string, Fields, Record, Func, Method, Ref
//
// Tables built from slices and maps are fresh copies with a read-only
// metatable: adding keys raises an error, so a policy cannot mistake
// writing into its input for a decision.
func (v *vm) toLua(x any, ro bool) lua.LValue {
	L := v.L
	switch xv := x.(type) {
	case nil:
		return lua.LNil
	case Ref:
		return xv.v
	case bool:
		return lua.LBool(xv)
	case string:
		return lua.LString(xv)
	case []byte:
		return lua.LString(xv)
	case int:
		return lua.LNumber(xv)
	case int64:
		return lua.LNumber(xv)
	case uint64:
		return lua.LNumber(xv)
	case float64:
		return lua.LNumber(xv)
	case []any:
		t := L.CreateTable(len(xv), 0)
		for _, e := range xv {
			t.Append(v.toLua(e, ro))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case []string:
		t := L.CreateTable(len(xv), 0)
		for _, e := range xv {
			t.Append(lua.LString(e))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case []float64:
		t := L.CreateTable(len(xv), 0)
		for _, e := range xv {
			t.Append(lua.LNumber(e))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(xv))
		for _, k := range sortedKeys(xv) {
			t.RawSetString(k, v.toLua(xv[k], ro))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case Fields:
		t := L.CreateTable(0, len(xv))
		for _, f := range xv {
			t.RawSetString(f.Key, v.toLua(f.Val, ro))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case map[string]float64:
		t := L.CreateTable(0, len(xv))
		for _, k := range sortedKeys(xv) {
			t.RawSetString(k, lua.LNumber(xv[k]))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case map[string]string:
		t := L.CreateTable(0, len(xv))
		for _, k := range sortedKeys(xv) {
			t.RawSetString(k, lua.LString(xv[k]))
		}
		if ro {
			L.SetMetatable(t, v.ro)
		}
		return t
	case Record:
		ud := L.NewUserData()
		ud.Value = xv
		L.SetMetatable(ud, v.recordMT)
		return ud
	case Func:
		return L.NewFunction(v.hostFunc(xv, 0))
	case Method:
		return L.NewFunction(v.hostFunc(Func(xv), 1))
	}
	panic(fmt.Sprintf("sandbox: cannot pass %T to a policy", x))
}

// sortedKeys keeps table construction order deterministic.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (v *vm) hostFunc(f Func, skip int) lua.LGFunction {
	return func(L *lua.LState) int {
		n := L.GetTop()
		args := make([]any, 0, max(n-skip, 0))
		for i := 1 + skip; i <= n; i++ {
			a, err := v.fromLua(L.Get(i), fmt.Sprintf("argument %d", i-skip))
			if err != nil {
				L.RaiseError("%s", err.(*Error).Msg)
			}
			args = append(args, a)
		}
		res, err := f(args)
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		for _, r := range res {
			L.Push(v.toLua(r, false))
		}
		return len(res)
	}
}

// fromLua converts a Lua value to Go: nil, bool, float64, string,
// []any (a table whose keys are exactly 1..n) or map[string]any (other
// tables; number keys are printed). Functions, userdata and tables that
// are too large, too deep or cyclic are errors of KindType.
func (v *vm) fromLua(val lua.LValue, what string) (any, error) {
	budget := v.p.limits.MaxResultItems
	return v.fromLuaDepth(val, what, 0, &budget)
}

func (vm_ *vm) fromLuaDepth(v lua.LValue, what string, depth int, budget *int) (any, error) {
	typeErr := func(format string, args ...any) (any, error) {
		return nil, &Error{Kind: KindType, Policy: vm_.p.name, Msg: what + ": " + fmt.Sprintf(format, args...)}
	}
	*budget--
	if *budget < 0 {
		return typeErr("more than %d values", vm_.p.limits.MaxResultItems)
	}
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(x), nil
	case lua.LNumber:
		return float64(x), nil
	case lua.LString:
		return string(x), nil
	case *lua.LTable:
		if depth >= vm_.p.limits.MaxResultDepth {
			return typeErr("tables nested deeper than %d (or cyclic)", vm_.p.limits.MaxResultDepth)
		}
		n := x.Len()
		count := 0
		x.ForEach(func(_, _ lua.LValue) { count++ })
		if n > 0 && count == n {
			out := make([]any, n)
			for i := 1; i <= n; i++ {
				e, err := vm_.fromLuaDepth(x.RawGetInt(i), what, depth+1, budget)
				if err != nil {
					return nil, err
				}
				out[i-1] = e
			}
			return out, nil
		}
		out := make(map[string]any, count)
		var err error
		x.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			var key string
			switch kk := k.(type) {
			case lua.LString:
				key = string(kk)
			case lua.LNumber:
				key = formatNumber(float64(kk))
			default:
				_, err = typeErr("table key of type %s", k.Type())
				return
			}
			var e any
			if e, err = vm_.fromLuaDepth(val, what, depth+1, budget); err == nil {
				out[key] = e
			}
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return typeErr("a %s cannot leave the sandbox", v.Type())
}

// formatNumber prints a number the way Lua 5.1 does (%.14g).
func formatNumber(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}
