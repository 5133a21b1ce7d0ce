package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
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

// Preflight renders as the cluster's Helm renders: the chart's kubeVersion
// is checked against the cluster's version (discovery), as Helm 4's
// upgrade checks it. A chart that requires a Kubernetes the cluster is
// not: preflight refuses it, naming the constraint, and Helm's own upgrade
// fails the same way; one the cluster satisfies passes both. Preflight
// runs as the release Plan's ServiceAccount and writes nothing.
func TestPreflightAgreesWithHelmOnKubeVersion(t *testing.T) {
	for _, tc := range []struct {
		name, kubeVersion string
		refused           bool
	}{
		{"a Kubernetes the cluster is not", ">=1.99.0-0", true},
		{"the cluster's Kubernetes", ">=1.20.0-0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			meta := filepath.Join(f.charts, "demo-app-2.0.0", "Chart.yaml")
			data, err := os.ReadFile(meta)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(meta, append(data, "kubeVersion: \""+tc.kubeVersion+"\"\n"...), 0o644))
			name := releaseName()
			sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
				"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
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
			if tc.refused {
				require.Equal(t, outcome.ExitRefused, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				assert.Contains(t, r.stderr, "requires kubeVersion: "+tc.kubeVersion+" which is incompatible with Kubernetes v1.33")
				require.Error(t, oracle, "Helm's own upgrade")
				assert.Contains(t, oracle.Error(), "requires kubeVersion")
				return
			}
			require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.NoError(t, oracle, "Helm's own upgrade")
		})
	}
}
