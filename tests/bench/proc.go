package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one measured process run.
type proc struct {
	Start, End time.Time     // just before it started, just after it was reaped
	Wall       time.Duration // End - Start
	CPU        time.Duration // user + system, itself and the children it waited for
	MaxRSS     int64         // bytes: the largest resident set of it or of any child it waited for
	Code       int
	Output     []byte // stdout and stderr, interleaved
}

// runTimeout bounds one tool run (the baseline waits without a timeout);
// an upgrade at 10,000 BundleDeployments waits minutes for the simulator.
const runTimeout = 30 * time.Minute

// measurePath is the measure program (tests/bench/measure), built next to
// this one.
func measurePath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(self), "measure")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the measure program (go build -o %s ./tests/bench/measure; the scripts do): %w", path, err)
	}
	return path, nil
}

// runProc runs name with args and env (added to this process's) through
// the measure program, which reports its times, CPU and peak RSS. A
// non-zero exit is not an error here: the caller judges the code; failing
// to start or being killed by a signal is. The run gets a process group of
// its own, killed when ctx ends or after runTimeout (a script's kubectl
// and sleep included).
func runProc(ctx context.Context, env []string, name string, args ...string) (proc, error) {
	measure, err := measurePath()
	if err != nil {
		return proc{}, err
	}
	result, err := os.CreateTemp("", "bench-measure-*.json")
	if err != nil {
		return proc{}, err
	}
	_ = result.Close()
	defer os.Remove(result.Name())

	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, measure, append([]string{result.Name(), name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		return proc{}, fmt.Errorf("running %s: %w", name, err)
	}
	p := proc{Output: out.Bytes()}
	var r struct {
		Start, End    time.Time
		UserNs, SysNs int64
		MaxRSS        int64
		Code          int
		Signal        string
	}
	data, err := os.ReadFile(result.Name())
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return p, fmt.Errorf("running %s (killed? %v): no measurement: %v\n%s", name, ctx.Err(), err, tail(p.Output))
	}
	if r.Signal != "" {
		return p, fmt.Errorf("%s killed by %s:\n%s", name, r.Signal, tail(p.Output))
	}
	p.Start, p.End, p.Wall = r.Start, r.End, r.End.Sub(r.Start)
	p.CPU, p.MaxRSS, p.Code = time.Duration(r.UserNs+r.SysNs), r.MaxRSS, r.Code
	return p, nil
}

// ok checks that the run exited 0.
func (p proc) ok(what string) error {
	if p.Code != 0 {
		return fmt.Errorf("%s exited %d:\n%s", what, p.Code, tail(p.Output))
	}
	return nil
}

// tail is the end of a process's output, for an error message.
func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = append([]byte("…"), b[len(b)-n:]...)
	}
	return string(b)
}
