package e2erelease

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// gadgetCharts gives demo-app 1.0.0 the Gadget CRD at v1 in crds/ and a
// Gadget; 2.0.0 the CRD with v2 added as the storage version (and its
// field b) and the Gadget at v2 with b: bee; 3.0.0, a copy of 2.0.0, the CRD
// without v1.
func (f *fixture) gadgetCharts(group string) {
	f.t.Helper()
	require.NoError(f.t, testchart.WriteGadgetsDroppingV1(f.charts, group))
}

// A chart whose 2.0.0 crds/ adds a version (the new storage version) and
// a field, and whose Gadget moves to it: under the default apply.crds
// (skip) preflight refuses it as Helm's upgrade would fail ("no matches
// for kind"); a bad policy word is bad input; with createReplace, as the
// Plan's ServiceAccount with the rules plan --check-chart --check-crds
// derives, preflight names the CRD's replacement and the upgrade applies
// the CRD before the chart: the release's Gadget is at v2 with the new
// field, an operator's own Gadget stays readable at v1 and v2, and a
// re-run writes nothing. A 3.0.0 that drops v1, which status.storedVersions
// still holds, is refused before anything is written, as the API server
// would refuse it.
func TestCRDsUpgradedWithTheChart(t *testing.T) {
	f := newFixture(t, "")
	group := "crd-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	f.gadgetCharts(group)
	name := releaseName()
	f.install(name)
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	mine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "mine"}, "spec": map[string]any{"a": "operator"}}}
	_, err := f.env.Dynamic().Resource(v1).Namespace(f.ns).Create(t.Context(), mine, metav1.CreateOptions{})
	require.NoError(t, err)
	n := newNode(t, "node-1")
	writes := len(f.writesBy())
	crdBefore, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)

	bad := f.applySpec(name, "{crds: replace}")
	r := f.cli(n, "preflight", "--spec", bad, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, `apply.crds: want skip, create, createReplace, not "replace"`)

	r = f.cli(n, "preflight", "--spec", f.applySpec(name, "{}"), "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "unserved kind: Gadget "+name+"-g is at "+group+"/v2")
	assert.Contains(t, r.Stderr, "apply.crds")

	// as the release Plan's ServiceAccount: Helm's rights on the chart's
	// kinds, and what plan --check-chart --check-crds createReplace derives
	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n"+
			"- apiGroups: ["+group+"]\n  resources: [gadgets]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	plan := noderun.CLI(t, "plan", "--kind", "release", "--name", "crds-"+name, "--image", "r/x", "--version", "2.0.0", "--namespace", sucNS,
		"--service-account", "chart-upgrader-release-"+name, "--check-chart", filepath.Join(f.charts, "demo-app-2.0.0"),
		"--check-release", f.ns+"/"+name, "--check-crds", "createReplace")
	plan.RequireCode(t, 0)
	assert.Contains(t, plan.Stdout, "resourceNames:\n  - "+crdName+"\n  resources:\n  - customresourcedefinitions\n  verbs:\n  - get\n  - list\n  - patch\n  - watch")
	var rbac []*unstructured.Unstructured
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if strings.HasSuffix(o.GetKind(), "Role") || strings.HasSuffix(o.GetKind(), "RoleBinding") {
			rbac = append(rbac, o)
		}
	}
	require.NotEmpty(t, rbac)
	rbaccheck.Create(t, f.env, rbac)
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
		return err
	})

	spec := f.applySpec(name, "{crds: createReplace}")
	r = f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "CRD "+crdName+": replace (the chart's differs)", "the report names each CRD's verdict")
	r = f.cli(n, "preflight", "--target", f.target(name), "--chart-source", f.charts, "--policy", f.policy(name), "--crds", "createReplace",
		"--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "CRD "+crdName+": replace (the chart's differs)", "--crds with --target is the spec's apply.crds")
	j := f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig, "-o", "json")
	j.RequireCode(t, 0)
	assert.Contains(t, j.Stdout, `"name": "`+crdName+`",`)
	assert.Contains(t, j.Stdout, `"action": "replace",`)
	assert.NotContains(t, j.Stdout, "PRIVATE KEY", "preflight -o json (a Job's log) never prints a secret value")
	assert.Equal(t, writes, len(f.writesBy()), "bad input and preflight write nothing")
	crdNow, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, crdBefore.GetResourceVersion(), crdNow.GetResourceVersion(), "preflight leaves the CRD as it is")

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "CRD applied")
	assert.Contains(t, r.Stdout, "CRD "+crdName+": replace")
	kept, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), crds.BackupName(upgrade.Ref{Kind: "release", Namespace: f.ns, Name: name}, "1.0.0"), metav1.GetOptions{})
	require.NoError(t, err, "the CRD as it was is kept beside the backup")
	zr, err := gzip.NewReader(bytes.NewReader(kept.Data[crds.BackupKey]))
	require.NoError(t, err)
	was, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Contains(t, string(was), "name: "+crdName)
	assert.Contains(t, string(was), "name: v1")
	assert.NotContains(t, string(was), "name: v2", "as it was before the upgrade")
	events, err := f.env.Kube().CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=CRDApplied"})
	require.NoError(t, err)
	require.Len(t, events.Items, 1, "one Event per CRD applied")
	assert.Contains(t, events.Items[0].Message, "CustomResourceDefinition "+crdName+": replace from demo-app/crds/gadgets.yaml (chart 2.0.0)")
	crdAfter, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(crdAfter.Object, "spec", "versions")
	require.Len(t, versions, 2)
	v2 := v1
	v2.Version = "v2"
	g, err := f.env.Dynamic().Resource(v2).Namespace(f.ns).Get(t.Context(), name+"-g", metav1.GetOptions{})
	require.NoError(t, err)
	b, _, _ := unstructured.NestedString(g.Object, "spec", "b")
	assert.Equal(t, "bee", b, "the release's Gadget has the field only the new CRD declares")
	for _, gvr := range []schema.GroupVersionResource{v1, v2} {
		m, err := f.env.Dynamic().Resource(gvr).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
		require.NoError(t, err, "the operator's own Gadget at %s", gvr.Version)
		a, _, _ := unstructured.NestedString(m.Object, "spec", "a")
		assert.Equal(t, "operator", a)
	}
	assert.Equal(t, "deployed", f.history(name)[1].Info.Status.String())

	// the ServiceAccount may change the chart's CRD and nothing else: not
	// another CRD, not the CRD's status (no migration asked), not a delete
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	asSA, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	others, err := f.env.Dynamic().Resource(crds.GVR).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var other string
	for _, o := range others.Items {
		if o.GetName() != crdName {
			other = o.GetName()
			break
		}
	}
	require.NotEmpty(t, other, "another CRD to try")
	patch := []byte(`{"metadata":{"labels":{"chart-upgrader-test":"x"}}}`)
	_, err = asSA.Resource(crds.GVR).Patch(t.Context(), other, types.MergePatchType, patch, metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "patching CRD %s as the ServiceAccount: %v", other, err)
	_, err = asSA.Resource(crds.GVR).Patch(t.Context(), crdName, types.MergePatchType, []byte(`{"status":{"storedVersions":["v2"]}}`), metav1.PatchOptions{}, "status")
	assert.True(t, apierrors.IsForbidden(err), "patching the CRD's status as the ServiceAccount: %v", err)
	err = asSA.Resource(crds.GVR).Delete(t.Context(), crdName, metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting the CRD as the ServiceAccount: %v", err)

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	again, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, crdAfter.GetResourceVersion(), again.GetResourceVersion(), "a re-run writes no CRD")

	// 3.0.0 drops v1, which status.storedVersions holds: refused before any write
	writes = len(f.writesBy())
	r = f.cli(n, "upgrade", "--spec", spec, "--version", "3.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "CustomResourceDefinition "+crdName+" (demo-app/crds/gadgets.yaml): status.storedVersions holds v1, which the new CRD drops")
	assert.Equal(t, writes, len(f.writesBy()), "a refused upgrade writes nothing")
	last, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, crdAfter.GetResourceVersion(), last.GetResourceVersion(), "the CRD is untouched")

	// with migrate, and the rules plan --check-crds-migrate adds: every
	// Gadget is written back at v2, status.storedVersions trimmed, v1 gone
	plan = noderun.CLI(t, "plan", "--kind", "release", "--name", "crds-migrate-"+name, "--image", "r/x", "--version", "3.0.0",
		"--namespace", sucNS, "--service-account", "chart-upgrader-release-"+name, "--check-chart", filepath.Join(f.charts, "demo-app-3.0.0"),
		"--check-release", f.ns+"/"+name, "--check-crds", "createReplace", "--check-crds-migrate")
	plan.RequireCode(t, 0)
	rbac = nil
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if strings.HasSuffix(o.GetKind(), "Role") || strings.HasSuffix(o.GetKind(), "RoleBinding") {
			rbac = append(rbac, o)
		}
	}
	rbaccheck.Create(t, f.env, rbac)
	migrate := f.applySpec(name, "{crds: {policy: createReplace, migrate: true}}")
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		r := f.cli(n, "preflight", "--spec", migrate, "--version", "3.0.0", "--kubeconfig", kubeconfig)
		if r.Code != 0 {
			return fmt.Errorf("preflight: %s", r.Stderr)
		}
		return nil
	})
	r = f.cli(n, "upgrade", "--spec", migrate, "--version", "3.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "the CRD's objects migrated")
	final, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	stored, _, _ := unstructured.NestedStringSlice(final.Object, "status", "storedVersions")
	assert.Equal(t, []string{"v2"}, stored)
	versions, _, _ = unstructured.NestedSlice(final.Object, "spec", "versions")
	assert.Len(t, versions, 1, "v1 is gone")
	m, err := f.env.Dynamic().Resource(v2).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
	require.NoError(t, err, "the operator's own Gadget, at v2")
	a, _, _ := unstructured.NestedString(m.Object, "spec", "a")
	assert.Equal(t, "operator", a)
	assert.Equal(t, "deployed", f.history(name)[2].Info.Status.String())

	// a rollback to 2.0.0 puts the CRD back as it was at 2.0.0: v1 is
	// served again beside v2, which status.storedVersions holds, and every
	// object stays
	rb := f.cli(n, "rollback", "--target", f.target(name), "--timeout", "60s", "--kubeconfig", kubeconfig)
	rb.RequireCode(t, 0)
	assert.Contains(t, rb.Stdout, "CRD "+crdName+" restored as it was at 2.0.0", "the rollback says what it did with the CRDs")
	restored, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ = unstructured.NestedSlice(restored.Object, "spec", "versions")
	assert.Len(t, versions, 2, "v1 is back")
	for _, gvr := range []schema.GroupVersionResource{v1, v2} {
		m, err := f.env.Dynamic().Resource(gvr).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
		require.NoError(t, err, "the operator's own Gadget at %s", gvr.Version)
		a, _, _ := unstructured.NestedString(m.Object, "spec", "a")
		assert.Equal(t, "operator", a)
	}
	again = restored
	rb = f.cli(n, "rollback", "--target", f.target(name), "--timeout", "60s", "--kubeconfig", kubeconfig)
	rb.RequireCode(t, 0)
	restored, err = f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, again.GetResourceVersion(), restored.GetResourceVersion(), "a second rollback writes no CRD")

	// a rollback to 1.0.0, whose CRD lacks v2 (which status.storedVersions
	// holds: objects are stored at it) and spec.b (which objects hold),
	// leaves the CRD as it is and says why
	rb = f.cli(n, "rollback", "--target", f.target(name), "--version", "1.0.0", "--timeout", "60s", "--kubeconfig", kubeconfig)
	rb.RequireCode(t, 0)
	assert.Contains(t, rb.Stdout, "CRD "+crdName+" left as it is")
	assert.Contains(t, rb.Stdout, "status.storedVersions holds v2")
	assert.Contains(t, rb.Stdout, "Secret "+f.ns+"/"+crds.BackupName(upgrade.Ref{Kind: "release", Namespace: f.ns, Name: name}, "1.0.0"))
	untouched, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, restored.GetResourceVersion(), untouched.GetResourceVersion(), "an unsafe restore writes no CRD")
	_, err = f.env.Dynamic().Resource(v2).Namespace(f.ns).Get(t.Context(), "mine", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", f.history(name)[3].Chart.Metadata.Version)
	assert.Equal(t, "1.0.0", f.history(name)[len(f.history(name))-1].Chart.Metadata.Version)
}

