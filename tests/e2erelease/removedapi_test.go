package e2erelease

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// rewriteRecord replaces old with new in the stored manifest of revision
// version of release name, as admin: the record a Helm on an older
// cluster made.
func (f *fixture) rewriteRecord(name string, version int, old, new string) {
	f.t.Helper()
	secrets := f.env.Kube().CoreV1().Secrets(f.ns)
	s, err := secrets.Get(f.t.Context(), helmrelease.SecretName(name, version), metav1.GetOptions{})
	require.NoError(f.t, err)
	rel, err := helmrelease.Decode(string(s.Data["release"]))
	require.NoError(f.t, err)
	require.Contains(f.t, rel.Manifest, old)
	rel.Manifest = strings.Replace(rel.Manifest, old, new, 1)
	data, err := helmrelease.Encode(rel)
	require.NoError(f.t, err)
	s.Data["release"] = []byte(data)
	_, err = secrets.Update(f.t.Context(), s, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

// A release whose deployed revision's stored manifest holds a version the
// cluster no longer serves (policy/v1beta1, as a release installed before
// Kubernetes 1.25 keeps it) is refused by preflight; with
// release.mapRemovedAPIs the upgrade, as the Plan's ServiceAccount, keeps
// the record in a Secret, maps the manifest to policy/v1 (nothing else
// changes), and upgrades; a second run maps nothing and writes nothing.
func TestARemovedAPIInTheDeployedManifestIsMappedOnRequest(t *testing.T) {
	f := newFixture(t, "")
	for _, v := range []string{"1.0.0", "2.0.0"} {
		require.NoError(t, writeTemplate(f.charts, v, "pdb.yaml", testchart.PDBTemplate("minAvailable: 1")))
	}
	name := releaseName()
	f.install(name)
	f.rewriteRecord(name, 1, "apiVersion: policy/v1\nkind: PodDisruptionBudget", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget")
	stored := f.history(name)[0]

	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n"+
			"- apiGroups: [policy]\n  resources: [poddisruptionbudgets]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)

	r := f.cli(newNode(t, "node-1"), "preflight", append(f.upgradeArgs(name, "2.0.0"), "--kubeconfig", kubeconfig)...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "removed API: the deployed revision's manifest holds PodDisruptionBudget "+name+"-web at policy/v1beta1")
	assert.Contains(t, r.Stderr, "map it to policy/v1 first: for a Release target, release.mapRemovedAPIs: true")

	before := len(f.writesBy())
	spec := f.specWith(name, "  release: {mapRemovedAPIs: true}\n  wait: {timeout: 60s}\n")
	r = f.cli(newNode(t, "node-1"), "upgrade", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout+r.Stderr, "maps-removed-api")
	assert.Contains(t, r.Stderr, `"from":"policy/v1beta1","to":"policy/v1"`)
	writes := f.writesBy()[before:]
	assert.Contains(t, writes, "create secrets/"+helmrelease.MappedBackupName(name, 1))
	assert.Contains(t, writes, "update secrets/"+helmrelease.SecretName(name, 1))

	h := f.history(name)
	require.Len(t, h, 2)
	assert.Equal(t, strings.Replace(stored.Manifest, "apiVersion: policy/v1beta1", "apiVersion: policy/v1", 1), h[0].Manifest, "only the apiVersion line changes")
	assert.Equal(t, stored.Config, h[0].Config)
	assert.Equal(t, "deployed", h[1].Info.Status.String())
	assert.Equal(t, "2.0.0", h[1].Chart.Metadata.Version)
	backup, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), helmrelease.MappedBackupName(name, 1), metav1.GetOptions{})
	require.NoError(t, err)
	kept, err := helmrelease.Decode(string(backup.Data["release"]))
	require.NoError(t, err)
	assert.Equal(t, stored.Manifest, kept.Manifest, "the record as it was is kept")

	before = len(f.writesBy())
	r = f.cli(newNode(t, "node-2"), "upgrade", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	assert.NotContains(t, r.Stdout+r.Stderr, "maps-removed-api")
	assert.Empty(t, f.writesBy()[before:], "a second run writes nothing")
}
