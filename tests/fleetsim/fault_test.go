package fleetsim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// Each fault test deploys demo 1.0.0, sets the fault, and upgrades to 2.0.0.
func deployed(t *testing.T, opts fleetsim.Options) (*fixture, *unstructuredT) {
	t.Helper()
	f := newFixture(t, opts)
	f.chart("demo", "1.0.0", map[string]any{"color": "blue"})
	f.chart("demo", "2.0.0", map[string]any{"color": "blue"})
	f.createManagedChart("demo", "1.0.0", nil)
	bundle, _ := f.waitReady("demo", "1.0.0")
	return f, bundle
}

func (f *fixture) upgrade(version string) {
	f.updateManagedChart("demo", func(spec map[string]any) { spec["version"] = version })
}

// upgradeNoHelmWait upgrades with helm.timeoutSeconds unset: the agent
// reports the deployment applied at once, then NotReady until ready.
func (f *fixture) upgradeNoHelmWait(version string) {
	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["version"] = version
		delete(spec, "timeoutSeconds")
	})
}

func TestFaultDelay(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	const delay = 1500 * time.Millisecond
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{Delay: delay})
	start := time.Now()
	f.upgradeNoHelmWait("2.0.0")

	notReady := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "NotReady after the upgrade", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "notReady") == 1
	})
	require.Equal(t, "False", condStatus(notReady, "Ready"))
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"], "the upgrade runs before the delay")

	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.GreaterOrEqual(t, f.sim.LastStatusWrite(f.ns, "demo").Sub(start), delay)
	rt := f.sim.ReadyTimes(f.ns, "demo")
	require.False(t, rt.ManagedChart.Before(rt.Bundle), "%v", rt)
}

func TestFaultNeverReady(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{NeverReady: true})
	f.upgradeNoHelmWait("2.0.0")
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "NotReady", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "notReady") == 1
	})
	require.EqualValues(t, 1, num(b, "status", "unavailable"))
	res := nonReadyResources(b)
	require.Len(t, res, 1)
	require.Equal(t, fleetsim.StateNotReady, res[0]["bundleState"])
	require.Contains(t, cond(b, "Ready")["message"], "configmap.v1 "+f.ns+"/demo-config")
	bd := f.localBD("demo")
	require.Equal(t, str(bd, "spec", "deploymentID"), str(bd, "status", "appliedDeploymentID"), "applied but not ready")

	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{})
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
}

// A deployment that fails (ErrApplied): Helm really runs on the local
// cluster and fails, the agent retries with a back-off, each attempt a
// new failed Helm revision, and Fleet's statuses keep the old deployment's
// readiness as real Fleet's do.
func TestFaultErrApplied(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{RetryBackoff: 300 * time.Millisecond})
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{ErrApplied: "boom: admission webhook denied"})
	oldID := str(f.localBD("demo"), "spec", "deploymentID")
	deployedRev := f.lastRevision("demo")
	require.Equal(t, "deployed", deployedRev.Status)
	f.upgrade("2.0.0")
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "ErrApplied", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "summary", "errApplied") == 1
	})
	res := nonReadyResources(b)
	require.Len(t, res, 1)
	require.Equal(t, "boom: admission webhook denied", res[0]["message"])
	require.Equal(t, fleetsim.StateErrApplied, str(b, "status", "display", "state"))
	require.Contains(t, cond(b, "Ready")["message"], "ErrApplied(1)")
	var bd *unstructuredT
	require.Eventually(t, func() bool {
		bd = f.localBD("demo")
		return str(bd, "spec", "deploymentID") != oldID && condStatus(bd, "Deployed") == "False"
	}, time.Minute, 10*time.Millisecond, "the new deployment fails")
	require.Equal(t, oldID, str(bd, "status", "appliedDeploymentID"))
	// as real Fleet: ready and Ready stay true from the deployment before;
	// only the IDs and the Deployed condition show the failure
	ready, _, _ := unstructured.NestedBool(bd.Object, "status", "ready")
	require.True(t, ready, "status.ready stays true")
	require.Equal(t, "True", condStatus(bd, "Ready"))
	require.Equal(t, "False", condStatus(bd, "Deployed"))
	require.Equal(t, "boom: admission webhook denied", cond(bd, "Deployed")["message"])
	require.EqualValues(t, 0, num(b, "status", "summary", "ready"), "the Bundle does not count it ready")

	// Helm ran and failed: a failed 2.0.0 revision; the agent retries, and
	// each retry is a newer failed revision while the deployed one stays
	var first revision
	require.Eventually(t, func() bool {
		first = f.lastRevision("demo")
		return first.Status == "failed"
	}, time.Minute, 20*time.Millisecond, "Helm wrote a failed revision")
	require.Equal(t, "2.0.0", first.Chart)
	require.Contains(t, first.Description, "not a valid key!", "the API server refused the object")
	require.Eventually(t, func() bool {
		r := f.lastRevision("demo")
		return r.Number > first.Number && r.Status == "failed"
	}, time.Minute, 50*time.Millisecond, "a retry writes a newer failed revision")
	require.Equal(t, 1, f.sim.HelmRuns(f.ns, "demo"), "failed attempts are not counted: only the install")
	h := f.helmHistory("demo")
	require.Contains(t, h, deployedRev, "Helm keeps the last deployed revision: %v", h)
	require.LessOrEqual(t, len(h), 2, "Fleet's history of 2 revisions: older failed ones are removed: %v", h)

	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{})
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"])
	last := f.lastRevision("demo")
	require.Equal(t, "deployed", last.Status)
	require.Equal(t, "2.0.0", last.Chart)
}

