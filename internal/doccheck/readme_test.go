package doccheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docSnippet matches a Go block of the README or of a page of docs/ with
// the comment that must come right before it and says how to compile it:
//
//	<!-- check: func(ctx context.Context, client *worqr.Client) | context github.com/worqr/worqr -->
//
// "func(params)" wraps the block in a function with those parameters that
// returns an error (return nil is added at its end, unless it ends with a
// return); "file" takes it as
// top-level declarations. After the bar come the imports it uses. The
// blocks of one page make one package, with docSupport. "program
// name/file.go" (nothing after the bar) takes the block as a whole file,
// package clause and imports included, of a package of its own, name,
// which every block of the page naming it joins: a complete program, or
// a package and its _test.go file, whose tests are run.
var docSnippet = regexp.MustCompile("(?s)(<!-- check: ([^|]*)\\|([^>]*)-->\n)?```go\n(.*?)```")

// programName and programFile are what a "program name/file.go" check
// comment may name.
var (
	programName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	programFile = regexp.MustCompile(`^[a-z][a-z0-9_]*\.go$`)
)

// docSupport declares what the snippets use without showing: a user's
// own functions and values.
const docSupport = `package snippets

import (
	"context"
	"errors"

	"github.com/worqr/worqr"
)

var errBadAddress = errors.New("bad address")

// send stands for a user's own work.
func send(context.Context, []byte) error { return nil }

// handleMail stands for a user's own handler.
func handleMail(context.Context, *worqr.Process) error { return nil }
`

// docPages are the Markdown files whose Go blocks must compile: the
// README and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages, "no pages in docs/")
	return append([]string{"README.md"}, pages...)
}

// Every Go snippet in the README and in docs/ compiles, passes go vet, and
// handles the errors it is given: each page's snippets are written, with
// the imports and parameters their check comments name, into a package of
// their own in this module (and each program into one of its own), every
// package is vetted with the go command (which compiles _test.go files
// too), and then type-checked again here to find errors left unhandled
// (see uncheckedErrors); the tests of a program that has them are run. A
// snippet without a check comment fails the test,
// so a new one cannot slip in unchecked. Each written file carries //line
// comments, so failures name the page and line of the block.
func TestDocSnippetsCompile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds packages with the go command")
	}
	// The same directory every run, so that the go command's cache holds
	// the packages (and the tests' results) of pages that did not change
	// since; a run that finds it taken (another run's, or one killed
	// before its cleanup) takes a fresh one, which builds everything.
	dir := filepath.Join("internal", "docsnippets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Logf("%s: %v; building in a fresh directory, uncached", dir, err)
		dir, err = os.MkdirTemp("internal", "docsnippets")
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	blocks := 0
	for _, page := range docPages(t) {
		blocks += writeSnippets(t, dir, page)
	}
	require.NotZero(t, blocks, "no Go blocks in the README or docs/")
	if t.Failed() {
		return
	}
	out, err := exec.CommandContext(t.Context(), "go", "vet", "./"+filepath.ToSlash(dir)+"/...").CombinedOutput()
	// go test puts its own go command first in PATH.
	require.NoError(t, err, "doc snippets do not compile or do not pass go vet:\n%s", out)
	// A program with a _test.go file is a recipe for a test: it must pass.
	tests, err := filepath.Glob(filepath.Join(dir, "*", "*_test.go"))
	require.NoError(t, err)
	if len(tests) > 0 {
		args := []string{"test"}
		for _, f := range tests {
			args = append(args, "./"+filepath.ToSlash(filepath.Dir(f)))
		}
		out, err := exec.CommandContext(t.Context(), "go", slices.Compact(args)...).CombinedOutput()
		require.NoError(t, err, "the tests in the docs fail:\n%s", out)
	}
	for _, problem := range uncheckedErrors(t, dir) {
		t.Error(problem)
	}
}

