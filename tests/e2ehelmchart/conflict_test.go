package e2ehelmchart

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// An operator's hotfix (the real kubectl) of a field the chart sets, under
// a HelmChart whose release helm-controller's Job installed server-side:
// preflight names the conflict and exits 3, the HelmChart untouched; with
// apply.forceConflicts the upgrade writes spec.forceConflicts, the Job
// forces, and the chart's value is back.
func TestAHotfixUnderAHelmChart(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	f.demoteStorageClass(name + "-longhorn")
	_, err := f.env.Kubectl(t.Context(), "-n", f.ns, "patch", "configmap", name+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`)
	require.NoError(t, err)
	before := f.get(name)

	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		"field-manager conflict: ConfigMap " + f.ns + "/" + name + "-config .data.replicaCount",
		`owned by "kubectl-patch"`,
		"live: 9; the upgrade sets:",
		`helm-controller's Job applies this chart server-side as "helm" and would fail`,
		"apply.forceConflicts: true",
	} {
		assert.Contains(t, r.Stderr, want)
	}
	assert.Equal(t, before.ResourceVersion, f.get(name).ResourceVersion, "the HelmChart is untouched")

	spec := f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
  apply: {forceConflicts: true}
`+indented(t, f.policy(name)))
	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "field-owned-by-another-manager")
	h := f.get(name)
	force, _, _ := unstructured.NestedBool(h.Object.Object, "spec", "forceConflicts")
	assert.True(t, force, "spec.forceConflicts written")
	assert.NotEqual(t, "9", f.configMap(name + "-config").Data["replicaCount"], "the upgrade took the field")
	env := map[string]string{}
	for _, e := range f.job(name).Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "true", env["FORCE_CONFLICTS"], "helm-controller passed it to the Job")
}

// indented is the policy file at path as the rules and migrations of a
// spec entry.
func indented(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// The same hotfix with preflight and upgrade run as the k3s Plan's
// ServiceAccount (plans/k3s/10-rbac.yaml and the read-only RBAC of `plan
// --check-chart`): both exit 3 naming the object, the field and the
// manager; the HelmChart is untouched and no request was refused.
func TestAHotfixUnderAHelmChartAsThePlansServiceAccount(t *testing.T) {
	f := newFixture(t)
	name := release()
	k := f.k3sPlan(name, true)
	f.demoteStorageClass(name + "-longhorn")
	_, err := f.env.Kubectl(t.Context(), "-n", k.relNS, "patch", "configmap", name+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`)
	require.NoError(t, err)
	before := f.get(name)

	n := newNode(t, "node-1")
	for _, cmd := range []string{"preflight", "upgrade"} {
		r := f.cliAs(k.kubeconfig, n, cmd, "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", k.policy, "--timeout", "90s")
		require.Equal(t, outcome.ExitRefused, r.Code, "%s as %s:\nstdout: %s\nstderr: %s", cmd, k.sa, r.Stdout, r.Stderr)
		for _, want := range []string{
			"field-manager conflict: ConfigMap " + k.relNS + "/" + name + "-config .data.replicaCount",
			`owned by "kubectl-patch"`,
			`helm-controller's Job applies this chart server-side as "helm" and would fail`,
		} {
			assert.Contains(t, r.Stderr, want, cmd)
		}
		assert.NotContains(t, r.Stderr, "not checked", cmd)
	}
	assert.Equal(t, before.ResourceVersion, f.get(name).ResourceVersion, "the HelmChart is untouched")
	_, denied := rbaccheck.Requests(t, f.env, k.sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", k.sa)
}
