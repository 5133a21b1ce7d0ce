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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// A spec whose live and once rules read objects outside the chart's
// namespace, run as the release Plan's ServiceAccount with only the RBAC
// of plans/release and what plan --check-chart --check-spec derives:
// preflight and the upgrade exit 0, the values taken from the live
// objects; with the derived rule of one source removed, preflight exits
// 3 naming that source, the rule of the spec that reads it and the RBAC
// rule to add, and writes nothing.
func TestTheSpecsReadsAreInTheDerivedRBAC(t *testing.T) {
	f := newFixture(t, "")
	f.charts = t.TempDir()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		_, err := testchart.Write(f.charts, testchart.ConfigMapChart("cfg", v, map[string]any{"mode": "default", "cert": "generated"}))
		require.NoError(t, err)
	}
	name := releaseName()
	settingsNS, certsNS := f.env.Namespace(t), f.env.Namespace(t)
	_, err := f.env.Kube().CoreV1().ConfigMaps(settingsNS).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"mode": "operator's"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.env.Kube().CoreV1().Secrets(certsNS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "certs"},
		Data: map[string][]byte{"tls.crt": []byte("the installed certificate")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := cluster.HelmConfiguration(f.helm, f.ns, cluster.SecretDriver, nil)
	require.NoError(t, err)
	ch, err := loader.Load(filepath.Join(f.charts, "cfg-1.0.0"))
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout, in.ServerSideApply = name, f.ns, kube.HookOnlyStrategy, 60e9, true
	_, err = in.RunWithContext(t.Context(), ch, map[string]any{})
	require.NoError(t, err)

	spec := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: Release, namespace: `+f.ns+`, name: `+name+`}
  chart: {name: cfg, source: `+f.charts+`}
  rules:
  - path: data.mode
    policy: live
    source: {apiVersion: v1, kind: ConfigMap, namespace: `+settingsNS+`, name: settings}
    expr: '.data.mode'
  - path: data.cert
    policy: once
    source: {apiVersion: v1, kind: Secret, namespace: `+certsNS+`, name: certs}
    expr: '.data["tls.crt"] | @base64d'
`), 0o600))
	sucNS, sa, _ := f.releasePlanRBAC(name)
	plan := noderun.CLI(t, "plan", "--kind", "release", "--name", "reads-"+name, "--image", "r/x", "--version", "2.0.0", "--namespace", sucNS,
		"--service-account", "chart-upgrader-release-"+name, "--check-chart", filepath.Join(f.charts, "cfg-2.0.0"),
		"--check-release", f.ns+"/"+name, "--check-spec", spec)
	plan.RequireCode(t, 0)
	var derived []*unstructured.Unstructured
	var settingsRole *unstructured.Unstructured
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if strings.HasSuffix(o.GetKind(), "Role") || strings.HasSuffix(o.GetKind(), "RoleBinding") {
			derived = append(derived, o)
			if o.GetKind() == "Role" && o.GetNamespace() == settingsNS {
				settingsRole = o
			}
		}
	}
	require.NotNil(t, settingsRole, "a Role in the live source's namespace")
	assert.Contains(t, plan.Stdout, "resourceNames:\n  - settings\n  resources:\n  - configmaps\n  verbs:\n  - get")
	assert.Contains(t, plan.Stdout, "resourceNames:\n  - certs\n  resources:\n  - secrets\n  verbs:\n  - get")
	rbaccheck.Create(t, f.env, derived)
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().ConfigMaps(settingsNS).Get(ctx, "settings", metav1.GetOptions{})
		return err
	})
	n := newNode(t, "node-1")
	r := f.cli(n, "preflight", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	r = f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, 0)
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), name+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "operator's", cm.Data["mode"], "the live rule's value")
	assert.Equal(t, "the installed certificate", cm.Data["cert"], "the once rule's value")
	_, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)

	// the derived rule of the live source removed: refused, named, nothing written
	require.NoError(t, f.env.Kube().RbacV1().Roles(settingsNS).Delete(t.Context(), settingsRole.GetName(), metav1.DeleteOptions{}))
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().ConfigMaps(settingsNS).Get(ctx, "settings", metav1.GetOptions{})
		if err == nil {
			return assert.AnError // still allowed: wait until the removal is seen
		}
		return nil
	})
	before := len(f.writesBy())
	_, err = testchart.Write(f.charts, testchart.ConfigMapChart("cfg", "3.0.0", map[string]any{"mode": "default", "cert": "generated"}))
	require.NoError(t, err)
	other := newNode(t, "node-2")
	r = f.cli(other, "preflight", "--spec", spec, "--version", "3.0.0", "--kubeconfig", kubeconfig)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "v1 ConfigMap "+settingsNS+"/settings, which rule 1 (data.mode, live) reads: this process may not read it: "+
		"add to a Role in namespace "+settingsNS+" the rule {apiGroups: [\"\"], resources: [configmaps], resourceNames: [settings], verbs: [get]}")
	assert.Equal(t, before, len(f.writesBy()), "nothing written")
}
