package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it
// is killed.
const stopGrace = 10 * time.Second

// process is one control plane component started by this package (beyond
// envtest's etcd and kube-apiserver), its output in a log file.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // how it exited; read after done
}

// startProcess runs the binary name of assets with args, its stdout and
// stderr appended to logDir/name.log (and copied to out when set). The
// process runs until stop, whatever the lifetime of the caller's context.
func startProcess(assets, logDir, name string, args []string, env []string, out io.Writer) (*process, error) {
	bin := filepath.Join(assets, name)
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	var w io.Writer = f
	if out != nil {
		w = io.MultiWriter(f, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports an error naming the process and the end of its log if it
// has exited, else nil.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, p.log, p.tail())
	default:
		return nil
	}
}

// stop sends SIGTERM, waits for the exit, and kills the process if it is
// still running after stopGrace. An exit caused by the signal is no error.
func (p *process) stop() error {
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("stopping %s: still running %v after SIGTERM, killed", p.name, stopGrace)
	}
}

// exitError is how a process that exited by itself ended, as an error.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited before it was stopped (%v); the end of %s:\n%s", p.name, p.err, p.log, p.tail())
}

// tail returns the last lines of the log, for error messages.
func (p *process) tail() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	const keep = 20
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
