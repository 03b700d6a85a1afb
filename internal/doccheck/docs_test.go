package doccheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markdownLink matches an inline link or image, [text](target) or
// ![alt](target "title"), and markdownRef a reference definition,
// [name]: target.
var (
	markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	markdownRef  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+(\S+)`)
	urlScheme    = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	atxHeading   = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	headingLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// markdownText is doc with what is not prose blanked out, newlines kept
// so that offsets keep their lines: fenced code blocks and code spans,
// where a link or a heading is only text.
func markdownText(doc []byte) []byte {
	out := bytes.Clone(doc)
	blank := func(b []byte) {
		for i := range b {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	fence := ""
	offset := 0
	for line := range bytes.Lines(doc) {
		trimmed := strings.TrimSpace(string(line))
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			blank(out[offset : offset+len(line)])
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			blank(out[offset : offset+len(line)])
		}
		offset += len(line)
	}
	// A code span runs from a run of backticks to the next run as long.
	for i := 0; i < len(out); {
		if out[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(out) && out[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(out); {
			if out[j] != '`' {
				j++
				continue
			}
			k := 0
			for j+k < len(out) && out[j+k] == '`' {
				k++
			}
			if k == n {
				end = j + k
				break
			}
			j += k
		}
		if end < 0 {
			i += n // no closing run: the backticks are text
			continue
		}
		blank(out[i:end])
		i = end
	}
	return out
}

// githubAnchors are the anchors GitHub gives the headings of a Markdown
// page: the heading's text (links and images by their text, without
// code, emphasis or HTML markers), lower-cased, with every character but
// letters, marks, digits, connector punctuation (_), hyphens and spaces
// dropped and each space made a hyphen; a repeated anchor gets -1, -2...
func githubAnchors(doc []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.Lines(string(doc)) {
		trimmed := strings.TrimSpace(line)
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		m := atxHeading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		text := headingLink.ReplaceAllString(m[2], "$1")
		text = strings.NewReplacer("`", "", "*", "").Replace(text)
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteByte('-')
			case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Pc):
				slug.WriteRune(r)
			}
		}
		anchor := slug.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	}
	return anchors
}

func TestGithubAnchors(t *testing.T) {
	t.Parallel()
	doc := "# worqr\n\n## Command line: `worqr`\n\n```sh\n# not a heading\n```\n\n" +
		"### Before and after task ids and the store (#10)\n\n## Stats (issue #13)\n\n## Stats\n\n## Stats\n\n" +
		"## Scaling out: Redis Cluster\n\n## [Recipes](recipes.md): a *typed* handler — with retries\n\n## worqr's own tests ##\n"
	var got []string
	for a := range githubAnchors([]byte(doc)) {
		got = append(got, a)
	}
	assert.ElementsMatch(t, []string{
		"worqr", "command-line-worqr", "before-and-after-task-ids-and-the-store-10", "stats-issue-13",
		"stats", "stats-1", "scaling-out-redis-cluster", "recipes-a-typed-handler--with-retries", "worqrs-own-tests",
	}, got)
}

// Every relative link and image in the README and in docs/ names a file
// of the repository, and every #anchor a heading of the page it points
// to, as GitHub makes anchors (BENCHMARKS.md's too). Links to other
// sites are not followed.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		doc, err := os.ReadFile(file)
		require.NoError(t, err)
		anchors[file] = githubAnchors(doc)
		return anchors[file]
	}
	links := 0
	for _, page := range docPages(t) {
		doc, err := os.ReadFile(page)
		require.NoError(t, err)
		text := markdownText(doc)
		var found [][]int
		found = append(found, markdownLink.FindAllSubmatchIndex(text, -1)...)
		found = append(found, markdownRef.FindAllSubmatchIndex(text, -1)...)
		for _, m := range found {
			target := string(text[m[2]:m[3]])
			where := fmt.Sprintf("%s:%d: %s", page, 1+bytes.Count(doc[:m[0]], []byte("\n")), target)
			if urlScheme.MatchString(target) {
				continue // https:, mailto:
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
				if strings.HasPrefix(file, "..") || filepath.IsAbs(path) {
					t.Errorf("%s: leaves the repository", where)
					continue
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: no such file", where)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: an anchor in a file that is not Markdown", where)
				continue
			}
			if !anchorsOf(file)[anchor] {
				t.Errorf("%s: %s has no heading with the anchor #%s", where, file, anchor)
			}
		}
	}
	require.NotZero(t, links, "no relative links found: is the pattern right?")
}

