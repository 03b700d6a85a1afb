package worqr

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeSnippet matches a Go block of the README with the comment that
// must come right before it and says how to compile it:
//
//	<!-- check: func(ctx context.Context, client *worqr.Client) | context github.com/worqr/worqr -->
//
// "func(params)" wraps the block in a function with those parameters that
// returns an error (return nil is added at its end); "file" takes it as
// top-level declarations. After the bar come the imports it uses.
var readmeSnippet = regexp.MustCompile("(?s)(<!-- check: ([^|]*)\\|([^>]*)-->\n)?```go\n(.*?)```")

// readmeSupport declares what the README's snippets use without showing:
// a user's own functions and values.
const readmeSupport = `package snippets

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

// Every Go snippet in the README compiles: each is written, with the
// imports and parameters its check comment names, into a package of its
// own in this module, and that package is built with the go command. A
// snippet without a check comment fails the test, so a new one cannot
// slip in unchecked.
func TestReadmeSnippetsCompile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a package with the go command")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := readmeSnippet.FindAllSubmatchIndex(readme, -1)
	require.NotEmpty(t, blocks, "no Go blocks in the README")

	dir, err := os.MkdirTemp(filepath.Join(".", "internal"), "readmesnippets")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "support.go"), []byte(readmeSupport), 0o600))
	for i, m := range blocks {
		line := 1 + strings.Count(string(readme[:m[0]]), "\n")
		if m[2] < 0 {
			t.Errorf("README.md:%d: a Go block without a <!-- check: ... --> comment before it", line)
			continue
		}
		how := strings.TrimSpace(string(readme[m[4]:m[5]]))
		body := string(readme[m[8]:m[9]])
		var src strings.Builder
		fmt.Fprintf(&src, "package snippets\n\n// README.md:%d\n\nimport (\n", line)
		for imp := range strings.FieldsSeq(string(readme[m[6]:m[7]])) {
			fmt.Fprintf(&src, "\t%q\n", imp)
		}
		src.WriteString(")\n\n")
		switch {
		case how == "file":
			src.WriteString(body)
		case strings.HasPrefix(how, "func(") && strings.HasSuffix(how, ")"):
			fmt.Fprintf(&src, "func snippet%d%s error {\n%s\treturn nil\n}\n", i, how[len("func"):], body)
		default:
			t.Errorf("README.md:%d: check comment %q: want file or func(params)", line, how)
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf("snippet%02d.go", i))
		require.NoError(t, os.WriteFile(name, []byte(src.String()), 0o600))
	}
	out, err := exec.CommandContext(t.Context(), "go", "build", "./"+filepath.ToSlash(dir)).CombinedOutput()
	// go test puts its own go command first in PATH. The compiler names the snippet files; each starts with the README
	// line its block comes from.
	require.NoError(t, err, "README snippets do not compile:\n%s", out)
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
