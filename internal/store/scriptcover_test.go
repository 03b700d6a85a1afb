package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/scripts"
)

// Every script of internal/scripts has a test of its own in the script
// test layer: some newScriptEnv (or queueAhead, which makes one) in this
// package's tests names it, and that test fails unless it read the keys
// after the script ran (see newScriptEnv). A script is named by a
// literal, at the call, or, where a table of cases names the script of
// each, anywhere in the function that calls newScriptEnv with a variable.
func TestEveryScriptHasAKeyTest(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	named := map[string]bool{}
	var discarded []string
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		// A dump thrown away marks the script's keys as read without
		// anything compared.
		ast.Inspect(f, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.ExprStmt:
				if isDump(s.X) {
					discarded = append(discarded, fset.Position(s.Pos()).String())
				}
			case *ast.AssignStmt:
				for i, rhs := range s.Rhs {
					if i < len(s.Lhs) && isIdent(s.Lhs[i], "_") && isDump(rhs) {
						discarded = append(discarded, fset.Position(s.Pos()).String())
					}
				}
			}
			return true
		})
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "newScriptEnv" || fn.Name.Name == "queueAhead" {
				continue
			}
			var variable bool
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isIdent(call.Fun, "newScriptEnv") && !isIdent(call.Fun, "queueAhead") {
					return true
				}
				for _, arg := range call.Args[1:] {
					if s, ok := luaLiteral(arg); ok {
						named[s] = true
					} else {
						variable = true
					}
				}
				return true
			})
			if variable {
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if s, ok := luaLiteral(n); ok {
						named[s] = true
					}
					return true
				})
			}
		}
	}
	// The files are the scripts the sets load (scripts.Load and LoadCheck),
	// no more and no fewer.
	loaded := slices.Sorted(maps.Values(scriptNames))
	require.Equal(t, slices.Compact(loaded), scripts.Files(), "the embedded scripts and those loaded")
	var missing []string
	for _, name := range scripts.Files() {
		if !named[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "scripts no newScriptEnv names")
	require.Empty(t, discarded, "dumps of keys that nothing compares")
}

// isDump tells whether e is a call of a scriptEnv's dump.
func isDump(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "dump"
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// luaLiteral is the value of a string literal naming a script.
func luaLiteral(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil && strings.HasSuffix(s, ".lua")
}

// A script test's failure names each key, and each field, member or list
// position in it, that differs.
func TestDiffKeysNamesKeyAndField(t *testing.T) {
	want := keyState{
		"meta":    hash{"name": "q", "seq": "9"},
		"waiting": list{"2:b", "1:a"},
		"leases":  zset{"w": 5},
		"queues":  set{"q"},
		"idle":    zset{"w": 1},
	}
	got := keyState{
		"meta":    hash{"name": "q", "seq": "10", "wx": "1"},
		"waiting": list{"2:b"},
		"leases":  zset{"w": 6},
		"queues":  set{"r"},
		"dead":    zset{"3:c": 1},
	}
	require.Equal(t, []string{
		`idle: missing, want store.zset map[w:1]`,
		`leases["w"]: 6, want 5`,
		`meta["seq"]: "10", want "9"`,
		`meta["wx"]: "1", not wanted`,
		`queues: no member "q"`,
		`queues: member "r" not wanted`,
		`waiting[1]: missing, want "1:a"`,
		`dead: not wanted, got store.zset map[3:c:1]`,
	}, diffKeys(want, got))
	require.Empty(t, diffKeys(want, want))
}
