package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// node is the local side of one simulated node: its own journal (state
// dir), host lock and node name, kept for the whole soak as a real node's.
type node struct {
	name, stateDir, lockFile, termLog string
}

func newNode(dir, name string) node {
	base := filepath.Join(dir, "nodes", name)
	return node{name: name, stateDir: filepath.Join(base, "state"), lockFile: filepath.Join(base, "run", "upgrade.lock"),
		termLog: filepath.Join(base, "termination-log")}
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// procRun is one chart-upgrader process of a cycle.
type procRun struct {
	node     node
	label    string   // "node-2 upgrade", "node-2 upgrade (re-run 1)"
	env      []string // added to the soak's environment
	crashAt  string   // CHART_UPGRADER_TEST_CRASH_AFTER, when set
	cmd      *exec.Cmd
	out      syncBuffer // stdout and stderr (the JSON logs), interleaved
	start    time.Time
	end      time.Time
	done     chan struct{}
	code     int            // exit code; -1 when killed by a signal
	signal   syscall.Signal // the signal that killed it
	killedBy string         // "soak" when the soak sent the signal, "deadline" when the hang guard did
	startErr error
	killMu   sync.Mutex
	logPath  string
}

// startProc starts bin as node n (its own process group, so a kill takes
// its hooks too). limit bounds it: past it the process is killed as hung.
func startProc(ctx context.Context, bin string, n node, label string, env []string, limit time.Duration, logPath string, args ...string) *procRun {
	p := &procRun{node: n, label: label, env: env, done: make(chan struct{}), logPath: logPath}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, crashAfterEnv+"="); ok {
			p.crashAt = v
		}
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		p.startErr, p.code, p.end = err, -2, time.Now()
		close(p.done)
		return p
	}
	go func() {
		err := p.cmd.Wait()
		p.end = time.Now()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.signal = ws.Signal()
			}
		} else if err != nil {
			p.startErr, p.code = err, -2
		}
		// the process group: a hook it left behind goes too
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		if p.logPath != "" {
			_ = os.WriteFile(p.logPath, []byte(fmt.Sprintf("# %s: %s\n# exit %s\n%s", p.label,
				strings.Join(p.cmd.Args, " "), p.exit(), p.out.String())), 0o644)
		}
		close(p.done)
	}()
	go func() {
		select {
		case <-p.done:
		case <-time.After(limit):
			p.kill("deadline")
		case <-ctx.Done():
			p.kill("deadline")
		}
	}()
	return p
}

// kill sends SIGKILL to the process group; who says who killed it. It
// reports whether the process was still running.
func (p *procRun) kill(who string) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	p.killMu.Lock()
	if p.killedBy == "" {
		p.killedBy = who
	}
	p.killMu.Unlock()
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) == nil
}

func (p *procRun) wait() { <-p.done }

func (p *procRun) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exit names how it ended: "0", "3", "killed".
func (p *procRun) exit() string {
	switch {
	case p.startErr != nil:
		return "start-error"
	case p.code == -1 && p.signal == syscall.SIGKILL && p.killedBy == "deadline":
		return "hung"
	case p.code == -1:
		return "killed"
	default:
		return fmt.Sprint(p.code)
	}
}

// killedByFault: killed by a fault the soak injected (the crash switch or
// its own SIGKILL), not by the hang guard.
func (p *procRun) killedByFault() bool {
	if p.code != -1 || p.signal != syscall.SIGKILL {
		return false
	}
	p.killMu.Lock()
	defer p.killMu.Unlock()
	return p.killedBy == "soak" || (p.killedBy == "" && p.crashAt != "")
}

// applied counts the apply log lines of the run: each is one write of the
// target's spec by this process.
func (p *procRun) applied() int { return strings.Count(p.out.String(), `"wrote":true`) }

// tail is the end of the run's output, for a report.
func (p *procRun) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.out.String(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return "    " + strings.Join(lines, "\n    ")
}
