//go:build testseams

// The tests of this file run against a real kube-apiserver + etcd
// (tests/testenv): scripts/test runs them (-tags testseams, with
// KUBEBUILDER_ASSETS).

package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/logbuf"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

func getLease(t *testing.T, env *testenv.Env, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := env.Kube().CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

func TestLeaseIsCreatedHeldAndRefused(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	a := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "chart-upgrader-web", Identity: "node-a",
		Duration: 30 * time.Second, Annotations: map[string]string{"chart-upgrader.io/node": "a"}}
	b := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "chart-upgrader-web", Identity: "node-b",
		Duration: 30 * time.Second, Annotations: map[string]string{"chart-upgrader.io/node": "b"}}

	held, holder, err := a.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, "node-a", holder)
	l := getLease(t, env, ns, "chart-upgrader-web")
	require.NotNil(t, l.Spec.HolderIdentity)
	assert.Equal(t, "node-a", *l.Spec.HolderIdentity)
	require.NotNil(t, l.Spec.LeaseDurationSeconds)
	assert.Equal(t, int32(30), *l.Spec.LeaseDurationSeconds)
	assert.Equal(t, map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader"}, l.Labels)
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "a"}, l.Annotations)
	require.NotNil(t, l.Spec.AcquireTime)
	require.NotNil(t, l.Spec.RenewTime)
	assert.Nil(t, l.Spec.LeaseTransitions)

	// another process is refused, told who holds it, and writes nothing
	held, holder, err = b.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.False(t, held)
	assert.Equal(t, "node-a", holder)
	assert.Equal(t, l.ResourceVersion, getLease(t, env, ns, "chart-upgrader-web").ResourceVersion)

	// the holder renews: same acquire time, no transition, its annotations
	held, holder, err = a.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, "node-a", holder)
	renewed := getLease(t, env, ns, "chart-upgrader-web")
	assert.NotEqual(t, l.ResourceVersion, renewed.ResourceVersion, "renewing writes")
	assert.True(t, renewed.Spec.AcquireTime.Equal(l.Spec.AcquireTime))
	assert.False(t, renewed.Spec.RenewTime.Before(l.Spec.RenewTime))
	assert.Nil(t, renewed.Spec.LeaseTransitions)
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "a"}, renewed.Annotations)
}

func TestLeaseTakesOverAnExpiredHolder(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	holder, secs, transitions := "node-old", int32(30), int32(2)
	_, err := env.Kube().CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l", Annotations: map[string]string{"chart-upgrader.io/node": "old", "keep": "me"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &old, RenewTime: &old,
			LeaseTransitions: &transitions},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	b := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "l", Identity: "node-b", Duration: 45 * time.Second,
		Annotations: map[string]string{"chart-upgrader.io/node": "b", "chart-upgrader.io/pod": "upgrade-b"}}
	held, who, err := b.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, "node-b", who)

	l := getLease(t, env, ns, "l")
	assert.Equal(t, "node-b", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(45), *l.Spec.LeaseDurationSeconds)
	assert.Equal(t, int32(3), *l.Spec.LeaseTransitions)
	assert.True(t, l.Spec.AcquireTime.After(old.Time))
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "b", "chart-upgrader.io/pod": "upgrade-b", "keep": "me"}, l.Annotations,
		"ours written over the old holder's, others kept")
}

func TestLeaseRelease(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	a := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "l", Identity: "node-a", Duration: time.Hour}
	b := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "l", Identity: "node-b", Duration: time.Hour}

	// nothing to release
	require.NoError(t, a.Release(t.Context()))
	leases, err := env.Kube().CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, leases.Items, "releasing creates nothing")

	held, _, err := a.TryAcquire(t.Context())
	require.NoError(t, err)
	require.True(t, held)

	// not ours: left alone
	require.NoError(t, b.Release(t.Context()))
	assert.Equal(t, "node-a", *getLease(t, env, ns, "l").Spec.HolderIdentity)
	held, holder, err := b.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.False(t, held, "an hour-long lease of another holder")
	assert.Equal(t, "node-a", holder)

	// ours: given up, so the other need not wait the hour
	require.NoError(t, a.Release(t.Context()))
	assert.Equal(t, "", *getLease(t, env, ns, "l").Spec.HolderIdentity)
	held, holder, err = b.TryAcquire(t.Context())
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, "node-b", holder)
	assert.Equal(t, int32(1), *getLease(t, env, ns, "l").Spec.LeaseTransitions)
}

