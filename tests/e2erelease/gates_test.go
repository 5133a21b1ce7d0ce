package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/tests/gatecase"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// The health gates on a release (tests/gatecase): as the release Plan's
// ServiceAccount with the RBAC plan --check-chart --check-spec derives,
// the upgrade waits for the operator's writes, a failed gate exits 1, a
// timeout exits 4 naming the gate, a re-run resumes or does nothing, and
// bad gates are exit 2 with nothing written.
func TestHealthGatesOfARelease(t *testing.T) {
	f := newFixture(t, "")
	f.charts = t.TempDir()
	require.NoError(t, gatecase.WriteCharts(f.charts))
	op := gatecase.Start(t, f.env, f.ns)
	name := releaseName()

	cfg, err := cluster.HelmConfiguration(f.helm, f.ns, "secret", nil)
	require.NoError(t, err)
	ch, err := loader.Load(filepath.Join(f.charts, gatecase.Chart+"-1.0.0"))
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout, in.ServerSideApply = name, f.ns, kube.StatusWatcherStrategy, 120e9, true
	_, err = in.RunWithContext(t.Context(), ch, map[string]any{})
	require.NoError(t, err)

	h := gatecase.Harness{T: t, Env: f.env, Operator: op, Namespace: f.ns, Widget: name + "-w", Target: f.target(name),
		Timeout: "  release: {rollbackOnFailure: false}\n",
		Applies: func() int { return len(f.history(name)) }}
	h.WaitDeployed("1.0.0")
	h.Spec = func(extra string) string {
		spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n" +
			"- target: {kind: Release, namespace: " + f.ns + ", name: " + name + "}\n" +
			"  chart: {name: " + gatecase.Chart + ", source: " + f.charts + "}\n" + extra
		path := filepath.Join(t.TempDir(), "spec.yaml")
		require.NoError(t, os.WriteFile(path, []byte(spec), 0o600))
		return path
	}

	// as the release Plan's ServiceAccount: Helm's rights on the chart's
	// kinds, and what plan --check-chart --check-spec derives
	sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [gates.example.com]\n  resources: [widgets]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	plan := noderun.CLI(t, "plan", "--kind", "release", "--name", "gates-"+name, "--image", "r/x", "--version", "2.0.0", "--namespace", sucNS,
		"--service-account", "chart-upgrader-release-"+name, "--check-chart", filepath.Join(f.charts, gatecase.Chart+"-2.0.0"),
		"--check-release", f.ns+"/"+name, "--check-spec", h.Spec(gatecase.Gates(f.ns)))
	plan.RequireCode(t, 0)
	require.Contains(t, plan.Stdout, "  - widgetparts\n  verbs:\n  - list\n  - watch")
	var rbac []*unstructured.Unstructured
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if strings.HasSuffix(o.GetKind(), "Role") || strings.HasSuffix(o.GetKind(), "RoleBinding") {
			rbac = append(rbac, o)
		}
	}
	rbaccheck.Create(t, f.env, rbac)
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().ConfigMaps(f.ns).Get(ctx, name+"-config", metav1.GetOptions{})
		return err
	})
	n := newNode(t, "node-1")
	h.Run = func(command string, args ...string) noderun.Result {
		return f.cli(n, command, append(args, "--kubeconfig", kubeconfig)...)
	}
	gatecase.Run(h)

	_, denied := rbaccheck.Requests(t, f.env, sa)
	require.Empty(t, denied, "requests of %s the RBAC refused", sa)
}
