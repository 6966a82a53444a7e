package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// vm is one Lua state with a program loaded and its globals frozen.
type vm struct {
	L *lua.LState
	p *Program
	// ro is the metatable of every table built from host data: new keys
	// raise an error and the metatable cannot be read or replaced.
	ro *lua.LTable
	// recordMT reads a Record's fields on demand and refuses writes.
	recordMT *lua.LTable
	// functions and values are the globals the program defined.
	functions []string
	values    []string
}

// The libraries a policy gets: base (trimmed), string (bounded), table
// (bounded concat) and math (deterministic random). Everything else —
// io, os, debug, package, coroutine, channel — is never opened.
var libs = []struct {
	name string
	open lua.LGFunction
}{
	{lua.BaseLibName, lua.OpenBase},
	{lua.TabLibName, lua.OpenTable},
	{lua.StringLibName, lua.OpenString},
	{lua.MathLibName, lua.OpenMath},
}

// newVM builds a state, loads the program under a fresh meter and freezes
// its globals.
func (p *Program) newVM(ctx context.Context, seed uint64) (v *vm, err error) {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       p.limits.CallStackFrames,
		RegistrySize:        initialRegistrySlots,
		RegistryMaxSize:     p.limits.RegistrySlots,
		MinimizeStackMemory: true,
	})
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Kind: KindRuntime, Policy: p.name, Msg: fmt.Sprintf("loading: %v", r)}
		}
		if err != nil {
			L.Close()
		}
	}()
	for _, lib := range libs {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	v = &vm{L: L, p: p}
	v.ro = L.NewTable()
	v.ro.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("the model is read-only (policies see copies; return your decision instead)")
		return 0
	}))
	v.ro.RawSetString("__metatable", lua.LString("read-only"))
	v.recordMT = L.NewTable()
	v.recordMT.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		rec, _ := L.CheckUserData(1).Value.(Record)
		if rec == nil {
			L.RaiseError("not a host record")
		}
		val, ok := rec.Get(L.CheckString(2))
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(v.toLua(val, true))
		return 1
	}))
	v.recordMT.RawSetString("__newindex", v.ro.RawGetString("__newindex"))
	v.recordMT.RawSetString("__metatable", lua.LString("read-only"))
	v.installLibs()

	G := L.Get(lua.GlobalsIndex).(*lua.LTable)
	builtin := map[string]bool{}
	G.ForEach(func(k, _ lua.LValue) { builtin[k.String()] = true })

	m := newMeter(ctx, &p.limits, seed)
	L.SetContext(m)
	fn := L.NewFunctionFromProto(p.proto)
	L.Push(fn)
	perr := L.PCall(0, 0, nil)
	L.RemoveContext()
	if perr == nil && m.err != nil {
		perr = m.err
	}
	if perr != nil {
		return nil, v.convertErr(m, perr)
	}
	// Record what the program defined, then freeze: move every global into
	// a hidden table and leave the globals table empty with a metatable
	// that reads through and refuses writes. (Writes to existing keys of a
	// non-empty table would bypass __newindex; rawset is removed.)
	defs := L.NewTable()
	var keys []lua.LValue
	G.ForEach(func(k, val lua.LValue) {
		keys = append(keys, k)
		defs.RawSet(k, val)
		if ks, ok := k.(lua.LString); ok && !builtin[string(ks)] {
			if val.Type() == lua.LTFunction {
				v.functions = append(v.functions, string(ks))
			} else {
				v.values = append(v.values, string(ks))
			}
		}
	})
	for _, k := range keys {
		G.RawSet(k, lua.LNil)
	}
	sort.Strings(v.functions)
	sort.Strings(v.values)
	gmt := L.NewTable()
	gmt.RawSetString("__index", defs)
	gmt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("cannot set global %q: policy globals are read-only after loading (use local variables)", L.ToString(2))
		return 0
	}))
	gmt.RawSetString("__metatable", lua.LString("globals"))
	L.SetMetatable(G, gmt)
	return v, nil
}

// readOnlyProxy returns an empty table that reads through to t and
// refuses writes, for the library tables a policy shares across calls.
func (v *vm) readOnlyProxy(t *lua.LTable, name string) *lua.LTable {
	L := v.L
	proxy := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("the %s library is read-only", name)
		return 0
	}))
	mt.RawSetString("__metatable", lua.LString(name))
	L.SetMetatable(proxy, mt)
	return proxy
}