// Drift as Fleet's agent sees it: an edit of an object the chart renders
// is reported Modified (DriftDelay after the change), with the merge patch
// that would restore it; a comparePatches entry for that path, written on
// the ManagedChart as a user would, makes the chart Ready again without a
// new deploymentID or a Helm run; an edit back ends the drift.
func TestDriftFromTheLiveObjects(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{DriftDelay: 200 * time.Millisecond})
	oldID := str(f.localBD("demo"), "spec", "deploymentID")
	runs := f.sim.HelmRuns(f.ns, "demo")
	f.editConfigMap("demo-config", "color", "red")
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "Modified", func(b *unstructuredT) bool {
		return num(b, "status", "summary", "modified") == 1
	})
	require.Equal(t, bundle.GetGeneration(), b.GetGeneration(), "drift changes no spec")
	res := nonReadyResources(b)
	require.Len(t, res, 1)
	require.Equal(t, fleetsim.StateModified, res[0]["bundleState"])
	mod := res[0]["modifiedStatus"].([]any)[0].(map[string]any)
	require.Equal(t, "demo-config", mod["name"])
	require.Equal(t, `{"data":{"color":"blue"}}`, mod["patch"], "what would restore the chart's value")
	require.Equal(t, "False", condStatus(b, "Ready"))
	require.Contains(t, cond(b, "Ready")["message"], "configmap.v1 "+f.ns+"/demo-config modified")
	require.EqualValues(t, 0, num(b, "status", "unavailable"), "a modified deployment is still available")
	_, hasNonModified, _ := unstructured.NestedBool(f.localBD("demo").Object, "status", "nonModified")
	require.False(t, hasNonModified, "nonModified absent")
	mc := f.waitFor(fleetsim.ManagedChartsGVR, f.ns, "demo", "Modified copied", func(m *unstructuredT) bool {
		return num(m, "status", "summary", "modified") == 1
	})
	require.Equal(t, "False", condStatus(mc, "Ready"))

	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["diff"] = map[string]any{"comparePatches": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "namespace": f.ns, "name": "demo-config",
			"operations": []any{map[string]any{"op": "remove", "path": "/data/color"}}}}}
	})
	b = f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "Ready with the comparePatches", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() && bundleReady(b)
	})
	require.Equal(t, oldID, str(f.localBD("demo"), "spec", "deploymentID"), "no new deployment")
	require.Equal(t, runs, f.sim.HelmRuns(f.ns, "demo"), "no Helm run")

	f.updateManagedChart("demo", func(spec map[string]any) { delete(spec, "diff") })
	f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "Modified again", func(u *unstructuredT) bool {
		return u.GetGeneration() > b.GetGeneration() && num(u, "status", "observedGeneration") == u.GetGeneration() &&
			num(u, "status", "summary", "modified") == 1
	})
	f.editConfigMap("demo-config", "color", "blue")
	f.waitReady("demo", "1.0.0")
}

// Stale: the specs move on, the status stays what it was, Ready included.
func TestFaultStale(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	oldBD := f.localBD("demo")
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{Stale: true})
	f.upgrade("2.0.0")
	bd := f.waitFor(fleetsim.BundleDeploymentsGVR, fleetsim.ClusterNamespace(f.ns), oldBD.GetName(), "new deploymentID", func(u *unstructuredT) bool {
		return str(u, "spec", "deploymentID") != str(oldBD, "spec", "deploymentID")
	})
	require.Equal(t, str(oldBD, "status", "appliedDeploymentID"), str(bd, "status", "appliedDeploymentID"))

	// Nothing reports for a while: no status change of the Bundle at all.
	b, err := f.dyn.Resource(fleetsim.BundlesGVR).Namespace(f.ns).Get(t.Context(), "mcc-demo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Greater(t, b.GetGeneration(), bundle.GetGeneration())
	require.Equal(t, bundle.GetGeneration(), num(b, "status", "observedGeneration"))
	require.Equal(t, "True", condStatus(b, "Ready"), "stale status still says Ready")
	requireQuiet(t, f, b.GetResourceVersion(), 500*time.Millisecond)
	require.Equal(t, 1, f.sim.HelmRuns(f.ns, "demo"))

	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{})
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"])
}

