package phase

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultHookTimeout bounds one hook.
const DefaultHookTimeout = 5 * time.Minute

// hooks runs the executables pre-<phase> and post-<phase> of a directory
// around each phase. A failing pre- hook stops the upgrade before its phase
// (refused, exit 3); a failing post- hook is reported and the upgrade goes
// on. When resolve finds the target already done (a re-run after success),
// the hooks after pre-resolve do not run: the re-run stays a no-op.
//
// A hook is run directly when it is executable. Plan secrets are mounted
// without the executable bit, so a hook that is not executable but starts
// with "#!" is run with that interpreter; in the scratch image there is
// none, so an interpreter missing from the image is taken from the host
// root (/host/bin/sh).
type hooks struct {
	dir      string
	timeout  time.Duration
	hostRoot string
}

// hookOutputLines bounds how much of a hook's output is logged.
const hookOutputLines = 50

// run runs the hook kind ("pre" or "post") of phase, if there is one.
// phaseErr is the phase's result, for post hooks.
func (h *hooks) run(ctx context.Context, s *State, kind, phase string, phaseErr error) error {
	if h == nil || h.dir == "" || s.noop {
		return nil
	}
	path := filepath.Join(h.dir, kind+"-"+phase)
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
	hctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	cmd := exec.CommandContext(hctx, argv[0], argv[1:]...)
	cmd.Dir = h.dir
	cmd.Env = append(os.Environ(), hookEnv(s, kind, phase, phaseErr)...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	log := s.Opts.Log.With("hook", kind+"-"+phase)
	lines := tail(out.Bytes(), hookOutputLines)
	for _, l := range lines {
		log.Info("hook output", "line", l)
	}
	if hctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", h.timeout)
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

func (h *hooks) fail(kind, phase string, err error) error {
	if kind == "pre" {
		return outcome.Refused(fmt.Errorf("stopped before %s: %w", phase, err))
	}
	return err
}

// command is how to run the hook: itself, or its #! interpreter.
func (h *hooks) command(path string, fi fs.FileInfo) ([]string, error) {
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
	if _, err := os.Stat(interp); err != nil && h.hostRoot != "" {
		if _, herr := os.Stat(filepath.Join(h.hostRoot, interp)); herr == nil {
			interp = filepath.Join(h.hostRoot, interp)
		}
	}
	return append(append([]string{interp}, fields[1:]...), path), nil
}

// hookEnv tells a hook what is going on. The prefix keeps clear of
// chart-upgrader's own CHART_UPGRADER_<FLAG> variables.
func hookEnv(s *State, kind, phase string, phaseErr error) []string {
	env := []string{
		"CHART_UPGRADER_HOOK=" + kind + "-" + phase,
		"CHART_UPGRADER_HOOK_PHASE=" + phase,
		"CHART_UPGRADER_HOOK_TARGET=" + s.Ref(),
		"CHART_UPGRADER_HOOK_NAMESPACE=" + s.Chart.Target.Namespace,
		"CHART_UPGRADER_HOOK_NAME=" + s.Chart.Target.Name,
		"CHART_UPGRADER_HOOK_FROM_VERSION=" + s.From,
		"CHART_UPGRADER_HOOK_TO_VERSION=" + s.To,
		"CHART_UPGRADER_HOOK_SITUATION=" + string(s.Situation),
		"CHART_UPGRADER_HOOK_NODE=" + s.Opts.NodeName,
		"CHART_UPGRADER_HOOK_VALUES_SHA256=" + s.Want.ValuesHash,
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
