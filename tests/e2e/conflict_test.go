package e2e

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// An operator's hotfix of a field Fleet's drift check is told to ignore
// (diff.comparePatches), made with the real kubectl: under a ManagedChart
// whose release Fleet's Helm 4 installed server-side, the upgrade would
// fail in Fleet's agent on every try with nothing in the Bundle but
// WaitApplied. Preflight names the conflict instead (the object, the
// field, its owner, both values, the ways out: Fleet cannot force) and
// exits 3 with the ManagedChart untouched.
func TestAHotfixUnderAManagedChartIsNamedInPreflight(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(t.Context(), name, `{"spec":{"diff":{"comparePatches":[`+
		`{"apiVersion":"v1","kind":"ConfigMap","name":"`+name+`-config","jsonPointers":["/data/replicaCount"]},`+
		`{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","name":"`+name+`-longhorn","jsonPointers":["/metadata/annotations/storageclass.kubernetes.io~1is-default-class"]}]}}}`)
	f.awaitObserved(name, "ready with the hotfixed field ignored", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.Ready == 1
	})
	kubectl, err := f.env.Binary("kubectl")
	require.NoError(t, err)
	out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", f.env.KubeconfigPath(), "-n", f.ns,
		"patch", "configmap", name+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`).CombinedOutput()
	require.NoError(t, err, string(out))
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), name+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	applier := ""
	for _, e := range cm.ManagedFields {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			applier = e.Manager
		}
	}
	require.Equal(t, "fleetagent", applier, "the simulated agent applies server-side as Fleet's does")
	before := f.get(name)

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, outcome.ExitRefused, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	for _, want := range []string{
		"field-manager conflict: ConfigMap " + f.ns + "/" + name + "-config .data.replicaCount",
		`owned by "kubectl-patch"`,
		"live: 9; the upgrade sets:",
		`Fleet's agent applies this chart server-side as "fleetagent" and would fail`,
		"Fleet cannot force conflicts",
	} {
		assert.Contains(t, r.stderr, want)
	}
	after := f.get(name)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the ManagedChart is untouched")
	assert.Equal(t, "1.0.0", after.Version)
}
