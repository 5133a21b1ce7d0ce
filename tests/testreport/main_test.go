package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The recordings in testdata are real `go test -json` output:
//
//   - node-ok.json: internal/node, every test passing;
//   - host-not-root.json: internal/host run as an unprivileged user (uid
//     65534), its seven tests that need root skipped;
//   - mixed.json: a package with a skip logged after a t.Log and on two
//     lines, a skipped subtest, t.SkipNow, a parallel skip, a failure;
//   - build-failed.json: a package that does not compile, and one
//     without test files.
const hostPkg = "github.com/chart-upgrader/chart-upgrader/internal/host"

// result is one run of the reporter.
type result struct {
	code  int
	out   string
	lines []string
}

// feed runs the reporter on a recording with the expected list given
// (nil: no file).
func feed(t *testing.T, recording string, expected *string, ci bool) result {
	t.Helper()
	in, err := os.Open(filepath.Join("testdata", recording))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), "skips-expected.txt")
	if expected != nil {
		if err := os.WriteFile(path, []byte(*expected), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	code := run(in, &out, path, ci)
	return result{code: code, out: out.String(), lines: strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")}
}

func list(s string) *string { return &s }

// outputs is the Output of every event of a recording, concatenated: what
// go test -v would have printed.
func outputs(t *testing.T, recording string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", recording))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ev event
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("%s: %v", recording, err)
		}
		b.WriteString(ev.Output)
	}
	if b.Len() == 0 {
		t.Fatalf("%s has no output", recording)
	}
	return b.String()
}

var closingRE = regexp.MustCompile(`^\d+ passed, \d+ failed, \d+ skipped$`)

func last(r result) string { return r.lines[len(r.lines)-1] }

func TestPassingPackage(t *testing.T) {
	r := feed(t, "node-ok.json", nil, true)
	if r.code != 0 {
		t.Errorf("exit %d, want 0\n%s", r.code, r.out)
	}
	if !strings.HasPrefix(r.out, outputs(t, "node-ok.json")) {
		t.Errorf("the output does not begin with go test's own, in order:\n%s", r.out)
	}
	if !strings.Contains(r.out, "\nok  \tgithub.com/chart-upgrader/chart-upgrader/internal/node\t0.017s\n") {
		t.Errorf("no closing ok line of the package:\n%s", r.out)
	}
	if want := "8 passed, 0 failed, 0 skipped"; last(r) != want {
		t.Errorf("closing line %q, want %q", last(r), want)
	}
	if !slices.Contains(r.lines, "skipped tests: none") {
		t.Errorf("no skip section:\n%s", r.out)
	}
}

