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
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Under a HelmChart, through the real helm-controller: the Job's Helm
// installed 1.0.0's crds/ server-side (manager "helm"); 2.0.0's CRD adds
// a version and a field its Gadget uses. With apply.crds: createReplace
// the upgrade applies the CRD as that same manager (the ownership goes
// on, nothing is forced) before writing the HelmChart, and the Job
// deploys the Gadget at v2 with the new field; a re-run writes no CRD.
func TestCRDsUpgradedUnderAHelmChart(t *testing.T) {
	f := newFixture(t)
	group := "hc-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	require.NoError(t, testchart.WriteGadgets(f.charts, group))
	name := release()
	f.installExample(name, nil)
	installed, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasEntry(installed, "helm", metav1.ManagedFieldsOperationApply), "the Job's Helm applied the CRD: %v", installed.GetManagedFields())

	spec := f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
  apply: {crds: createReplace}
`)
	n := newNode(t, "node-1")
	r := f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "CRD "+crdName+": replace (the chart's differs)")

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "90s")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	after, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(after.Object, "spec", "versions")
	assert.Len(t, versions, 2)
	assert.True(t, hasEntry(after, "helm", metav1.ManagedFieldsOperationApply), "%v", after.GetManagedFields())
	assert.False(t, hasEntry(after, crds.Manager, metav1.ManagedFieldsOperationApply), "applied as the installer: %v", after.GetManagedFields())
	g, err := f.env.Dynamic().Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gadgets"}).Namespace(f.ns).
		Get(t.Context(), name+"-g", metav1.GetOptions{})
	require.NoError(t, err)
	b, _, _ := unstructured.NestedString(g.Object, "spec", "b")
	assert.Equal(t, "bee", b, "the Job deployed the Gadget with the field only the new CRD declares")

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "90s")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	again, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), again.GetResourceVersion(), "a re-run writes no CRD")
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
