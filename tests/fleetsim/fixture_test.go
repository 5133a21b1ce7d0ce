package fleetsim_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 60 * time.Second

// fixture is one test's namespace, chart directory and simulator.
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	charts string
	sim    *fleetsim.Sim
	dyn    dynamic.Interface
}

// newFixture starts a simulator for a fresh namespace of the shared
// control plane; it stops with the test.
func newFixture(t *testing.T, opts fleetsim.Options) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	f := &fixture{t: t, env: env, ns: env.Namespace(t), charts: t.TempDir(), dyn: env.Dynamic()}
	opts.Config = env.Config()
	opts.Loader = fleetsim.DirLoader(f.charts)
	opts.Namespace = f.ns
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sim, err := fleetsim.New(opts)
	require.NoError(t, err)
	f.sim = sim
	done := make(chan error, 1)
	go func() { done <- sim.Run(t.Context()) }()
	t.Cleanup(func() { require.NoError(t, <-done) })
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	require.NoError(t, sim.WaitForSync(ctx))
	return f
}

// chart writes chart demo at version with the ConfigMap template.
func (f *fixture) chart(name, version string, defaults map[string]any) {
	f.t.Helper()
	_, err := testchart.Write(f.charts, testchart.ConfigMapChart(name, version, defaults))
	require.NoError(f.t, err)
}

func (f *fixture) createManagedChart(name, version string, values map[string]any) *unstructured.Unstructured {
	f.t.Helper()
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "management.cattle.io/v3",
		"kind":       "ManagedChart",
		"metadata":   map[string]any{"namespace": f.ns, "name": name},
		"spec": map[string]any{
			"chart": name, "releaseName": name, "version": version, "repoName": "harvester-charts",
			"defaultNamespace": f.ns, "timeoutSeconds": int64(600),
			"values":  values,
			"targets": []any{map[string]any{"clusterName": "local"}},
		},
	}}
	got, err := f.dyn.Resource(fleetsim.ManagedChartsGVR).Namespace(f.ns).Create(f.t.Context(), mc, metav1.CreateOptions{})
	require.NoError(f.t, err)
	return got
}

// updateManagedChart applies edit to the ManagedChart spec, retrying on
// conflicts, and returns the result.
func (f *fixture) updateManagedChart(name string, edit func(spec map[string]any)) *unstructured.Unstructured {
	f.t.Helper()
	mcs := f.dyn.Resource(fleetsim.ManagedChartsGVR).Namespace(f.ns)
	for {
		mc, err := mcs.Get(f.t.Context(), name, metav1.GetOptions{})
		require.NoError(f.t, err)
		spec := mc.Object["spec"].(map[string]any)
		edit(spec)
		got, err := mcs.Update(f.t.Context(), mc, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		require.NoError(f.t, err)
		return got
	}
}

// waitFor watches one object until cond holds and returns it.
func (f *fixture) waitFor(gvr schema.GroupVersionResource, ns, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), waitTimeout)
	defer cancel()
	res := f.dyn.Resource(gvr).Namespace(ns)
	sel := "metadata.name=" + name
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return res.Watch(ctx, o)
		},
	}
	var last *unstructured.Unstructured
	ev, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		last = u
		return cond(u), nil
	})
	if err != nil {
		f.t.Fatalf("waiting for %s (%s %s/%s): %v\nlast seen: %s", what, gvr.Resource, ns, name, err, dump(last))
	}
	return ev.Object.(*unstructured.Unstructured)
}

// waitReady waits until ManagedChart name is deployed at version and
// reported ready for the Bundle's current generation, and returns the
// Bundle and the ManagedChart.
func (f *fixture) waitReady(name, version string) (bundle, mc *unstructured.Unstructured) {
	f.t.Helper()
	return f.waitReadyAfter(name, version, 0)
}

// waitReadyAfter is waitReady for a Bundle generation above prevGeneration:
// status from before a change never counts.
func (f *fixture) waitReadyAfter(name, version string, prevGeneration int64) (bundle, mc *unstructured.Unstructured) {
	f.t.Helper()
	bundle = f.waitFor(fleetsim.BundlesGVR, f.ns, fleetsim.BundleName(name), "bundle ready at "+version, func(b *unstructured.Unstructured) bool {
		return b.GetGeneration() > prevGeneration && str(b, "spec", "helm", "version") == version && bundleReady(b)
	})
	mc = f.waitFor(fleetsim.ManagedChartsGVR, f.ns, name, "ManagedChart status copied", func(m *unstructured.Unstructured) bool {
		return num(m, "status", "observedGeneration") == bundle.GetGeneration() && condStatus(m, "Ready") == "True" && condStatus(m, "Defined") == "True"
	})
	return bundle, mc
}

