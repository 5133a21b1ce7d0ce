package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/hotfix"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// hotfixCharts puts testchart.HotfixTemplate in both versions of the
// example chart (hotfix.Charts), in place of the fixture's Deployment.
func (f *fixture) hotfixCharts() {
	f.t.Helper()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		require.NoError(f.t, os.Remove(filepath.Join(f.charts, "demo-app-"+v, "templates", "deployment.yaml")))
	}
	hotfix.Charts(f.t, f.charts)
}

// An operator's hotfixes on a server-side release, made with the real
// kubectl, everything run as the release Plan's ServiceAccount: drift names each in values terms with the rule that keeps it;
// an upgrade without adopt rules is refused as before, each conflict
// line saying which value renders the field and how to adopt it; with
// adopt rules on the image tag and the replicas only the ConfigMap key is
// refused; with one on it too the upgrade goes through without force,
// keeping every hotfix, the fields shared between Helm and the managers
// that made them. No request is refused by the Plan's RBAC.
func TestAdoptAnOperatorsHotfixesOfARelease(t *testing.T) {
	f := newFixture(t, "")
	f.hotfixCharts()
	name := releaseName()
	// the chart's Deployment: Helm's verbs on it, as for every kind of the chart
	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	f.install(name)
	f.demoteStorageClass(name + "-longhorn")
	hotfix.Make(t, f.env, f.ns, name, true)
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
		return err
	})
	n := newNode(t, "node-1")
	cli := func(command string, args ...string) result {
		t.Helper()
		return f.cli(n, command, append(args, "--kubeconfig", kubeconfig)...)
	}

	r := cli("drift", "--target", f.target(name), "-o", "json")
	r.RequireCode(t, 0)
	hotfix.CheckDrift(t, r.Stdout, f.ns, name, true)
	r = cli("drift", "--target", f.target(name))
	require.Equal(t, 0, r.Code, r.Stderr)
	t.Logf("drift:\n%s", r.Stdout)
	for _, want := range []string{"MANAGER", "web.image.repository, web.image.tag", "{path: web.image.tag, policy: adopt} (or --set-string web.image.tag=1-hotfix)",
		"not adoptable: no value renders it"} {
		assert.Contains(t, r.Stdout, want)
	}
	before := len(f.writesBy())

	// with every value adopted, the hard-coded field alone is refused
	args := func(rules string) []string {
		return []string{"--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", hotfix.WithRules(t, f.policy(name), rules), "--timeout", "60s"}
	}
	r = cli("preflight", args(hotfix.AdoptDeployment+hotfix.AdoptConfigMap)...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, hotfix.HardCodedField+` is owned by "kubectl-patch"`)
	assert.Contains(t, r.Stderr, "not adoptable: no value renders it")
	assert.NotContains(t, r.Stderr, hotfix.ImageField)
	assert.NotContains(t, r.Stderr, hotfix.RetentionField)
	hotfix.UndoHardCoded(t, f.env, f.ns, name)

	// without adopt: today's refusal, each line in values terms
	r = cli("upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		hotfix.ImageField + ` is owned by "kubectl-set"`,
		"set by the value web.image.repository, web.image.tag; to keep the live value, adopt it with the spec rule {path: web.image.tag, policy: adopt}, or give --set-string web.image.tag=1-hotfix",
		hotfix.ReplicasField + ` is owned by "kubectl" with subresource "scale"`,
		hotfix.RetentionField + ` is owned by "kubectl-patch"`,
	} {
		assert.Contains(t, r.Stderr, want)
	}

	// adopt the Deployment's hotfixes: the ConfigMap key alone is refused
	r = cli("preflight", args(hotfix.AdoptDeployment)...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, hotfix.RetentionField+` is owned by "kubectl-patch"`)
	assert.Contains(t, r.Stderr, "{path: web.retention, policy: adopt}")
	assert.NotContains(t, r.Stderr, hotfix.ImageField)
	assert.NotContains(t, r.Stderr, hotfix.ReplicasField)
	assert.Equal(t, before, len(f.writesBy()), "nothing written by the refusals")
	assert.Len(t, f.history(name), 1)

	// adopt all three: no conflict, no force
	r = cli("upgrade", args(hotfix.AdoptDeployment+hotfix.AdoptConfigMap)...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "adopted from the live Deployment "+f.ns+"/"+name+"-web "+hotfix.ImageField+" (changed by kubectl-set)")
	assert.NotContains(t, r.Stdout, "field-owned-by-another-manager")
	h := f.history(name)
	require.Len(t, h, 2)
	assert.Equal(t, "2.0.0", h[1].Chart.Metadata.Version)
	assert.Equal(t, "ssa", h[1].ApplyMethod)
	hotfix.CheckKept(t, f.env, f.ns, name, cluster.HelmFieldManager)

	// the fields are the chart's now too: drift shows them shared, not changed
	r = cli("drift", "--target", f.target(name), "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.NotContains(t, r.Stdout, `"differs": true`)
	_, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
}

// drift of a target that does not exist is bad input naming it.
func TestDriftOfAMissingTarget(t *testing.T) {
	f := newFixture(t, "")
	r := f.cli(newNode(t, "node-1"), "drift", "--target", f.target("nothing-here"))
	assert.Equal(t, outcome.ExitBadInput, r.Code, r.Stderr)
	assert.Contains(t, r.Stderr, "release/"+f.ns+"/nothing-here: not found")
}
