package sandbox

import (
	"fmt"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// forbiddenGlobals are names the sandbox removes. Using one as a free
// (global) name is rejected when the policy is compiled, with its line,
// so `os.execute(...)` inside a function that validation never calls is
// still refused at put time; at run time the names are nil anyway.
var forbiddenGlobals = map[string]string{
	"os":             "the os library (processes, files, clock) is not available in policies",
	"io":             "the io library (files) is not available in policies",
	"debug":          "the debug library is not available in policies",
	"package":        "modules cannot be loaded in policies",
	"require":        "modules cannot be loaded in policies (require)",
	"module":         "modules cannot be defined in policies (module)",
	"coroutine":      "coroutines are not available in policies",
	"channel":        "channels are not available in policies",
	"dofile":         "files cannot be loaded in policies (dofile)",
	"loadfile":       "files cannot be loaded in policies (loadfile)",
	"load":           "code cannot be loaded at run time in policies (load)",
	"loadstring":     "code cannot be loaded at run time in policies (loadstring)",
	"collectgarbage": "the garbage collector is not controllable from policies",
	"getfenv":        "function environments are not accessible in policies (getfenv)",
	"setfenv":        "function environments are not accessible in policies (setfenv)",
	"rawset":         "rawset is not available in policies (shared tables are read-only)",
	"newproxy":       "newproxy is not available in policies",
	"_printregs":     "_printregs is not available in policies",
}

// concatFunc is the global the compiler rewrites every `..` into: a call
// to a host function that checks the result against MaxStringBytes and
// the session's string budget. gopher-lua concatenates inside one VM
// instruction, where no limit applies, so `s = s .. s` in a loop could
// otherwise allocate gigabytes between two deadline checks. The name is
// not a valid Lua identifier, so source code cannot refer to it.
const concatFunc = "\x00concat"

// Program is a compiled policy: the checked, rewritten bytecode of one
// source. It is immutable and safe for concurrent use; VMs that run it
// are pooled per Program.
type Program struct {
	name   string
	source string
	proto  *lua.FunctionProto
	limits Limits
	pool   chan *vm
}

// Name is the chunk name used in error messages.
func (p *Program) Name() string { return p.name }

// Source returns the policy source.
func (p *Program) Source() string { return p.source }

// Limits returns the limits the program runs under.
func (p *Program) Limits() Limits { return p.limits }

// poolSize bounds idle VMs kept per program: enough for the callers of a
// 2–8 core node, each VM costing tens of KiB.
const poolSize = 8

// Compile parses, checks and compiles a policy. Errors are *Error with
// the Lua line: KindTooLarge, KindSyntax or KindForbidden.
func Compile(name, source string, lim Limits) (*Program, error) {
	lim.EnsureDefaults()
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if len(source) > lim.MaxSourceBytes {
		return nil, &Error{Kind: KindTooLarge, Policy: name, Msg: fmt.Sprintf("source is %d bytes, limit %d", len(source), lim.MaxSourceBytes)}
	}
	if strings.HasPrefix(source, "\x1bLua") {
		return nil, &Error{Kind: KindForbidden, Policy: name, Msg: "precompiled bytecode is not accepted; submit Lua source"}
	}
	chunk, err := parseChunk(name, source)
	if err != nil {
		return nil, err
	}
	c := &checker{policy: name, maxDepth: lim.MaxNesting}
	c.block(chunk, newScope(nil))
	if c.err != nil {
		return nil, c.err
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, syntaxErrorFromCompile(name, err)
	}
	return &Program{name: name, source: source, proto: proto, limits: lim, pool: make(chan *vm, poolSize)}, nil
}

// parseChunk runs gopher-lua's parser, turning its panics (it has a few on
// malformed input) into syntax errors.
func parseChunk(name, source string) (chunk []ast.Stmt, err error) {
	defer func() {
		if r := recover(); r != nil {
			chunk, err = nil, &Error{Kind: KindSyntax, Policy: name, Msg: fmt.Sprint(r)}
		}
	}()
	chunk, perr := parse.Parse(strings.NewReader(source), name)
	if perr != nil {
		return nil, syntaxError(name, perr)
	}
	return chunk, nil
}

func syntaxErrorFromCompile(name string, err error) *Error {
	if ce, ok := err.(*lua.CompileError); ok {
		return &Error{Kind: KindSyntax, Policy: name, Line: ce.Line, Msg: ce.Message}
	}
	return &Error{Kind: KindSyntax, Policy: name, Msg: err.Error()}
}

// scope tracks local names so that a local called `os` is not mistaken for
// the removed library.
type scope struct {
	parent *scope
	names  map[string]bool
}

func newScope(parent *scope) *scope { return &scope{parent: parent, names: map[string]bool{}} }

func (s *scope) declare(n string) { s.names[n] = true }

func (s *scope) isLocal(n string) bool {
	for x := s; x != nil; x = x.parent {
		if x.names[n] {
			return true
		}
	}
	return false
}

// checker walks the AST once: it enforces the nesting limit, rejects free
// uses of forbidden names, and rewrites string concatenation into calls
// of concatFunc. It fails closed: a node type it does not know is an error.
type checker struct {
	policy   string
	maxDepth int
	depth    int
	err      *Error
}

func (c *checker) fail(line int, kind Kind, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{Kind: kind, Policy: c.policy, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
}

func (c *checker) enter(line int) bool {
	c.depth++
	if c.depth > c.maxDepth {
		c.fail(line, KindTooLarge, "nesting deeper than %d levels", c.maxDepth)
		return false
	}
	return c.err == nil
}

func (c *checker) leave() { c.depth-- }

func (c *checker) block(stmts []ast.Stmt, sc *scope) {
	for _, st := range stmts {
		if c.err != nil {
			return
		}
		c.stmt(st, sc)
	}
}

func (c *checker) exprs(es []ast.Expr, sc *scope) {
	for i := range es {
		es[i] = c.expr(es[i], sc)
	}
}

func (c *checker) stmt(st ast.Stmt, sc *scope) {
	if !c.enter(st.Line()) {
		return
	}
	defer c.leave()
	switch s := st.(type) {
	case *ast.AssignStmt:
		c.exprs(s.Lhs, sc)
		c.exprs(s.Rhs, sc)
		for _, l := range s.Lhs {
			if id, ok := l.(*ast.IdentExpr); ok && !sc.isLocal(id.Value) {
				if _, bad := forbiddenGlobals[id.Value]; bad {
					c.fail(id.Line(), KindForbidden, "%s cannot be redefined", id.Value)
				}
			}
		}
	case *ast.LocalAssignStmt:
		// As the compiler does: `local function f` and `local f =
		// function` see f inside their body.
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				sc.declare(s.Names[0])
			}
		}
		c.exprs(s.Exprs, sc)
		for _, n := range s.Names {
			sc.declare(n)
		}
	case *ast.FuncCallStmt:
		s.Expr = c.expr(s.Expr, sc)
	case *ast.DoBlockStmt:
		c.block(s.Stmts, newScope(sc))
	case *ast.WhileStmt:
		s.Condition = c.expr(s.Condition, sc)
		c.block(s.Stmts, newScope(sc))
	case *ast.RepeatStmt:
		inner := newScope(sc)
		c.block(s.Stmts, inner)
		s.Condition = c.expr(s.Condition, inner) // until sees the body's locals
	case *ast.IfStmt:
		s.Condition = c.expr(s.Condition, sc)
		c.block(s.Then, newScope(sc))
		c.block(s.Else, newScope(sc))
	case *ast.NumberForStmt:
		s.Init = c.expr(s.Init, sc)
		s.Limit = c.expr(s.Limit, sc)
		if s.Step != nil {
			s.Step = c.expr(s.Step, sc)
		}
		inner := newScope(sc)
		inner.declare(s.Name)
		c.block(s.Stmts, inner)
	case *ast.GenericForStmt:
		c.exprs(s.Exprs, sc)
		inner := newScope(sc)
		for _, n := range s.Names {
			inner.declare(n)
		}
		c.block(s.Stmts, inner)
	case *ast.FuncDefStmt:
		if s.Name.Func != nil {
			if id, ok := s.Name.Func.(*ast.IdentExpr); ok && !sc.isLocal(id.Value) {
				if _, bad := forbiddenGlobals[id.Value]; bad {
					c.fail(id.Line(), KindForbidden, "%s cannot be redefined", id.Value)
				}
			} else {
				s.Name.Func = c.expr(s.Name.Func, sc)
			}
		}
		if s.Name.Receiver != nil {
			s.Name.Receiver = c.expr(s.Name.Receiver, sc)
		}
		fsc := newScope(sc)
		if s.Name.Method != "" {
			fsc.declare("self")
		}
		c.function(s.Func, fsc)
	case *ast.ReturnStmt:
		c.exprs(s.Exprs, sc)
	case *ast.BreakStmt, *ast.LabelStmt, *ast.GotoStmt:
	default:
		c.fail(st.Line(), KindSyntax, "unsupported statement %T", st)
	}
}

