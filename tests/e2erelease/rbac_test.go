package e2erelease

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// The ServiceAccount and RBAC of plans/release/10-rbac.yaml run a whole
// upgrade of the bundled example as a release (the Helm upgrade, the
// wait, status, a rollback), are refused nothing, and use every
// permission they grant.
func TestReleasePlanRBACIsSufficientAndTight(t *testing.T) {
	f := newFixture(t, "")
	// the example charts as they are: the objects the RBAC example names
	f.charts = t.TempDir()
	require.NoError(t, example.CopyDir(filepath.Join(f.root, "package", "examples", "charts"), f.charts))
	name := releaseName()
	sucNS, sa, objs := f.releasePlanRBAC(name)
	f.install(name)

	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.CoreV1().Secrets(f.ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", append(f.upgradeArgs(name, "2.0.0"), "--require-nodes-ready", "--kubeconfig", kubeconfig)...)
	require.Equal(t, 0, r.Code, "upgrade as %s: %s", sa, r.Stderr)
	st := f.cli(n, "status", "--target", f.target(name), "--kubeconfig", kubeconfig)
	require.Equal(t, 0, st.Code, st.Stderr)
	rb := f.cli(n, "rollback", "--target", f.target(name), "--timeout", "60s", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, rb.Code, "rollback as %s: %s", sa, rb.Stderr)

	used, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
	// Helm's write verbs on the chart's own kinds are what any upgrade of
	// the chart may need (an object added, changed or removed); every
	// other permission must have been used.
	helmWrites := func(p string) bool {
		for _, kind := range []string{"/configmaps ", "storage.k8s.io/storageclasses ", "/secrets delete"} {
			if strings.Contains(p, kind) && !strings.HasSuffix(p, " get") && !strings.HasSuffix(p, " list") && !strings.HasSuffix(p, " watch") {
				return true
			}
		}
		return false
	}
	var unused []string
	for _, p := range rbaccheck.Granted(objs) {
		if !used[p] && !helmWrites(p) {
			unused = append(unused, p)
		}
	}
	assert.Empty(t, unused, "granted and never used (used: %v)", rbaccheck.Keys(used))
}

// withPods are the replacements of plans/release/10-rbac.yaml that grant
// what preflight reads to judge the pods of a chart with a workload (the
// LimitRanges of the release's namespace, the pods bound to nodes) and
// what the wait watches of its new pods (the pods, the ReplicaSets that
// say their revision), as plan --check-chart grants them.
var withPods = []string{"  resources: [resourcequotas]\n", "  resources: [resourcequotas, limitranges]\n",
	"- apiGroups: [admissionregistration.k8s.io]\n", "- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [list, watch]\n" +
		"- apiGroups: [apps]\n  resources: [replicasets]\n  verbs: [list, watch]\n- apiGroups: [admissionregistration.k8s.io]\n"}

// hasWorkload says whether the fixture's chart 2.0.0 has a Deployment
// (written as one, or chosen by a value: the shapes chart's kind).
func (f *fixture) hasWorkload() bool {
	files, _ := filepath.Glob(filepath.Join(f.charts, "demo-app-2.0.0", "templates", "*"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil && (strings.Contains(string(data), "kind: Deployment") || strings.Contains(string(data), `kind "Deployment"`)) {
			return true
		}
	}
	return false
}

// releasePlanRBAC creates plans/release/10-rbac.yaml for release name,
// moved to the fixture's namespace and a new SUC namespace, with extra
// (old, new) replacements of its text; it returns that namespace, the
// ServiceAccount's user name and the objects.
func (f *fixture) releasePlanRBAC(name string, extra ...string) (sucNS, sa string, objs []*unstructured.Unstructured) {
	f.t.Helper()
	sucNS = f.env.Namespace(f.t)
	data, err := os.ReadFile(filepath.Join(f.root, "plans", "release", "10-rbac.yaml"))
	require.NoError(f.t, err)
	if f.hasWorkload() {
		extra = append(extra, withPods...)
	}
	text := strings.NewReplacer(append([]string{
		"namespace: demo-system", "namespace: " + f.ns,
		"namespace: system-upgrade", "namespace: " + sucNS,
		"resourceNames: [demo-app-longhorn]", "resourceNames: [" + name + "-longhorn]",
		"resourceNames: [demo-system]", "resourceNames: [" + f.ns + "]",
		"name: chart-upgrader-release\n", "name: chart-upgrader-release-" + name + "\n",
	}, extra...)...).Replace(string(data))
	objs = rbaccheck.Decode(f.t, text)
	rbaccheck.Create(f.t, f.env, objs)
	return sucNS, "system:serviceaccount:" + sucNS + ":chart-upgrader-release-" + name, objs
}
