package fleetsim_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

func TestInstallUpgradeAndStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{})
	f.chart("demo", "1.0.0", map[string]any{"greeting": "hello", "color": "blue"})
	f.chart("demo", "2.0.0", map[string]any{"greeting": "hi", "color": "blue", "size": "L"})

	f.createManagedChart("demo", "1.0.0", map[string]any{"data": map[string]any{"color": "red"}})
	bundle, mc := f.waitReady("demo", "1.0.0")

	// Rancher's Bundle.
	require.Equal(t, "demo", str(bundle, "spec", "helm", "chart"))
	require.Equal(t, f.ns, str(bundle, "spec", "defaultNamespace"))
	require.EqualValues(t, 600, num(bundle, "spec", "helm", "timeoutSeconds"))
	require.Equal(t, "1/1", str(bundle, "status", "display", "readyClusters"))
	require.EqualValues(t, 1, num(bundle, "status", "summary", "desiredReady"))
	require.Equal(t, "True", condStatus(mc, "Defined"))

	// Fleet's BundleDeployment.
	bd := f.localBD("demo")
	require.Equal(t, "mcc-demo", bd.GetLabels()[fleetsim.LabelBundleName])
	require.Equal(t, f.ns, bd.GetLabels()[fleetsim.LabelBundleNamespace])
	id := str(bd, "spec", "deploymentID")
	require.Regexp(t, `^s-[0-9a-f]{64}:[0-9a-f]+$`, id)
	require.Equal(t, id, str(bd, "spec", "stagedDeploymentID"))
	require.Equal(t, id, str(bd, "status", "appliedDeploymentID"))
	ready, _, _ := unstructuredBool(bd, "status", "ready")
	require.True(t, ready)

	// The agent's Helm release: chart defaults + the values, nothing reused.
	require.Equal(t, map[string]string{"chartVersion": "1.0.0", "greeting": "hello", "color": "red"}, f.configMap("demo"))
	require.Equal(t, 1, f.sim.HelmRuns(f.ns, "demo"))
	require.False(t, f.sim.LastStatusWrite(f.ns, "demo").IsZero())

	// Upgrade: new version and values.
	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["version"] = "2.0.0"
		spec["values"] = map[string]any{"data": map[string]any{"color": "green"}}
	})
	bundle2, _ := f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.Greater(t, bundle2.GetGeneration(), bundle.GetGeneration())
	require.NotEqual(t, id, str(f.localBD("demo"), "spec", "deploymentID"))
	require.Equal(t, map[string]string{"chartVersion": "2.0.0", "greeting": "hi", "color": "green", "size": "L"}, f.configMap("demo"))
	require.Equal(t, 2, f.sim.HelmRuns(f.ns, "demo"))

	// The values are the complete user values: dropping one restores the
	// default. (Dropping all of them would not: Helm's upgrade reuses the
	// previous values when given none, and Fleet sets no flag against it.)
	f.updateManagedChart("demo", func(spec map[string]any) {
		spec["values"] = map[string]any{"data": map[string]any{"greeting": "yo"}}
	})
	bundle3, _ := f.waitReadyAfter("demo", "2.0.0", bundle2.GetGeneration())
	require.Equal(t, map[string]string{"chartVersion": "2.0.0", "greeting": "yo", "color": "blue", "size": "L"}, f.configMap("demo"))

	// A ManagedChart change that does not change the Bundle spec leaves the
	// Bundle generation alone; the status keeps the Bundle's generation.
	before := f.sim.HelmRuns(f.ns, "demo")
	mcNow := f.updateManagedChart("demo", func(spec map[string]any) { spec["repoName"] = "other-repo" })
	b, err := f.dyn.Resource(fleetsim.BundlesGVR).Namespace(f.ns).Get(t.Context(), "mcc-demo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, bundle3.GetGeneration(), b.GetGeneration())
	require.NotEqual(t, mcNow.GetGeneration(), b.GetGeneration(), "test premise: the generations differ")
	mcNow = f.waitFor(fleetsim.ManagedChartsGVR, f.ns, "demo", "status", func(m *unstructuredT) bool {
		return condStatus(m, "Ready") == "True"
	})
	require.Equal(t, b.GetGeneration(), num(mcNow, "status", "observedGeneration"))
	require.Equal(t, before, f.sim.HelmRuns(f.ns, "demo"))
	require.True(t, strings.HasPrefix(id, "s-"))
}

// Without spec.releaseName, the agent deploys the release under the name
// of the BundleDeployment in real Fleet, which is its Bundle's: mcc-<name>,
// not the chart's name (Fleet's helmdeployer; the adapter's Release says
// the same).
func TestAReleaseWithoutANameIsTheBundles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{})
	f.chart("demo", "1.0.0", map[string]any{"greeting": "hello"})
	f.createManagedChart("demo", "1.0.0", nil)
	f.updateManagedChart("demo", func(spec map[string]any) { delete(spec, "releaseName") })
	f.waitReady("demo", "1.0.0")
	require.Equal(t, "hello", f.configMap("mcc-demo")["greeting"], "the release is mcc-demo, its objects named after it")
}
