package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// helmUpgrade upgrades release name to the example chart at version as
// Helm 4 does (the SDK's upgrade, server-side, the release's values
// reused): the oracle preflight must agree with.
func (f *fixture) helmUpgrade(name, version string) error {
	f.t.Helper()
	cfg, err := cluster.HelmConfiguration(f.helm, f.ns, "secret", nil)
	require.NoError(f.t, err)
	ch, err := loader.Load(filepath.Join(f.charts, "demo-app-"+version))
	require.NoError(f.t, err)
	up := action.NewUpgrade(cfg)
	up.Namespace, up.WaitStrategy, up.Timeout, up.ReuseValues, up.ServerSideApply = f.ns, kube.HookOnlyStrategy, 60e9, true, "true"
	_, err = up.RunWithContext(f.t.Context(), name, ch, nil)
	return err
}

// hpaTemplate is a HorizontalPodAutoscaler of the release's Deployment at
// apiVersion.
func hpaTemplate(apiVersion string) string {
	return `apiVersion: ` + apiVersion + `
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .Release.Name }}-web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}-web}
  minReplicas: 1
  maxReplicas: 3
`
}

// Preflight and Helm 4's own upgrade (the oracle, run as admin right
// after) agree, for chart version pairs that each break a real upgrade and
// a control beside each that does not: preflight, as the release Plan's
// ServiceAccount, refuses exactly where Helm fails, naming the cause, and
// writes nothing.
//   - Preflight renders as the cluster's Helm renders: the chart's
//     kubeVersion is checked against the cluster's version (discovery).
//   - An object of a kind the cluster does not serve at the chart's
//     version (autoscaling/v2beta2, removed in Kubernetes 1.26) is refused,
//     naming the versions it serves.
//   - An object in a namespace that does not exist (and that the chart does
//     not create) is refused, naming it.
func TestPreflightAgreesWithHelm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, chartDir string)
		says   string // preflight's refusal; "" for a control
		helm   string // Helm's error
	}{
		{"a Kubernetes the cluster is not", kubeVersion(">=1.99.0-0"),
			"requires kubeVersion: >=1.99.0-0 which is incompatible with Kubernetes v1.33", "requires kubeVersion"},
		{"the cluster's Kubernetes", kubeVersion(">=1.20.0-0"), "", ""},
		{"a removed API version", template("hpa.yaml", hpaTemplate("autoscaling/v2beta2")),
			"is at autoscaling/v2beta2, which this cluster does not serve (it serves only autoscaling/v1, autoscaling/v2)", `no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta2"`},
		{"the served API version", template("hpa.yaml", hpaTemplate("autoscaling/v2")), "", ""},
		{"a namespace that does not exist", template("other.yaml", otherNamespaceTemplate("absent")),
			"missing namespace: {ns}-absent does not exist", `namespaces "{ns}-absent" not found`},
		{"a namespace that exists", template("other.yaml", otherNamespaceTemplate("present")), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			tc.change(t, filepath.Join(f.charts, "demo-app-2.0.0"))
			name := releaseName()
			_, err := f.env.Kube().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-present"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = f.env.Kube().CoreV1().Namespaces().Delete(context.Background(), f.ns+"-present", metav1.DeleteOptions{})
			})
			// the namespaces the chart names, by name, as plan --check-chart grants them
			sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
				"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]",
				"  resources: [nodes]\n  verbs: [list]\n",
				"  resources: [nodes]\n  verbs: [list]\n- apiGroups: [\"\"]\n  resources: [namespaces]\n  resourceNames: ["+f.ns+"-absent, "+f.ns+"-present]\n  verbs: [get]\n")
			f.install(name)
			kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
			rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
				_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
				return err
			})
			node := newNode(t, "node-1")
			before := len(f.writesBy())

			r := f.cli(node, "preflight", append(f.upgradeArgs(name, "2.0.0"), "--kubeconfig", kubeconfig)...)
			assert.Equal(t, before, len(f.writesBy()), "preflight writes nothing")
			oracle := f.helmUpgrade(name, "2.0.0")
			if tc.says != "" {
				require.Equal(t, outcome.ExitRefused, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				assert.Contains(t, r.stderr, strings.ReplaceAll(tc.says, "{ns}", f.ns))
				require.Error(t, oracle, "Helm's own upgrade")
				assert.Contains(t, oracle.Error(), strings.ReplaceAll(tc.helm, "{ns}", f.ns))
				return
			}
			require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.NoError(t, oracle, "Helm's own upgrade")
		})
	}
}

// otherNamespaceTemplate is a ConfigMap in namespace <release
// namespace>-suffix.
func otherNamespaceTemplate(suffix string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-other\n  namespace: {{ .Release.Namespace }}-" + suffix + "\ndata: {a: b}\n"
}

// kubeVersion sets the chart's kubeVersion.
func kubeVersion(constraint string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		meta := filepath.Join(dir, "Chart.yaml")
		data, err := os.ReadFile(meta)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(meta, append(data, "kubeVersion: \""+constraint+"\"\n"...), 0o644))
	}
}

// template adds a template to the chart.
func template(name, body string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", name), []byte(body), 0o644))
	}
}
