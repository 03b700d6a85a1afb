package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every header letter, outcome record letter and meta hash field that the
// scripts or the store write or read is listed in HeaderFields,
// ResultFields or MetaFields, and each of those is described in the
// layout at the top of records.go.
func TestRecordLayoutIsDocumented(t *testing.T) {
	t.Parallel()
	lua := luaSources(t)
	header := make(map[string][]string) // letter -> where
	meta := make(map[string][]string)
	comma := make(map[string][]string) // ',<letter>' in a string
	for name, src := range lua {
		for _, call := range luaCalls(src, "header_get", "header_set", "header_has") {
			if len(call) < 2 {
				t.Errorf("%s: a header helper called with %q", name, call)
				continue
			}
			if m := regexp.MustCompile(`^'([A-Za-z])'$`).FindStringSubmatch(call[1]); m != nil {
				header[m[1]] = append(header[m[1]], name)
			} else if call[1] != "letter" {
				// A letter the test cannot read: keep them literal.
				t.Errorf("%s: a header helper called with the letter %s", name, call[1])
			}
		}
		// The letters dead_revived removes.
		for _, m := range regexp.MustCompile(`ipairs\(\{([^}]*)\}\) do\s+h = header_set\(h, letter, nil\)`).FindAllStringSubmatch(src, -1) {
			for _, l := range regexp.MustCompile(`'([A-Za-z])'`).FindAllStringSubmatch(m[1], -1) {
				header[l[1]] = append(header[l[1]], name)
			}
		}
		for _, l := range regexp.MustCompile(`'\,([A-Za-z])`).FindAllStringSubmatch(src, -1) {
			comma[l[1]] = append(comma[l[1]], name)
		}
		// Fields named in a call on the meta hash (a value written is never
		// a quoted word).
		for _, call := range luaCalls(src, "redis.call") {
			if len(call) < 3 || !strings.HasPrefix(call[0], "'H") || (call[1] != "meta" && call[1] != "meta_key") {
				continue
			}
			for _, a := range call[2:] {
				if m := regexp.MustCompile(`^'([a-z]+)'$`).FindStringSubmatch(a); m != nil {
					meta[m[1]] = append(meta[m[1]], name)
				}
			}
		}
	}
	// Fields named in calls on a workflow's flow hash (the field of each
	// field and value pair of an HSET), and the states written to its
	// steps hash.
	flow := make(map[string][]string)
	steps := make(map[string][]string)
	quoted := regexp.MustCompile(`^'([a-z]+)'$`)
	for name, src := range lua {
		for _, call := range luaCalls(src, "redis.call") {
			if len(call) < 3 {
				continue
			}
			switch call[1] {
			case "flow_key", "flow", "keys[1]":
				step := 1
				if call[0] == "'HSET'" {
					step = 2
				}
				for i := 2; i < len(call); i += step {
					if m := quoted.FindStringSubmatch(call[i]); m != nil {
						flow[m[1]] = append(flow[m[1]], name)
					}
				}
			case "steps_key", "steps":
				if call[0] == "'HSET'" && len(call) == 4 {
					if m := quoted.FindStringSubmatch(call[3]); m != nil {
						steps[m[1]] = append(steps[m[1]], name)
					}
				}
			}
		}
		for _, call := range luaCalls(src, "flow_step_end") {
			if m := quoted.FindStringSubmatch(call[len(call)-1]); m != nil {
				steps[m[1]] = append(steps[m[1]], name)
			}
		}
	}
	require.Contains(t, flow, "cancelled", "the scan found the flow hash's fields")
	require.Contains(t, steps, "x", "the scan found the step states")
	for f, where := range flow {
		assert.Contains(t, WorkflowFields, f, "flow hash field %q (in %v) is not in WorkflowFields", f, where)
	}
	for st, where := range steps {
		assert.Contains(t, StepStates, st, "step state %q (in %v) is not in StepStates", st, where)
	}

	// The fields the store writes into headers.
	for _, f := range goStrings(t, `",([A-Za-z])`) {
		header[f] = append(header[f], "internal/store")
	}
	require.Contains(t, header, "a", "the scan found the header letters")
	require.Contains(t, header, "W")
	require.Contains(t, meta, "wx", "the scan found the meta fields")
	require.Contains(t, comma, "E", "the scan found retain's outcome letters")

	for l, where := range header {
		assert.Contains(t, HeaderFields, l, "header letter %q (in %v) is not in HeaderFields", l, where)
	}
	for l, where := range comma {
		assert.True(t, strings.Contains(HeaderFields, l) || strings.Contains(ResultFields, l),
			"%q (in %v) is neither a header nor an outcome record letter", ","+l, where)
	}
	for f, where := range meta {
		assert.Contains(t, MetaFields, f, "meta field %q (in %v) is not in MetaFields", f, where)
	}

	// And records.go describes each.
	doc, err := os.ReadFile("records.go")
	require.NoError(t, err)
	var described []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([A-Za-z])  `).FindAllStringSubmatch(string(doc), -1) {
		described = append(described, m[1])
	}
	assert.ElementsMatch(t, strings.Split(HeaderFields, ""), described, "the header letters records.go describes")
	assert.ElementsMatch(t, MetaFields, fieldTable(t, string(doc), "(MetaFields):"), "the meta fields records.go describes")
	assert.ElementsMatch(t, WorkflowFields, fieldTable(t, string(doc), "(WorkflowFields):"), "the flow hash fields records.go describes")
	for _, st := range StepStates {
		assert.Regexp(t, `\b`+st+`\s+(//\s+)?\(`, string(doc), "records.go describes step state %q", st)
	}
	described = nil
	format := regexp.MustCompile(`(?m)^//\t<id>(,.*):<body>$`).FindStringSubmatch(string(doc))
	require.NotNil(t, format, "records.go lays out the outcome record")
	for _, m := range regexp.MustCompile(`,([A-Za-z])<`).FindAllStringSubmatch(format[1], -1) {
		described = append(described, m[1])
	}
	assert.ElementsMatch(t, strings.Split(ResultFields, ""), described, "the outcome record letters records.go describes")
	for _, l := range HeaderFields {
		assert.Equal(t, 1, strings.Count(HeaderFields, string(l)), "%q twice in HeaderFields", l)
	}
}

