package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// awaitModified waits until Fleet reports the chart's objects changed in
// the cluster (the simulator's agent compares the live objects with what
// Helm rendered, as Fleet's drift detection does).
func (f *fixture) awaitModified(name string) {
	f.t.Helper()
	f.awaitObserved(name, "Modified", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.Modified > 0
	})
}

// editConfigMap changes data key of the chart's ConfigMap, as an operator
// would.
func (f *fixture) editConfigMap(name, key, value string) {
	f.t.Helper()
	patch := fmt.Sprintf(`{"data":{%q:%q}}`, key, value)
	_, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Patch(f.t.Context(), name+"-config", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

// An operator demoted the chart's default StorageClass: drift to Fleet
// (the ManagedChart here has no comparePatches for it). The example
// policy's live rule reads exactly that StorageClass, so the upgrade that
// takes its live value is what ends the drift: preflight goes ahead, the
// report says so, and once 2.0.0 renders the StorageClass as it is live
// Fleet finds no drift and the chart is Ready.
func TestDriftOwnedByALiveRuleDoesNotStopTheUpgrade(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(t.Context(), name, `{"spec":{"diff":null}}`)
	f.awaitObserved(name, "ready without comparePatches", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.Ready == 1
	})
	sc := name + "-longhorn"
	_, err := f.env.Kube().StorageV1().StorageClasses().Patch(t.Context(), sc, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	f.awaitModified(name)

	logs, _, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	require.NoError(t, err, logs)
	assert.Contains(t, logs, "drift-owned-by-live-rule")
	assert.Contains(t, logs, "storage.k8s.io/v1 StorageClass/"+sc+" was changed in the cluster")
	assert.Contains(t, logs, `{\"metadata\":{\"annotations\":{\"storageclass.kubernetes.io/is-default-class\":\"true\"}}}`, "Fleet's patch")
	assert.Contains(t, logs, `"phase":"preflight"`)
	assert.Contains(t, logs, `"drift_owned":1`)
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
	f.editConfigMap(name, "replicaCount", "9")
	f.awaitModified(name)
	before := f.get(name)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, outcome.ExitRefused, r.Code, "stderr: %s", r.Stderr)
	assert.Contains(t, r.Stderr, "v1 ConfigMap "+f.ns+"/"+name+"-config was changed in the cluster")
	assert.Contains(t, r.Stderr, `{"data":{"replicaCount":"2"}}`, "the change Fleet shows")
	assert.Contains(t, r.Stderr, "diff.comparePatches")
	assertUnchanged(t, before, f.get(name))
}