// bundleReady is the readiness rule of docs/design.md §4.2 for a Bundle.
func bundleReady(b *unstructured.Unstructured) bool {
	desired := num(b, "status", "summary", "desiredReady")
	return num(b, "status", "observedGeneration") == b.GetGeneration() &&
		desired > 0 && num(b, "status", "summary", "ready") == desired &&
		num(b, "status", "unavailable") == 0 && condStatus(b, "Ready") == "True"
}

// localBD returns the local cluster's BundleDeployment of ManagedChart name.
func (f *fixture) localBD(name string) *unstructured.Unstructured {
	f.t.Helper()
	bd, err := f.dyn.Resource(fleetsim.BundleDeploymentsGVR).Namespace(fleetsim.ClusterNamespace(f.ns)).
		Get(f.t.Context(), fleetsim.BundleDeploymentName(fleetsim.BundleName(name), fleetsim.LocalCluster), metav1.GetOptions{})
	require.NoError(f.t, err)
	return bd
}

// configMap returns the data of the ConfigMap the demo chart renders.
func (f *fixture) configMap(release string) map[string]string {
	f.t.Helper()
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(f.t.Context(), release+"-config", metav1.GetOptions{})
	require.NoError(f.t, err)
	return cm.Data
}

func str(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

func num(u *unstructured.Unstructured, path ...string) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, path...)
	return n
}

func condStatus(u *unstructured.Unstructured, typ string) string {
	return cond(u, typ)["status"]
}

func cond(u *unstructured.Unstructured, typ string) map[string]string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			out := map[string]string{}
			for k, v := range m {
				out[k], _ = v.(string)
			}
			return out
		}
	}
	return map[string]string{}
}

func dump(u *unstructured.Unstructured) string {
	if u == nil {
		return "nothing"
	}
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	b, _ := json.MarshalIndent(c.Object, "", "  ")
	return string(b)
}

// waitGone waits until an object does not exist.
func (f *fixture) waitGone(gvr schema.GroupVersionResource, ns, name string) {
	f.t.Helper()
	f.waitUntil("deletion of "+gvr.Resource+" "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		_, err := f.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, f.dyn.Resource(gvr).Namespace(ns), name)
}

func (f *fixture) waitGoneConfigMap(name string) {
	f.t.Helper()
	f.waitUntil("deletion of ConfigMap "+name, func(ctx context.Context) (bool, error) {
		_, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, f.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(f.ns), name)
}

// waitUntil re-checks done on every watch event of object name in res.
func (f *fixture) waitUntil(what string, done func(context.Context) (bool, error), res dynamic.ResourceInterface, name string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), waitTimeout)
	defer cancel()
	for {
		w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		require.NoError(f.t, err, "watching for %s", what)
		ok, err := done(ctx) // after the watch starts: no event can be missed
		if err != nil || ok {
			w.Stop()
			require.NoError(f.t, err, "checking %s", what)
			return
		}
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			w.Stop()
			f.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		w.Stop()
	}
}

// revision is one Helm release record, as `helm history` shows it.
type revision struct {
	Number      int
	Status      string
	Chart       string // chart version
	Description string
}

// helmHistory reads the Helm release records of release in the test's
// namespace (Secrets, Helm's default storage), oldest first.
func (f *fixture) helmHistory(name string) []revision {
	f.t.Helper()
	rels, err := driver.NewSecrets(f.env.Kube().CoreV1().Secrets(f.ns)).Query(map[string]string{"name": name, "owner": "helm"})
	require.NoError(f.t, err)
	out := make([]revision, 0, len(rels))
	for _, res := range rels {
		r := res.(*release.Release)
		out = append(out, revision{Number: r.Version, Status: r.Info.Status.String(), Chart: r.Chart.Metadata.Version, Description: r.Info.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// lastRevision is the newest Helm release record of release.
func (f *fixture) lastRevision(release string) revision {
	f.t.Helper()
	h := f.helmHistory(release)
	require.NotEmpty(f.t, h, "release %s has no history", release)
	return h[len(h)-1]
}

// editConfigMap sets data key of ConfigMap name in the test's namespace,
// as an operator would.
func (f *fixture) editConfigMap(name, key, value string) {
	f.t.Helper()
	patch, err := json.Marshal(map[string]any{"data": map[string]any{key: value}})
	require.NoError(f.t, err)
	_, err = f.env.Kube().CoreV1().ConfigMaps(f.ns).Patch(f.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(f.t, err)
}
