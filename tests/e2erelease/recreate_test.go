package e2erelease

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// A StatefulSet whose claim template the new chart grows, which the API
// server refuses to update: listed in apply.recreate, preflight warns
// that the upgrade recreates it (and refuses, naming the rule, where the
// Plan's ServiceAccount may not delete it); the upgrade deletes it,
// orphaning its dependents, and Helm creates it again with the new
// template; a re-run deletes nothing. An entry that names no object of
// the chart is bad input, and nothing is written.
func TestRecreateWhatTheServerWillNotUpdate(t *testing.T) {
	f := newFixture(t, "")
	template("db.yaml", testchart.StatefulSetTemplate(0, "1Gi"))(t, filepath.Join(f.charts, "demo-app-1.0.0"))
	template("db.yaml", testchart.StatefulSetTemplate(0, "2Gi"))(t, filepath.Join(f.charts, "demo-app-2.0.0"))
	name := releaseName()
	f.install(name)
	sts := f.env.Kube().AppsV1().StatefulSets(f.ns)
	before, err := sts.Get(t.Context(), name+"-db", metav1.GetOptions{})
	require.NoError(t, err)
	n := newNode(t, "node-1")
	writes := len(f.writesBy())

	bad := f.specWith(name, "  apply: {recreate: [StatefulSet/"+name+"-absent]}\n")
	r := f.cli(n, "preflight", "--spec", bad, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, "apply.recreate: StatefulSet/"+name+"-absent: no object of the new chart")
	r = f.cli(n, "upgrade", "--spec", bad, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Equal(t, writes, len(f.writesBy()), "bad input writes nothing")

	// as the release Plan's ServiceAccount, which may read the StatefulSet but not delete it
	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments, statefulsets]\n  verbs: [get, list]\n- apiGroups: [coordination.k8s.io]")
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().StatefulSets(f.ns).Get(ctx, name+"-db", metav1.GetOptions{})
		return err
	})
	spec := f.specWith(name, "  apply: {recreate: [StatefulSet/"+name+"-db]}\n")
	r = f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "rejected by the API server: StatefulSet "+f.ns+"/"+name+"-db")
	assert.Contains(t, r.Stderr, "apply.recreate lists it, but this process may not delete it: add to a Role in namespace "+f.ns+
		` the rule {apiGroups: ["apps"], resources: [statefulsets], resourceNames: [`+name+`-db], verbs: [delete]}`)

	r = f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "recreate")
	assert.Contains(t, r.Stdout, "StatefulSet "+f.ns+"/"+name+"-db")
	assert.Equal(t, writes, len(f.writesBy()), "preflight writes nothing")

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	after, err := sts.Get(t.Context(), name+"-db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, before.UID, after.UID, "created again")
	assert.Equal(t, "2Gi", after.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
	assert.Equal(t, "deployed", f.history(name)[1].Info.Status.String())

	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	again, err := sts.Get(t.Context(), name+"-db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.UID, again.UID, "a re-run recreates nothing")
}
