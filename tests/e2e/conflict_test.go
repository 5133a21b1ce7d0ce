package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
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
	f.installIgnoringReplicaCount(name)
	f.hotfixReplicaCount(name)
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

// installIgnoringReplicaCount installs the example 1.0.0 whose Fleet drift
// check ignores the ConfigMap's data.replicaCount (and, as every fixture,
// the StorageClass's default-class annotation).
func (f *fixture) installIgnoringReplicaCount(name string) {
	f.t.Helper()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(f.t.Context(), name, `{"spec":{"diff":{"comparePatches":[`+
		`{"apiVersion":"v1","kind":"ConfigMap","name":"`+name+`-config","jsonPointers":["/data/replicaCount"]},`+
		`{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","name":"`+name+`-longhorn","jsonPointers":["/metadata/annotations/storageclass.kubernetes.io~1is-default-class"]}]}}}`)
	f.awaitObserved(name, "ready with the hotfixed field ignored", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.Ready == 1
	})
}

// hotfixReplicaCount is an operator's `kubectl patch` of the ConfigMap's
// data.replicaCount: the field's owner becomes "kubectl-patch".
func (f *fixture) hotfixReplicaCount(name string) {
	f.t.Helper()
	kubectl, err := f.env.Binary("kubectl")
	require.NoError(f.t, err)
	out, err := exec.CommandContext(f.t.Context(), kubectl, "--kubeconfig", f.env.KubeconfigPath(), "-n", f.ns,
		"patch", "configmap", name+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`).CombinedOutput()
	require.NoError(f.t, err, string(out))
}

// The same hotfix made after preflight (as the upgrade applies): Fleet's
// agent fails every try with the conflict, writes failed Helm revisions
// and reports nothing in the Bundle but WaitApplied (as real Fleet v0.16.1
// does). The wait reads the failed revision at the new version on the
// local cluster and exits 1 with its description after errAppliedGrace,
// not after the whole timeout.
func TestAConflictInFleetsAgentEndsTheWait(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installIgnoringReplicaCount(name)
	spec := f.failFastSpec(name, f.charts, "2s")
	data, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(spec, []byte(strings.Replace(string(data), "timeout: 10m", "timeout: 90s", 1)), 0o600))
	opts := app.Options{SpecFile: spec, Version: "2.0.0"}
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.hotfixReplicaCount(name)
		}
	})
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "error: %v", err)
	assert.Contains(t, err.Error(), "managedchart/"+f.ns+"/"+name+" failed to deploy version 2.0.0")
	assert.Contains(t, err.Error(), "failed in Fleet's agent")
	assert.Contains(t, err.Error(), `conflict with "kubectl-patch"`)
	assert.Contains(t, err.Error(), ".data.replicaCount")
	b, berr := f.tc.Bundle(t.Context(), f.ns, name)
	require.NoError(t, berr)
	assert.Zero(t, b.Status.Summary.ErrApplied, "Fleet reports no error of it")
	last := f.lastRevision(name)
	assert.Equal(t, "failed", last.Status)
	assert.Equal(t, "2.0.0", last.Chart)
}
