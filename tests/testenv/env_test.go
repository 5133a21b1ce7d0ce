package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

func managedChart(ns, name string, values map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "management.cattle.io/v3",
		"kind":       "ManagedChart",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"chart": name, "version": "1.0.0", "repoName": "repo", "defaultNamespace": ns,
			"values": values, "timeoutSeconds": int64(600),
		},
	}}
}

// The CRDs are installed, and the API server bumps metadata.generation on
// real spec changes only: the behaviour the wait logic relies on.
func TestManagedChartGeneration(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	mcs := env.Dynamic().Resource(testenv.ManagedChartsGVR).Namespace(ns)

	mc, err := mcs.Create(ctx, managedChart(ns, "demo", map[string]any{"a": map[string]any{"b": "c"}}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, mc.GetGeneration())

	same, err := mcs.Update(ctx, mc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, same.GetGeneration(), "a no-op update must not bump the generation")
	require.Equal(t, mc.GetResourceVersion(), same.GetResourceVersion())

	require.NoError(t, unstructured.SetNestedField(same.Object, int64(601), "spec", "timeoutSeconds"))
	bumped, err := mcs.Update(ctx, same, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 2, bumped.GetGeneration())

	require.NoError(t, unstructured.SetNestedField(bumped.Object, map[string]any{"observedGeneration": int64(7)}, "status"))
	st, err := mcs.UpdateStatus(ctx, bumped, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 2, st.GetGeneration(), "a status write must not bump the generation")
	og, _, _ := unstructured.NestedInt64(st.Object, "status", "observedGeneration")
	require.EqualValues(t, 7, og)

	_, err = env.Dynamic().Resource(testenv.BundlesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = env.Dynamic().Resource(testenv.BundleDeploymentsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = env.Dynamic().Resource(testenv.PlansGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
}

func TestKubeconfigFile(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath())
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	got, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, ns, got.Name)
}

func TestNamespacesAreUnique(t *testing.T) {
	env := testenv.ForTest(t)
	a, b := env.Namespace(t), env.Namespace(t)
	require.NotEqual(t, a, b)
	require.Regexp(t, `^testnamespacesareunique-[a-z0-9]+$`, a)
}

// A dedicated environment: restarting its API server must not disturb the
// tests sharing the package's one.
func TestAPIServerRestartAndAuditLog(t *testing.T) {
	ctx := t.Context()
	env, err := testenv.Start(ctx, testenv.Options{AuditLog: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	require.FileExists(t, env.AuditLogPath())

	ns, err := env.CreateNamespace(ctx, "restart")
	require.NoError(t, err)
	cms := env.Kube().CoreV1().ConfigMaps(ns)

	// An informer started before the restart must see objects created after it.
	seen := make(chan string, 16)
	lw := cache.NewListWatchFromClient(env.Kube().CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			seen <- obj.(*corev1.ConfigMap).Name
		}},
	})
	go informer.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))

	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, seen, "before")

	host := env.Host()
	require.NoError(t, env.StopAPIServer())
	_, err = cms.Get(ctx, "before", metav1.GetOptions{})
	require.Error(t, err, "the API server is stopped")
	require.NoError(t, env.StartAPIServer(ctx))
	require.Equal(t, host, env.Host())

	got, err := cms.Get(ctx, "before", metav1.GetOptions{})
	require.NoError(t, err, "etcd keeps the data and the old client reconnects")
	require.Equal(t, "before", got.Name)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, seen, "after")

	events, err := testenv.ReadAuditLog(env.AuditLogPath())
	require.NoError(t, err)
	creates := 0
	for _, ev := range events {
		if ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Namespace == ns {
			creates++
		}
	}
	require.Equal(t, 2, creates, "one audit event per request, across the restart")
}

func waitFor(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("waiting for %q: %v", want, ctx.Err())
		}
	}
}
