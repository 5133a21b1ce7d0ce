package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
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
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		"field-manager conflict: ConfigMap " + f.ns + "/" + name + "-config .data.replicaCount",
		`owned by "kubectl-patch"`,
		"live: 9; the upgrade sets:",
		`Fleet's agent applies this chart server-side as "fleetagent" and would fail`,
		"Fleet cannot force conflicts",
	} {
		assert.Contains(t, r.Stderr, want)
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
	_, err := f.env.Kubectl(f.t.Context(), "-n", f.ns, "patch", "configmap", name+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`)
	require.NoError(f.t, err)
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

	// someone else's write of the same version (as when the ManagedChart
	// was set to 2.0.0 by hand) meets a Fleet stuck in WaitApplied:
	// preflight says why, from the failed revision
	f.patchManagedChart(t.Context(), name, `{"metadata":{"annotations":null}}`)
	r := f.cli(f.node, "preflight", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "failed in Fleet's agent")
	assert.Contains(t, r.Stderr, `conflict with "kubectl-patch"`)
}

// A HelmChart CRD from before helm-controller v0.17.9 has neither
// spec.serverSide nor spec.forceConflicts, and the API server would drop
// them without a word: apply: settings for such a HelmChart are bad input
// (exit 2) saying why, with nothing written. (This package runs no
// helm-controller, so the CRD can be made old here and put back after.)
func TestApplySettingsNeedTheHelmChartCRDsFields(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	crds := f.env.Dynamic().Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd, err := crds.Get(ctx, "helmcharts.helm.cattle.io", metav1.GetOptions{})
	require.NoError(t, err)
	original := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for i, v := range versions {
		props, found, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
		require.True(t, found)
		delete(props, "serverSide")
		delete(props, "forceConflicts")
		require.NoError(t, unstructured.SetNestedMap(versions[i].(map[string]any), props, "schema", "openAPIV3Schema", "properties", "spec", "properties"))
	}
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
	_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		now, err := crds.Get(context.Background(), "helmcharts.helm.cattle.io", metav1.GetOptions{})
		if err == nil {
			original.SetResourceVersion(now.GetResourceVersion())
			_, err = crds.Update(context.Background(), original, metav1.UpdateOptions{})
		}
		assert.NoError(t, err, "putting the HelmChart CRD back")
	})

	hc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
		"metadata": map[string]any{"name": "old-crd", "namespace": f.ns},
		"spec":     map[string]any{"chart": "demo-app", "version": "1.0.0", "targetNamespace": f.ns, "valuesContent": "a: 1\n"},
	}}
	_, err = f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Create(ctx, hc, metav1.CreateOptions{})
	require.NoError(t, err)
	// the CRD change reaches the API server's handlers shortly after
	require.Eventually(t, func() bool {
		_, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Patch(ctx, "old-crd", types.MergePatchType,
			[]byte(`{"spec":{"forceConflicts":true}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the strict dry run refuses the field once the CRD lacks it")
	created, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Get(ctx, "old-crd", metav1.GetOptions{})
	require.NoError(t, err)

	spec := f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
		"- target: {kind: HelmChart, namespace: "+f.ns+", name: old-crd}\n"+
		"  chart: {name: demo-app, source: "+f.charts+"}\n"+
		"  apply: {forceConflicts: true}\n")
	r := f.cli(f.node, "preflight", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, "helmchart/"+f.ns+"/old-crd")
	assert.Contains(t, r.Stderr, "this cluster's HelmChart CRD does not have them (helm-controller v0.17.9 and later do)")
	after, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Get(ctx, "old-crd", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.GetResourceVersion(), after.GetResourceVersion(), "nothing written")
}