// docs/key-layout.md, the layout for operators, names every header
// letter, meta hash field, flow hash field and event kind that records.go
// lays out: a reader of either finds each.
func TestKeyLayoutPageNamesEveryField(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "key-layout.md"))
	require.NoError(t, err)
	page := string(b)
	// The backquoted words of the table row of key, or of the paragraph
	// that starts with it.
	named := func(start string) map[string]bool {
		at := strings.Index(page, start)
		require.GreaterOrEqual(t, at, 0, "key-layout.md has %s", start)
		text, _, _ := strings.Cut(page[at:], "\n\n")
		if strings.HasPrefix(start, "|") {
			text, _, _ = strings.Cut(page[at:], "\n")
		}
		out := make(map[string]bool)
		for _, m := range regexp.MustCompile("`([A-Za-z]+)").FindAllStringSubmatch(text, -1) {
			out[m[1]] = true
		}
		return out
	}
	letters := named("**Task entries.**")
	for _, l := range HeaderFields {
		assert.True(t, letters[string(l)], "the header letter %q is not in key-layout.md's task entries", l)
	}
	meta := named("| `P:{q:N}:meta`")
	for _, f := range MetaFields {
		assert.True(t, meta[f], "the meta field %q is not in key-layout.md", f)
	}
	flow := named("| `P:{wf:W}:flow`")
	for _, f := range WorkflowFields {
		assert.True(t, flow[f], "the flow hash field %q is not in key-layout.md", f)
	}
	events := named("| `P:{q:N}:events`")
	for _, k := range []EventKind{EventWork, EventCancel, EventDelete, EventSchedule, EventOutcome, EventNoOutcome, EventProgress, EventHandOff} {
		assert.True(t, events[string(k)], "the event %q is not in key-layout.md", k)
	}
}

// fieldTable is the fields a table of records.go's layout describes: the
// names (two letters or more, ", " between) that start its lines, in the
// comment paragraph after the line that ends with heading.
func fieldTable(t *testing.T, doc, heading string) []string {
	t.Helper()
	_, after, ok := strings.Cut(doc, heading+"\n//\n")
	require.True(t, ok, "records.go has a table %s", heading)
	table, _, _ := strings.Cut(after, "\n//\n")
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z]{2,}(?:, [a-z]{2,})*)  `).FindAllStringSubmatch(table, -1) {
		out = append(out, strings.Split(m[1], ", ")...)
	}
	return out
}

// luaSources are the scripts' texts and the common helpers' (by their
// path under internal/scripts), comments removed.
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "scripts")
	names, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	require.NoError(t, err)
	common, err := filepath.Glob(filepath.Join(dir, "common", "*.lua"))
	require.NoError(t, err)
	require.Greater(t, len(common), 1, "the common helpers")
	comment := regexp.MustCompile(`--[^\n]*`)
	out := make(map[string]string)
	for _, path := range append(names, common...) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		name, err := filepath.Rel(dir, path)
		require.NoError(t, err)
		out[filepath.ToSlash(name)] = comment.ReplaceAllString(string(b), "")
	}
	require.Greater(t, len(out), 10)
	return out
}

// goStrings are the first submatches of pattern in the store's Go files
// (not its tests).
func goStrings(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	re := regexp.MustCompile(pattern)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// luaCalls are the arguments of every call of the named functions in src
// (a definition is not a call): each argument's text, trimmed, split at
// the commas outside brackets and strings.
func luaCalls(src string, names ...string) [][]string {
	var calls [][]string
	for _, name := range names {
		re := regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])` + regexp.QuoteMeta(name) + `\(`)
		for _, loc := range re.FindAllStringIndex(src, -1) {
			if strings.HasSuffix(strings.TrimSpace(src[:loc[0]+1]), "function") {
				continue
			}
			calls = append(calls, luaArgs(src[loc[1]:]))
		}
	}
	return calls
}

// luaArgs splits the arguments that s starts with, up to the parenthesis
// that closes them.
func luaArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			if depth == 0 {
				return append(args, strings.TrimSpace(s[start:i]))
			}
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return args
}
