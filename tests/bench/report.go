package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// report is a markdown document: a heading, what was measured and how,
// and tables.
type report struct {
	b strings.Builder
}

func (r *report) line(format string, args ...any) { fmt.Fprintf(&r.b, format+"\n", args...) }

// machine writes one line naming the machine, the Go version and the date.
func (r *report) machine() {
	r.line("Machine: %d CPUs (%s), %s, %s, %s; load average %s at the end (other jobs on the machine show here).",
		runtime.NumCPU(), cpuModel(), goVersion(), runtime.GOOS+"/"+runtime.GOARCH,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAverage())
}

// loadAverage is the 1, 5 and 15 minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// table writes a markdown table.
func (r *report) table(header []string, rows [][]string) {
	r.line("| %s |", strings.Join(header, " | "))
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
	}
	r.line("| %s |", strings.Join(seps, " | "))
	for _, row := range rows {
		r.line("| %s |", strings.Join(row, " | "))
	}
}

// emit prints the report to out and writes it to path (when set).
func (r *report) emit(out io.Writer, path string) error {
	if _, err := io.WriteString(out, r.b.String()); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the results directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(r.b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	return nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// goVersion is the toolchain on PATH (which built chart-upgrader), else the
// one this program was built with.
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return runtime.Version()
}

// logf writes one progress line.
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "bench: "+format+"\n", args...)
}