// within bounds a wait: running out is a failure of the test, never a
// measurement.
func within(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestLeaseHoldRenewsAndNoticesATakeover(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	leases := env.Kube().CoordinationV1().Leases(ns)
	a := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "l", Identity: "node-a", Duration: 3 * time.Second}
	held, _, err := a.TryAcquire(t.Context())
	require.NoError(t, err)
	require.True(t, held)
	first := getLease(t, env, ns, "l")

	stop, lost := a.Hold(t.Context())
	defer stop()

	// it renews by itself: watch for a write that moves RenewTime
	ctx := within(t)
	w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l", ResourceVersion: first.ResourceVersion})
	require.NoError(t, err)
	for renewed := false; !renewed; {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch ended: %v", ctx.Err())
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease {
				renewed = l.Spec.RenewTime.After(first.Spec.RenewTime.Time) && *l.Spec.HolderIdentity == "node-a"
			}
		case <-lost:
			t.Fatal("lost a lease nobody else wanted")
		}
	}
	w.Stop()

	// another process takes it (as if it had expired)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(t.Context(), "l", metav1.GetOptions{})
		if err != nil {
			return err
		}
		other, now, secs := "node-b", metav1.NewMicroTime(time.Now()), int32(3600)
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &other, &now, &secs
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		return err
	}))
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("Hold did not notice that node-b took the lease")
	}
	stop()
	assert.Equal(t, "node-b", *getLease(t, env, ns, "l").Spec.HolderIdentity, "Hold does not take it back")
}

func TestLeaseHoldStopsWithoutLosing(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	a := &cluster.Lease{Client: env.Kube(), Namespace: ns, Name: "l", Identity: "node-a", Duration: 3 * time.Second}
	held, _, err := a.TryAcquire(t.Context())
	require.NoError(t, err)
	require.True(t, held)
	stop, lost := a.Hold(t.Context())
	stop() // returns once the renewing goroutine ended
	select {
	case <-lost:
		t.Fatal("a stopped Hold reported a loss")
	default:
	}
	assert.Equal(t, "node-a", *getLease(t, env, ns, "l").Spec.HolderIdentity)
}

func TestNotReadyNodes(t *testing.T) {
	env := testenv.ForTest(t)
	clients, err := cluster.NewClients(env.Config(), nil)
	require.NoError(t, err)
	c := &cluster.Cluster{Clients: clients}
	none, err := c.NotReadyNodes(t.Context())
	require.NoError(t, err)
	require.Empty(t, none, "this control plane has no nodes of its own")

	cond := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: s}}
	}
	for name, conds := range map[string][]corev1.NodeCondition{
		"ready":         cond(corev1.ConditionTrue),
		"not-ready":     cond(corev1.ConditionFalse),
		"unknown":       cond(corev1.ConditionUnknown),
		"no-conditions": nil,
		"pressure-only": {{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue}},
		"ready-as-well": cond(corev1.ConditionTrue),
	} {
		_, err := env.Kube().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: conds}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = env.Kube().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	got, err := c.NotReadyNodes(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"not-ready", "unknown", "no-conditions", "pressure-only"}, got)
}

