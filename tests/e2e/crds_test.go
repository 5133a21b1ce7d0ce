package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Under a ManagedChart, with the simulated Fleet agent (Helm 4,
// server-side, as "fleetagent"), as the Plan's ServiceAccount with
// plans/10-rbac.yaml's rules and those `plan --check-chart --check-crds
// createReplace` derives: 1.0.0's crds/ were installed by the agent's
// Helm; 2.0.0's CRD adds a version (the storage version) and a field its
// Gadget uses. With apply.crds: createReplace the upgrade applies the CRD
// as the agent's manager before writing the ManagedChart, and the agent
// deploys the Gadget at v2 with the new field; an operator's own Gadget
// stays readable at v1 and v2; a re-run writes no CRD. 3.0.0 drops v1,
// which status.storedVersions holds: refused before any write. The
// rollback to 1.0.0 leaves the CRD as it is (1.0.0's lacks v2, where
// objects are now stored) and says so.
func TestCRDsUpgradedUnderAManagedChart(t *testing.T) {
	f := newFixture(t)
	group := "mc-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	require.NoError(t, testchart.WriteGadgetsDroppingV1(f.charts, group))
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	v2 := schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gadgets"}
	mine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "mine"}, "spec": map[string]any{"a": "operator"}}}
	_, err := f.env.Dynamic().Resource(v1).Namespace(f.ns).Create(t.Context(), mine, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig := f.planServiceAccount(name, "--check-crds", "createReplace")
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(t, err)
	spec := f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
		"- target: {kind: ManagedChart, namespace: "+f.ns+", name: "+name+"}\n"+
		"  chart: {name: demo-app, source: "+f.charts+"}\n"+
		"  apply: {crds: createReplace}\n"+indent(string(policy), "  "))

	r := f.cli(f.node, "preflight", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "CRD "+crdName+": replace (the chart's differs)")

	r = f.cli(f.node, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "60s", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	after, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(after.Object, "spec", "versions")
	assert.Len(t, versions, 2)
	g, err := f.env.Dynamic().Resource(v2).Namespace(f.ns).Get(t.Context(), name+"-g", metav1.GetOptions{})
	require.NoError(t, err)
	b, _, _ := unstructured.NestedString(g.Object, "spec", "b")
	assert.Equal(t, "bee", b, "the agent deployed the Gadget with the field only the new CRD declares")
	assert.Equal(t, "2.0.0", f.get(name).Version)
	for _, gvr := range []schema.GroupVersionResource{v1, v2} {
		m, err := f.env.Dynamic().Resource(gvr).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
		require.NoError(t, err, "the operator's own Gadget at %s", gvr.Version)
		a, _, _ := unstructured.NestedString(m.Object, "spec", "a")
		assert.Equal(t, "operator", a)
	}

	r = f.cli(f.node, "upgrade", "--spec", spec, "--version", "2.0.0", "--timeout", "60s", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	again, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), again.GetResourceVersion(), "a re-run writes no CRD")

	r = f.cli(f.node, "upgrade", "--spec", spec, "--version", "3.0.0", "--timeout", "60s", "--kubeconfig", kubeconfig)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "status.storedVersions holds v1, which the new CRD drops")
	assert.Equal(t, "2.0.0", f.get(name).Version, "a refused upgrade leaves the ManagedChart")
	last, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), last.GetResourceVersion(), "and the CRD")

	rb := f.cli(f.node, "rollback", "--target", "managedchart/"+f.ns+"/"+name, "--timeout", "60s", "--kubeconfig", kubeconfig)
	rb.RequireCode(t, 0)
	assert.Contains(t, rb.Stdout, "CRD "+crdName+" left as it is")
	assert.Contains(t, rb.Stdout, "status.storedVersions holds v2")
	assert.Equal(t, "1.0.0", f.get(name).Version)
	left, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.GetResourceVersion(), left.GetResourceVersion(), "a rollback writes no CRD it cannot put back safely")
	_, err = f.env.Dynamic().Resource(v2).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
	require.NoError(t, err, "every object stays")
}

// planServiceAccount creates the ManagedChart Plan's ServiceAccount for
// ManagedChart name with plans/10-rbac.yaml's rules moved to the test's
// namespaces (the Roles of the Harvester spec's other sources left out)
// and those `plan --check-chart` derives from the 2.0.0 chart, with
// planArgs; it returns a kubeconfig acting as it.
func (f *fixture) planServiceAccount(name string, planArgs ...string) string {
	f.t.Helper()
	return f.planServiceAccountOf(name, filepath.Join(f.charts, "demo-app-2.0.0"), planArgs...)
}

// planServiceAccountOf is planServiceAccount with the RBAC plan
// --check-chart derives from checkChart.
func (f *fixture) planServiceAccountOf(name, checkChart string, planArgs ...string) string {
	t := f.t
	t.Helper()
	sucNS := f.env.Namespace(t)
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "plans", "10-rbac.yaml"))
	require.NoError(t, err)
	sa := "chart-upgrader-" + name
	text := strings.NewReplacer(
		"namespace: fleet-local", "namespace: "+f.ns,
		"namespace: harvester-system", "namespace: "+f.ns,
		"namespace: system-upgrade", "namespace: "+sucNS,
		"name: chart-upgrader\n", "name: "+sa+"\n",
		"resourceNames: [harvester-crd, harvester]", "resourceNames: ["+name+"]",
		"resourceNames: [mcc-harvester-crd, mcc-harvester]", "resourceNames: ["+managedchart.BundleName(name)+"]",
		"resourceNames: [harvester-longhorn]", "resourceNames: ["+name+"-longhorn]",
		"resourceNames: [harvester-system]", "resourceNames: ["+f.ns+"]",
	).Replace(string(data))
	var objs []*unstructured.Unstructured
	for _, o := range rbaccheck.Decode(t, text) {
		if o.GetName() != "chart-upgrader-sources" && o.GetName() != "chart-upgrader-gates" {
			objs = append(objs, o)
		}
	}
	plan := noderun.CLI(t, append([]string{"plan", "--image", "registry.example/chart-upgrader", "--version", "2.0.0",
		"--namespace", sucNS, "--service-account", sa, "--name", "check-" + name,
		"--check-chart", checkChart, "--check-release", f.ns + "/" + name}, planArgs...)...)
	plan.RequireCode(t, 0)
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if o.GetKind() != "Plan" {
			objs = append(objs, o)
		}
	}
	rbaccheck.Create(t, f.env, objs)
	kubeconfig := rbaccheck.Impersonating(t, f.env, "system:serviceaccount:"+sucNS+":"+sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().ConfigMaps(f.ns).Get(ctx, name+"-config", metav1.GetOptions{})
		return err
	})
	return kubeconfig
}
