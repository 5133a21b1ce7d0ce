// Package docs checks the repository's documentation: every relative link
// in the README and docs/ leads to a file (and heading) that exists, every
// document in docs/ is listed in the README, every `make` target the
// documents name exists, and no file in the repository refers to anything
// outside it.
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingDocs are documents the README lists that are written on a parallel
// branch; until they land, a link to one of them may not resolve. Remove an
// entry once its file is in the repository.
var pendingDocs = map[string]bool{}

// root is the repository root (this package is tests/docs).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "no go.mod in %s: is this package still tests/docs?", dir)
	return dir
}

// documents are the README and every Markdown file in docs/, relative to
// the root, slash-separated.
func documents(t *testing.T, dir string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no docs/*.md")
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(dir, d)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose returns the lines of a Markdown file outside fenced code blocks,
// with their 1-based line numbers.
func prose(data []byte) map[int]string {
	out := map[int]string{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[n] = line
		}
	}
	return out
}

// anchors returns the GitHub anchors of a Markdown file's headings: lower
// case, punctuation dropped, spaces as hyphens, -1, -2 … for repeats.
func anchors(data []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := prose(data)
	for _, line := range lines {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestAnchors pins the slug rule on headings the documents use.
func TestAnchors(t *testing.T) {
	got := anchors([]byte("# A\n## 3.2 The core: situation → step → situation\n" +
		"### The JSON result (`-o json`)\n## `node cordon`, `node drain`\n## A\n```\n# not a heading\n```\n"))
	want := []string{"a", "32-the-core-situation--step--situation", "the-json-result--o-json",
		"node-cordon-node-drain", "a-1"}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, want, keys)
}

// TestRelativeLinksResolve: every relative link of the README and docs/
// names a file or directory of the repository, and its #anchor, if any, a
// heading of that file.
func TestRelativeLinksResolve(t *testing.T) {
	dir := root(t)
	cache := map[string][]byte{}
	read := func(rel string) ([]byte, error) {
		if b, ok := cache[rel]; ok {
			return b, nil
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		cache[rel] = b
		return b, err
	}
	links := 0
	for _, doc := range documents(t, dir) {
		data, err := read(doc)
		require.NoError(t, err)
		lines := prose(data)
		nums := make([]int, 0, len(lines))
		for n := range lines {
			nums = append(nums, n)
		}
		sort.Ints(nums)
		for _, n := range nums {
			line := codeSpanRE.ReplaceAllString(lines[n], "")
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if schemeRE.MatchString(target) {
					continue // http:, https:, mailto:
				}
				links++
				where := fmt.Sprintf("%s:%d: link %q", doc, n, target)
				file, anchor, _ := strings.Cut(target, "#")
				rel := doc
				if file != "" {
					rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), file)))
				}
				if strings.HasPrefix(rel, "../") || rel == ".." || filepath.IsAbs(file) {
					t.Errorf("%s: leads outside the repository", where)
					continue
				}
				fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
				if err != nil {
					if !pendingDocs[rel] {
						t.Errorf("%s: %s does not exist", where, rel)
					}
					continue
				}
				if anchor == "" {
					continue
				}
				if fi.IsDir() || !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: an anchor on %s, which is not a Markdown file", where, rel)
					continue
				}
				body, err := read(rel)
				require.NoError(t, err)
				if !anchors(body)[anchor] {
					t.Errorf("%s: %s has no heading with the anchor #%s", where, rel, anchor)
				}
			}
		}
	}
	assert.Greater(t, links, 20, "found almost no relative links: is the link pattern still right?")
}

// TestReadmeListsEveryDocument: the README's contents list links every
// document of docs/.
func TestReadmeListsEveryDocument(t *testing.T) {
	dir := root(t)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	for _, doc := range documents(t, dir)[1:] {
		assert.Contains(t, string(readme), "]("+doc+")", "README.md does not link %s", doc)
	}
}

var makeRE = regexp.MustCompile("`(?:[A-Z_]+=\\S+ )*make ([a-z][a-z0-9-]*)")

// TestMakeTargetsExist: every `make TARGET` the documents name is a target
// of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	dir := root(t)
	mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, line := range strings.Split(string(mk), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
			targets[name] = true
		}
	}
	require.True(t, targets["test"], "no test target found in the Makefile")
	named := 0
	for _, doc := range documents(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(doc)))
		require.NoError(t, err)
		// in code spans, and at the start of a line in code blocks
		// ("make demo   # …")
		fenced := false
		for _, line := range strings.Split(string(data), "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				fenced = !fenced
				continue
			}
			var found []string
			for _, m := range makeRE.FindAllStringSubmatch(line, -1) {
				found = append(found, m[1])
			}
			if fenced && strings.HasPrefix(trimmed, "make ") {
				found = append(found, strings.Fields(trimmed)[1])
			}
			for _, f := range found {
				named++
				assert.True(t, targets[f], "%s names `make %s`, which the Makefile does not have", doc, f)
			}
		}
	}
	assert.Greater(t, named, 10, "found almost no make targets in the documents")
}

// outside are the marks of a reference to something outside the
// repository: a path into the directory the project's notes were kept in,
// relative (from beside the checkout) or absolute, and the old design
// document's citations (the project's design is docs/design.md, cited as
// "docs/design.md §n").
var outside = []string{
	"/" + "shared",
	"DESIGN" + " §",
	"DESIGN" + ".md",
}

// TestNothingRefersOutsideTheRepository reads every file of the repository
// (build outputs and version control aside).
func TestNothingRefersOutsideTheRepository(t *testing.T) {
	dir := root(t)
	skip := map[string]bool{".git": true, "bin": true, "dist": true, "bench-results": true}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skip[d.Name()] && rel == d.Name() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || d.Name() == ".git" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, mark := range outside {
			if i := bytes.Index(data, []byte(mark)); i >= 0 {
				line := bytes.Count(data[:i], []byte("\n")) + 1
				t.Errorf("%s:%d mentions %q: the repository must stand alone", rel, line, mark)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 100, "read almost no files: is the root right?")
}