// writeSnippets writes the Go blocks of page under dir and returns how
// many it found.
func writeSnippets(t *testing.T, dir, page string) int {
	t.Helper()
	doc, err := os.ReadFile(page)
	require.NoError(t, err)
	lineAt := func(offset int) int { return 1 + bytes.Count(doc[:offset], []byte("\n")) }
	// A package per page: README.md is readme, docs/queue-controls.md docs_queue_controls.
	pkg := strings.NewReplacer("/", "_", "-", "_", ".md", "").Replace(strings.ToLower(filepath.ToSlash(page)))
	blocks := docSnippet.FindAllSubmatchIndex(doc, -1)
	for i, m := range blocks {
		line := lineAt(m[0])
		if m[2] < 0 {
			t.Errorf("%s:%d: a Go block without a <!-- check: ... --> comment before it", page, line)
			continue
		}
		how := strings.TrimSpace(string(doc[m[4]:m[5]]))
		imports := strings.Fields(string(doc[m[6]:m[7]]))
		body := string(doc[m[8]:m[9]])
		// The //line comments make the compiler's and uncheckedErrors'
		// positions those of the page: the check comment for the
		// imports, the block's own lines for its body.
		abs, err := filepath.Abs(page)
		require.NoError(t, err)
		at := func(offset int) string { return fmt.Sprintf("//line %s:%d\n", abs, lineAt(offset)) }
		var src strings.Builder
		var name string
		switch {
		case strings.HasPrefix(how, "program "):
			prog, file, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(how, "program ")), "/")
			if !programName.MatchString(prog) || !programFile.MatchString(file) || len(imports) > 0 {
				t.Errorf("%s:%d: check comment %q: want program name/file.go, and nothing after the bar", page, line, how)
				continue
			}
			name = filepath.Join(dir, pkg+"_"+prog, file)
			src.WriteString(at(m[8]) + body)
		case how == "file" || strings.HasPrefix(how, "func(") && strings.HasSuffix(how, ")"):
			fmt.Fprintf(&src, "package snippets\n\n%simport (", at(m[2]))
			for _, imp := range imports {
				fmt.Fprintf(&src, "%q; ", imp)
			}
			src.WriteString(")\n\n")
			if how == "file" {
				src.WriteString(at(m[8]) + body)
			} else {
				end := "\treturn nil\n"
				if lines := strings.Split(strings.TrimSpace(body), "\n"); strings.HasPrefix(lines[len(lines)-1], "return ") {
					end = "" // go vet finds a return nil after a return unreachable
				}
				fmt.Fprintf(&src, "func snippet%d%s error {\n%s%s%s}\n", i, how[len("func"):], at(m[8]), body, end)
			}
			name = filepath.Join(dir, pkg, fmt.Sprintf("snippet%02d.go", i))
			support := filepath.Join(dir, pkg, "support.go")
			if _, err := os.Stat(support); err != nil {
				require.NoError(t, os.MkdirAll(filepath.Dir(support), 0o700))
				require.NoError(t, os.WriteFile(support, []byte(docSupport), 0o600))
			}
		default:
			t.Errorf("%s:%d: check comment %q: want file, func(params) or program name/file.go", page, line, how)
			continue
		}
		if _, err := os.Stat(name); err == nil {
			t.Errorf("%s:%d: %s is written by two blocks", page, line, name)
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o700))
		require.NoError(t, os.WriteFile(name, []byte(src.String()), 0o600))
	}
	return len(blocks)
}

// errorType is the built-in error interface.
var errorType = types.Universe.Lookup("error").Type()