// requireQuiet fails if Bundle mcc-demo changes within d after
// resourceVersion rv.
func requireQuiet(t *testing.T, f *fixture, rv string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	w, err := f.dyn.Resource(fleetsim.BundlesGVR).Namespace(f.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=mcc-demo", ResourceVersion: rv,
	})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Bookmark && ev.Type != "" {
			t.Fatalf("the stale Bundle changed: %s %s", ev.Type, dump(ev.Object.(*unstructuredT)))
		}
	case <-ctx.Done():
	}
}

func TestFaultReadyOverTime(t *testing.T) {
	t.Parallel()
	const clusters = 50
	f, bundle := deployed(t, fleetsim.Options{Clusters: clusters})
	require.Equal(t, "50/50", str(bundle, "status", "display", "readyClusters"))
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{ReadyOverTime: 2 * time.Second})
	start := time.Now()
	f.upgrade("2.0.0")
	seen := map[int64]bool{}
	f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "all clusters ready over time", func(b *unstructuredT) bool {
		if b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() {
			seen[num(b, "status", "summary", "ready")] = true
		}
		return b.GetGeneration() > bundle.GetGeneration() && bundleReady(b)
	})
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	require.GreaterOrEqual(t, len(seen), 5, "clusters become ready one by one: saw ready counts %v", seen)
	require.True(t, seen[clusters])
}

func nonReadyResources(b *unstructuredT) []map[string]any {
	items, _, _ := unstructuredSlice(b, "status", "summary", "nonReadyResources")
	var out []map[string]any
	for _, it := range items {
		out = append(out, it.(map[string]any))
	}
	return out
}

// Fleet's deploymentID is a hash of the content: going back to the spec
// of before a failed upgrade gives back the deploymentID the
// BundleDeployment last applied, which counts as applied at once, and no
// Helm action follows (as real Fleet does). Changing a field that enters
// the ID without changing what is deployed (the Helm timeout) makes the
// agent run Helm again.
func TestRollbackToTheAppliedDeploymentIDRunsNoHelm(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	require.EqualValues(t, 600, num(bundle, "spec", "helm", "timeoutSeconds"), "as the fixture's ManagedChart")
	oldID := str(f.localBD("demo"), "spec", "deploymentID")

	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{ErrApplied: "2.0.0 cannot be deployed", ErrAppliedVersion: "2.0.0"})
	f.upgrade("2.0.0")
	f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "ErrApplied", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "errApplied") == 1
	})
	require.Eventually(t, func() bool { return f.lastRevision("demo").Status == "failed" }, time.Minute, 20*time.Millisecond,
		"Helm ran 2.0.0 and failed")
	require.Equal(t, "2.0.0", f.lastRevision("demo").Chart)

	f.upgrade("1.0.0") // the spec of before, as it was
	// applied at once, with no Helm action: what the failed upgrade changed
	// (the ConfigMap, updated before Helm failed on the refused object)
	// stays, and the agent reports it as drift
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "back at 1.0.0, Modified", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration()+1 && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "modified") == 1
	})
	bd := f.localBD("demo")
	require.Equal(t, oldID, str(bd, "spec", "deploymentID"), "the content hash of before")
	require.Equal(t, oldID, str(bd, "status", "appliedDeploymentID"))
	require.Contains(t, cond(b, "Ready")["message"], "configmap.v1 "+f.ns+"/demo-config modified")
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"], "the failed upgrade's change")
	last := f.lastRevision("demo")
	require.Equal(t, "failed", last.Status, "no Helm action: Helm's last revision is still the failed one")
	require.Equal(t, "2.0.0", last.Chart)

	runs := f.sim.HelmRuns(f.ns, "demo")
	f.updateManagedChart("demo", func(spec map[string]any) { spec["timeoutSeconds"] = int64(601) })
	f.waitReadyAfter("demo", "1.0.0", b.GetGeneration())
	bd = f.localBD("demo")
	require.NotEqual(t, oldID, str(bd, "spec", "deploymentID"), "the Helm timeout enters the deploymentID")
	require.Equal(t, runs+1, f.sim.HelmRuns(f.ns, "demo"), "Helm ran again")
	require.Equal(t, "1.0.0", f.configMap("demo")["chartVersion"])
	last = f.lastRevision("demo")
	require.Equal(t, "deployed", last.Status)
	require.Equal(t, "1.0.0", last.Chart)
}

