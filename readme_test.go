package worqr

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
