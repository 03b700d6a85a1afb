package scripts

import (
	"flag"
	"os"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/carried.txt from the scripts as they are")

// The common parts each script carries, by the names they define (sorted),
// are those testdata/carried.txt lists: a change to the common helpers
// that makes a script carry more or fewer of them (each a closure per
// call) shows there, in review. After such a change on purpose:
// go test ./internal/scripts -run TestScriptsCarryTheListedParts -update
func TestScriptsCarryTheListedParts(t *testing.T) {
	parts := commonParts(false, true)
	var b strings.Builder
	for _, name := range Files() {
		pre := prelude(parts, source(name))
		var carried []string
		for _, p := range parts {
			if strings.Contains(pre, p.src) {
				carried = append(carried, p.names...)
			}
		}
		sort.Strings(carried)
		b.WriteString(name + ": " + strings.Join(carried, " ") + "\n")
	}
	const file = "testdata/carried.txt"
	if *update {
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(b.String(), "\n")
	lines := strings.Split(string(want), "\n")
	for i := 0; i < len(got) || i < len(lines); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(lines) {
			w = lines[i]
		}
		if g != w {
			t.Errorf("carried parts differ from %s (-update rewrites it):\n got: %s\nwant: %s", file, g, w)
		}
	}
}
