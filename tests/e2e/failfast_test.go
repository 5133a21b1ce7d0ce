package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// failFastSpec writes a spec upgrading the fixture's target name with the
// example policy, a wait timeout far beyond the test and the given
// errAppliedGrace; source is its chart source.
func (f *fixture) failFastSpec(name, source, grace string) string {
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(f.t, err)
	return f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
		"- target: {kind: ManagedChart, namespace: "+f.ns+", name: "+name+"}\n"+
		"  chart: {name: demo-app, source: "+source+"}\n"+
		"  wait: {timeout: 10m, errAppliedGrace: "+grace+"}\n"+indent(string(policy), "  "))
}

// A deployment Fleet's agent cannot make (ErrApplied for the deployment we
// applied) ends the wait after errAppliedGrace with exit 1 and Fleet's
// error, not after the whole timeout with exit 4. A retried Job (another
// node, the fault still there) does not refuse in preflight because of
// the failure its own apply caused, and does not apply again: it reports
// the same failure.
func TestErrAppliedFailsFastWithFleetsError(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const msg = "failed to create resource: server-side apply failed for object demo/bad: Invalid value"
	opts := app.Options{SpecFile: f.failFastSpec(name, f.charts, "2s"), Version: "2.0.0"}
	var failedAt time.Time
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{ErrApplied: msg})
			failedAt = time.Now()
		}
	})
	require.Error(t, err, logs)
	t.Logf("terminal error → exit: %s (grace 2s)", time.Since(failedAt).Round(time.Millisecond))
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	assert.Contains(t, err.Error(), "managedchart/"+f.ns+"/"+name+" failed to deploy version 2.0.0")
	assert.Contains(t, err.Error(), "ErrApplied: 1 of 1 clusters could not deploy it")
	assert.Contains(t, err.Error(), msg, "Fleet's own error text")
	assert.Contains(t, logs, `"progress":"ready 0/1; failed: ErrApplied`, "the failure shows in the progress while the grace runs")
	assertAppliedRecord(t, f.get(name), "2.0.0")
	term, rerr := os.ReadFile(f.node.TermLog)
	require.NoError(t, rerr)
	assert.True(t, strings.HasPrefix(string(term), "exit 1: "), string(term))

	// the Job is retried on another node while Fleet still fails
	before := f.get(name)
	other := noderun.New(t, "node-2")
	logs, wc, err := f.upgradeCounting(other, opts)
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "not refused by our own failed apply: %v", err)
	assert.Contains(t, err.Error(), msg)
	wc.mu.Lock()
	for _, w := range wc.seen {
		assert.NotContains(t, w, "managedcharts", "no second apply")
	}
	wc.mu.Unlock()
	assert.Equal(t, before.ResourceVersion, f.get(name).ResourceVersion)

	// the agent's retry succeeds (the cause was fixed): a re-run finishes.
	// Its grace outlasts the agent's back-off, which has grown with every
	// failed try so far (how many depends on the machine's speed)
	f.sim.SetFault(f.ns, name, fleetsim.Fault{})
	logs, _, err = f.upgradeCounting(other, app.Options{SpecFile: f.failFastSpec(name, f.charts, "2m"), Version: "2.0.0"})
	require.NoError(t, err, logs)
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", f.configMap(name + "-config")["webhookImage"], "2.0.0 deployed")
}

// A failure that Fleet's agent recovers from within the grace (its retry
// succeeds) is waited through.
func TestErrAppliedRecoveredWithinTheGraceIsWaitedThrough(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := app.Options{SpecFile: f.failFastSpec(name, f.charts, "10m"), Version: "2.0.0"}
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{ErrApplied: "transient: webhook unavailable"})
			go func() {
				// the agent's next attempt works
				time.Sleep(2 * time.Second)
				f.sim.SetFault(f.ns, name, fleetsim.Fault{})
			}()
		}
	})
	require.NoError(t, err, logs)
	assert.Contains(t, logs, "failed: ErrApplied", "the failure was seen")
	assertAppliedRecord(t, f.get(name), "2.0.0")
}

