// Package rbaccheck proves the RBAC examples of plans/ against a real API
// server: it creates them, acts as their ServiceAccount by impersonation,
// and reads the API server's audit log for what that ServiceAccount used
// and what it was refused.
package rbaccheck

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

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

func Decode(t *testing.T, text string) []*unstructured.Unstructured {
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

func Create(t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config())
	require.NoError(t, err)
	m := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		res := env.Dynamic().Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(o.GetNamespace()).Create(t.Context(), o, metav1.CreateOptions{})
		} else {
			_, err = res.Create(t.Context(), o, metav1.CreateOptions{})
		}
		require.NoError(t, err, "creating %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// Impersonating writes a kubeconfig acting as ServiceAccount user sa of
// namespace saNS, with the admin's credentials.
func Impersonating(t *testing.T, env *testenv.Env, sa, saNS string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath())
	require.NoError(t, err)
	for _, user := range cfg.AuthInfos {
		user.Impersonate = sa
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-sa")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// waitAgent is the user agent of WaitAuthorized's requests: Requests
// does not count their refusals, which are the wait's (the authorizer's
// cache did not know a new binding yet), not the tool's.
const waitAgent = "rbaccheck-wait-authorized"

// WaitAuthorized returns once try, run with the kubeconfig's clients,
// is no longer forbidden (the authorizer reads RBAC from a cache).
func WaitAuthorized(t *testing.T, kubeconfig string, try func(ctx context.Context, kube kubernetes.Interface) error) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cfg.UserAgent = waitAgent
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := try(ctx, kube)
		return err == nil || apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err)
}

// Permission names one permission: scope (a namespace, or "cluster"),
// group, resource, verb.
func Permission(scope, group, resource, verb string) string {
	return fmt.Sprintf("%s %s/%s %s", scope, group, resource, verb)
}

// Granted lists the permissions of the Roles and ClusterRoles.
func Granted(objs []*unstructured.Unstructured) []string {
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
						out = append(out, Permission(scope, g, res, v))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Requests reads what ServiceAccount user sa did, by the audit log: the
// permissions used, and the requests refused (403), but for
// WaitAuthorized's own refusals.
func Requests(t *testing.T, env *testenv.Env, sa string) (used map[string]bool, denied []string) {
	t.Helper()
	events, err := testenv.ReadAuditLog(env.AuditLogPath())
	require.NoError(t, err)
	used = map[string]bool{}
	for _, e := range events {
		if e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != sa || e.ObjectRef == nil {
			continue
		}
		scope := e.ObjectRef.Namespace
		if scope == "" || (e.ObjectRef.APIGroup == "" && e.ObjectRef.Resource == "namespaces") {
			scope = "cluster" // a Namespace is cluster-scoped, though the audit names it as its own namespace
		}
		p := Permission(scope, e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.Verb)
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			if e.UserAgent != waitAgent {
				denied = append(denied, p+" "+e.RequestURI)
			}
			continue
		}
		used[p] = true
	}
	return used, denied
}

// Keys are the keys of m, sorted.
func Keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
