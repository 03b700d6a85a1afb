package scripts

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// redisGlobals are the globals Redis's Lua (5.1) gives a script: the
// allow lists of Redis's src/script_lua.c (libraries_allow_list,
// redis_api_allow_list, lua_builtins_allow_list and its not-documented
// list), less os, which Redis 7.0 does not load, and debug, which Redis
// sets to nil once its error handler is made, and KEYS and ARGV, which
// each call sets. print, dofile and loadfile are on its deny list.
var redisGlobals = func() map[string]bool {
	out := make(map[string]bool)
	for _, n := range strings.Fields(`
		KEYS ARGV redis
		string table math bit struct cjson cmsgpack
		xpcall tostring getfenv setmetatable next assert tonumber rawequal
		collectgarbage getmetatable rawset pcall coroutine type _G select
		unpack gcinfo pairs rawget loadstring ipairs _VERSION setfenv load
		error newproxy`) {
		out[n] = true
	}
	return out
}()

// Every script, as each of the loader's variants builds it (events by
// PUBLISH or SPUBLISH, stats on or off) with the common parts it carries,
// compiles as Lua 5.1 and reads no global but those Redis gives: a helper
// it calls and does not carry, or one defined below the code that calls
// it, is a global read, which Redis fails at run time ("Script attempted
// to access nonexistent global variable"), and only on the path that
// reaches it. It assigns no global either: Redis 7 refuses that too.
func TestScriptsReadOnlyDefinedGlobals(t *testing.T) {
	n := 0
	for _, sharded := range []bool{false, true} {
		for _, stats := range []bool{false, true} {
			load := loader(sharded, stats)
			for _, name := range Files() {
				variant := fmt.Sprintf("%s (sharded %v, stats %v)", name, sharded, stats)
				for _, p := range globalsProblems(t, variant, load(name).src) {
					t.Errorf("%s: %s", variant, p)
				}
				n++
			}
		}
	}
	for _, p := range globalsProblems(t, "WithCommon", WithCommon("").src) {
		t.Errorf("WithCommon: %s", p)
	}
	if n < 40 {
		t.Fatalf("only %d scripts checked", n)
	}
}

// The check finds each kind of fault it is there to find, and passes
// what Lua allows: a local function calling itself, a local's use inside
// its own scope, the upvalues of nested functions.
func TestGlobalsCheckFindsFaults(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"clean", `
local function fact(n) if n < 2 then return 1 end return n * fact(n - 1) end
local t = {a = 1}
for k, v in pairs(t) do t[k] = v + fact(3) end
local function outer() local x = 1; return function() return x + #KEYS end end
repeat local done = true until done
return redis.call('GET', KEYS[1]) .. cjson.encode(t) .. tostring(outer()())
`, nil},
		{"an undefined helper", "return now_ms()", []string{"reads global now_ms"}},
		{"a helper defined below its call", "local function a() return b() end\nlocal function b() return 1 end\nreturn a()", []string{"reads global b"}},
		{"a local outside its block", "if true then local x = 1 end\nreturn x", []string{"reads global x"}},
		{"a local function value calls itself", "local f = function(n) return f(n) end\nreturn f(1)", []string{"reads global f"}},
		{"a global assigned", "count = 1\nreturn 1", []string{"assigns global count"}},
		{"a global function", "function helper() end\nreturn 1", []string{"assigns global helper"}},
		{"a library Redis does not give", "print('x')\nreturn os.time()", []string{"reads global print", "reads global os"}},
		{"goto, which Lua 5.1 lacks", "goto done\n::done::\nreturn 1", []string{"goto", "label"}},
	} {
		got := globalsProblems(t, c.name, c.src)
		for _, w := range c.want {
			found := false
			for _, g := range got {
				found = found || strings.Contains(g, w)
			}
			if !found {
				t.Errorf("%s: want a problem %q, got %q", c.name, w, got)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: got %d problems %q, want %d", c.name, len(got), got, len(c.want))
		}
	}
	if _, err := parse.Parse(strings.NewReader("local x = = 1"), "bad"); err == nil {
		t.Error("the parser took a syntax error")
	}
}

// globalsProblems parses src (failing the test if it does not compile)
// and lists, by line, its reads of globals Redis does not give, its
// assignments of globals, and its goto statements and labels.
func globalsProblems(t *testing.T, name, src string) []string {
	t.Helper()
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		t.Errorf("%s does not compile: %v", name, err)
		return nil
	}
	g := &globals{lines: strings.Split(src, "\n")}
	g.block(&scope{}, chunk)
	sort.Strings(g.problems)
	return g.problems
}

type scope struct {
	names  map[string]bool
	parent *scope
}

func (s *scope) declare(names ...string) {
	if s.names == nil {
		s.names = make(map[string]bool)
	}
	for _, n := range names {
		s.names[n] = true
	}
}

func (s *scope) has(name string) bool {
	for ; s != nil; s = s.parent {
		if s.names[name] {
			return true
		}
	}
	return false
}

// globals walks a chunk with its scopes as Lua 5.1 makes them.
type globals struct {
	lines    []string
	problems []string
}

