package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// hotfix is an operator's `kubectl set image` on the release's
// Deployment: the real kubectl, so the field's owner is "kubectl-set".
func (f *fixture) hotfix(name, image string) {
	f.t.Helper()
	_, err := f.env.Kubectl(f.t.Context(), "-n", f.ns, "set", "image", "deployment/"+name+"-web", "web="+image)
	require.NoError(f.t, err)
	_, err = f.env.Kubectl(f.t.Context(), "-n", f.ns, "rollout", "status", "deployment/"+name+"-web", "--timeout", "60s")
	require.NoError(f.t, err)
}

// image is the image of the release's Deployment now.
func (f *fixture) image(name string) string {
	f.t.Helper()
	d, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(f.t.Context(), name+"-web", metav1.GetOptions{})
	require.NoError(f.t, err)
	return d.Spec.Template.Spec.Containers[0].Image
}

// applySpec writes a spec of the release with the given apply: block
// (with the example policy) and returns its path.
func (f *fixture) applySpec(name, apply string) string {
	f.t.Helper()
	return f.specWith(name, "  apply: "+apply+"\n")
}

// specWith writes a spec of the release with the example policy and the
// chart entry's extra lines (each indented by two spaces), and returns
// its path.
func (f *fixture) specWith(name, extra string) string {
	f.t.Helper()
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(f.t, err)
	spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n" +
		"- target: {kind: Release, namespace: " + f.ns + ", name: " + name + "}\n" +
		"  chart: {name: demo-app, source: " + f.charts + "}\n" +
		extra + indentPolicy(string(policy))
	path := filepath.Join(f.t.TempDir(), "spec.yaml")
	require.NoError(f.t, os.WriteFile(path, []byte(spec), 0o600))
	return path
}

// A hotfix on a field the upgrade sets, on a release Helm 4 installed
// (server-side): preflight names the conflict (object, field, owner, both
// values, the ways out) and exits 3 with nothing written; with
// apply.forceConflicts the upgrade takes the field and says so.
func TestAHotfixConflictsWithAServerSideRelease(t *testing.T) {
	f := newFixture(t, "")
	f.addValues("2.0.0", map[string]any{"webImage": "registry.example/web:2"})
	name := releaseName()
	installed := f.install(name)
	require.Equal(t, "ssa", installed.ApplyMethod, "the SDK installs as helm install (v4) does")
	f.demoteStorageClass(name + "-longhorn")
	f.hotfix(name, "registry.example/web:1-hotfix")
	before := len(f.writesBy())

	n := newNode(t, "node-1")
	start := time.Now()
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0")...)
	t.Logf("a conflicting upgrade, start → exit 3: %s", time.Since(start).Round(time.Millisecond))
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		"field-manager conflict: Deployment " + f.ns + "/" + name + "-web",
		`.spec.template.spec.containers[name="web"].image`,
		`owned by "kubectl-set"`,
		"live: registry.example/web:1-hotfix; the upgrade sets: registry.example/web:2",
		"apply.forceConflicts",
		"revert the other manager's change",
	} {
		assert.Contains(t, r.Stderr, want)
	}
	assert.Len(t, f.history(name), 1, "no revision written")
	assert.Equal(t, before, len(f.writesBy()), "nothing written by the tool")
	assert.Equal(t, "registry.example/web:1-hotfix", f.image(name), "the hotfix stays")

	r = f.cli(n, "upgrade", "--spec", f.applySpec(name, "{forceConflicts: true}"), "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "field-owned-by-another-manager")
	assert.Equal(t, "registry.example/web:2", f.image(name), "the upgrade took the field")
	h := f.history(name)
	require.Len(t, h, 2)
	assert.Equal(t, "ssa", h[1].ApplyMethod, "the release stays server-side")
}

// The same hotfix on a release installed client-side (Helm 3): Helm's
// three-way merge meets no conflict, so the upgrade goes ahead, and the
// report warns that it overwrites the field another manager set; the
// release stays client-side.
func TestAHotfixOnAClientSideReleaseIsAWarning(t *testing.T) {
	f := newFixture(t, "")
	f.addValues("2.0.0", map[string]any{"webImage": "registry.example/web:2"})
	name := releaseName()
	f.installClientSide(name)
	f.demoteStorageClass(name + "-longhorn")
	f.hotfix(name, "registry.example/web:1-hotfix")

	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "field-owned-by-another-manager")
	assert.Contains(t, r.Stdout, `owned by "kubectl-set"`)
	assert.Contains(t, r.Stdout, "applies this release client-side and overwrites it")
	assert.Equal(t, "registry.example/web:2", f.image(name))
	h := f.history(name)
	require.Len(t, h, 2)
	assert.NotEqual(t, "ssa", h[1].ApplyMethod, "auto keeps the release client-side")
}

// Bad apply: settings are bad input naming file, line and field, with
// nothing written.
func TestBadApplySettingsAreRefused(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	before := len(f.writesBy())
	for apply, want := range map[string]string{
		"{serverSide: sometimes}":                   "apply.serverSide: want auto, true or false",
		"{forceConflicts: maybe}":                   "apply.forceConflicts",
		"{serverSide: false, forceConflicts: true}": "forceConflicts: true needs server-side apply",
		"{colour: red}":                             "apply.colour: unknown field",
	} {
		path := f.applySpec(name, apply)
		r := f.cli(newNode(t, "node-1"), "upgrade", "--spec", path, "--version", "2.0.0")
		assert.Equal(t, outcome.ExitBadInput, r.Code, apply)
		assert.Contains(t, r.Stderr, path+":6: charts[1].apply", apply)
		assert.Contains(t, r.Stderr, want, apply)
	}
	assert.Equal(t, before, len(f.writesBy()))
	assert.Len(t, f.history(name), 1)
}

// The same hotfix, with the upgrade run as the release Plan's
// ServiceAccount (plans/release/10-rbac.yaml, adapted to the chart's
// Deployment as its README says): preflight and upgrade exit 3 naming the
// object, the field and the manager; nothing is written.
func TestAHotfixIsNamedAsTheReleasePlansServiceAccount(t *testing.T) {
	f := newFixture(t, "")
	f.addValues("2.0.0", map[string]any{"webImage": "registry.example/web:2"})
	name := releaseName()
	// the chart's Deployment: Helm's verbs on it, as for every kind of the chart
	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	installed := f.install(name)
	require.Equal(t, "ssa", installed.ApplyMethod)
	f.demoteStorageClass(name + "-longhorn")
	f.hotfix(name, "registry.example/web:1-hotfix")
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
		return err
	})
	before := len(f.writesBy())

	n := newNode(t, "node-1")
	for _, cmd := range []string{"preflight", "upgrade"} {
		r := f.cli(n, cmd, append(f.upgradeArgs(name, "2.0.0"), "--kubeconfig", kubeconfig)...)
		require.Equal(t, outcome.ExitRefused, r.Code, "%s as %s:\nstdout: %s\nstderr: %s", cmd, sa, r.Stdout, r.Stderr)
		for _, want := range []string{
			"field-manager conflict: Deployment " + f.ns + "/" + name + "-web",
			`.spec.template.spec.containers[name="web"].image`,
			`owned by "kubectl-set"`,
		} {
			assert.Contains(t, r.Stderr, want, cmd)
		}
		assert.NotContains(t, r.Stderr, "not checked", cmd)
	}
	assert.Len(t, f.history(name), 1, "no revision written")
	assert.Equal(t, before, len(f.writesBy()), "nothing written by the tool")
	assert.Equal(t, "registry.example/web:1-hotfix", f.image(name), "the hotfix stays")
	_, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
}
