package host

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultHostRoot is where system-upgrade-controller mounts the node's /.
const DefaultHostRoot = "/host"

// DefaultTerminationLog is where Kubernetes reads a container's result.
const DefaultTerminationLog = "/dev/termination-log"

// LocalPaths returns the state directory and the lock file: the ones given
// when not empty; else under the host root (/host) when it exists (run by
// system-upgrade-controller); else under $XDG_STATE_HOME.
func LocalPaths(hostRoot, stateDir, lockFile string) (string, string) {
	if hostRoot == "" {
		hostRoot = DefaultHostRoot
	}
	host := false
	if fi, err := os.Stat(hostRoot); err == nil && fi.IsDir() {
		host = true
	}
	if stateDir == "" {
		switch {
		case host:
			stateDir = filepath.Join(hostRoot, "var", "lib", "chart-upgrader")
		case os.Getenv("XDG_STATE_HOME") != "":
			stateDir = filepath.Join(os.Getenv("XDG_STATE_HOME"), "chart-upgrader")
		default:
			home, _ := os.UserHomeDir()
			stateDir = filepath.Join(home, ".local", "state", "chart-upgrader")
		}
	}
	if lockFile == "" {
		if host {
			lockFile = filepath.Join(hostRoot, "run", "chart-upgrader", "upgrade.lock")
		} else {
			lockFile = filepath.Join(stateDir, "upgrade.lock")
		}
	}
	return stateDir, lockFile
}

// WriteTermination writes the one-line result where Kubernetes reads it:
// "ok: VERB", or "exit N: error". The default path is written only when it
// exists (in a pod).
func WriteTermination(path, verb string, err error, log *slog.Logger) {
	WriteTerminationLines(path, []string{verb}, err, log)
}

// WriteTerminationLines is WriteTermination with one line per chart: "ok:
// LINE" each when err is nil.
func WriteTerminationLines(path string, lines []string, err error, log *slog.Logger) {
	if path == "" {
		path = DefaultTerminationLog
	}
	if path == DefaultTerminationLog {
		if _, statErr := os.Stat(path); statErr != nil {
			return
		}
	}
	oks := make([]string, len(lines))
	for i, l := range lines {
		oks[i] = "ok: " + l
	}
	line := strings.Join(oks, "\n")
	if err != nil {
		line = fmt.Sprintf("exit %d: %s", outcome.Code(err), strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if len(line) > 4000 {
		line = line[:4000]
	}
	if werr := os.WriteFile(path, []byte(line+"\n"), 0o644); werr != nil {
		log.Warn("could not write the termination log", "path", path, "error", werr.Error())
	}
}