// Neither diff.comparePatches nor a Helm history limit of Fleet's default
// is deployed; only the second enters the deploymentID (Fleet hashes the
// options without diff), so only it makes Helm run again.
func TestComparePatchesStayOutOfTheDeploymentID(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	oldID := str(f.localBD("demo"), "spec", "deploymentID")
	runs := f.sim.HelmRuns(f.ns, "demo")
	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["diff"] = map[string]any{"comparePatches": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "namespace": f.ns, "name": "demo-config",
			"operations": []any{map[string]any{"op": "remove", "path": "/data/color"}}}}}
	})
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "the comparePatches copied", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() && bundleReady(b)
	})
	bd := f.localBD("demo")
	require.Equal(t, oldID, str(bd, "spec", "deploymentID"), "diff is not part of the deploymentID")
	_, hasDiff, _ := unstructured.NestedSlice(bd.Object, "spec", "options", "diff", "comparePatches")
	require.True(t, hasDiff, "the BundleDeployment carries the comparePatches")
	require.Equal(t, runs, f.sim.HelmRuns(f.ns, "demo"))

	f.updateManagedChart("demo", func(spec map[string]any) { spec["maxHistory"] = int64(2) })
	f.waitReadyAfter("demo", "1.0.0", b.GetGeneration())
	require.NotEqual(t, oldID, str(f.localBD("demo"), "spec", "deploymentID"), "Helm options enter the deploymentID")
	require.Equal(t, runs+1, f.sim.HelmRuns(f.ns, "demo"), "Helm ran again")
}

// With helm.timeoutSeconds > 0 Helm waits for the rollout inside the
// agent: the BundleDeployment is not reported applied (the Bundle says
// WaitApplied, never NotReady) until the deployment is ready, and then
// applied and ready at once.
func TestHelmWaitHoldsWaitApplied(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	oldID := str(f.localBD("demo"), "status", "appliedDeploymentID")
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{Delay: 5 * time.Second})
	f.upgrade("2.0.0") // timeoutSeconds 600, as the fixture's
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "WaitApplied", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "waitApplied") == 1
	})
	require.Equal(t, fleetsim.StateWaitApplied, str(b, "status", "display", "state"))
	require.Eventually(t, func() bool { return f.sim.HelmRuns(f.ns, "demo") == 2 }, time.Minute, 10*time.Millisecond, "Helm upgraded")
	bd := f.localBD("demo")
	require.Equal(t, oldID, str(bd, "status", "appliedDeploymentID"), "not applied while Helm waits")
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
}

// A rollout that never finishes with helm.timeoutSeconds > 0: WaitApplied
// for the timeout with Helm's revision pending-upgrade, then ErrApplied
// with Helm's "context deadline exceeded" and the revision failed; the
// agent retries, holding a newer revision pending-upgrade for the next
// wait.
func TestHelmWaitTimesOutIntoErrApplied(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{RetryBackoff: 500 * time.Millisecond})
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{NeverReady: true})
	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["version"] = "2.0.0"
		spec["timeoutSeconds"] = int64(2)
	})
	f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "WaitApplied", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "waitApplied") == 1
	})
	var waiting revision
	require.Eventually(t, func() bool {
		waiting = f.lastRevision("demo")
		return waiting.Chart == "2.0.0" && waiting.Status == "pending-upgrade"
	}, time.Minute, 20*time.Millisecond, "Helm upgraded and waits for the rollout: pending-upgrade")
	b := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "ErrApplied", func(b *unstructuredT) bool {
		return num(b, "status", "summary", "errApplied") == 1
	})
	require.Contains(t, cond(b, "Ready")["message"], "context deadline exceeded")
	require.Equal(t, "False", condStatus(f.localBD("demo"), "Deployed"))
	require.Eventually(t, func() bool {
		h := f.helmHistory("demo")
		for _, r := range h {
			if r.Number == waiting.Number {
				return r.Status == "failed"
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "the revision fails when Helm's wait runs out")
	require.Eventually(t, func() bool {
		r := f.lastRevision("demo")
		return r.Number > waiting.Number && r.Status == "pending-upgrade"
	}, time.Minute, 20*time.Millisecond, "the agent's retry holds a newer revision pending-upgrade")

	// the rollout finishes: the retry's wait ends with the revision deployed
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{})
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.Eventually(t, func() bool { return f.lastRevision("demo").Status == "deployed" }, time.Minute, 20*time.Millisecond)
}
