package scripts

import (
	"regexp"
	"strings"
)

// A script runs its whole text on every call, so each of the common
// helpers (common/) it carries costs a closure (and garbage to collect)
// per call: all of them, prepended to a script that uses two, cost some
// 5 µs per call on Redis 7, more than such a script's own work. So each
// script carries only the common parts it uses, and the parts those use.

// part is one top-level definition of a common file: a local function or
// local values, with the comment lines above it.
type part struct {
	names []string // the names it defines
	src   string
	uses  map[string]bool // the identifiers in its text
}

// localDef matches the start of a top-level definition, and names what it
// defines: "local function name" or "local a, b = ...".
var localDef = regexp.MustCompile(`^local (?:function ([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_, ]*)=)`)

var ident = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// identifiers are the words of src's code that could name a helper.
// Strings count too: that may carry a part a script does not need, never
// leave out one it does. Comments do not: their words ("wake the
// runtimes", "see group_push") would carry helpers nobody calls, each a
// closure made on every call of the script.
func identifiers(src string) map[string]bool {
	out := make(map[string]bool)
	for _, w := range ident.FindAllString(uncommented(src), -1) {
		out[w] = true
	}
	return out
}

// uncommented is src without its comments ('--' to the end of the line,
// outside a quoted string). The scripts have no long strings or long
// comments ('[[', '--[[').
func uncommented(src string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		var quote byte // the quote of the string the scan is in, or 0
		cut := len(line)
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0 && c == '\\':
				i++ // an escaped byte
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '-' && i+1 < len(line) && line[i+1] == '-':
				cut = i
			}
			if cut < len(line) {
				break
			}
		}
		b.WriteString(line[:cut])
		if cut < len(line) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// splitCommon cuts a common file into its parts, in order. The file's
// opening comment, down to the last blank line before the first
// definition, belongs to no part: it says what the file holds.
func splitCommon(src string) []part {
	var parts []part
	var cur *part
	var pending strings.Builder // comment and blank lines since the last code line
	lines := strings.SplitAfter(src, "\n")
	for _, line := range lines {
		m := localDef.FindStringSubmatch(line)
		if m != nil {
			if cur != nil {
				parts = append(parts, *cur)
			}
			cur = &part{names: defined(m)}
			cur.src = pending.String()
			if i := strings.LastIndex(cur.src, "\n\n"); i >= 0 && len(parts) == 0 {
				cur.src = cur.src[i+2:] // the first part: the opening comment is none of it
			}
			pending.Reset()
			cur.src += line
			continue
		}
		top := strings.HasPrefix(line, "--") || strings.TrimSpace(line) == ""
		if top {
			pending.WriteString(line)
			continue
		}
		if cur != nil {
			cur.src += pending.String() + line
		}
		pending.Reset()
	}
	if cur != nil {
		parts = append(parts, *cur)
	}
	for i := range parts {
		parts[i].uses = identifiers(parts[i].src)
	}
	return parts
}

func defined(m []string) []string {
	if m[1] != "" {
		return []string{m[1]}
	}
	var names []string
	for _, n := range strings.Split(m[2], ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// prelude is the common parts a script whose own text is body needs:
// those it names, and those they name, in their order (a Lua local exists
// only below its definition).
func prelude(parts []part, body string) string {
	need := identifiers(body)
	keep := make([]bool, len(parts))
	// A part only names parts above it, so one pass from the bottom up
	// finds them all.
	for i := len(parts) - 1; i >= 0; i-- {
		for _, n := range parts[i].names {
			if need[n] {
				keep[i] = true
			}
		}
		if keep[i] {
			for w := range parts[i].uses {
				need[w] = true
			}
		}
	}
	var b strings.Builder
	for i, p := range parts {
		if keep[i] {
			b.WriteString(p.src)
		}
	}
	return b.String()
}