// A chart version Rancher cannot find in its repository (ManagedChart
// Defined=False; the Bundle is left alone) ends the wait after the grace
// with exit 1 and Rancher's message, not after the whole timeout.
func TestDefinedFalseFailsFast(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// the spec's source has 2.0.0; the repository Rancher reads does not
	source := t.TempDir()
	require.NoError(t, example.CopyDir(f.charts, source))
	require.NoError(t, os.RemoveAll(filepath.Join(f.charts, "demo-app-2.0.0")))

	opts := app.Options{SpecFile: f.failFastSpec(name, source, "2s"), Version: "2.0.0"}
	logs, _, err := f.upgradeCounting(f.node, opts)
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	assert.Contains(t, err.Error(), "Rancher cannot define the chart (ManagedChart condition Defined=False)")
	assert.Contains(t, err.Error(), "2.0.0", "Rancher's message names the version")
	b, gerr := f.env.Dynamic().Resource(fleetsim.BundlesGVR).Namespace(f.ns).Get(t.Context(), "mcc-"+name, metav1.GetOptions{})
	require.NoError(t, gerr)
	version, _, _ := unstructured.NestedString(b.Object, "spec", "helm", "version")
	assert.Equal(t, "1.0.0", version, "the Bundle was left alone")
}

// After an upgrade Fleet could not deploy, restoring the spec of before
// would give back the deploymentID the BundleDeployment last applied, and
// Fleet would run no Helm action (Helm's last revision would stay the
// failed one). rollback changes one field that enters the deploymentID
// and nothing that is deployed (the Helm timeout, 600 → 601), so Helm runs
// again; a second rollback writes nothing.
func TestRollbackAfterErrAppliedMakesFleetRunHelmAgain(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	bdBefore := f.localBD(name)
	f.sim.SetFault(f.ns, name, fleetsim.Fault{ErrApplied: "2.0.0 cannot be deployed", ErrAppliedVersion: "2.0.0"})
	logs, _, err := f.upgradeCounting(f.node, app.Options{SpecFile: f.failFastSpec(name, f.charts, "1s"), Version: "2.0.0"})
	require.Error(t, err, logs)
	require.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	failed := f.lastRevision(name)
	require.Equal(t, "failed", failed.Status, "Helm ran 2.0.0 and failed")
	require.Equal(t, "2.0.0", failed.Chart)

	logs, _, err = f.rollbackCounting(f.node, name)
	require.NoError(t, err, logs)
	assert.Contains(t, logs, "spec.timeoutSeconds 600 → 601", "says what it changed")
	mc := f.get(name)
	assert.Equal(t, "1.0.0", mc.Version)
	timeout, _, _ := unstructured.NestedInt64(mc.Object.Object, "spec", "timeoutSeconds")
	assert.EqualValues(t, 601, timeout)
	bd := f.localBD(name)
	assert.NotEqual(t, bdBefore["deploymentID"], bd["deploymentID"], "a deployment Fleet has not applied before")
	assert.Equal(t, bd["deploymentID"], bd["appliedDeploymentID"], "and applied now")
	last := f.lastRevision(name)
	assert.Equal(t, "deployed", last.Status, "Helm ran again: its last revision is deployed")
	assert.Equal(t, "1.0.0", last.Chart)
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0", f.configMap(name + "-config")["image"])
	helmRuns := f.sim.HelmRuns(f.ns, name)

	// a second rollback: the same spec, nothing written, no Helm action
	before := f.get(name)
	logs, wc, err := f.rollbackCounting(f.node, name)
	require.NoError(t, err, logs)
	assert.Zero(t, wc.writes.Load(), "a second rollback wrote: %v", wc.seen)
	assertUnchanged(t, before, f.get(name))
	assert.Equal(t, helmRuns, f.sim.HelmRuns(f.ns, name))
	assert.Equal(t, last, f.lastRevision(name))
}

// A rollout that stalls (never ready) without a Helm timeout: Fleet
// applied 2.0.0 and reports it NotReady for good, so the upgrade times out
// (exit 4). rollback writes the spec of before with maxHistory set to
// Fleet's default (timeoutSeconds would turn Helm's wait on): a new
// deploymentID, Helm runs with 1.0.0, and what 2.0.0 changed is gone.
func TestRollbackAfterAStalledRolloutWithoutAHelmTimeout(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(t.Context(), name, `{"spec":{"timeoutSeconds":null}}`)
	f.awaitObserved(name, "ready without a Helm timeout", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.HelmTimeoutSeconds == 0 && b.Status.Summary.Ready == 1
	})
	opts := app.Options{SpecFile: f.failFastSpec(name, f.charts, "1s"), Version: "2.0.0", Timeout: 3 * time.Second}
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{NeverReady: true})
		}
	})
	require.Error(t, err, logs)
	require.Equal(t, outcome.ExitTimeout, outcome.Code(err), "error: %v", err)
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", f.configMap(name + "-config")["webhookImage"], "2.0.0 was deployed")

	f.sim.SetFault(f.ns, name, fleetsim.Fault{}) // 1.0.0 rolls out fine
	logs, _, err = f.rollbackCounting(f.node, name)
	require.NoError(t, err, logs)
	assert.Contains(t, logs, "spec.maxHistory 0 → 2", "says what it changed")
	mc := f.get(name)
	assert.Equal(t, "1.0.0", mc.Version)
	_, hasTimeout, _ := unstructured.NestedInt64(mc.Object.Object, "spec", "timeoutSeconds")
	assert.False(t, hasTimeout, "Helm's wait stays off")
	last := f.lastRevision(name)
	assert.Equal(t, "deployed", last.Status)
	assert.Equal(t, "1.0.0", last.Chart)
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0", f.configMap(name + "-config")["image"])
	cm := f.configMap(name + "-config")
	assert.Equal(t, "registry.example.com/demo/webhook:v0.4.1", cm["webhookImage"], "nothing of 2.0.0 is left")
	assert.NotContains(t, cm, "metrics", "nothing of 2.0.0 is left")
}

