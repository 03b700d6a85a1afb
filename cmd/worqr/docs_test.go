package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The command table of the operations page (docs/operations.md) names
// every command of the binary and no other, and every flag a row names is
// one that the row's commands take, as their -h says.
func TestDocsListEveryCommand(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(page), "\n## Command line: `worqr`\n")
	require.True(t, ok, "docs/operations.md has no Command line section")
	section, _, _ = strings.Cut(section, "\n## ")

	code := regexp.MustCompile("`([^`]*)`")
	flagName := regexp.MustCompile(`--[a-z][a-z-]*`)
	want := map[string]bool{"help": true}
	for _, c := range commands() {
		want[c.name] = true
	}
	documented := map[string]bool{}
	rows := 0
	b := newBackend(t)
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		cells := strings.Split(line, " | ")
		require.GreaterOrEqual(t, len(cells), 2, "a row without two cells: %s", line)
		// The first cell names the row's commands, each in a code span:
		// its words up to the first argument or flag.
		var names []string
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			var words []string
			for _, w := range strings.Fields(m[1]) {
				if strings.ContainsAny(w[:1], "<[-\\|") {
					break
				}
				words = append(words, w)
			}
			if len(words) > 0 && !slices.Contains(names, strings.Join(words, " ")) {
				names = append(names, strings.Join(words, " "))
			}
		}
		require.NotEmpty(t, names, "a row that names no command: %s", line)
		var help strings.Builder
		for _, name := range names {
			documented[name] = true
			if name == "help" {
				continue
			}
			r := execute(t, b.bare(append(strings.Fields(name), "-h")...), "")
			if assert.Equal(t, exitOK, r.code, "worqr %s -h\n%s", name, r) {
				help.WriteString(r.stdout)
			}
		}
		// The flags in the row's code spans, but for a span that starts
		// with another command's name (`enqueue --retain` in result's).
		for _, m := range code.FindAllStringSubmatch(line, -1) {
			words := strings.Fields(m[1])
			if len(words) > 0 && want[words[0]] && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, words[0]) }) {
				continue
			}
			for _, f := range flagName.FindAllString(m[1], -1) {
				assert.Contains(t, help.String(), "  "+f+" ", "the docs give %s a flag %s that its -h does not list", names, f)
			}
		}
	}
	require.NotZero(t, rows, "no command table in the Command line section")
	for name := range want {
		assert.True(t, documented[name], "docs/operations.md's command table does not list %q", name)
	}
	for name := range documented {
		assert.True(t, want[name], "docs/operations.md's command table lists %q, which is no command", name)
	}
}
