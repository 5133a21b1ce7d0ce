package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packageRoots are the directories whose Go packages docs/development.md
// lists, one table row each.
var packageRoots = []string{"internal", "tests"}

// packageSection is the heading of development.md's package table.
const packageSection = "## Packages"

// goPackages returns, relative to the root and slash-separated, every
// directory under packageRoots that holds at least one .go file. Test
// files count: several end-to-end packages (tests/e2e, tests/docs) hold
// nothing else, and `go test ./...` runs them. Directories the go command
// ignores are skipped: testdata, and names starting with "." or "_".
func goPackages(t *testing.T, dir string) []string {
	t.Helper()
	found := map[string]bool{}
	for _, top := range packageRoots {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !strings.HasSuffix(name, ".go") ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return nil
			}
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			found[filepath.ToSlash(rel)] = true
			return nil
		})
		require.NoError(t, err)
	}
	out := make([]string, 0, len(found))
	for p := range found {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

var packageCellRE = regexp.MustCompile("^`([^`]+)`$")

// packageTable returns the first column of the table under packageSection
// in development.md, with the line of each row, and the problems that keep
// a row from being read: a first cell that is not one path in backticks, a
// path listed twice, no such section at all. The table must stay readable
// by this test.
func packageTable(data []byte) (listed map[string]int, problems []string) {
	listed = map[string]int{}
	lines := prose(data)
	nums := make([]int, 0, len(lines))
	for n := range lines {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	in, seen, rows := false, false, 0
	for _, n := range nums {
		line := strings.TrimSpace(lines[n])
		if strings.HasPrefix(line, "#") {
			if in && strings.HasPrefix(line, "## ") {
				break // the next section
			}
			if line == packageSection {
				in, seen = true, true
			}
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		rows++
		if rows <= 2 {
			continue // the header and its separator
		}
		cells := strings.Split(line, "|")
		m := packageCellRE.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if m == nil {
			problems = append(problems, fmt.Sprintf("docs/development.md:%d: the first cell of a row under %q is not a package path in backticks: %s", n, packageSection, line))
			continue
		}
		if first, dup := listed[m[1]]; dup {
			problems = append(problems, fmt.Sprintf("docs/development.md:%d: %s is listed again (first on line %d)", n, m[1], first))
			continue
		}
		listed[m[1]] = n
	}
	if !seen {
		problems = append(problems, fmt.Sprintf("docs/development.md has no section %q", packageSection))
	}
	return listed, problems
}

// TestPackageListIsComplete: docs/development.md lists every Go package
// under internal/ and tests/, and nothing else.
func TestPackageListIsComplete(t *testing.T) {
	dir := root(t)
	data, err := os.ReadFile(filepath.Join(dir, "docs", "development.md"))
	require.NoError(t, err)
	listed, problems := packageTable(data)
	for _, p := range problems {
		t.Error(p)
	}
	require.NotEmpty(t, listed, "read no package from docs/development.md")
	pkgs := goPackages(t, dir)
	assert.Greater(t, len(pkgs), 30, "found almost no Go packages: is the root right?")

	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p] = true
		if _, ok := listed[p]; !ok {
			t.Errorf("package %s is not in docs/development.md: add a row \"| `%s` | what it is |\" to the table under %q", p, p, packageSection)
		}
	}
	stale := make([]string, 0)
	for p := range listed {
		if !exists[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	for _, p := range stale {
		t.Errorf("docs/development.md:%d lists %s, which is not a Go package of the repository (no .go file there): remove or rename the row", listed[p], p)
	}
}

// TestPackageTableParser pins what the table parser accepts and refuses.
func TestPackageTableParser(t *testing.T) {
	doc := "# D\n## Packages\n\n| package | what |\n| --- | --- |\n" +
		"| `internal/a` | one |\n| `tests/b` | two, with `code` |\n\n" +
		"```\n| `internal/fenced` | not a row |\n```\n" +
		"## Conventions\n\n| `internal/later` | another section |\n"
	got, problems := packageTable([]byte(doc))
	assert.Empty(t, problems)
	assert.Equal(t, map[string]int{"internal/a": 6, "tests/b": 7}, got)

	got, problems = packageTable([]byte("## Packages\n| p | w |\n|---|---|\n" +
		"| internal/a | no backticks |\n| `x` | y |\n| `x` | again |\n"))
	assert.Equal(t, map[string]int{"x": 5}, got)
	assert.Len(t, problems, 2, "a row without backticks and a repeated row: %v", problems)

	_, problems = packageTable([]byte("# D\n## Layout\n| `internal/a` | x |\n"))
	assert.Len(t, problems, 1, "no Packages section: %v", problems)
}