// uncheckedErrors type-checks every package under dir (with the export
// data the go command builds for their imports) and names each error its
// code drops: a call whose error result is not used (outside fmt's
// printing, and a deferred Close or Unregister, which has nowhere to send
// it), an error assigned to _, and an error assigned to a variable that
// no later statement of its block reads before it is assigned again (or,
// in an if's init, that the condition does not read). A snippet in the docs is code people copy: it shows what to do with
// each error.
func uncheckedErrors(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	packages := map[string][]*ast.File{}
	imports := map[string]bool{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		packages[filepath.Dir(path)] = append(packages[filepath.Dir(path)], f)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			imports[p] = true
		}
		return nil
	}))
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	for p := range imports {
		args = append(args, p)
	}
	out, err := exec.CommandContext(t.Context(), "go", args...).Output()
	require.NoError(t, err, "go list -export of the snippets' imports")
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if p, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok && file != "" {
			exports[p] = file
		}
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})

	var problems []string
	for pkgDir, files := range packages {
		info := &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{},
			Defs:  map[*ast.Ident]types.Object{},
			Uses:  map[*ast.Ident]types.Object{},
		}
		conf := types.Config{Importer: imp}
		_, err := conf.Check(pkgDir, fset, files, info)
		require.NoError(t, err, "type-checking %s", pkgDir)
		for _, f := range files {
			problems = append(problems, droppedErrors(fset, f, info)...)
		}
	}
	slices.Sort(problems)
	return problems
}

// droppedErrors are the errors f's code drops; see uncheckedErrors.
func droppedErrors(fset *token.FileSet, f *ast.File, info *types.Info) []string {
	var problems []string
	report := func(n ast.Node, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	// errorResults are the indexes of call's results of type error.
	errorResults := func(e ast.Expr) []int {
		call, ok := ast.Unparen(e).(*ast.CallExpr)
		if !ok {
			return nil
		}
		var idx []int
		switch typ := info.Types[call].Type.(type) {
		case *types.Tuple:
			for i := range typ.Len() {
				if types.Identical(typ.At(i).Type(), errorType) {
					idx = append(idx, i)
				}
			}
		case nil:
		default:
			if types.Identical(typ, errorType) {
				idx = []int{0}
			}
		}
		return idx
	}
	callee := func(call *ast.CallExpr) types.Object {
		switch fun := ast.Unparen(call.Fun).(type) {
		case *ast.Ident:
			return info.Uses[fun]
		case *ast.SelectorExpr:
			return info.Uses[fun.Sel]
		}
		return nil
	}
	mayDrop := func(call *ast.CallExpr, deferred bool) bool {
		obj := callee(call)
		if obj == nil {
			return false
		}
		if obj.Pkg() != nil && obj.Pkg().Path() == "fmt" && (strings.HasPrefix(obj.Name(), "Print") || strings.HasPrefix(obj.Name(), "Fprint")) {
			return true
		}
		return deferred && (obj.Name() == "Close" || obj.Name() == "Unregister")
	}
	// errorVars are the variables that stmt assigns an error result to,
	// after reporting the errors it assigns to _.
	errorVars := func(stmt ast.Stmt) []types.Object {
		as, ok := stmt.(*ast.AssignStmt)
		if !ok {
			return nil
		}
		var lhs []ast.Expr
		var vars []types.Object
		switch {
		case len(as.Rhs) == 1 && len(as.Lhs) > 1:
			for _, i := range errorResults(as.Rhs[0]) {
				lhs = append(lhs, as.Lhs[i])
			}
		case len(as.Rhs) == len(as.Lhs):
			for i, rhs := range as.Rhs {
				if len(errorResults(rhs)) > 0 {
					lhs = append(lhs, as.Lhs[i])
				}
			}
		}
		for _, e := range lhs {
			id, ok := e.(*ast.Ident)
			if !ok {
				continue
			}
			if id.Name == "_" {
				report(id, "an error assigned to _")
				continue
			}
			obj := info.Defs[id]
			if obj == nil {
				obj = info.Uses[id]
			}
			if obj != nil {
				vars = append(vars, obj)
			}
		}
		return vars
	}
	// reads says whether n reads obj; assigns whether it assigns to it.
	assigned := func(n ast.Node) map[*ast.Ident]bool {
		lhs := map[*ast.Ident]bool{}
		ast.Inspect(n, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				for _, e := range as.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						lhs[id] = true
					}
				}
			}
			return true
		})
		return lhs
	}
	reads := func(n ast.Node, obj types.Object) bool {
		if n == nil {
			return false
		}
		lhs := assigned(n)
		found := false
		ast.Inspect(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && !lhs[id] && info.Uses[id] == obj {
				found = true
			}
			return !found
		})
		return found
	}
	assigns := func(n ast.Node, obj types.Object) bool {
		for id := range assigned(n) {
			if info.Uses[id] == obj || info.Defs[id] == obj {
				return true
			}
		}
		return false
	}
	// checkList looks for each error a statement assigns in the statements
	// after it, before it is assigned again.
	checkList := func(list []ast.Stmt) {
		for i, stmt := range list {
		vars:
			for _, v := range errorVars(stmt) {
				for _, next := range list[i+1:] {
					if reads(next, v) {
						continue vars
					}
					if assigns(next, v) {
						report(stmt, "the error in %s is assigned again before it is looked at", v.Name())
						continue vars
					}
				}
				report(stmt, "the error in %s is never looked at", v.Name())
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ExprStmt:
			if call, ok := ast.Unparen(n.X).(*ast.CallExpr); ok && len(errorResults(call)) > 0 && !mayDrop(call, false) {
				report(n, "the error of %s is dropped", types.ExprString(call.Fun))
			}
		case *ast.DeferStmt:
			if len(errorResults(n.Call)) > 0 && !mayDrop(n.Call, true) {
				report(n, "the error of deferred %s is dropped", types.ExprString(n.Call.Fun))
			}
		case *ast.GoStmt:
			if len(errorResults(n.Call)) > 0 {
				report(n, "the error of go %s is dropped", types.ExprString(n.Call.Fun))
			}
		case *ast.BlockStmt:
			checkList(n.List)
		case *ast.CaseClause:
			checkList(n.Body)
		case *ast.CommClause:
			checkList(n.Body)
		case *ast.IfStmt:
			if n.Init != nil {
				for _, v := range errorVars(n.Init) {
					if !reads(n.Cond, v) {
						report(n, "the error in %s is not looked at by the if's condition", v.Name())
					}
				}
			}
		}
		return true
	})
	return problems
}

