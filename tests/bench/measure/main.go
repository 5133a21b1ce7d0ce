// Command measure runs a command and writes what it cost as JSON: when it
// started and ended, its CPU time and peak RSS. tests/bench starts every
// measured tool through it.
//
//	measure RESULT.json COMMAND [ARG]...
//
// Why a separate, small program: Go starts children with vfork, and Linux
// carries the parent's memory high-water mark into the child's ru_maxrss
// when the child calls exec (the parent's address space is the one
// replaced). Measured from the benchmark driver, which holds a control
// plane client and the Fleet simulator, every tool would report the
// driver's RSS. This program is a few MB, so that floor is a few MB.
//
// The command's stdin, stdout and stderr are this program's; its exit code
// is this program's (128+signal when it was killed by one).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Result is what measure writes.
type Result struct {
	Start, End time.Time
	UserNs     int64 // CPU time of the command and the children it waited for
	SysNs      int64
	MaxRSS     int64 // bytes: the largest resident set of it or any child it waited for
	Code       int
	Signal     string `json:",omitempty"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: measure RESULT.json COMMAND [ARG]...")
		os.Exit(2)
	}
	code, err := run(os.Args[1], os.Args[2], os.Args[3:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "measure: %v\n", err)
		os.Exit(125)
	}
	os.Exit(code)
}

func run(resultPath, name string, args []string) (int, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	r := Result{Start: time.Now()}
	err := cmd.Run()
	r.End = time.Now()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return 0, err
	}
	st := cmd.ProcessState
	r.Code = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal, r.Code = ws.Signal().String(), 128+int(ws.Signal())
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		r.UserNs, r.SysNs = ru.Utime.Nano(), ru.Stime.Nano()
		r.MaxRSS = ru.Maxrss * 1024 // Linux reports kilobytes
	}
	data, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(resultPath, data, 0o644); err != nil {
		return 0, fmt.Errorf("writing the result: %w", err)
	}
	return r.Code, nil
}
