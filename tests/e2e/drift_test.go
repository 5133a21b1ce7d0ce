package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// markModified makes Fleet report obj of the chart as changed in the
// cluster (Modified, with patch), and waits until the Bundle says so.
// (The simulator does not diff live objects: the fault stands for Fleet's
// drift watcher, which reports a change about 5 s after it.)
func (f *fixture) markModified(name string, obj fleetsim.Resource) {
	f.t.Helper()
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Modified: []fleetsim.Resource{obj}})
	f.awaitObserved(name, "Modified", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.Modified > 0
	})
}

// An operator demoted the chart's default StorageClass: drift to Fleet.
// The example policy's live rule reads exactly that StorageClass, so the
// upgrade that takes its live value is what ends the drift: preflight goes
// ahead and the report says so.
func TestDriftOwnedByALiveRuleDoesNotStopTheUpgrade(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	sc := name + "-longhorn"
	_, err := f.env.Kube().StorageV1().StorageClasses().Patch(t.Context(), sc, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	f.markModified(name, fleetsim.Resource{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: sc,
		Patch: `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}`})

	logs, _, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)), func(_ context.Context, attempt int) {
		if attempt == 1 {
			// the new deployment renders the StorageClass as it is live:
			// Fleet's next drift check finds nothing
			f.sim.SetFault(f.ns, name, fleetsim.Fault{})
		}
	})
	require.NoError(t, err, logs)
	assert.Contains(t, logs, "drift-owned-by-live-rule")
	assert.Contains(t, logs, "storage.k8s.io/v1 StorageClass/"+sc+" was changed in the cluster")
	assert.Contains(t, logs, `"msg":"drift owned by a live rule"`)
	mc := f.get(name)
	assert.Equal(t, false, mc.Values["storageClass"].(map[string]any)["defaultStorageClass"], "the live value")
	got, err := f.env.Kube().StorageV1().StorageClasses().Get(t.Context(), sc, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "false", got.Annotations["storageclass.kubernetes.io/is-default-class"], "the operator's choice stays")
}

// Drift that no rule accounts for is refused, naming the object and the
// change Fleet shows; nothing is written.
func TestDriftNoRuleReadsIsRefused(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.markModified(name, fleetsim.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.ns, Name: name + "-config",
		Patch: `{"data":{"color":"red"}}`})
	before := f.get(name)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, outcome.ExitRefused, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "v1 ConfigMap "+f.ns+"/"+name+"-config was changed in the cluster")
	assert.Contains(t, r.stderr, `{"data":{"color":"red"}}`, "the change Fleet shows")
	assert.Contains(t, r.stderr, "diff.comparePatches")
	assertUnchanged(t, before, f.get(name))
}
