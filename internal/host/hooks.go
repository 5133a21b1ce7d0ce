package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// DefaultHookTimeout bounds one hook.
const DefaultHookTimeout = 5 * time.Minute

// Hooks runs the executables pre-<phase> and post-<phase> of a directory
// around each phase. A failing pre- hook stops the upgrade before its phase
// (refused, exit 3); a failing post- hook is reported and the upgrade goes
// on. (The runner runs no hook after pre-resolve when resolve finds the
// target already done: a re-run after success stays a no-op.)
//
// A hook is run directly when it is executable. Plan secrets are mounted
// without the executable bit, so a hook that is not executable but starts
// with "#!" is run with that interpreter; in the scratch image there is
// none, so an interpreter missing from the image is taken from the host
// root (/host/bin/sh).
type Hooks struct {
	Dir      string
	Timeout  time.Duration // bounds one hook; DefaultHookTimeout when not > 0
	HostRoot string        // where the node's / is mounted, for interpreters
	Log      *slog.Logger
}

var _ upgrade.Hooks = (*Hooks)(nil)

// hookOutputLines bounds how much of a hook's output is logged.
const hookOutputLines = 50

// Run runs the hook kind ("pre" or "post") of phase, if there is one.
// phaseErr is the phase's result, for post hooks.
func (h *Hooks) Run(ctx context.Context, kind, phase string, c upgrade.HookContext, phaseErr error) error {
	if h == nil || h.Dir == "" {
		return nil
	}
	path := filepath.Join(h.Dir, kind+"-"+phase)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || fi.IsDir() {
		return h.fail(kind, phase, fmt.Errorf("hook %s: not a file: %v", path, err))
	}
	argv, err := h.command(path, fi)
	if err != nil {
		return h.fail(kind, phase, err)
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(hctx, argv[0], argv[1:]...)
	cmd.Dir = h.Dir
	cmd.Env = append(os.Environ(), hookEnv(c, kind, phase, phaseErr)...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	log := h.Log.With("hook", kind+"-"+phase)
	lines := tail(out.Bytes(), hookOutputLines)
	for _, l := range lines {
		log.Info("hook output", "line", l)
	}
	if hctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		last := ""
		if len(lines) > 0 {
			last = ": " + lines[len(lines)-1]
		}
		return h.fail(kind, phase, fmt.Errorf("hook %s failed (%v)%s", path, err, last))
	}
	log.Info("hook done", "duration", time.Since(start).Round(time.Millisecond).String())
	return nil
}

func (h *Hooks) fail(kind, phase string, err error) error {
	if kind == "pre" {
		return outcome.Refused(fmt.Errorf("stopped before %s: %w", phase, err))
	}
	return err
}

// command is how to run the hook: itself, or its #! interpreter.
func (h *Hooks) command(path string, fi fs.FileInfo) ([]string, error) {
	if fi.Mode().Perm()&0o111 != 0 {
		return []string{path}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hook %s: %w", path, err)
	}
	defer f.Close()
	first, _ := bufio.NewReader(f).ReadString('\n')
	if !strings.HasPrefix(first, "#!") {
		return nil, fmt.Errorf("hook %s is neither executable nor a #! script", path)
	}
	fields := strings.Fields(strings.TrimPrefix(first, "#!"))
	if len(fields) == 0 {
		return nil, fmt.Errorf("hook %s: empty #! line", path)
	}
	interp := fields[0]
	if _, err := os.Stat(interp); err != nil && h.HostRoot != "" {
		if _, herr := os.Stat(filepath.Join(h.HostRoot, interp)); herr == nil {
			interp = filepath.Join(h.HostRoot, interp)
		}
	}
	return append(append([]string{interp}, fields[1:]...), path), nil
}

// hookEnv tells a hook what is going on. The prefix keeps clear of
// chart-upgrader's own CHART_UPGRADER_<FLAG> variables.
func hookEnv(c upgrade.HookContext, kind, phase string, phaseErr error) []string {
	env := []string{
		"CHART_UPGRADER_HOOK=" + kind + "-" + phase,
		"CHART_UPGRADER_HOOK_PHASE=" + phase,
		"CHART_UPGRADER_HOOK_TARGET=" + c.Target.String(),
		"CHART_UPGRADER_HOOK_NAMESPACE=" + c.Target.Namespace,
		"CHART_UPGRADER_HOOK_NAME=" + c.Target.Name,
		"CHART_UPGRADER_HOOK_FROM_VERSION=" + c.From,
		"CHART_UPGRADER_HOOK_TO_VERSION=" + c.To,
		"CHART_UPGRADER_HOOK_SITUATION=" + string(c.Situation),
		"CHART_UPGRADER_HOOK_NODE=" + c.Node,
		"CHART_UPGRADER_HOOK_VALUES_SHA256=" + c.ValuesHash,
	}
	if kind == "post" {
		result := "ok"
		if phaseErr != nil {
			result = "failed"
			env = append(env, "CHART_UPGRADER_HOOK_ERROR="+strings.ReplaceAll(phaseErr.Error(), "\n", " "))
		}
		env = append(env, "CHART_UPGRADER_HOOK_RESULT="+result)
	}
	return env
}

// tail returns the last n non-empty lines of out.
func tail(out []byte, n int) []string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
