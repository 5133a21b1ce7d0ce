package fleetsim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
