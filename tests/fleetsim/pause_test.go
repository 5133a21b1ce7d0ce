package fleetsim_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// While the Bundle is paused, the BundleDeployments stage the new content
// but keep their deploymentID: nothing is deployed until unpaused.
func TestPausedBundleDoesNotAdvanceDeploymentID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{})
	f.chart("demo", "1.0.0", map[string]any{"color": "blue"})
	f.chart("demo", "2.0.0", map[string]any{"color": "blue"})
	f.createManagedChart("demo", "1.0.0", nil)
	bundle, _ := f.waitReady("demo", "1.0.0")
	oldID := str(f.localBD("demo"), "spec", "deploymentID")

	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["paused"] = true
		spec["version"] = "2.0.0"
	})
	paused := f.waitFor(fleetsim.BundlesGVR, f.ns, "mcc-demo", "paused bundle out of sync", func(b *unstructuredT) bool {
		return b.GetGeneration() > bundle.GetGeneration() && num(b, "status", "observedGeneration") == b.GetGeneration() &&
			num(b, "status", "summary", "outOfSync") == 1
	})
	require.Equal(t, "False", condStatus(paused, "Ready"))
	require.Contains(t, cond(paused, "Ready")["message"], "OutOfSync(1)")
	require.EqualValues(t, 0, num(paused, "status", "summary", "ready"))
	bd := f.localBD("demo")
	require.Equal(t, oldID, str(bd, "spec", "deploymentID"), "paused: deploymentID must not advance")
	require.NotEqual(t, oldID, str(bd, "spec", "stagedDeploymentID"))
	require.Equal(t, oldID, str(bd, "status", "appliedDeploymentID"))
	require.Equal(t, "1.0.0", f.configMap("demo")["chartVersion"])
	require.Equal(t, 1, f.sim.HelmRuns(f.ns, "demo"))

	f.updateManagedChart("demo", func(spec map[string]any) { spec["paused"] = false })
	f.waitReadyAfter("demo", "2.0.0", paused.GetGeneration())
	bd = f.localBD("demo")
	require.Equal(t, str(bd, "spec", "stagedDeploymentID"), str(bd, "spec", "deploymentID"))
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"])
	require.Equal(t, 2, f.sim.HelmRuns(f.ns, "demo"))
}

// A version the chart source does not have leaves the Bundle alone and
// says so in the ManagedChart's Defined condition.
func TestMissingChartVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{})
	f.chart("demo", "1.0.0", nil)
	f.createManagedChart("demo", "1.0.0", nil)
	bundle, _ := f.waitReady("demo", "1.0.0")

	f.updateManagedChart("demo", func(spec map[string]any) { spec["version"] = "9.9.9" })
	mc := f.waitFor(fleetsim.ManagedChartsGVR, f.ns, "demo", "Defined False", func(m *unstructuredT) bool {
		return condStatus(m, "Defined") == "False"
	})
	require.Contains(t, cond(mc, "Defined")["message"], "9.9.9")
	b, err := f.dyn.Resource(fleetsim.BundlesGVR).Namespace(f.ns).Get(t.Context(), "mcc-demo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, bundle.GetGeneration(), b.GetGeneration())
	require.Equal(t, "1.0.0", str(b, "spec", "helm", "version"))

	f.chart("demo", "9.9.9", nil) // the repo catches up; Rancher retries
	f.waitReadyAfter("demo", "9.9.9", bundle.GetGeneration())
	require.Equal(t, "9.9.9", f.configMap("demo")["chartVersion"])
}

// Deleting the ManagedChart deletes the Bundle, its BundleDeployments and
// the Helm release.
func TestDeleteManagedChart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{})
	f.chart("demo", "1.0.0", nil)
	f.createManagedChart("demo", "1.0.0", nil)
	f.waitReady("demo", "1.0.0")

	require.NoError(t, f.dyn.Resource(fleetsim.ManagedChartsGVR).Namespace(f.ns).Delete(t.Context(), "demo", metav1.DeleteOptions{}))
	f.waitGone(fleetsim.BundlesGVR, f.ns, "mcc-demo")
	f.waitGone(fleetsim.BundleDeploymentsGVR, fleetsim.ClusterNamespace(f.ns), fleetsim.BundleDeploymentName("mcc-demo", fleetsim.LocalCluster))
	f.waitGoneConfigMap("demo-config")
}