// Our own in-flight apply never blocks us: after our apply, while Helm
// waits for a rollout that does not finish (helm.timeoutSeconds 600, the
// release pending-upgrade), a retried Job on the same node (its journal)
// and one on another node (the record on the target) continue the wait
// (exit 4 when it runs out), never refuse in preflight (exit 3) because of
// the pending release, and never apply again; once the rollout finishes a
// re-run ends with exit 0.
func TestOurPendingUpgradeDoesNotBlockARetriedJob(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := app.Options{SpecFile: f.failFastSpec(name, f.charts, "10m"), Version: "2.0.0", Timeout: 2 * time.Second}
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{NeverReady: true})
		}
	})
	require.Error(t, err, logs)
	require.Equal(t, outcome.ExitTimeout, outcome.Code(err), "error: %v", err)
	pending := f.lastRevision(name)
	require.Equal(t, "pending-upgrade", pending.Status, "Helm still waits for the rollout of 2.0.0")
	require.Equal(t, "2.0.0", pending.Chart)
	applied := f.get(name)

	for _, n := range []node{f.node, noderun.New(t, "node-2")} {
		logs, wc, err := f.upgradeCounting(n, opts)
		require.Error(t, err, logs)
		assert.Equal(t, outcome.ExitTimeout, outcome.Code(err), "%s continues the wait: %v", n.Name, err)
		assert.NotContains(t, err.Error(), "pending-upgrade", "not refused because of our own apply")
		wc.mu.Lock()
		for _, w := range wc.seen {
			assert.NotContains(t, w, "managedcharts", "no second apply")
		}
		wc.mu.Unlock()
	}
	assert.Equal(t, applied.ResourceVersion, f.get(name).ResourceVersion)

	f.sim.SetFault(f.ns, name, fleetsim.Fault{})
	logs, _, err = f.upgradeCounting(f.node, opts)
	require.NoError(t, err, logs)
	last := f.lastRevision(name)
	assert.Equal(t, "deployed", last.Status)
	assert.Equal(t, "2.0.0", last.Chart)
}

// revision is one Helm release record, as `helm history` shows it.
type revision struct {
	Number int
	Status string
	Chart  string // chart version
}

// lastRevision is the newest Helm release record of the fixture's release
// name (Secrets, Helm's storage), read from the API server.
func (f *fixture) lastRevision(name string) revision {
	f.t.Helper()
	rels, err := driver.NewSecrets(f.env.Kube().CoreV1().Secrets(f.ns)).Query(map[string]string{"name": name, "owner": "helm"})
	require.NoError(f.t, err)
	var last revision
	for _, res := range rels {
		r := res.(*helmrelease.Release)
		if r.Version > last.Number {
			last = revision{Number: r.Version, Status: r.Info.Status.String(), Chart: r.Chart.Metadata.Version}
		}
	}
	require.NotZero(f.t, last.Number, "release %s/%s has no history", f.ns, name)
	return last
}

// localBD is the local cluster's BundleDeployment of the fixture's
// ManagedChart name: its deploymentID and appliedDeploymentID.
func (f *fixture) localBD(name string) map[string]string {
	f.t.Helper()
	bd, err := f.env.Dynamic().Resource(fleetsim.BundleDeploymentsGVR).Namespace(fleetsim.ClusterNamespace(f.ns)).
		Get(f.t.Context(), fleetsim.BundleDeploymentName(fleetsim.BundleName(name), fleetsim.LocalCluster), metav1.GetOptions{})
	require.NoError(f.t, err)
	id, _, _ := unstructured.NestedString(bd.Object, "spec", "deploymentID")
	applied, _, _ := unstructured.NestedString(bd.Object, "status", "appliedDeploymentID")
	return map[string]string{"deploymentID": id, "appliedDeploymentID": applied}
}