func TestSkipsOfTestsThatNeedRoot(t *testing.T) {
	names := []string{"TestUpgradeAsTheUpgradeUserOnAnUnpreparedNode", "TestHostPrepareCommand/prepare",
		"TestPrepareThenTheUpgradeUserPasses", "TestPrepareTakesOverOnlyItsOwnFiles", "TestPrepareRefusesALinkedDirectory",
		"TestPrepareNeedsOnlyCAPCHOWN", "TestCheckWritableUnreadableJournal"}
	const why = "needs root: it runs children as another user and changes owners (make test runs as root in CI)"

	r := feed(t, "host-not-root.json", nil, false)
	if r.code != 0 {
		t.Errorf("without CI an unexpected skip is reported only: exit %d\n%s", r.code, r.out)
	}
	for _, n := range names {
		want := "  " + hostPkg + " " + n + ": " + why + "  [not in "
		if !slices.ContainsFunc(r.lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no line %q in the skip section:\n%s", want, r.out)
		}
	}
	if !slices.Contains(r.lines, "skipped tests (7):") {
		t.Errorf("the section does not count 7 skips:\n%s", r.out)
	}
	if want := "12 passed, 0 failed, 7 skipped"; last(r) != want {
		t.Errorf("closing line %q, want %q", last(r), want)
	}

	t.Run("with CI, an unexpected skip fails", func(t *testing.T) {
		r := feed(t, "host-not-root.json", list("# none\n"), true)
		if r.code != 1 {
			t.Errorf("exit %d, want 1\n%s", r.code, r.out)
		}
		if !strings.Contains(r.out, "7 skipped test(s) not expected by ") || !strings.Contains(r.out, "CI=true: failing") {
			t.Errorf("the failure is not explained:\n%s", r.out)
		}
		if !closingRE.MatchString(last(r)) {
			t.Errorf("the last line is not the closing line: %q", last(r))
		}
	})
	t.Run("one not listed is enough to fail", func(t *testing.T) {
		r := feed(t, "host-not-root.json", list(hostPkg+" TestPrepare*\n"+hostPkg+" TestHostPrepareCommand/prepare\n"+
			hostPkg+" TestCheckWritableUnreadableJournal\n"), true)
		if r.code != 1 {
			t.Errorf("exit %d, want 1\n%s", r.code, r.out)
		}
		if !strings.Contains(r.out, "1 skipped test(s) not expected") ||
			!strings.Contains(r.out, "TestUpgradeAsTheUpgradeUserOnAnUnpreparedNode: "+why+"  [not in ") {
			t.Errorf("not the one unexpected skip:\n%s", r.out)
		}
	})
	t.Run("every skip listed passes", func(t *testing.T) {
		r := feed(t, "host-not-root.json", list(hostPkg+" TestPrepare*\n"+hostPkg+" TestHostPrepareCommand/prepare\n"+
			hostPkg+" TestCheckWritableUnreadableJournal  # a comment\n"+hostPkg+" TestUpgradeAs*\n"), true)
		if r.code != 0 {
			t.Errorf("exit %d, want 0\n%s", r.code, r.out)
		}
		if strings.Contains(r.out, "[not in ") {
			t.Errorf("a listed skip is marked:\n%s", r.out)
		}
	})
	t.Run("a wildcard of a parent does not list a sibling", func(t *testing.T) {
		r := feed(t, "host-not-root.json", list(hostPkg+" TestHostPrepareCommand/other*\n"), true)
		if !strings.Contains(r.out, "TestHostPrepareCommand/prepare: "+why+"  [not in ") {
			t.Errorf("TestHostPrepareCommand/prepare should be unexpected:\n%s", r.out)
		}
	})
}

func TestSkipReasonsAndFailures(t *testing.T) {
	r := feed(t, "mixed.json", list("skipdemo *\n"), true)
	if r.code != 1 {
		t.Errorf("a test failed: exit %d, want 1\n%s", r.code, r.out)
	}
	if !strings.HasPrefix(r.out, outputs(t, "mixed.json")) {
		t.Errorf("the output does not begin with go test's own, in order:\n%s", r.out)
	}
	for _, want := range []string{
		"  skipdemo TestA: needs root: because second line", // the skip, not the t.Log before it
		"  skipdemo TestB/sub_one: sub reason 1",
		"  skipdemo TestC: (no reason given)", // t.SkipNow
		"  skipdemo TestD: par",               // parallel, after the others ran
	} {
		if !slices.Contains(r.lines, want) {
			t.Errorf("no line %q:\n%s", want, r.out)
		}
	}
	at := slices.Index(r.lines, "failed tests (1):")
	if at < 0 || at+2 >= len(r.lines) || r.lines[at+1] != "  skipdemo TestE" || r.lines[at+2] != "      a_test.go:12: boom" {
		t.Errorf("the summary does not name the failed test and its log:\n%s", r.out)
	}
	if want := "2 passed, 1 failed, 4 skipped"; last(r) != want {
		t.Errorf("closing line %q, want %q", last(r), want)
	}
	if !slices.Contains(r.lines, "FAIL\tskipdemo\t0.006s") {
		t.Errorf("no closing FAIL line of the package:\n%s", r.out)
	}
}

func TestBuildFailure(t *testing.T) {
	r := feed(t, "build-failed.json", nil, false)
	if r.code != 1 {
		t.Errorf("exit %d, want 1\n%s", r.code, r.out)
	}
	for _, want := range []string{"bad/bad.go:2:12: undefined: undefined", "FAIL\tskipdemo/bad [build failed]", "?   \tskipdemo/none\t[no test files]"} {
		if !slices.Contains(r.lines, want) {
			t.Errorf("no line %q:\n%s", want, r.out)
		}
	}
	if want := "0 passed, 0 failed, 0 skipped"; last(r) != want {
		t.Errorf("closing line %q, want %q (a package without tests is no skipped test)", last(r), want)
	}
}

