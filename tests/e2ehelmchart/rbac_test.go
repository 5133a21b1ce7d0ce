package e2ehelmchart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The ServiceAccount and RBAC of plans/k3s/10-rbac.yaml run a whole
// HelmChart upgrade against the real helm-controller (and status, and a
// rollback), are refused nothing, and use every permission they grant.
func TestK3sPlanRBACIsSufficientAndTight(t *testing.T) {
	f := newFixture(t)
	name := release()
	hcNS, relNS, sucNS := f.ns, f.env.Namespace(t), f.env.Namespace(t)
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
		"name: chart-upgrader-helmchart\n", "name: chart-upgrader-helmchart-"+name+"\n",
	).Replace(string(data))
	sa := "system:serviceaccount:" + sucNS + ":chart-upgrader-helmchart-" + name
	objs := decodeAll(t, text)
	createAll(t, f, objs)

	// the HelmChart releasing into relNS; the example policy reading there
	spec := map[string]any{"chart": "demo-app", "version": "1.0.0", "chartContent": f.chartContent(f.exampleChart("1.0.0")),
		"targetNamespace": relNS, "valuesContent": installerValues(t)}
	f.create(f.helmChart(name, spec))
	f.waitDeployed(name, "1.0.0")
	policyText, err := os.ReadFile(filepath.Join(root, "package", "examples", "policy.yaml"))
	require.NoError(t, err)
	policy := f.writeFile("policy.yaml", strings.NewReplacer("namespace: demo-system", "namespace: "+relNS,
		"name: demo-app-longhorn", "name: "+name+"-longhorn").Replace(string(policyText)))

	kubeconfig := impersonating(t, f, sa, sucNS)
	waitAuthorized(t, kubeconfig, hcNS, name)
	n := newNode(t, "node-1")
	as := func(command string, args ...string) result {
		return f.cliAs(kubeconfig, n, command, args...)
	}
	r := as("upgrade", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", policy,
		"--timeout", "90s", "--require-nodes-ready")
	require.Equal(t, 0, r.code, "upgrade as %s: %s", sa, r.stderr)
	st := as("status", "--target", f.target(name))
	require.Equal(t, 0, st.code, st.stderr)
	assert.Contains(t, st.stdout, "version 2.0.0, ready")
	rb := as("rollback", "--target", f.target(name), "--timeout", "90s")
	require.Equal(t, 0, rb.code, "rollback as %s: %s", sa, rb.stderr)

	used, denied := saRequests(t, f, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
	var unused []string
	for _, p := range granted(objs) {
		if !used[p] {
			unused = append(unused, p)
		}
	}
	assert.Empty(t, unused, "granted and never used (used: %v)", keys(used))
}

// cliAs runs chart-upgrader with another kubeconfig.
func (f *fixture) cliAs(kubeconfig string, n node, command string, args ...string) result {
	f.t.Helper()
	return f.cli(n, command, append(args, "--kubeconfig", kubeconfig)...)
}

func decodeAll(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	require.NotEmpty(t, out)
	return out
}

func createAll(t *testing.T, f *fixture, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(f.env.Config())
	require.NoError(t, err)
	m := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		res := f.env.Dynamic().Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(o.GetNamespace()).Create(t.Context(), o, metav1.CreateOptions{})
		} else {
			_, err = res.Create(t.Context(), o, metav1.CreateOptions{})
		}
		require.NoError(t, err, "creating %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// impersonating writes a kubeconfig acting as the ServiceAccount.
func impersonating(t *testing.T, f *fixture, sa, saNS string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(f.env.KubeconfigPath())
	require.NoError(t, err)
	for _, user := range cfg.AuthInfos {
		user.Impersonate = sa
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-sa")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// waitAuthorized returns once the authorizer knows the Role binding.
func waitAuthorized(t *testing.T, kubeconfig, ns, name string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.BatchV1().Jobs(ns).Get(ctx, "helm-install-"+name, metav1.GetOptions{})
		return err == nil || apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err)
}

// permission names one permission: scope (a namespace, or "cluster"),
// group, resource, verb.
func permission(scope, group, resource, verb string) string {
	return fmt.Sprintf("%s %s/%s %s", scope, group, resource, verb)
}

// granted lists the permissions of the Roles and ClusterRoles.
func granted(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role)
		scope := o.GetNamespace()
		if o.GetKind() == "ClusterRole" {
			scope = "cluster"
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, permission(scope, g, res, v))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// saRequests reads what the ServiceAccount did, by the audit log: the
// permissions used, and the requests refused (403).
func saRequests(t *testing.T, f *fixture, sa string) (used map[string]bool, denied []string) {
	t.Helper()
	events, err := testenv.ReadAuditLog(f.env.AuditLogPath())
	require.NoError(t, err)
	used = map[string]bool{}
	for _, e := range events {
		if e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != sa || e.ObjectRef == nil {
			continue
		}
		scope := e.ObjectRef.Namespace
		if scope == "" {
			scope = "cluster"
		}
		p := permission(scope, e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.Verb)
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			denied = append(denied, p+" "+e.RequestURI)
			continue
		}
		used[p] = true
	}
	return used, denied
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
