// Package kubecompat holds `preflight --kube-version` to releases the real
// Helm 3 and Helm 4 CLIs installed on a real kube-apiserver: charts of our
// own with the shapes real ones have (a kubeVersion upper bound, >=
// bounds, a template that switches on .Capabilities.KubeVersion), a
// release whose stored manifest holds an API an older cluster stored, and
// chart sources (a directory, an HTTP repository on loopback) holding
// later versions of which exactly one fits both versions.
package kubecompat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/kubecompat"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// writeChart writes chart name at version with kubeVersion (may be "")
// and templates (file name: content) under dir/name-version.
func writeChart(t *testing.T, dir, name, version, kubeVersion string, templates map[string]string) string {
	t.Helper()
	root := filepath.Join(dir, name+"-"+version)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "templates"), 0o755))
	meta := fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version)
	if kubeVersion != "" {
		meta += fmt.Sprintf("kubeVersion: %q\n", kubeVersion)
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "Chart.yaml"), []byte(meta), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "values.yaml"), []byte("greeting: hello\n"), 0o644))
	for f, c := range templates {
		require.NoError(t, os.WriteFile(filepath.Join(root, "templates", f), []byte(c), 0o644))
	}
	return root
}

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  greeting: {{ .Values.greeting | quote }}
`

// switcher renders a beta kind from 1.35 on (its author expected the
// beta to stay), a ConfigMap before: the shape of a chart that picks an
// API version with .Capabilities.KubeVersion.
const switcher = `{{- if semverCompare ">=1.35-0" .Capabilities.KubeVersion.Version }}
apiVersion: storage.k8s.io/v1beta1
kind: VolumeAttributesClass
metadata:
  name: {{ .Release.Name }}-fast