func TestLinesThatAreNotEvents(t *testing.T) {
	in := "go: something went wrong\n" +
		`{"Action":"output","Package":"p","Test":"TestX","Output":"=== RUN   TestX\n"}` + "\n" +
		`{"Action":"pass","Package":"p","Test":"TestX"}` + "\n" +
		"{not json\n" +
		"no newline at the end"
	var out bytes.Buffer
	if code := run(strings.NewReader(in), &out, filepath.Join(t.TempDir(), "none.txt"), true); code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, out.String())
	}
	want := "go: something went wrong\n=== RUN   TestX\n{not json\nno newline at the end\n\n" +
		"skipped tests: none\n1 passed, 0 failed, 0 skipped\n"
	if out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
}

func TestParseExpected(t *testing.T) {
	ps, err := parseExpected(strings.NewReader(`# a comment

github.com/a/b TestX
github.com/a/b TestY/sub#01   # the second "sub"
	github.com/a/c   TestZ*
github.com/a/d *
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []pattern{{"github.com/a/b", "TestX", false}, {"github.com/a/b", "TestY/sub#01", false},
		{"github.com/a/c", "TestZ", true}, {"github.com/a/d", "", true}}
	if !slices.Equal(ps, want) {
		t.Errorf("parsed %+v, want %+v", ps, want)
	}
	for _, bad := range []string{"github.com/a/b\n", "github.com/a/b TestX extra\n", "github.com/a/b Test*X\n", "github.com/a/* TestX\n"} {
		if _, err := parseExpected(strings.NewReader("# ok\n" + bad)); err == nil || !strings.Contains(err.Error(), "line 2:") {
			t.Errorf("%q: error %v, want one naming line 2", bad, err)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p    pattern
		s    skip
		want bool
	}{
		{pattern{"p", "TestX", false}, skip{Package: "p", Test: "TestX"}, true},
		{pattern{"p", "TestX", false}, skip{Package: "p", Test: "TestX/sub"}, false},
		{pattern{"p", "TestX", false}, skip{Package: "p", Test: "TestXY"}, false},
		{pattern{"p", "TestX", false}, skip{Package: "q", Test: "TestX"}, false},
		{pattern{"p", "TestX/sub", false}, skip{Package: "p", Test: "TestX/sub"}, true},
		{pattern{"p", "TestX", true}, skip{Package: "p", Test: "TestXY"}, true},
		{pattern{"p", "TestX", true}, skip{Package: "p", Test: "TestX/sub"}, true},
		{pattern{"p", "TestX", true}, skip{Package: "p/sub", Test: "TestX"}, false},
		{pattern{"p", "", true}, skip{Package: "p", Test: "TestAnything"}, true},
	} {
		if got := c.p.match(c.s); got != c.want {
			t.Errorf("%+v matches %s: %v, want %v", c.p, c.s, got, c.want)
		}
	}
}

// The repository's list parses, and names tests by package path.
func TestTheRepositorysList(t *testing.T) {
	path := filepath.Join("..", "skips-expected.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := parseExpected(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !strings.HasPrefix(p.pkg, "github.com/chart-upgrader/chart-upgrader/") || !strings.HasPrefix(p.test, "Test") {
			t.Errorf("%s: %+v is not a package of this module and a test", path, p)
		}
	}
}

// A list the reporter cannot read fails the run, with or without CI.
func TestABadListFails(t *testing.T) {
	r := feed(t, "node-ok.json", list("github.com/chart-upgrader/chart-upgrader/internal/node\n"), false)
	if r.code != 1 {
		t.Errorf("exit %d, want 1\n%s", r.code, r.out)
	}
	if !strings.Contains(r.out, `skips-expected.txt: line 1: want "package TestName"`) {
		t.Errorf("the bad line is not named:\n%s", r.out)
	}
	if !closingRE.MatchString(last(r)) {
		t.Errorf("the last line is not the closing line: %q", last(r))
	}
}
