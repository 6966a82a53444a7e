package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	lua "github.com/yuin/gopher-lua"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hostLib builds the `terrace` table: pure helpers a policy cannot write
// efficiently in Lua 5.1 (no bit operations), each bounded like the
// string library.
//
//	terrace.sha256(s)       hex SHA-256 of s
//	terrace.crc32c(s)       CRC-32C of s as a number
//	terrace.hex(s)          hex encoding of s
//	terrace.json_encode(v)  JSON text of a table, string, number, boolean or nil
//	terrace.json_decode(s)  the value of JSON text (objects and arrays become tables)
func (v *vm) hostLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	t.RawSetString("sha256", L.NewFunction(func(L *lua.LState) int {
		s := L.CheckString(1)
		meterOf(L).chargeString(L, 64)
		sum := sha256.Sum256([]byte(s))
		L.Push(lua.LString(hex.EncodeToString(sum[:])))
		return 1
	}))
	t.RawSetString("crc32c", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(crc32.Checksum([]byte(L.CheckString(1)), castagnoli)))
		return 1
	}))
	t.RawSetString("hex", L.NewFunction(func(L *lua.LState) int {
		s := L.CheckString(1)
		meterOf(L).chargeString(L, 2*len(s))
		L.Push(lua.LString(hex.EncodeToString([]byte(s))))
		return 1
	}))
	t.RawSetString("json_encode", L.NewFunction(func(L *lua.LState) int {
		x, err := v.fromLua(L.Get(1), "json_encode")
		if err != nil {
			L.RaiseError("%s", err.(*Error).Msg)
		}
		if err := finite(x); err != nil {
			L.RaiseError("json_encode: %v", err)
		}
		// Measure before marshalling: a table may hold one large string
		// many times, and json.Marshal would build the whole text first.
		m := meterOf(L)
		n, err := JSONSize(x, m.lim.MaxStringBytes)
		if errors.Is(err, ErrJSONTooLarge) {
			L.RaiseError("json_encode: result exceeds the policy limit of %d bytes", m.lim.MaxStringBytes)
		} else if err != nil {
			L.RaiseError("json_encode: %v", err)
		}
		m.chargeString(L, n)
		b, err := json.Marshal(x)
		if err != nil {
			L.RaiseError("json_encode: %v", err)
		}
		L.Push(lua.LString(b))
		return 1
	}))
	t.RawSetString("json_decode", L.NewFunction(func(L *lua.LState) int {
		s := L.CheckString(1)
		var x any
		if err := json.Unmarshal([]byte(s), &x); err != nil {
			L.RaiseError("json_decode: %v", err)
		}
		meterOf(L).chargeString(L, len(s)) // the tables cost about the text
		if err := v.checkSize(x, 0, new(int)); err != nil {
			L.RaiseError("json_decode: %v", err)
		}
		L.Push(v.toLua(x, false))
		return 1
	}))
	return t
}

// finite rejects NaN and infinities, which JSON cannot carry.
func finite(x any) error {
	switch v := x.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%v cannot be encoded", v)
		}
	case []any:
		for _, e := range v {
			if err := finite(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range v {
			if err := finite(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSize bounds decoded JSON like results leaving the sandbox.
func (v *vm) checkSize(x any, depth int, n *int) error {
	*n++
	if *n > v.p.limits.MaxResultItems {
		return fmt.Errorf("more than %d values", v.p.limits.MaxResultItems)
	}
	if depth > v.p.limits.MaxResultDepth {
		return fmt.Errorf("nested deeper than %d", v.p.limits.MaxResultDepth)
	}
	switch c := x.(type) {
	case []any:
		for _, e := range c {
			if err := v.checkSize(e, depth+1, n); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range c {
			if err := v.checkSize(e, depth+1, n); err != nil {
				return err
			}
		}
	}
	return nil
}
