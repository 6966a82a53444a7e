// Package sandbox runs untrusted Lua policies with bounded resources. It
// owns compiling a policy (Compile), loading it into pooled VMs whose
// globals are frozen after load, and running hook calls in sessions
// (Program.Run) under Limits; it converts values between Go and Lua.
//
// What a policy gets: the Lua 5.1 base library without dofile, loadfile,
// load, loadstring, require, module, collectgarbage, getfenv, setfenv,
// rawset and newproxy; string (every allocating function bounded, a step-
// budgeted pattern matcher, no dump); table (bounded concat, metered
// sort); math
// (random seeded per session, so decisions replay); and `terrace`
// (sha256, crc32c, hex, json_encode, json_decode). io, os, debug,
// package, coroutine and channel are never opened. Free uses of removed
// names are rejected at compile time with their line.
//
// How it is bounded, per session:
//
//   - instructions, counted exactly: gopher-lua selects on its context's
//     Done channel before every instruction, and the session meter is
//     that context, so Done counts (see meter.go); expiry is sticky, so
//     pcall cannot swallow it;
//   - a wall-clock deadline and the caller's context, checked every 256
//     instructions and inside long host operations;
//   - call depth (stack overflow) and the value stack (registry) caps;
//   - string sizes and a per-session string budget: `..` is rewritten at
//     compile time into a bounded host call, and rep, format, gsub,
//     upper, lower, reverse, table.concat and JSON (measured by JSONSize
//     before it is encoded) check before they allocate; print writes into
//     the capped log one argument at a time;
//   - table.sort, one VM instruction, charges each comparison to the
//     instruction budget (strings by the bytes compared) and checks the
//     clock as it goes;
//   - pattern matching by a port of Lua 5.1's matcher that counts its
//     steps (gopher-lua's is unbounded and eager);
//   - heap allocation, sampled from the runtime's allocation counter
//     (gopher-lua has no allocation hook), plus lua.MaxArrayIndex lowered
//     so one sparse table store cannot allocate more than 4 MiB.
//
// Every failure is an *Error with a Kind and, when known, the Lua line. A
// VM that saw an error is discarded, never reused. Host values handed to
// a policy are fresh copies with a read-only metatable.
//
// The package is pure: it performs no I/O, keeps no global state besides
// the VM pools owned by each Program, and reads the clock only to enforce
// deadlines. It must not import any other Terrace package; the registry,
// hooks and their wiring live in internal/policy.
//
// Dependency: github.com/yuin/gopher-lua, a pure-Go Lua 5.1 VM (no cgo,
// so the static build stays static), maintained and widely used; its
// context support is what makes an exact instruction budget possible
// without forking it.
package sandbox