driverName: csi.example.com
{{- else }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-fast-legacy
data:
  class: fast
{{- end }}
`

// helm runs the Helm CLI bin (helm3, helm4) against env.
func helm(t *testing.T, env *testenv.Env, bin string, args ...string) {
	t.Helper()
	path, err := env.Binary(bin)
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), path, append(args, "--kubeconfig", env.KubeconfigPath())...)
	cmd.Env = append(os.Environ(), testenv.HelmCLIEnv(t.TempDir())...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", bin, strings.Join(args, " "), out)
}

// storeAs rewrites the stored manifest of release ns/name's deployed
// revision: from becomes to (a release as an older cluster stored it).
func storeAs(t *testing.T, env *testenv.Env, ns, name, from, to string) {
	t.Helper()
	d := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	rs, err := d.Query(map[string]string{"name": name, "owner": "helm", "status": "deployed"})
	require.NoError(t, err)
	revs, err := helmrelease.Revisions(rs)
	require.NoError(t, err)
	rel := revs[len(revs)-1]
	require.Contains(t, rel.Manifest, from)
	rel.Manifest = strings.ReplaceAll(rel.Manifest, from, to)
	require.NoError(t, d.Update(fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, rel.Version), rel))
}

// asAccount is a kubeconfig acting as a ServiceAccount of ns with rules,
// returned once probe, which the rules allow, is allowed.
func asAccount(t *testing.T, env *testenv.Env, ns string, rules []rbacv1.PolicyRule, probe func(context.Context, kubernetes.Interface) error) string {
	t.Helper()
	ctx := t.Context()
	kube := env.Kube()
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "upgrader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	role := ns + "-kube-version"
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "upgrader", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	path := rbaccheck.Impersonating(t, env, "system:serviceaccount:"+ns+":upgrader", ns)
	// the authorizer reads RBAC from a cache: wait until the role holds
	rbaccheck.WaitAuthorized(t, path, probe)
	return path
}

// TestKubeVersion: the releases of one cluster, checked against 1.34 and
// against 1.37 as the Plan's ServiceAccount would, through the CLI.
func TestKubeVersion(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	charts := t.TempDir()
	// installed: legacy (kubeVersion < 1.34) by Helm 4, modern (>= 1.25)
	// by Helm 3, switcher by Helm 4, pdb by Helm 3 then stored as an
	// older cluster stored it
	helm(t, env, "helm4", "install", "legacy", writeChart(t, charts, "legacy", "1.0.0", "<1.34.0-0", map[string]string{"cm.yaml": configMap}), "-n", ns)
	helm(t, env, "helm3", "install", "modern", writeChart(t, charts, "modern", "2.0.0", ">=1.25.0-0", map[string]string{"cm.yaml": configMap}), "-n", ns)
	helm(t, env, "helm4", "install", "switcher", writeChart(t, charts, "switcher", "1.0.0", "", map[string]string{"cm.yaml": configMap, "class.yaml": switcher}), "-n", ns)
	pdb := `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Release.Name }}-web
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
`
	helm(t, env, "helm3", "install", "budgeted", writeChart(t, charts, "budgeted", "3.0.0", "", map[string]string{"pdb.yaml": pdb}), "-n", ns)
	storeAs(t, env, ns, "budgeted", "apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n")

	// the sources: legacy's in a directory (1.1.0 still < 1.34, 1.2.0
	// fits both, 1.3.0 needs >= 1.35), switcher's in an HTTP repository
	// (1.1.0 renders a ConfigMap at every version)
	dir := t.TempDir()
	writeChart(t, dir, "legacy", "1.1.0", "<1.34.0-0", map[string]string{"cm.yaml": configMap})
	writeChart(t, dir, "legacy", "1.2.0", ">=1.25.0-0", map[string]string{"cm.yaml": configMap})
	writeChart(t, dir, "legacy", "1.3.0", ">=1.35.0-0", map[string]string{"cm.yaml": configMap})
	repoDir := t.TempDir()
	pkgDir := t.TempDir()
	helm4 := func(args ...string) {
		path, err := env.Binary("helm4")
		require.NoError(t, err)
		cmd := exec.CommandContext(t.Context(), path, args...)
		cmd.Env = append(os.Environ(), testenv.HelmCLIEnv(t.TempDir())...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "helm4 %v: %s", args, out)
	}
	helm4("package", writeChart(t, pkgDir, "switcher", "1.0.0", "", map[string]string{"cm.yaml": configMap, "class.yaml": switcher}), "-d", repoDir)
	helm4("package", writeChart(t, pkgDir, "switcher", "1.1.0", "", map[string]string{"cm.yaml": configMap}), "-d", repoDir)
	srv := httptest.NewServer(http.FileServer(http.Dir(repoDir)))
	t.Cleanup(srv.Close)
	helm4("repo", "index", repoDir, "--url", srv.URL)
	// a HelmChart deploys switcher from that repository (its release is
	// named after it in its targetNamespace)
	_, err := env.Dynamic().Resource(schema.GroupVersionResource{Group: "helm.cattle.io", Version: "v1", Resource: "helmcharts"}).Namespace(ns).Create(t.Context(),
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
			"metadata": map[string]any{"name": "switcher", "namespace": ns},
			"spec":     map[string]any{"chart": "switcher", "repo": srv.URL, "targetNamespace": ns, "version": "1.0.0"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	kubeconfig := asAccount(t, env, ns, kubecompat.RBAC(), func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	run := func(v string, extra ...string) (noderun.Result, *kubecompat.Report) {
		r := noderun.CLI(t, append([]string{"preflight", "--kubeconfig", kubeconfig, "--kube-version", v, "-o", "json", "--termination-log", ""}, extra...)...)
		// one object: the report, or on exit 3 the failure holding it
		var out struct {
			kubecompat.Report
			Error  *struct{ ExitCode int } `json:"error"`
			Failed *kubecompat.Report      `json:"report"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), "%s\n%s", r.Stdout, r.Stderr)
		if out.Error != nil {
			require.NotNil(t, out.Failed, r.Stdout)
			assert.Equal(t, r.Code, out.Error.ExitCode)
			return r, out.Failed
		}
		return r, &out.Report
	}
	failing := func(rep *kubecompat.Report) map[string]kubecompat.ReleaseReport {
		out := map[string]kubecompat.ReleaseReport{}
		for _, f := range rep.Failing {
			if strings.HasPrefix(f.Release, ns+"/") {
				out[strings.TrimPrefix(f.Release, ns+"/")] = f
			}
		}
		return out
	}

	t.Run("1.33: only the stored removed API", func(t *testing.T) {
		r, rep := run("v1.33.5+rke2r1")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		f := failing(rep)
		assert.Len(t, f, 1, "%v", f)
		require.Contains(t, f, "budgeted")
		assert.Contains(t, f["budgeted"].Findings[0].Why, "PodDisruptionBudget budgeted-web at policy/v1beta1, removed in Kubernetes 1.25")
		assert.Equal(t, "at its next helm upgrade (or rollback)", f["budgeted"].When)
		assert.Contains(t, f["budgeted"].Forward, "map the stored manifest's removed APIs first")
		assert.Contains(t, f["budgeted"].Forward, "no chart source known: give --release-source "+ns+"/budgeted=SOURCE")
		assert.GreaterOrEqual(t, rep.Checked, 4)
		assert.Empty(t, rep.NotChecked, "as the derived RBAC, everything was read")
		assert.Contains(t, rep.RemovalData, "k8s.io/api v0.37.2")
	})
	t.Run("1.34: kubeVersion, and the way forward from a directory", func(t *testing.T) {
		r, rep := run("v1.34.2+k3s1", "--release-source", ns+"/legacy="+dir)
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		f := failing(rep)
		require.Contains(t, f, "legacy")
		assert.Equal(t, "kubeVersion", f["legacy"].Findings[0].What)
		assert.Equal(t, "chart requires kubeVersion: <1.34.0-0 which is incompatible with Kubernetes v1.34.2", f["legacy"].Findings[0].Why)
		assert.Equal(t, "upgrade chart legacy to 1.2.0 first (from "+dir+"), then move the nodes", f["legacy"].Forward)
		assert.NotContains(t, f, "modern")
		assert.NotContains(t, f, "switcher", "at 1.34 it still renders its ConfigMap")
	})
	t.Run("1.34: the way forward from an upgrade spec's chart source", func(t *testing.T) {
		specFile := filepath.Join(t.TempDir(), "spec.yaml")
		require.NoError(t, os.WriteFile(specFile, []byte(fmt.Sprintf(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: Release, namespace: %s, name: legacy}
  chart: {name: legacy, source: %s}
`, ns, dir)), 0o600))
		r, rep := run("1.34", "--spec", specFile)
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		f := failing(rep)
		require.Contains(t, f, "legacy")
		assert.Equal(t, "upgrade chart legacy to 1.2.0 first (from "+dir+"), then move the nodes", f["legacy"].Forward)
	})
	t.Run("1.37: a template that switches on the version, its HelmChart's repository", func(t *testing.T) {
		r, rep := run("1.37")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		f := failing(rep)
		require.Contains(t, f, "switcher")
		sw := f["switcher"]
		assert.Equal(t, "HelmChart "+ns+"/switcher", sw.Kind)
		assert.Equal(t, "at helm-controller's next run of it (its Job's helm upgrade)", sw.When)
		assert.True(t, sw.Rendered)
		assert.Contains(t, sw.Findings[0].Why, "the chart makes VolumeAttributesClass switcher-fast at storage.k8s.io/v1beta1, removed in Kubernetes 1.37")
		assert.Equal(t, []string{"VolumeAttributesClass switcher-fast"}, sw.Appear)
		assert.Equal(t, []string{"ConfigMap switcher-fast-legacy"}, sw.Disappear)
		assert.Equal(t, "upgrade chart switcher to 1.1.0 first (from "+srv.URL+"), then move the nodes", sw.Forward)
		assert.Contains(t, f["legacy"].Forward, "no chart source known")
		assert.NotContains(t, f, "modern")
		assert.GreaterOrEqual(t, rep.Rendered, 1)
	})
	t.Run("bad input and no change", func(t *testing.T) {
		r := noderun.CLI(t, "preflight", "--kubeconfig", kubeconfig, "--kube-version", "next")
		assert.Equal(t, outcome.ExitBadInput, r.Code)
		assert.Contains(t, r.Stderr, `--kube-version "next": not a Kubernetes version`)
		r = noderun.CLI(t, "preflight", "--kubeconfig", kubeconfig, "--kube-version", "1.34", "--release-source", "legacy=/tmp")
		assert.Equal(t, outcome.ExitBadInput, r.Code)
		assert.Contains(t, r.Stderr, `--release-source "legacy=/tmp": want NAMESPACE/NAME=SOURCE`)
		r = noderun.CLI(t, "preflight", "--kubeconfig", kubeconfig, "--kube-version", "1.34", "--target", "release/"+ns+"/legacy")
		assert.Equal(t, outcome.ExitBadInput, r.Code)
		assert.Contains(t, r.Stderr, "--kube-version checks every release on the cluster: drop --target")
		r = noderun.CLI(t, "preflight", "--kubeconfig", kubeconfig, "--kube-version", "1.34", "--spec", filepath.Join(t.TempDir(), "none.yaml"))
		assert.Equal(t, outcome.ExitBadInput, r.Code)
		assert.Contains(t, r.Stderr, "none.yaml")
	})
	t.Run("a record that does not decode", func(t *testing.T) {
		_, err := env.Kube().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.broken.v1",
			Labels: map[string]string{"owner": "helm", "status": "deployed", "name": "broken", "version": "1"}},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("not a release")}}, metav1.CreateOptions{})
		require.NoError(t, err)
		r, rep := run("1.33")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		f := failing(rep)
		require.Contains(t, f, "broken")
		assert.Equal(t, "unreadable", f["broken"].Findings[0].What)
		assert.Contains(t, f["broken"].Findings[0].Why, "its stored record "+ns+"/sh.helm.release.v1.broken.v1 does not decode")
	})
	t.Run("RBAC in one namespace: its releases checked, the others named", func(t *testing.T) {
		other := env.Namespace(t)
		kc := asAccount(t, env, other, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}},
			func(ctx context.Context, kube kubernetes.Interface) error {
				_, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
				return err
			})
		_, err := env.Kube().RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "release-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = env.Kube().RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "release-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "release-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "upgrader", Namespace: other}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		rbaccheck.WaitAuthorized(t, kc, func(ctx context.Context, kube kubernetes.Interface) error {
			_, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		})
		r, rep := run("1.34")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		require.Contains(t, failing(rep), "legacy")
		r = noderun.CLI(t, "preflight", "--kubeconfig", kc, "--kube-version", "1.34", "-o", "json", "--termination-log", "")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		var out struct {
			Report kubecompat.Report `json:"report"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
		var mine []string
		for _, f := range out.Report.Failing {
			mine = append(mine, f.Release)
		}
		assert.Contains(t, mine, ns+"/legacy", "the namespace it may read is checked")
		notChecked := strings.Join(out.Report.NotChecked, "\n")
		assert.Contains(t, notChecked, "the releases in Helm's secret storage of ")
		assert.Contains(t, notChecked, other, "a namespace it may not read is named")
		for _, line := range out.Report.NotChecked {
			if strings.Contains(line, "secret storage") {
				assert.NotContains(t, line, ns+",", "the namespace it may read is not among them")
				assert.NotContains(t, line, ns+")", "the namespace it may read is not among them")
			}
		}
	})
	t.Run("an unreadable storage", func(t *testing.T) {
		other := env.Namespace(t)
		kc := asAccount(t, env, other, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
			func(ctx context.Context, kube kubernetes.Interface) error {
				_, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
				return err
			})
		r := noderun.CLI(t, "preflight", "--kubeconfig", kc, "--kube-version", "1.34")
		assert.Equal(t, outcome.ExitFailure, r.Code, r.Stderr)
		assert.Contains(t, r.Stderr, "this process may list neither the secrets nor the configmaps of any namespace")
	})
}
