package e2ehelmchart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The ServiceAccount and RBAC of plans/k3s/10-rbac.yaml run a whole
// HelmChart upgrade against the real helm-controller (and status, and a
// rollback), are refused nothing, and use every permission they grant.
func TestK3sPlanRBACIsSufficientAndTight(t *testing.T) {
	f := newFixture(t)
	name := release()
	k := f.k3sPlan(name, false)
	policy, sa, objs := k.policy, k.sa, k.objs
	n := newNode(t, "node-1")
	as := func(command string, args ...string) result {
		return f.cliAs(k.kubeconfig, n, command, args...)
	}
	r := as("upgrade", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", policy,
		"--timeout", "90s", "--require-nodes-ready")
	require.Equal(t, 0, r.Code, "upgrade as %s: %s", sa, r.Stderr)
	st := as("status", "--target", f.target(name))
	require.Equal(t, 0, st.Code, st.Stderr)
	assert.Contains(t, st.Stdout, "version 2.0.0, ready")
	rb := as("rollback", "--target", f.target(name), "--timeout", "90s")
	require.Equal(t, 0, rb.Code, "rollback as %s: %s", sa, rb.Stderr)

	used, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
	var unused []string
	for _, p := range rbaccheck.Granted(objs) {
		if !used[p] {
			unused = append(unused, p)
		}
	}
	assert.Empty(t, unused, "granted and never used (used: %v)", rbaccheck.Keys(used))
}

// cliAs runs chart-upgrader with another kubeconfig.
func (f *fixture) cliAs(kubeconfig string, n node, command string, args ...string) result {
	f.t.Helper()
	return f.cli(n, command, append(args, "--kubeconfig", kubeconfig)...)
}

// k3sPlanWorld is a HelmChart installed at 1.0.0, releasing into relNS,
// with plans/k3s/10-rbac.yaml created for it (and, with check, the
// conflict check's RBAC that `plan --check-chart` prints, with planArgs).
type k3sPlanWorld struct {
	relNS, sucNS, policy, sa, kubeconfig string
	objs                                 []*unstructured.Unstructured
}

func (f *fixture) k3sPlan(name string, check bool, planArgs ...string) k3sPlanWorld {
	t := f.t
	t.Helper()
	checkChart := ""
	if check {
		checkChart = f.exampleChart("2.0.0")
	}
	w := f.k3sPlanRBAC(name, f.env.Namespace(t), checkChart, planArgs...)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	relNS := w.relNS
	// the HelmChart releasing into relNS; the example policy reading there
	spec := map[string]any{"chart": "demo-app", "version": "1.0.0", "chartContent": f.chartContent(f.exampleChart("1.0.0")),
		"targetNamespace": relNS, "valuesContent": installerValues(t)}
	f.create(f.helmChart(name, spec))
	f.waitDeployed(name, "1.0.0")
	policyText, err := os.ReadFile(filepath.Join(root, "package", "examples", "policy.yaml"))
	require.NoError(t, err)
	w.policy = f.writeFile("policy.yaml", strings.NewReplacer("namespace: demo-system", "namespace: "+relNS,
		"name: demo-app-longhorn", "name: "+name+"-longhorn").Replace(string(policyText)))

	rbaccheck.WaitAuthorized(t, w.kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.BatchV1().Jobs(f.ns).Get(ctx, "helm-install-"+name, metav1.GetOptions{})
		return err
	})
	return w
}

// k3sPlanRBAC creates plans/k3s/10-rbac.yaml for HelmChart name of the
// fixture's namespace releasing into relNS (and, with
// checkChart, what `plan --check-chart` prints for that chart, with
// planArgs); it returns the world without the HelmChart and policy.
func (f *fixture) k3sPlanRBAC(name, relNS, checkChart string, planArgs ...string) k3sPlanWorld {
	t := f.t
	t.Helper()
	hcNS, sucNS := f.ns, f.env.Namespace(t)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "plans", "k3s", "10-rbac.yaml"))
	require.NoError(t, err)
	text := strings.NewReplacer(
		"namespace: kube-system", "namespace: "+hcNS,
		"namespace: demo-system", "namespace: "+relNS,
		"namespace: system-upgrade", "namespace: "+sucNS,
		"resourceNames: [demo-app]", "resourceNames: ["+name+"]",
		"resourceNames: [helm-install-demo-app]", "resourceNames: [helm-install-"+name+"]",
		"resourceNames: [demo-app-longhorn]", "resourceNames: ["+name+"-longhorn]",
		"resourceNames: [demo-system]", "resourceNames: ["+relNS+"]",
		"name: chart-upgrader-helmchart\n", "name: chart-upgrader-helmchart-"+name+"\n",
	).Replace(string(data))
	w := k3sPlanWorld{relNS: relNS, sucNS: sucNS, sa: "system:serviceaccount:" + sucNS + ":chart-upgrader-helmchart-" + name}
	w.objs = rbaccheck.Decode(t, text)
	if checkChart != "" {
		plan := noderun.CLI(t, append([]string{"plan", "--kind", "helmchart", "--image", "registry.example/chart-upgrader",
			"--version", "2.0.0", "--namespace", sucNS, "--service-account", "chart-upgrader-helmchart-" + name, "--name", "check-" + name,
			"--check-chart", checkChart, "--check-release", relNS + "/" + name}, planArgs...)...)
		plan.RequireCode(t, 0)
		for _, o := range rbaccheck.Decode(t, plan.Stdout) {
			if o.GetKind() != "Plan" {
				w.objs = append(w.objs, o)
			}
		}
	}
	rbaccheck.Create(t, f.env, w.objs)
	w.kubeconfig = rbaccheck.Impersonating(t, f.env, w.sa, w.sucNS)
	return w
}
