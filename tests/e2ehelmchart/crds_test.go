package e2ehelmchart

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Under a HelmChart, through the real helm-controller, as the k3s Plan's
// ServiceAccount with plans/k3s's rules and those `plan --check-chart
// --check-crds createReplace` derives: the Job's Helm installed 1.0.0's
// crds/ (manager "helm"); 2.0.0's CRD adds a version (the storage
// version) and a field its Gadget uses. With apply.crds: createReplace
// the upgrade applies the CRD as that same manager (the ownership goes
// on, nothing is forced) before writing the HelmChart, and the Job
// deploys the Gadget at v2 with the new field; an operator's own Gadget
// stays readable at v1 and v2; a re-run writes no CRD. 3.0.0 drops v1,
// which status.storedVersions holds: refused before any write. The
// rollback to 1.0.0 leaves the CRD as it is (1.0.0's lacks v2, where
// objects are now stored) and says so.
func TestCRDsUpgradedUnderAHelmChart(t *testing.T) {
	f := newFixture(t)
	group := "hc-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	require.NoError(t, testchart.WriteGadgetsDroppingV1(f.charts, group))
	name := release()
	w := f.k3sPlan(name, true, "--check-crds", "createReplace")
	installed, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasEntry(installed, "helm", metav1.ManagedFieldsOperationApply), "the Job's Helm applied the CRD: %v", installed.GetManagedFields())
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	v2 := schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gadgets"}
	mine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "mine"}, "spec": map[string]any{"a": "operator"}}}
	_, err = f.env.Dynamic().Resource(v1).Namespace(w.relNS).Create(t.Context(), mine, metav1.CreateOptions{})
	require.NoError(t, err)

	spec := f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
  apply: {crds: createReplace}
`)
	n := newNode(t, "node-1")
	r := f.cliAs(w.kubeconfig, n, "preflight", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "CRD "+crdName+": replace (the chart's differs)")

	r = f.cliAs(w.kubeconfig, n, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "90s")
	r.RequireCode(t, 0)
	after, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(after.Object, "spec", "versions")
	assert.Len(t, versions, 2)
	assert.True(t, hasEntry(after, "helm", metav1.ManagedFieldsOperationApply), "%v", after.GetManagedFields())
	assert.False(t, hasEntry(after, crds.Manager, metav1.ManagedFieldsOperationApply), "applied as the installer: %v", after.GetManagedFields())
	g, err := f.env.Dynamic().Resource(v2).Namespace(w.relNS).Get(t.Context(), name+"-g", metav1.GetOptions{})
	require.NoError(t, err)
	b, _, _ := unstructured.NestedString(g.Object, "spec", "b")
	assert.Equal(t, "bee", b, "the Job deployed the Gadget with the field only the new CRD declares")
	for _, gvr := range []schema.GroupVersionResource{v1, v2} {
		m, err := f.env.Dynamic().Resource(gvr).Namespace(w.relNS).Get(t.Context(), "mine", metav1.GetOptions{})
		require.NoError(t, err, "the operator's own Gadget at %s", gvr.Version)
		a, _, _ := unstructured.NestedString(m.Object, "spec", "a")
		assert.Equal(t, "operator", a)
	}

	r = f.cliAs(w.kubeconfig, n, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "90s")
	r.RequireCode(t, 0)
	again, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), again.GetResourceVersion(), "a re-run writes no CRD")

	r = f.cliAs(w.kubeconfig, n, "upgrade", "--spec", spec, "--version", "3.0.0", "--timeout", "90s")
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "status.storedVersions holds v1, which the new CRD drops")
	hc, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	version, _, _ := unstructured.NestedString(hc.Object, "spec", "version")
	assert.Equal(t, "2.0.0", version, "a refused upgrade leaves the HelmChart")
	last, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), last.GetResourceVersion(), "and the CRD")

	rb := f.cliAs(w.kubeconfig, n, "rollback", "--target", "helmchart/"+f.ns+"/"+name, "--timeout", "90s")
	rb.RequireCode(t, 0)
	assert.Contains(t, rb.Stdout, "CRD "+crdName+" left as it is")
	assert.Contains(t, rb.Stdout, "status.storedVersions holds v2")
	left, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), left.GetResourceVersion(), "a rollback writes no CRD it cannot put back safely")
	_, err = f.env.Dynamic().Resource(v2).Namespace(w.relNS).Get(t.Context(), "mine", metav1.GetOptions{})
	require.NoError(t, err, "every object stays")
}

// hasEntry says whether u has a managedFields entry of manager with op.
func hasEntry(u *unstructured.Unstructured, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager && e.Operation == op {
			return true
		}
	}
	return false
}
