package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// crashAfterEnv is the test-only fault switch of the runner: the process
// SIGKILLs itself right after the named phase finished and was journaled.
const crashAfterEnv = "CHART_UPGRADER_TEST_CRASH_AFTER"

// crashPhases are the phases after which a run is killed and resumed.
var crashPhases = []string{"resolve", "preflight", "merge", "apply", "wait", "verify"}

// bgProcess is a chart-upgrader process started in the background.
type bgProcess struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// startBG starts chart-upgrader as a separate process for node n; its
// stdout and stderr are kept apart (the JSON logs go to stderr).
func (f *fixture) startBG(n node, env []string, command string, args ...string) *bgProcess {
	f.t.Helper()
	p := &bgProcess{cmd: f.process(n, env, command, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(f.t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	f.t.Cleanup(func() {
		select {
		case <-p.done:
		default: // a hang detector fired: stop the process this test started
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// bgExit is how a process ended.
type bgExit struct {
	code   int            // -1 when killed by a signal
	signal syscall.Signal // the signal that killed it, else 0
}

// wait waits (at most a generous hang-detector deadline) for the process
// to end and returns how it ended.
func (p *bgProcess) wait(t *testing.T) bgExit {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("chart-upgrader %v did not end within 3 minutes\nstdout: %s\nstderr: %s", p.cmd.Args, p.stdout.String(), p.stderr.String())
	}
	if p.err == nil {
		return bgExit{}
	}
	var ee *exec.ExitError
	require.True(t, errors.As(p.err, &ee), "running chart-upgrader: %v", p.err)
	e := bgExit{code: ee.ExitCode()}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.signal = ws.Signal()
	}
	return e
}

func (p *bgProcess) output() string {
	return "stdout:\n" + p.stdout.String() + "\nstderr:\n" + p.stderr.String()
}

// runBG runs chart-upgrader as a process and waits for it.
func (f *fixture) runBG(n node, env []string, command string, args ...string) (bgExit, *bgProcess) {
	f.t.Helper()
	p := f.startBG(n, env, command, args...)
	return p.wait(f.t), p
}

// withoutCerts returns a deep copy of values without webhook.certs: the
// certificate is generated at install, so it differs between releases.
func withoutCerts(v map[string]any) map[string]any {
	out := deepCopyMap(v)
	if wh, ok := out["webhook"].(map[string]any); ok {
		delete(wh, "certs")
		if len(wh) == 0 {
			delete(out, "webhook")
		}
	}
	return out
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out[k] = deepCopyMap(sub)
			continue
		}
		out[k] = v
	}
	return out
}

func lookup(v map[string]any, path ...string) any {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// referenceValues upgrades a release without interruption, in a fixture
// of its own, and returns its ManagedChart's values after the upgrade.
func referenceValues(t *testing.T) map[string]any {
	t.Helper()
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, "reference upgrade: %s", r.Stderr)
	mc := f.get(name)
	require.Equal(t, "2.0.0", mc.Version)
	return mc.Values
}

// assertUpgraded checks the final state of an upgrade of name from 1.0.0
// with userValues to 2.0.0: what an uninterrupted upgrade leaves.
func (f *fixture) assertUpgraded(name string, reference map[string]any, cert []byte) *managedchart.ManagedChart {
	t := f.t
	t.Helper()
	mc := f.get(name)
	assert.Equal(t, "2.0.0", mc.Version)
	assert.Equal(t, "2.0.0", mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash], "the annotated hash is that of the values")
	assert.Equal(t, "1.0.0", mc.Annotations[managedchart.AnnotationPreviousVersion])
	assert.False(t, mc.Paused, "left paused")
	assert.Empty(t, mc.Annotations[managedchart.AnnotationPaused])
	assert.Equal(t, withoutCerts(reference), withoutCerts(mc.Values), "values differ from an uninterrupted upgrade's")
	assert.Equal(t, string(cert), lookup(mc.Values, "webhook", "certs", "cert"), "once pinned this release's certificate")

	// no user customisation lost
	assert.EqualValues(t, 2, lookup(mc.Values, "storageClass", "replicaCount"))
	assert.Equal(t, "512Mi", lookup(mc.Values, "resources", "requests", "memory"))
	for k, v := range example.UserValues()["promote"].(map[string]any) {
		assert.Equal(t, v, lookup(mc.Values, "promote", k), "promote.%s", k)
	}

	bk := f.backups(name)
	if assert.Len(t, bk, 1, "exactly one backup") {
		assert.Equal(t, managedchart.BackupName(name, "1.0.0"), bk[0].Name)
	}
	f.waitReady(name, upgrade.Want{Version: "2.0.0", ValuesHash: mc.ValuesHash()})
	return mc
}

// TestCrashAndResume kills an upgrade right after each phase (SIGKILL, so
// nothing is cleaned up) and runs it again without the fault, on the same
// node and on another: every resumed run finishes with exit 0 and leaves
// what an uninterrupted upgrade leaves.
func TestCrashAndResume(t *testing.T) {
	reference := referenceValues(t)
	for _, ph := range crashPhases {
		for _, where := range []string{"same-node", "other-node"} {
			t.Run(ph+"/"+where, func(t *testing.T) {
				f := newFixture(t)
				name := release()
				f.install(name, "1.0.0", example.UserValues())
				cert := f.secretData("demo-app-webhook-certs", "tls.crt")
				require.NotEmpty(t, cert)
				args := f.upgradeArgs(name, "2.0.0", f.policy(name))

				exit, p := f.runBG(f.node, []string{crashAfterEnv + "=" + ph}, "upgrade", args...)
				require.Equal(t, -1, exit.code, "the run was not killed after %s: %s", ph, p.output())
				require.Equal(t, syscall.SIGKILL, exit.signal, p.output())
				assert.Contains(t, p.stderr.String(), `"msg":"phase done","target":"managedchart/`+f.ns+"/"+name+`","phase":"`+ph+`"`)
				assert.NotContains(t, p.stdout.String(), "upgraded managedchart/", "killed before the end")

				rerun := f.node
				if where == "other-node" {
					rerun = noderun.New(t, "node-2")
				}
				exit, p = f.runBG(rerun, nil, "upgrade", args...)
				require.Equal(t, 0, exit.code, "resume after a crash after %s on %s: %s", ph, where, p.output())
				assert.True(t, strings.Contains(p.stdout.String(), "upgraded managedchart/"+f.ns+"/"+name) ||
					strings.Contains(p.stdout.String(), "nothing to do"), p.output())

				f.assertUpgraded(name, reference, cert)
				assert.Equal(t, 2, f.sim.HelmRuns(f.ns, name), "one install and one upgrade")
				if where == "same-node" {
					assert.False(t, f.leaseHeld(name), "the lease is still held after the resumed run")
				}

				// and once more: nothing to do
				exit, p = f.runBG(rerun, nil, "upgrade", args...)
				require.Equal(t, 0, exit.code, p.output())
				assert.Contains(t, p.stdout.String(), "nothing to do")
			})
		}
	}
}
