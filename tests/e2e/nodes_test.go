package e2e

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// TestTenNodesApplyOnce starts ten processes, as ten nodes would (each with
// its own node name, journal and lock file), at the same time on the same
// target: all finish with exit 0 and exactly one of them applies.
func TestTenNodesApplyOnce(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	cert := f.secretData("demo-app-webhook-certs", "tls.crt")
	reference := referenceValues(t)
	before := f.get(name)
	runsBefore := f.sim.HelmRuns(f.ns, name)
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: 2 * time.Second})
	args := f.upgradeArgs(name, "2.0.0", f.policy(name))

	binary(t) // build before the start line, so the ten start together
	const n = 10
	procs := make([]*bgProcess, n)
	for i := range procs {
		procs[i] = f.startBG(noderun.New(t, fmt.Sprintf("node-%d", i+1)), nil, "upgrade", args...)
	}
	applied := 0
	for i, p := range procs {
		exit := p.wait(t)
		assert.Equal(t, 0, exit.code, "node-%d: %s", i+1, p.output())
		c := strings.Count(p.stderr.String(), `"wrote":true`)
		if c > 0 {
			t.Logf("node-%d applied", i+1)
		}
		applied += c
	}
	assert.Equal(t, 1, applied, "processes that logged an apply")

	after := f.assertUpgraded(name, reference, cert)
	assert.Equal(t, before.Generation+1, after.Generation, "the spec was written more than once (or not at all)")
	assert.Equal(t, runsBefore+1, f.sim.HelmRuns(f.ns, name), "helm upgrades")
	assert.False(t, f.leaseHeld(name), "the lease is released")
}

// TestSameNodeSecondProcessLockHeld: two processes on one node (one lock
// file) at once: the second exits 5 at once, the first finishes.
func TestSameNodeSecondProcessLockHeld(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// hold the first in its wait until the second has been turned away
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: time.Hour})
	args := f.upgradeArgs(name, "2.0.0", f.policy(name))

	first := f.startBG(f.node, nil, "upgrade", args...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, _ := os.ReadFile(f.node.LockFile)
		if strings.HasPrefix(string(data), fmt.Sprintf("pid %d", first.cmd.Process.Pid)) {
			break
		}
		select {
		case <-first.done:
			t.Fatalf("the first process ended before taking the lock: %s", first.output())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the first process never took the lock %s", f.node.LockFile)
		time.Sleep(20 * time.Millisecond)
	}

	exit, second := f.runBG(f.node, nil, "upgrade", args...)
	assert.Equal(t, 5, exit.code, second.output())
	assert.Contains(t, second.stderr.String(), filepath.Base(f.node.LockFile))
	select {
	case <-first.done:
		t.Fatalf("the first process ended while the second ran: %s", first.output())
	default:
	}

	f.sim.SetFault(f.ns, name, fleetsim.Fault{}) // let the first finish
	exit = first.wait(t)
	require.Equal(t, 0, exit.code, first.output())
	assert.Equal(t, "2.0.0", f.get(name).Version)
	assert.Len(t, f.backups(name), 1)
}

// gateTransport holds back the first request that matches until open is
// closed: a test seam to let another process act between two steps of
// this one.
type gateTransport struct {
	next    http.RoundTripper
	match   func(*http.Request) bool
	open    chan struct{}
	reached chan struct{} // closed when the request arrives
	passed  chan struct{} // closed when its response came back
	once    sync.Once
}

func (g *gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.match(r) {
		first := false
		g.once.Do(func() { first = true; close(g.reached) })
		if first {
			select {
			case <-g.open:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			defer close(g.passed)
		}
	}
	return g.next.RoundTrip(r)
}

// TestLateNodeSeesAnotherNodesApplyDuringPreflight: a node reads the target
// before another node applies it, and runs its preflight checks after: the
// target is then rolling out (not Ready, Helm release pending). That is not
// a reason to refuse: the late node must see that the target was applied
// for this version and wait for it, as if it had started later.
func TestLateNodeSeesAnotherNodesApplyDuringPreflight(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	cert := f.secretData("demo-app-webhook-certs", "tls.crt")
	reference := referenceValues(t)
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: time.Hour}) // the rollout stays in progress
	args := f.upgradeArgs(name, "2.0.0", f.policy(name))

	// the late node: held back at its first read of the Bundle, which
	// preflight makes after resolve read the target at 1.0.0
	gate := &gateTransport{open: make(chan struct{}), reached: make(chan struct{}), passed: make(chan struct{}),
		match: func(r *http.Request) bool {
			return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/bundles/"+managedchart.BundleName(name))
		}}
	late := noderun.New(t, "node-late")
	var logs bytes.Buffer
	opts := app.Options{Target: "managedchart/" + f.ns + "/" + name, ChartSource: f.charts, Version: "2.0.0",
		PolicyFile: f.policy(name), Timeout: 2 * time.Minute,
		Kubeconfig: f.env.KubeconfigPath(), StateDir: late.StateDir, LockFile: late.LockFile,
		TerminationLog: late.TermLog, NodeName: late.Name,
		Log: slog.New(slog.NewJSONHandler(&logs, nil)), Out: io.Discard}
	seams := app.Seams{WrapTransport: func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate }}
	lateDone := make(chan error, 1)
	go func() { lateDone <- app.Upgrade(app.WithSeams(t.Context(), seams), opts) }()
	select {
	case <-gate.reached:
	case err := <-lateDone:
		t.Fatalf("the late node ended before its preflight read the bundle: %v\n%s", err, logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the late node never reached its preflight")
	}

	// meanwhile another node applies; its rollout is under way
	first := f.startBG(f.node, nil, "upgrade", args...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mc := f.get(name)
		b, err := f.tc.Bundle(t.Context(), mc.Namespace, mc.Name)
		require.NoError(t, err)
		if mc.Annotations[managedchart.AnnotationVersion] == "2.0.0" && !managedchart.Health(mc, b).Healthy() {
			break
		}
		require.True(t, time.Now().Before(deadline), "the first node never applied: %s", first.output())
		time.Sleep(20 * time.Millisecond)
	}

	close(gate.open) // the late node's preflight now sees the rollout
	select {
	case <-gate.passed:
	case <-time.After(2 * time.Minute):
		t.Fatal("the late node's read of the bundle never came back")
	}
	f.sim.SetFault(f.ns, name, fleetsim.Fault{}) // let the rollout finish
	exit := first.wait(t)
	require.Equal(t, 0, exit.code, first.output())
	select {
	case err := <-lateDone:
		require.NoError(t, err, logs.String())
	case <-time.After(3 * time.Minute):
		t.Fatal("the late node did not finish")
	}
	assert.NotContains(t, logs.String(), `"wrote":true`, "the late node applied too")
	f.assertUpgraded(name, reference, cert)
	assert.False(t, f.leaseHeld(name))
}