func (c *checker) function(f *ast.FunctionExpr, sc *scope) {
	if f.ParList != nil {
		for _, n := range f.ParList.Names {
			sc.declare(n)
		}
	}
	c.block(f.Stmts, sc)
}

func (c *checker) expr(e ast.Expr, sc *scope) ast.Expr {
	if e == nil || !c.enter(e.Line()) {
		return e
	}
	defer c.leave()
	switch x := e.(type) {
	case *ast.TrueExpr, *ast.FalseExpr, *ast.NilExpr, *ast.NumberExpr, *ast.StringExpr, *ast.Comma3Expr:
	case *ast.IdentExpr:
		if !sc.isLocal(x.Value) {
			if why, bad := forbiddenGlobals[x.Value]; bad {
				c.fail(x.Line(), KindForbidden, "%s: %s", x.Value, why)
			}
		}
	case *ast.AttrGetExpr:
		if id, ok := x.Object.(*ast.IdentExpr); ok && id.Value == "string" && !sc.isLocal("string") {
			if k, ok := x.Key.(*ast.StringExpr); ok && k.Value == "dump" {
				c.fail(x.Line(), KindForbidden, "string.dump is not available in policies")
			}
		}
		x.Object = c.expr(x.Object, sc)
		x.Key = c.expr(x.Key, sc)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			if f.Key != nil {
				f.Key = c.expr(f.Key, sc)
			}
			f.Value = c.expr(f.Value, sc)
		}
	case *ast.FuncCallExpr:
		if x.Func != nil {
			x.Func = c.expr(x.Func, sc)
		}
		if x.Receiver != nil {
			x.Receiver = c.expr(x.Receiver, sc)
		}
		c.exprs(x.Args, sc)
	case *ast.LogicalOpExpr:
		x.Lhs = c.expr(x.Lhs, sc)
		x.Rhs = c.expr(x.Rhs, sc)
	case *ast.RelationalOpExpr:
		x.Lhs = c.expr(x.Lhs, sc)
		x.Rhs = c.expr(x.Rhs, sc)
	case *ast.ArithmeticOpExpr:
		x.Lhs = c.expr(x.Lhs, sc)
		x.Rhs = c.expr(x.Rhs, sc)
	case *ast.UnaryMinusOpExpr:
		x.Expr = c.expr(x.Expr, sc)
	case *ast.UnaryNotOpExpr:
		x.Expr = c.expr(x.Expr, sc)
	case *ast.UnaryLenOpExpr:
		x.Expr = c.expr(x.Expr, sc)
	case *ast.FunctionExpr:
		c.function(x, newScope(sc))
	case *ast.StringConcatOpExpr:
		return c.concat(x, sc)
	default:
		c.fail(e.Line(), KindSyntax, "unsupported expression %T", e)
	}
	return e
}