// A program that ran `go get github.com/worqr/worqr` has the go.sum
// entries of the root package's dependencies only: importing a package of
// this module that needs another module (cron's robfig/cron, embedded's
// miniredis) fails to build with "missing go.sum entry" until `go mod
// tidy`. The README's Getting started names every such package on its
// `go mod tidy` line.
func TestReadmeNamesThePackagesThatNeedTidy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("lists packages with the go command")
	}
	goList := func(args ...string) []string {
		out, err := exec.CommandContext(t.Context(), "go", append([]string{"list"}, args...)...).Output()
		require.NoError(t, err, "go list %s", strings.Join(args, " "))
		return strings.Fields(string(out))
	}
	modules := func(pkg string) []string {
		return goList("-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", pkg)
	}
	root := map[string]bool{}
	for _, m := range modules(".") {
		root[m] = true
	}

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	section, _, _ := strings.Cut(string(readme[strings.Index(string(readme), "## Getting started"):]), "\n## ")
	var tidy string
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "go mod tidy") {
			tidy = line
		}
	}
	require.NotEmpty(t, tidy, "Getting started has no `go mod tidy` line")
	words := strings.FieldsFunc(tidy, func(r rune) bool { return strings.ContainsRune(" ,`\n", r) })

	var needing []string
	for _, pkg := range goList("-f", "{{if ne .Name \"main\"}}{{.ImportPath}}{{end}}", "./...") {
		if strings.Contains(pkg, "/internal") {
			continue
		}
		for _, m := range modules(pkg) {
			if !root[m] {
				needing = append(needing, pkg)
				t.Logf("%s needs %s", pkg, m)
				break
			}
		}
	}
	require.NotEmpty(t, needing, "no package needs a module the root package does not: is go list answering?")
	for _, pkg := range needing {
		name := pkg[strings.LastIndex(pkg, "/")+1:]
		assert.Contains(t, words, name, "%s needs a module the root package does not; the README's `go mod tidy` line does not name it:\n%s", pkg, tidy)
	}
}
