// Command testreport reads `go test -json` on its standard input and
// prints each event's output as it comes, so that the console reads as
// `go test -v` does, the closing ok and FAIL lines of each package
// included. At the end it lists every failed test with the last lines it
// logged (a CI log is often read from its tail only), then every skipped
// test with the reason it gave, and closes with one line: "N passed, N
// failed, N skipped" (tests and subtests, as go test reports them).
//
// It exits 1 when a test, a package or a build failed, and, when the
// environment variable CI is "true", when a test skipped that the expected
// list (-expected, default tests/skips-expected.txt) does not name. Without
// CI=true an unexpected skip is only reported.
//
// The expected list has one skip a line, "package TestName" or
// "package TestName/subtest"; a line ending in "*" names every test of the
// package whose name begins with what precedes the "*". A "#" at the start
// of a line or after a blank starts a comment. A missing list expects no
// skip; a line it cannot read fails the run.
//
// scripts/test runs go test -json into it, with the shell's pipefail so
// that go test's own exit status counts too.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

func main() {
	expected := flag.String("expected", "tests/skips-expected.txt", "the list of the skips CI accepts")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, *expected, os.Getenv("CI") == "true"))
}

// run reports the go test -json stream in to out and returns the exit
// code.
func run(in io.Reader, w io.Writer, expectedPath string, ci bool) int {
	out := &lineWriter{w: w, atStart: true}
	r := newReport()
	err := r.read(in, out)
	if !out.atStart { // the stream ended inside a line
		fmt.Fprintln(out)
	}
	if err != nil {
		fmt.Fprintf(out, "testreport: reading go test -json: %v\n", err)
		r.failed = true
	}
	expected, err := readExpected(expectedPath)
	if err != nil {
		fmt.Fprintf(out, "testreport: %v\n", err)
		r.failed = true
	}
	unexpected := r.summary(out, expected, expectedPath, ci)
	if r.failed || (ci && unexpected > 0) {
		return 1
	}
	return 0
}

// lineWriter knows whether what it wrote ends a line.
type lineWriter struct {
	w       io.Writer
	atStart bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.atStart = p[len(p)-1] == '\n'
	}
	return l.w.Write(p)
}

// event is one line of go test -json (cmd/test2json), the fields read.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// failure is one failed test and the last lines it logged.
type failure struct {
	Package, Test string
	Log           []string
}

// failureLogLines is how many of a failed test's last log lines the
// summary repeats.
const failureLogLines = 12

// skip is one skipped test.
type skip struct {
	Package, Test, Reason string
}

func (s skip) String() string { return s.Package + " " + s.Test }

type testKey struct{ pkg, test string }

// report is what the stream said so far.
type report struct {
	passed, failedTests, skipped int
	// failed: a test, a package or a build failed
	failed bool
	skips  []skip
	fails  []failure
	// logs is the recent log lines of each running test (at most
	// failureLogLines), repeated in the summary when it fails.
	logs map[testKey][]string
	// lastLog is the last log entry of each running test: the reason of
	// a skip is the last thing the test logged (t.Skip logs it).
	lastLog map[testKey][]string
}

func newReport() *report {
	return &report{lastLog: map[testKey][]string{}, logs: map[testKey][]string{}}
}

// read copies the output of each event to out as it comes and records
// the results. A line that is not an event is copied as it is.
func (r *report) read(in io.Reader, out io.Writer) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.line(line, out)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *report) line(line []byte, out io.Writer) {
	var ev event
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil || ev.Action == "" {
		out.Write(line)
		return
	}
	if ev.Output != "" {
		io.WriteString(out, ev.Output)
	}
	r.event(ev)
}

// event records one event.
func (r *report) event(ev event) {
	k := testKey{ev.Package, ev.Test}
	switch ev.Action {
	case "output":
		if ev.Test != "" {
			r.output(k, ev.Output)
		}
	case "build-fail":
		r.failed = true
	case "pass", "fail", "skip":
		if ev.Action == "fail" {
			r.failed = true
		}
		if ev.Test == "" { // the package's result ("skip": no test files)
			return
		}
		switch ev.Action {
		case "pass":
			r.passed++
		case "fail":
			r.failedTests++
			r.fails = append(r.fails, failure{Package: ev.Package, Test: ev.Test, Log: r.logs[k]})
		case "skip":
			r.skipped++
			r.skips = append(r.skips, skip{Package: ev.Package, Test: ev.Test, Reason: reason(r.lastLog[k])})
		}
		delete(r.lastLog, k)
		delete(r.logs, k)
	}
}