// concat flattens a chain a .. b .. c into concatFunc(a, b, c). Operands
// that can yield several values (calls, ...) are truncated to one, as `..`
// does.
func (c *checker) concat(x *ast.StringConcatOpExpr, sc *scope) ast.Expr {
	var ops []ast.Expr
	var flatten func(e ast.Expr)
	flatten = func(e ast.Expr) {
		if cc, ok := e.(*ast.StringConcatOpExpr); ok {
			flatten(cc.Lhs)
			flatten(cc.Rhs)
			return
		}
		ops = append(ops, e)
	}
	flatten(x)
	for i := range ops {
		ops[i] = c.expr(ops[i], sc)
		switch o := ops[i].(type) {
		case *ast.FuncCallExpr:
			o.AdjustRet = true
		case *ast.Comma3Expr:
			o.AdjustRet = true
		}
	}
	fn := &ast.IdentExpr{Value: concatFunc}
	fn.SetLine(x.Line())
	fn.SetLastLine(x.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: ops}
	call.SetLine(x.Line())
	call.SetLastLine(x.LastLine())
	return call
}

// ForbiddenNames lists the names the sandbox removes, sorted (for docs and
// error messages).
func ForbiddenNames() []string {
	out := make([]string, 0, len(forbiddenGlobals))
	for k := range forbiddenGlobals {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