// convertErr turns a PCall error into an *Error, preferring the meter's
// reason when the session expired.
func (v *vm) convertErr(m *meter, err error) *Error {
	msg := err.Error()
	if ae, ok := err.(*lua.ApiError); ok && ae.Object != nil {
		msg = ae.Object.String()
	}
	e := errorFrom(v.p.name, msg, KindRuntime)
	if m != nil && m.err != nil {
		switch {
		case strings.Contains(m.err.Error(), msgDeadline):
			e.Kind = KindDeadline
			e.Starved = m.steps < m.lim.Instructions/4
		case strings.Contains(m.err.Error(), msgCanceled):
			e.Kind = KindCanceled
		default:
			e.Kind = KindBudget
		}
		e.Msg = m.err.Error()
	}
	return e
}

// RunOptions configure one session.
type RunOptions struct {
	// Seed seeds math.random; the same seed and inputs give the same
	// decision.
	Seed uint64
}

// Session is one hook invocation: any number of calls sharing one meter
// (deadline, instruction, string and pattern budgets). It is valid only
// inside Program.Run.
type Session struct {
	v *vm
	m *meter
}

// Run acquires a VM (pooled, or built and loaded now), runs fn with a
// session, and returns the VM to the pool if nothing went wrong. A VM that
// saw any error is discarded: its state is not trusted again.
func (p *Program) Run(ctx context.Context, opts RunOptions, fn func(s *Session) error) error {
	var v *vm
	select {
	case v = <-p.pool:
	default:
		var err error
		if v, err = p.newVM(ctx, opts.Seed); err != nil {
			return err
		}
	}
	s := &Session{v: v, m: newMeter(ctx, &p.limits, opts.Seed)}
	healthy := false
	defer func() {
		v.L.RemoveContext()
		if healthy && s.m.err == nil {
			select {
			case p.pool <- v:
				return
			default:
			}
		}
		v.L.Close()
	}()
	v.L.SetContext(s.m)
	if err := fn(s); err != nil {
		return err
	}
	healthy = true
	return nil
}

// Describe loads the program in a fresh VM and reports the globals it
// defines: functions (sorted) and other values (sorted). The VM then
// joins the pool.
func (p *Program) Describe(ctx context.Context) (functions, values []string, err error) {
	v, err := p.newVM(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	fns, vals := v.functions, v.values
	select { // the loaded VM serves the first calls
	case p.pool <- v:
	default:
		v.L.Close()
	}
	return fns, vals, nil
}

// Functions returns the global functions the program defines.
func (s *Session) Functions() []string { return s.v.functions }

// Has reports whether the program defines a global function name.
func (s *Session) Has(name string) bool {
	for _, f := range s.v.functions {
		if f == name {
			return true
		}
	}
	return false
}

// Elapsed is the wall time the session has used.
func (s *Session) Elapsed() time.Duration { return time.Since(s.m.startedAt) }

// Instructions is the number of VM instructions the session has run.
func (s *Session) Instructions() int64 { return s.m.steps }

// Log returns what print() wrote during the session.
func (s *Session) Log() string { return s.m.log.String() }

// Global returns a global value the program defined, converted to Go
// (nil if it is not defined).
func (s *Session) Global(name string) (any, error) {
	L := s.v.L
	val := L.GetGlobal(name)
	return s.v.fromLua(val, name)
}

// Call calls a global function with args converted to Lua (read-only
// copies) and returns its results converted to Go. Failures are *Error
// with the line of the failing Lua code.
func (s *Session) Call(name string, args ...any) (res []any, err error) {
	L := s.v.L
	if s.m.err != nil {
		return nil, s.v.convertErr(s.m, s.m.err)
	}
	fnv := L.GetGlobal(name)
	if fnv.Type() != lua.LTFunction {
		return nil, &Error{Kind: KindMissing, Policy: s.v.p.name, Msg: fmt.Sprintf("function %s is not defined", name)}
	}
	base := L.GetTop()
	defer func() {
		if r := recover(); r != nil {
			// Conversion of arguments can raise (registry full); the
			// PCall below recovers everything that happens inside Lua.
			L.SetTop(base)
			err = &Error{Kind: KindRuntime, Policy: s.v.p.name, Msg: fmt.Sprint(r)}
		}
	}()
	L.Push(fnv)
	for _, a := range args {
		L.Push(s.v.toLua(a, true))
	}
	perr := L.PCall(len(args), lua.MultRet, nil)
	if perr == nil && s.m.err != nil {
		// The budget ran out inside a pcall whose result was returned
		// without another instruction (a tail call): still a failure.
		perr = s.m.err
	}
	if perr != nil {
		L.SetTop(base)
		return nil, s.v.convertErr(s.m, perr)
	}
	n := L.GetTop() - base
	res = make([]any, n)
	for i := 0; i < n; i++ {
		if res[i], err = s.v.fromLua(L.Get(base+1+i), fmt.Sprintf("result %d of %s", i+1, name)); err != nil {
			L.SetTop(base)
			return nil, err
		}
	}
	L.SetTop(base)
	return res, nil
}
