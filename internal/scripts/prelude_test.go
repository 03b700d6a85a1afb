package scripts

import (
	"regexp"
	"strings"
	"testing"
)

// Every script carries the helpers it names, and what they name in turn,
// and no others.
func TestPreludeCarriesWhatAScriptUses(t *testing.T) {
	parts := commonParts(true, true)
	has := func(src, name string) bool {
		return strings.Contains(src, "local function "+name+"(") || strings.Contains(src, "local "+name+" =")
	}
	p := prelude(parts, "local now = now_ms()\nif lease_live(KEYS[1], ARGV[1], now) then publish('c', 'm') end\n")
	for _, name := range []string{"now_ms", "lease_live", "publish", "PUBLISH_COMMAND"} {
		if !has(p, name) {
			t.Errorf("%s missing from\n%s", name, p)
		}
	}
	for _, name := range []string{"now_us", "stat", "stats_flush", "STATS", "entry_id"} {
		if has(p, name) {
			t.Errorf("%s carried needlessly", name)
		}
	}
	if !strings.Contains(p, "SPUBLISH") {
		t.Error("the publish command is lost")
	}
	// A helper's own helpers come along, above it.
	p = prelude(parts, "return stat('x', 1)")
	if i, j := strings.Index(p, "local STATS ="), strings.Index(p, "local function stat("); i < 0 || j < 0 || i > j {
		t.Errorf("stat needs STATS defined above it:\n%s", p)
	}
}

// Every script carries each helper that its code, or the code of a helper
// it carries, calls, defined above the helpers that call it. (prelude
// looks only upwards from a helper: one that calls a helper placed below
// it, in its file or in a file later in commonFiles, goes without it, and
// the script fails on a nil call.)
func TestEveryScriptCarriesTheHelpersItCalls(t *testing.T) {
	parts := commonParts(true, true)
	defined := make(map[string]int) // a helper's name -> its part
	for i, p := range parts {
		for _, n := range p.names {
			defined[n] = i
		}
	}
	comment := regexp.MustCompile(`--[^\n]*`)
	names := Files()
	for _, name := range names {
		body := source(name)
		pre := prelude(parts, body)
		// Where each carried part starts in the prelude (they come in
		// the common parts' order).
		at, off := make(map[int]int), 0
		for i, p := range parts {
			if j := strings.Index(pre[off:], p.src); j >= 0 {
				at[i], off = off+j, off+j+len(p.src)
			}
		}
		calls := func(caller string, self int, code string, pos int) {
			for w := range identifiers(comment.ReplaceAllString(code, "")) {
				k, ok := defined[w]
				if !ok || k == self {
					continue
				}
				if j, carried := at[k]; !carried || j >= pos {
					t.Errorf("%s: %s names %s, which is not carried above it", name, caller, w)
				}
			}
		}
		for i, j := range at {
			calls(strings.Join(parts[i].names, ","), i, parts[i].src, j)
		}
		calls("the script", -1, body, len(pre))
	}
	if len(names) < 10 {
		t.Fatalf("only %d scripts read", len(names))
	}
}

// Every part of a common file is cut at a definition, so that nothing of
// it is lost between parts: joined again, they are the file less its
// opening comment, which says what the file holds and is followed by a
// blank line.
func TestSplitCommonLosesNothing(t *testing.T) {
	for _, name := range commonFiles() {
		src := source("common/" + name)
		var b strings.Builder
		for _, p := range splitCommon(src) {
			if len(p.names) == 0 {
				t.Errorf("%s: a part defines nothing: %q", name, p.src)
			}
			b.WriteString(p.src)
		}
		joined := strings.TrimSpace(b.String())
		head, ok := strings.CutSuffix(strings.TrimSpace(src), joined)
		if !ok || joined == "" {
			t.Errorf("%s: parts joined again differ from the file", name)
			continue
		}
		if !strings.HasPrefix(head, "--") || !strings.HasSuffix(head, "\n\n") {
			t.Errorf("%s: no opening comment then a blank line: %q", name, head)
		}
	}
}

// Every file of common/ is one of commonFiles, whose order the prelude
// keeps: a file left out would be no script's.
func TestCommonFilesAreListed(t *testing.T) {
	listed := make(map[string]bool)
	for _, name := range commonFiles() {
		listed[name] = true
	}
	entries, err := files.ReadDir("common")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("common/%s is not in commonFiles", e.Name())
		}
		delete(listed, e.Name())
	}
	for name := range listed {
		t.Errorf("commonFiles lists %s, which common/ does not hold", name)
	}
}

// A helper named only in a comment is not carried (each carried helper
// costs a closure per call); one named after a string holding '--' is.
func TestPreludeSkipsComments(t *testing.T) {
	parts := commonParts(true, true)
	p := prelude(parts, "-- see now_us and wake\nlocal x = now_ms() -- not stat\n")
	if !strings.Contains(p, "local function now_ms(") {
		t.Errorf("now_ms missing from\n%s", p)
	}
	for _, name := range []string{"now_us", "wake", "stat"} {
		if strings.Contains(p, "local function "+name+"(") {
			t.Errorf("%s, named in a comment only, carried", name)
		}
	}
	p = prelude(parts, "local s = 'a--b\\'--' .. ms(1) -- wake\n")
	if !strings.Contains(p, "local function ms(") || strings.Contains(p, "local function wake(") {
		t.Errorf("a string's '--' is not a comment:\n%s", p)
	}
}