// Every page of docs/ opens with its title and a paragraph that says what
// it covers, links back to the index (docs/README.md), and is listed in
// the index; the README links to the index.
func TestDocPagesAreIndexed(t *testing.T) {
	t.Parallel()
	index, err := os.ReadFile(filepath.Join("docs", "README.md"))
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), "](docs/README.md)", "the README does not link to the guide's index")
	for _, page := range docPages(t)[1:] {
		if filepath.Base(page) == "README.md" {
			continue
		}
		doc, err := os.ReadFile(page)
		require.NoError(t, err)
		blocks := strings.Split(strings.TrimSpace(string(doc)), "\n\n")
		require.GreaterOrEqual(t, len(blocks), 3, "%s is too short", page)
		assert.True(t, strings.HasPrefix(blocks[0], "# ") && !strings.Contains(blocks[0], "\n"), "%s does not open with a title", page)
		first := blocks[1]
		assert.False(t, strings.HasPrefix(first, "#") || strings.HasPrefix(first, "-") || strings.HasPrefix(first, "|") ||
			strings.HasPrefix(first, "<!--") || strings.HasPrefix(first, "```"), "%s: its title is not followed by a summary paragraph", page)
		assert.Contains(t, blocks[2], "](README.md)", "%s: no link back to the index after its summary", page)
		assert.Contains(t, string(index), "]("+filepath.Base(page)+")", "the index does not list %s", page)
	}
}

// recipeBlock matches a recipe's Go block in docs/recipes.md and the
// program file it is.
var recipeBlock = regexp.MustCompile("(?s)<!-- check: program ([a-z0-9]+/[a-z0-9_]+\\.go) \\| -->\n```go\n(.*?)```")

// Every recipe on the recipes page is a program under examples/recipes,
// word for word, so that the program CI runs (.ci/recipe) is the one the
// page shows; and every file there is on the page.
func TestRecipesAreExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "recipes.md"))
	require.NoError(t, err)
	shown := map[string]bool{}
	for _, m := range recipeBlock.FindAllSubmatch(doc, -1) {
		name := string(m[1])
		shown[name] = true
		file, err := os.ReadFile(filepath.Join("examples", "recipes", filepath.FromSlash(name)))
		if !assert.NoError(t, err, "docs/recipes.md shows %s: it must be examples/recipes/%[1]s", name) {
			continue
		}
		assert.Equal(t, string(file), string(m[2]), "docs/recipes.md's %s differs from examples/recipes/%[1]s", name)
	}
	require.NotEmpty(t, shown, "no recipes found in docs/recipes.md")
	files, err := filepath.Glob(filepath.Join("examples", "recipes", "*", "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, filepath.Join("examples", "recipes")+string(filepath.Separator)))
		assert.True(t, shown[rel], "examples/recipes/%s is not on docs/recipes.md", rel)
	}
}

// The package doc's map of the files names every source file of the
// package, and no file that is gone.
func TestTheMapOfTheFilesMatchesTheTree(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	start := bytes.Index(doc, []byte("// # Map of the files"))
	require.NotEqual(t, -1, start, "doc.go has no map of the files")
	mapText := string(doc[start:])
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b([a-z0-9_]+\.go)\b`).FindAllStringSubmatch(mapText, -1) {
		named[m[1]] = true
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		assert.True(t, named[f], "doc.go's map of the files does not name %s", f)
		delete(named, f)
	}
	for f := range named {
		assert.Fail(t, "doc.go's map of the files names a file that is not in the package", f)
	}
}

// docs/internals.md names every package under internal/ (in bold, or as
// internal/<name> in a heading), and none that is gone.
func TestTheMapOfInternalMatchesTheTree(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("docs", "internals.md"))
	require.NoError(t, err)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)\*\*([a-z0-9]+)\*\*|^#+ .*internal/([a-z0-9]+)`).FindAllStringSubmatch(string(page), -1) {
		named[m[1]+m[2]] = true
	}
	dirs, err := os.ReadDir("internal")
	require.NoError(t, err)
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		assert.True(t, named[d.Name()], "docs/internals.md does not name internal/%s", d.Name())
		delete(named, d.Name())
	}
	for n := range named {
		assert.Fail(t, "docs/internals.md names a package that is not under internal/", n)
	}
}
