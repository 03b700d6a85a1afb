package scripts

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every script names its KEYS and ARGV in locals at its top, before its
// first other line of code, and indexes them by number nowhere else (a
// loop over a variable tail, such as ARGV[10 + i], is not a number): a
// reader learns what a script takes from its first lines. The numbers each
// names run from 1 with no gap. The common helpers index neither by
// number: a helper that read a script's argument would hide it from the
// script's top.
func TestScriptsNameTheirKeysAndArgs(t *testing.T) {
	numbered := regexp.MustCompile(`\b(KEYS|ARGV)\s*\[\s*(\d+)\s*\]`)
	comment := regexp.MustCompile(`--.*`)
	for _, name := range commonFiles() {
		for i, line := range strings.Split(source("common/"+name), "\n") {
			for _, m := range numbered.FindAllString(comment.ReplaceAllString(line, ""), -1) {
				t.Errorf("common/%s:%d: %s in a common helper", name, i+1, m)
			}
		}
	}
	for _, name := range Files() {
		top := true
		named := map[string]map[int]bool{"KEYS": {}, "ARGV": {}}
		for i, line := range strings.Split(source(name), "\n") {
			code := strings.TrimSpace(comment.ReplaceAllString(line, ""))
			if code == "" {
				continue
			}
			found := numbered.FindAllStringSubmatch(code, -1)
			if top && strings.HasPrefix(code, "local ") && len(found) > 0 {
				for _, m := range found {
					n, _ := strconv.Atoi(m[2])
					named[m[1]][n] = true
				}
				continue
			}
			top = false
			for _, m := range found {
				t.Errorf("%s:%d: %s below the locals that name them", name, i+1, m[0])
			}
		}
		for table, ns := range named {
			for n := 1; n <= len(ns); n++ {
				if !ns[n] {
					t.Errorf("%s: %s[%d] not named, though a later one is", name, table, n)
				}
			}
		}
	}
}

// No script declares a local named as a common definition: it would hide
// the helper from the rest of the script, and its name alone makes the
// script carry the helper (see prelude).
func TestScriptLocalsDoNotShadowCommon(t *testing.T) {
	common := make(map[string]bool)
	for _, p := range commonParts(false, true) {
		for _, n := range p.names {
			common[n] = true
		}
	}
	decl := regexp.MustCompile(`\blocal\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
	comment := regexp.MustCompile(`--[^\n]*`)
	for _, name := range Files() {
		for _, m := range decl.FindAllStringSubmatch(comment.ReplaceAllString(source(name), ""), -1) {
			for _, n := range strings.Split(m[1], ",") {
				if n = strings.TrimSpace(n); common[n] {
					t.Errorf("%s: local %s hides the common helper", name, n)
				}
			}
		}
	}
}

// A Lua function holds at most 200 active locals, and a script's top level
// holds its own and those of the common parts it carries (prelude): the
// text sent to Redis is kept well under that (150), so that a new helper
// or key never makes a script fail to compile. Each script is judged by
// the parts it carries, not by all of them: a helper that few scripts use
// costs the others nothing. WithCommon, for tests of the helpers, carries
// every part: they stay under the same bound, which leaves a test's body
// room.
func TestScriptsStayUnderTheLocalsLimit(t *testing.T) {
	load := loader(false, true)
	for _, name := range Files() {
		if n := topLocals(load(name).src); n > 150 {
			t.Errorf("%s: %d locals at its top level, with the common parts it carries", name, n)
		}
	}
	if n := topLocals(WithCommon("").src); n > 150 {
		t.Errorf("the whole of the common helpers (WithCommon): %d locals at the top level", n)
	}
}

// topLocals counts the locals a script's text declares at its top level
// (a line that starts with local): a helper's own locals are its
// function's, indented.
func topLocals(src string) int {
	n := 0
	for _, m := range topLocal.FindAllStringSubmatch(src, -1) {
		n += len(strings.Split(m[1], ","))
	}
	return n
}

var topLocal = regexp.MustCompile(`(?m)^local\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