// A release Helm installed client-side (as Helm 3 did): its crds/ were
// created with Update entries of Helm's manager. Another manager's value
// on a field the new CRD sets (a label kubectl set) is a conflict the
// upgrade refuses, naming it, and never forces; once that label is gone,
// Helm's own client-side fields are handed over to chart-upgrader
// (nothing forced) and the CRD is replaced.
func TestCRDsOfAClientSideInstall(t *testing.T) {
	f := newFixture(t, "")
	group := "csa-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
	crdName := "gadgets." + group
	t.Cleanup(func() { _, _ = f.env.Kubectl(context.Background(), "delete", "crd", crdName, "--ignore-not-found") })
	f.gadgetCharts(group)
	path := filepath.Join(f.charts, "demo-app-2.0.0", "crds", "gadgets.yaml")
	crd, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(crd), "metadata: {name: "+crdName+"}", "metadata: {name: "+crdName+", labels: {team: chart}}", 1)), 0o644))
	name := releaseName()
	f.installClientSide(name)
	_, err = f.env.Kubectl(t.Context(), "label", "crd", crdName, "team=ops")
	require.NoError(t, err)
	n := newNode(t, "node-1")
	spec := f.applySpec(name, "{crds: createReplace}")

	r := f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "CustomResourceDefinition "+crdName+" (demo-app/crds/gadgets.yaml): the API server refuses it (dry run)")
	assert.Contains(t, r.Stderr, `conflicts with "kubectl-label"`)
	assert.Contains(t, r.Stderr, "chart-upgrader never forces a CRD")
	live, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ops", live.GetLabels()["team"], "nothing forced")

	_, err = f.env.Kubectl(t.Context(), "label", "crd", crdName, "team-")
	require.NoError(t, err)
	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stderr, "the fields helm wrote client-side when it installed the chart are handed over to chart-upgrader first")
	after, err := f.env.Dynamic().Resource(crds.GVR).Get(t.Context(), crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "chart", after.GetLabels()["team"])
	var managers []string
	for _, e := range after.GetManagedFields() {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
	}
	assert.Contains(t, managers, crds.Manager+"/Apply")
	assert.NotContains(t, managers, "helm/Update", "Helm's client-side fields were handed over")
}

