package fleetsim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

func TestThousandClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 simulated clusters: skipped with -short")
	}
	t.Parallel()
	const clusters = 1000
	start := time.Now()
	f, bundle := deployed(t, fleetsim.Options{Clusters: clusters})
	t.Logf("deployed to %d clusters in %v", clusters, time.Since(start))
	require.Equal(t, "1000/1000", str(bundle, "status", "display", "readyClusters"))
	bds, err := f.dyn.Resource(fleetsim.BundleDeploymentsGVR).Namespace(fleetsim.ClusterNamespace(f.ns)).List(t.Context(), metav1.ListOptions{
		LabelSelector: fleetsim.LabelBundleName + "=mcc-demo," + fleetsim.LabelBundleNamespace + "=" + f.ns,
	})
	require.NoError(t, err)
	require.Len(t, bds.Items, clusters)

	start = time.Now()
	f.upgrade("2.0.0")
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	t.Logf("upgraded %d clusters in %v", clusters, time.Since(start))
	require.Equal(t, 1, f.sim.HelmRuns(f.ns, "demo")-1, "Helm runs on the local cluster only")
}

// Every cluster reports what Fleet's agent reports of its deployment, the
// local one as the others: each object the deployment renders in
// status.resources, resourceCounts, release ns/name:revision, the four
// conditions; the Helm values in spec.options and spec.stagedOptions.
// That is the weight a BundleDeployment has (docs/performance.md "Scale").
func TestEveryClusterReportsItsDeploymentsObjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fleetsim.Options{Clusters: 3})
	f.chart("demo", "1.0.0", map[string]any{"color": "blue"})
	f.chart("demo", "2.0.0", map[string]any{"color": "blue"})
	f.createManagedChart("demo", "1.0.0", map[string]any{"data": map[string]any{"color": "red"}})
	bundle, _ := f.waitReady("demo", "1.0.0")
	f.upgrade("2.0.0")
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	local := f.localBD("demo")
	want, _, _ := unstructured.NestedSlice(local.Object, "status", "resources")
	require.NotEmpty(t, want, "the local cluster lists what Helm deployed")
	for i := range 3 {
		name := fleetsim.BundleDeploymentName(fleetsim.BundleName("demo"), fleetsim.ClusterName(i))
		bd, err := f.dyn.Resource(fleetsim.BundleDeploymentsGVR).Namespace(fleetsim.ClusterNamespace(f.ns)).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		got, _, _ := unstructured.NestedSlice(bd.Object, "status", "resources")
		require.ElementsMatch(t, want, got, "%s lists the objects of its deployment", name)
		require.EqualValues(t, len(want), num(bd, "status", "resourceCounts", "desiredReady"), name)
		require.EqualValues(t, len(want), num(bd, "status", "resourceCounts", "ready"), name)
		require.Regexp(t, `^`+f.ns+`/demo:\d+$`, str(bd, "status", "release"), name)
		conds, _, _ := unstructured.NestedSlice(bd.Object, "status", "conditions")
		require.Len(t, conds, 4, name)
		for _, field := range []string{"options", "stagedOptions"} {
			_, found, _ := unstructured.NestedFieldNoCopy(bd.Object, "spec", field, "helm", "values")
			require.True(t, found, "%s spec.%s carries the values", name, field)
		}
	}
}