func TestLiveReadsWhatExistsAndLeavesOutTheRest(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	var logs logbuf.Buffer
	clients, err := cluster.NewClients(env.Config(), slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err)
	c := &cluster.Cluster{Clients: clients}
	_, err = env.Kube().CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"clusterName": "prod-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	settings := values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"}
	missing := values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "missing"}
	namespace := values.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns}
	widget := values.ObjectRef{APIVersion: "example.com/v1", Kind: "Widget", Namespace: ns, Name: "w"}
	live, err := c.Live(t.Context(), []values.ObjectRef{settings, missing, namespace, widget, settings})
	require.NoError(t, err)

	assert.Len(t, live, 2, "the missing object and the kind not served are left out")
	cm, ok := live.Get(settings)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"clusterName": "prod-1"}, cm["data"])
	nsObj, ok := live.Get(namespace)
	require.True(t, ok, "a cluster-scoped object is read without a namespace")
	assert.Equal(t, "Active", nsObj["status"].(map[string]any)["phase"])
	_, ok = live.Get(missing)
	assert.False(t, ok)

	assert.Equal(t, []map[string]any{{"level": "WARN", "msg": "live source kind is not served by the cluster",
		"source": widget.String()}}, logs.Records(t))

	// an apiVersion that does not parse is an error naming the source
	bad := values.ObjectRef{APIVersion: "a/b/c", Kind: "ConfigMap", Namespace: ns, Name: "x"}
	_, err = c.Live(t.Context(), []values.ObjectRef{settings, bad})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "live source "+bad.String()+": "), err.Error())
}

var crdSeq atomic.Int64

// createCRD creates a namespaced CRD of a new group and waits until the
// API server's discovery serves it.
func createCRD(t *testing.T, env *testenv.Env) schema.GroupVersionKind {
	t.Helper()
	group := fmt.Sprintf("g%d.getter.example.com", crdSeq.Add(1))
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
	}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err := env.Dynamic().Resource(crds).Create(t.Context(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Dynamic().Resource(crds).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config())
	require.NoError(t, err)
	ctx := within(t)
	for {
		if _, err := dc.ServerResourcesForGroupVersion(group + "/v1"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s never served", crd.GetName())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Gizmo"}
}

func TestHelmGetterResetForgetsWhatDiscoveryLearnt(t *testing.T) {
	env := testenv.ForTest(t)
	g := cluster.NewHelmGetter(env.Config())
	mapper, err := g.For("default").ToRESTMapper()
	require.NoError(t, err)
	_, err = mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	require.NoError(t, err, "discovery is read and cached")

	gvk := createCRD(t, env)
	_, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.Error(t, err, "the cached discovery predates the CRD")
	assert.True(t, meta.IsNoMatchError(err), "%v", err)

	// the getter of another namespace shares the cache: a Reset from
	// either serves both
	g.Reset()
	other, err := g.For("kube-system").ToRESTMapper()
	require.NoError(t, err)
	m, err := other.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err)
	assert.Equal(t, schema.GroupVersionResource{Group: gvk.Group, Version: "v1", Resource: "gizmos"}, m.Resource)
	assert.Equal(t, meta.RESTScopeNameNamespace, m.Scope.Name())
	_, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	assert.NoError(t, err)
}

// An Event is sent while the run goes on; Flush returns once it is in the
// cluster, also when the run's context ended first.
func TestEventsAreSentByFlush(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	clients, err := cluster.NewClients(env.Config(), nil)
	require.NoError(t, err)
	c := &cluster.Cluster{Clients: clients, Kinds: targets.Kinds()}
	ctx, cancel := context.WithCancel(t.Context())
	for _, reason := range []string{"PhaseWait", "PhaseVerify"} {
		c.Event(ctx, upgrade.Event{Target: upgrade.Ref{Kind: "managedchart", Namespace: ns, Name: "app"}, Reason: reason,
			Action: "wait", Message: reason + " done", Node: "node-a", Reporting: "node-a-1"})
	}
	cancel()
	c.Flush()
	events, err := env.Kube().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
		assert.Equal(t, "ManagedChart", e.InvolvedObject.Kind)
		assert.Equal(t, "app", e.InvolvedObject.Name)
	}
	assert.ElementsMatch(t, []string{"PhaseWait", "PhaseVerify"}, reasons)
}