// With helm.timeoutSeconds > 0 Fleet's agent waits for the rollout inside
// Helm (the Bundle says WaitApplied all along); a rollout that never
// finishes becomes ErrApplied when Helm's wait runs out. The tool reports
// that as a rollout that did not finish, after the grace, with exit 1.
func TestHelmWaitThatRunsOutIsARolloutThatDidNotFinish(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(t.Context(), name, `{"spec":{"timeoutSeconds":2}}`)
	f.awaitObserved(name, "ready with a 2s Helm timeout", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.HelmTimeoutSeconds == 2 && b.Status.Summary.Ready == 1
	})
	logs, _, err := f.upgradeCounting(f.node, app.Options{SpecFile: f.failFastSpec(name, f.charts, "1s"), Version: "2.0.0"},
		func(_ context.Context, attempt int) {
			if attempt == 1 {
				f.sim.SetFault(f.ns, name, fleetsim.Fault{NeverReady: true})
			}
		})
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	assert.Contains(t, err.Error(), "the rollout did not finish within Helm's wait (helm.timeoutSeconds 2)")
	assert.Contains(t, err.Error(), "context deadline exceeded")
	assert.Contains(t, logs, "have not applied the deployment", "WaitApplied while Helm waited")
}

// Fleet counts ErrApplied from any BundleDeployment whose Deployed
// condition is False, also when that was set for the deployment before
// the one it is asked for now. A rollback after a failed upgrade asks for
// a new deployment while the BundleDeployment still shows the failed
// one's error; the agent, held here (fleetsim Fault.AgentHold), has not
// tried the new one. The wait reads the BundleDeployments: the failure is
// older than their spec, so it is no failure of this rollback, which waits
// for the agent and ends with exit 0, never showing that failure as its
// own.
func TestAnOlderDeploymentsErrAppliedDoesNotFailTheRollback(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const msg = "failed to create resource: server-side apply failed for object demo/bad: Invalid value"
	failing := fleetsim.Fault{ErrApplied: msg, ErrAppliedVersion: "2.0.0"}
	f.sim.SetFault(f.ns, name, failing)
	logs, _, err := f.upgradeCounting(f.node, app.Options{SpecFile: f.failFastSpec(name, f.charts, "1s"), Version: "2.0.0"})
	require.Error(t, err, logs)
	require.Equal(t, outcome.ExitFailure, outcome.Code(err), "the upgrade to 2.0.0 failed: %v", err)
	time.Sleep(2100 * time.Millisecond) // the rollback's spec lands at least 2 s after the failure (olderBy, whole seconds)

	hold := failing
	hold.AgentHold = true
	f.sim.SetFault(f.ns, name, hold)
	done := make(chan result, 1)
	go func() { done <- f.cli(f.node, "rollback", "--target", f.targetRef(name), "--timeout", "60s") }()
	time.Sleep(3 * time.Second) // Fleet's summary counts the older ErrApplied meanwhile
	released := time.Now()
	f.sim.SetFault(f.ns, name, failing) // the agent catches up: 1.0.0 deploys
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the rollback did not end")
	}
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "counts ErrApplied, but the failure is an older deployment's", "the older failure was seen and not taken for this rollback's")
	// while the agent was held, the only failure was the older one; once it
	// runs, a transient failure of its own try (a conflict under load, say)
	// is this deployment's, and may be reported
	held := 0
	for _, line := range strings.Split(r.Stderr, "\n") {
		var entry struct {
			Time     time.Time `json:"time"`
			Progress string    `json:"progress"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Progress == "" || !entry.Time.Before(released) {
			continue
		}
		held++
		assert.NotContains(t, entry.Progress, "failed: ErrApplied", "the rollback never reported the older failure as its own")
	}
	assert.Positive(t, held, "progress lines while the agent was held: %s", r.Stderr)
}

// A release Fleet's agent left pending makes its next Helm upgrade answer
// "another operation (install/upgrade/rollback) is in progress", which
// Fleet reports as ErrApplied while its agent heals the release (it rolls
// back, then upgrades again). The wait goes on while that heals; when it
// lasts past wait.errAppliedGrace, the wait ends with exit 1 and that
// text.
func TestAnotherOperationInProgressPastTheGraceEndsWithItsText(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const msg = "another operation (install/upgrade/rollback) is in progress"
	opts := app.Options{SpecFile: f.failFastSpec(name, f.charts, "2s"), Version: "2.0.0"}
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{ErrApplied: msg})
		}
	})
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	assert.Contains(t, err.Error(), msg, "Fleet's own text")
	assert.Contains(t, logs, `"progress":"ready 0/1; failed: ErrApplied`, "the wait went on through the grace")
}