var (
	// logEntryRE is the first line of a t.Log, t.Error or t.Skip entry:
	// "    file_test.go:12: the message".
	logEntryRE = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: ?(.*)$`)
	// frameRE is a line go test writes around a test's own output.
	frameRE = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|FAIL|SKIP|BENCH):)`)
)

// output follows the log entries of a running test.
func (r *report) output(k testKey, text string) {
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case frameRE.MatchString(l):
			continue
		case logEntryRE.MatchString(l):
			r.lastLog[k] = []string{logEntryRE.FindStringSubmatch(l)[1]}
		case r.lastLog[k] != nil && strings.TrimSpace(l) != "": // a message's next line
			r.lastLog[k] = append(r.lastLog[k], strings.TrimSpace(l))
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		logs := append(r.logs[k], l)
		if len(logs) > failureLogLines {
			logs = logs[len(logs)-failureLogLines:]
		}
		r.logs[k] = logs
	}
}

// reason is a log entry on one line.
func reason(entry []string) string {
	s := strings.TrimSpace(strings.Join(entry, " "))
	if s == "" {
		return "(no reason given)"
	}
	return s
}

// summary prints the skipped tests, marking the ones the expected list
// does not name, and the closing line; it returns how many were not
// expected.
func (r *report) summary(out io.Writer, expected []pattern, expectedPath string, ci bool) int {
	fmt.Fprintln(out)
	if len(r.fails) > 0 {
		fmt.Fprintf(out, "failed tests (%d):\n", len(r.fails))
		for _, f := range r.fails {
			fmt.Fprintf(out, "  %s %s\n", f.Package, f.Test)
			for _, l := range f.Log {
				fmt.Fprintf(out, "      %s\n", strings.TrimSpace(l))
			}
		}
	}
	unexpected := 0
	if len(r.skips) == 0 {
		fmt.Fprintln(out, "skipped tests: none")
	} else {
		fmt.Fprintf(out, "skipped tests (%d):\n", len(r.skips))
		for _, s := range r.skips {
			mark := ""
			if !matchAny(expected, s) {
				unexpected++
				mark = "  [not in " + expectedPath + "]"
			}
			fmt.Fprintf(out, "  %s %s: %s%s\n", s.Package, s.Test, s.Reason, mark)
		}
	}
	if unexpected > 0 {
		verdict := "reported only (CI is not true)"
		if ci {
			verdict = "CI=true: failing"
		}
		fmt.Fprintf(out, "%d skipped test(s) not expected by %s: %s\n", unexpected, expectedPath, verdict)
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", r.passed, r.failedTests, r.skipped)
	return unexpected
}

// pattern is one line of the expected list.
type pattern struct {
	pkg, test string
	prefix    bool // the line ended in "*": test is a prefix
}

func (p pattern) match(s skip) bool {
	if p.pkg != s.Package {
		return false
	}
	if p.prefix {
		return strings.HasPrefix(s.Test, p.test)
	}
	return p.test == s.Test
}

func matchAny(ps []pattern, s skip) bool {
	for _, p := range ps {
		if p.match(s) {
			return true
		}
	}
	return false
}

// readExpected reads the expected list at path; a missing file is an
// empty list.
func readExpected(path string) ([]pattern, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ps, err := parseExpected(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}

// commentRE is a comment: from a "#" at the start of a line or after a
// blank (a subtest's name may hold a "#": TestX/case#01) to the end.
var commentRE = regexp.MustCompile(`(^|\s)#.*$`)

// parseExpected parses the expected list: one "package TestName" a line.
func parseExpected(in io.Reader) ([]pattern, error) {
	var ps []pattern
	sc := bufio.NewScanner(in)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(commentRE.ReplaceAllString(sc.Text(), ""))
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"package TestName\", have %q", n, sc.Text())
		}
		p := pattern{pkg: fields[0], test: fields[1]}
		if rest, ok := strings.CutSuffix(p.test, "*"); ok {
			p.test, p.prefix = rest, true
		}
		if strings.Contains(p.pkg, "*") || strings.Contains(p.test, "*") {
			return nil, fmt.Errorf("line %d: %q: a \"*\" may only end the line", n, sc.Text())
		}
		ps = append(ps, p)
	}
	return ps, sc.Err()
}
