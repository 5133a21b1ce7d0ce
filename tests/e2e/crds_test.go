package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Under a ManagedChart, with the simulated Fleet agent (Helm 4,
// server-side, as "fleetagent"): 1.0.0's crds/ were installed by the
// agent's Helm; 2.0.0's CRD adds a version and a field its Gadget uses.
// With apply.crds: createReplace the upgrade applies the CRD as the
// agent's manager before writing the ManagedChart, and the agent deploys
// the Gadget at v2 with the new field; a re-run writes no CRD.
func TestCRDsUpgradedUnderAManagedChart(t *testing.T) {
	f := newFixture(t)
	group := "mc-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	require.NoError(t, testchart.WriteGadgets(f.charts, group))
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(t, err)
	spec := f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
		"- target: {kind: ManagedChart, namespace: "+f.ns+", name: "+name+"}\n"+
		"  chart: {name: demo-app, source: "+f.charts+"}\n"+
		"  apply: {crds: createReplace}\n"+indent(string(policy), "  "))

	r := f.cli(f.node, "preflight", "--spec", spec, "--version", "2.0.0")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "CRD "+crdName+": replace (the chart's differs)")

	r = f.cli(f.node, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "60s")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	after, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(after.Object, "spec", "versions")
	assert.Len(t, versions, 2)
	g, err := f.env.Dynamic().Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gadgets"}).Namespace(f.ns).
		Get(t.Context(), name+"-g", metav1.GetOptions{})
	require.NoError(t, err)
	b, _, _ := unstructured.NestedString(g.Object, "spec", "b")
	assert.Equal(t, "bee", b, "the agent deployed the Gadget with the field only the new CRD declares")
	assert.Equal(t, "2.0.0", f.get(name).Version)

	r = f.cli(f.node, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "60s")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	again, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), again.GetResourceVersion(), "a re-run writes no CRD")
}