func (g *globals) report(line int, format string, args ...any) {
	g.problems = append(g.problems, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
}

// localFunction matches "local function name": unlike "local name =
// function", the name is in scope in the function's own body. The parser
// makes one LocalAssignStmt of either, so the line's text tells them
// apart.
var localFunction = regexp.MustCompile(`^\s*local\s+function\s+([A-Za-z_][A-Za-z0-9_]*)`)

func (g *globals) block(s *scope, stmts []ast.Stmt) {
	for _, st := range stmts {
		g.stmt(s, st)
	}
}

func (g *globals) stmt(s *scope, st ast.Stmt) {
	switch st := st.(type) {
	case *ast.AssignStmt:
		g.exprs(s, st.Rhs)
		for _, e := range st.Lhs {
			g.target(s, e, st.Line())
		}
	case *ast.LocalAssignStmt:
		if len(st.Names) == 1 && len(st.Exprs) == 1 && st.Line() <= len(g.lines) {
			if m := localFunction.FindStringSubmatch(g.lines[st.Line()-1]); m != nil && m[1] == st.Names[0] {
				s.declare(st.Names...)
				g.exprs(s, st.Exprs)
				return
			}
		}
		g.exprs(s, st.Exprs)
		s.declare(st.Names...)
	case *ast.FuncCallStmt:
		g.expr(s, st.Expr)
	case *ast.DoBlockStmt:
		g.block(&scope{parent: s}, st.Stmts)
	case *ast.WhileStmt:
		g.expr(s, st.Condition)
		g.block(&scope{parent: s}, st.Stmts)
	case *ast.RepeatStmt:
		inner := &scope{parent: s} // the condition sees the body's locals
		g.block(inner, st.Stmts)
		g.expr(inner, st.Condition)
	case *ast.IfStmt:
		g.expr(s, st.Condition)
		g.block(&scope{parent: s}, st.Then)
		g.block(&scope{parent: s}, st.Else)
	case *ast.NumberForStmt:
		g.expr(s, st.Init)
		g.expr(s, st.Limit)
		g.expr(s, st.Step)
		inner := &scope{parent: s}
		inner.declare(st.Name)
		g.block(inner, st.Stmts)
	case *ast.GenericForStmt:
		g.exprs(s, st.Exprs)
		inner := &scope{parent: s}
		inner.declare(st.Names...)
		g.block(inner, st.Stmts)
	case *ast.FuncDefStmt:
		self := false
		if st.Name.Func != nil {
			g.target(s, st.Name.Func, st.Line())
		} else {
			g.expr(s, st.Name.Receiver)
			self = true
		}
		g.function(s, st.Func, self)
	case *ast.ReturnStmt:
		g.exprs(s, st.Exprs)
	case *ast.BreakStmt:
	case *ast.GotoStmt:
		g.report(st.Line(), "goto, which Redis's Lua 5.1 does not compile")
	case *ast.LabelStmt:
		g.report(st.Line(), "label ::%s::, which Redis's Lua 5.1 does not compile", st.Name)
	default:
		g.report(st.Line(), "a statement the check does not know: %T", st)
	}
}

// target is the left side of an assignment: a name is a local's, or a
// global assigned; a table's field reads the table and the key.
func (g *globals) target(s *scope, e ast.Expr, line int) {
	if id, ok := e.(*ast.IdentExpr); ok {
		if !s.has(id.Value) {
			g.report(line, "assigns global %s", id.Value)
		}
		return
	}
	g.expr(s, e)
}

func (g *globals) function(s *scope, f *ast.FunctionExpr, self bool) {
	inner := &scope{parent: s}
	if self {
		inner.declare("self")
	}
	inner.declare(f.ParList.Names...)
	g.block(inner, f.Stmts)
}

func (g *globals) exprs(s *scope, es []ast.Expr) {
	for _, e := range es {
		g.expr(s, e)
	}
}

func (g *globals) expr(s *scope, e ast.Expr) {
	switch e := e.(type) {
	case nil:
	case *ast.IdentExpr:
		if !s.has(e.Value) && !redisGlobals[e.Value] {
			g.report(e.Line(), "reads global %s", e.Value)
		}
	case *ast.AttrGetExpr:
		g.expr(s, e.Object)
		g.expr(s, e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			g.expr(s, f.Key)
			g.expr(s, f.Value)
		}
	case *ast.FuncCallExpr:
		g.expr(s, e.Func)
		g.expr(s, e.Receiver)
		g.exprs(s, e.Args)
	case *ast.LogicalOpExpr:
		g.expr(s, e.Lhs)
		g.expr(s, e.Rhs)
	case *ast.RelationalOpExpr:
		g.expr(s, e.Lhs)
		g.expr(s, e.Rhs)
	case *ast.StringConcatOpExpr:
		g.expr(s, e.Lhs)
		g.expr(s, e.Rhs)
	case *ast.ArithmeticOpExpr:
		g.expr(s, e.Lhs)
		g.expr(s, e.Rhs)
	case *ast.UnaryMinusOpExpr:
		g.expr(s, e.Expr)
	case *ast.UnaryNotOpExpr:
		g.expr(s, e.Expr)
	case *ast.UnaryLenOpExpr:
		g.expr(s, e.Expr)
	case *ast.FunctionExpr:
		g.function(s, e, false)
	case *ast.TrueExpr, *ast.FalseExpr, *ast.NilExpr, *ast.NumberExpr, *ast.StringExpr, *ast.Comma3Expr:
	default:
		g.report(e.Line(), "an expression the check does not know: %T", e)
	}
}
