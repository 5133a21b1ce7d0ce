// Package noderun runs chart-upgrader's command line in-process for the
// tests, the one runner they share: as is (CLI), or as one "node" of the
// end-to-end tests (its own state directory, lock file and termination
// log); and it reads from the API server's audit log what chart-upgrader
// wrote.
package noderun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// Node is the local side of one chart-upgrader process.
type Node struct {
	Name, StateDir, LockFile, TermLog string
	// Images: its upgrades and preflights check the images (with the
	// registries.yaml the test gives, --registries-config). A node of a
	// test that does not set it runs with --skip-image-check: the charts
	// of those tests name images no registry here serves.
	Images bool
}

// New is a node with fresh local files.
func New(t *testing.T, name string) Node {
	dir := t.TempDir()
	return Node{Name: name, StateDir: filepath.Join(dir, "state"), LockFile: filepath.Join(dir, "run", "upgrade.lock"),
		TermLog: filepath.Join(dir, "termination-log")}
}

// Result is what one run printed and returned.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// RequireCode stops the test unless the run exited with code, showing
// what it printed.
func (r Result) RequireCode(t testing.TB, code int) {
	t.Helper()
	require.Equal(t, code, r.Code, "stdout: %s\nstderr: %s", r.Stdout, r.Stderr)
}

// Outputs are the run's exit code, stdout and stderr, for a test that
// names them.
func (r Result) Outputs() (code int, stdout, stderr string) { return r.Code, r.Stdout, r.Stderr }

// CLI runs chart-upgrader with args (the program name left out), as a
// shell would, in this process.
func CLI(t testing.TB, args ...string) Result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(t.Context(), append([]string{"chart-upgrader"}, args...), &out, &errb)
	return Result{Code: code, Stdout: out.String(), Stderr: errb.String()}
}

// Run runs chart-upgrader command with args as node n against env: the
// node's flags come first, so a flag given again in args (--kubeconfig)
// wins.
func (n Node) Run(ctx context.Context, env *testenv.Env, command string, args ...string) Result {
	var out, errb bytes.Buffer
	code := cli.Run(ctx, append([]string{"chart-upgrader"}, n.args(env, command, args)...), &out, &errb)
	return Result{Code: code, Stdout: out.String(), Stderr: errb.String()}
}

// args are command and args after the node's own flags.
func (n Node) args(env *testenv.Env, command string, args []string) []string {
	full := []string{command, "--kubeconfig", env.KubeconfigPath(), "--state-dir", n.StateDir,
		"--lock-file", n.LockFile, "--termination-log", n.TermLog, "--log-format", "json"}
	if command == "upgrade" || command == "preflight" || command == "rollback" {
		full = append(full, "--node-name", n.Name)
	}
	if (command == "upgrade" || command == "preflight") && !n.Images {
		full = append(full, "--skip-image-check")
	}
	return append(full, args...)
}

// Writes lists the requests chart-upgrader (its user agent) made that
// change something in namespace, by the audit log: "update helmcharts/x".
func Writes(t *testing.T, env *testenv.Env, namespace string) []string {
	t.Helper()
	events, err := testenv.ReadAuditLog(env.AuditLogPath())
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, "chart-upgrader") || e.ObjectRef == nil || e.ObjectRef.Namespace != namespace {
			continue
		}
		if testenv.StoresNothing(e.RequestURI) {
			continue // the conflict check's dry runs and questions
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
		}
	}
	return out
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary builds chart-upgrader (with the test seams) once per test binary,
// for tests that need separate processes: a process killed with SIGKILL,
// many nodes at once.
func Binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "chart-upgrader-test-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "chart-upgrader")
		cmd := exec.Command("go", "build", "-tags", "testseams", "-o", binPath, "./cmd/chart-upgrader")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// Command is chart-upgrader command with args as node n against env, as a
// separate process (not started), with the flags Run gives it.
func (n Node) Command(t *testing.T, env *testenv.Env, command string, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(Binary(t), n.args(env, command, args)...)
}