// A chart whose crds/ holds what is not a CRD, or one CRD two ways, is
// bad input under apply.crds: exit 2 naming the file, nothing written.
func TestBadCRDsAreBadInput(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	n := newNode(t, "node-1")
	writes := len(f.writesBy())
	dir := filepath.Join(f.charts, "demo-app-2.0.0", "crds")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	spec := f.applySpec(name, "{crds: create}")
	for _, tc := range []struct{ name, file, body, says string }{
		{"not a CRD", "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", `demo-app/crds/cm.yaml: a ConfigMap "x" is not a CustomResourceDefinition`},
		{"one CRD two ways", "twice.yaml", testchart.GadgetCRD("twice.example.com", false, "v1*") + "---\n" + testchart.GadgetCRD("twice.example.com", true, "v1*"),
			"demo-app/crds/twice.yaml (document 2): the CustomResourceDefinition gadgets.twice.example.com differs from the one demo-app/crds/twice.yaml (document 1) defines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			require.NoError(t, os.WriteFile(path, []byte(tc.body), 0o644))
			t.Cleanup(func() { _ = os.Remove(path) })
			for _, cmd := range []string{"preflight", "upgrade"} {
				r := f.cli(n, cmd, "--spec", spec, "--version", "2.0.0")
				require.Equal(t, outcome.ExitBadInput, r.Code, "%s: stdout: %s\nstderr: %s", cmd, r.Stdout, r.Stderr)
				assert.Contains(t, r.Stderr, tc.says, cmd)
			}
			assert.Equal(t, writes, len(f.writesBy()), "bad input writes nothing")
		})
	}
}
