package gates_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/gates"
	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/operator"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// release is a target whose release is in one namespace.
type release string

func (r release) HelmRelease(context.Context, *upgrade.Observed) (string, string, string, error) {
	return string(r), "rel", "secret", nil
}

// world is the operator's CRDs on the API server and a port of gates on
// them in a new namespace.
func world(tb testing.TB, gs ...health.Gate) (*testenv.Env, string, *gates.Port) {
	env := testenv.ForTest(tb)
	ns := env.Namespace(tb)
	ctx := context.Background()
	defs, err := manifest.Objects(operator.CRDs)
	require.NoError(tb, err)
	for _, crd := range defs {
		if _, err := env.Dynamic().Resource(crds.GVR).Create(ctx, crd, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			require.NoError(tb, err)
		}
	}
	require.Eventually(tb, func() bool {
		_, err := env.Dynamic().Resource(operator.PartGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	return env, ns, &gates.Port{Dynamic: env.Dynamic(), Mapper: mapper, Gates: gs, Target: release(ns),
		Releases: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(), RESTMapper: mapper},
		Access:   &liveobjects.SelfAccess{Kube: env.Kube()}}
}

func partGate(tb testing.TB, ns string) health.Gate {
	cur, err := health.Compile("status.state == 'running' && spec.version == version")
	require.NoError(tb, err)
	sel, err := health.ParseSelector(operator.PartLabel + "=true")
	require.NoError(tb, err)
	return health.Gate{APIVersion: "gates.example.com/v1", Kind: "WidgetPart", Namespace: ns, Selector: sel, MinCount: 1, Current: cur, At: "spec.yaml:9: charts[1].wait.health[1]"}
}

func part(ns, name, version, state string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gates.example.com/v1", "kind": "WidgetPart",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{operator.PartLabel: "true"}},
		"spec":     map[string]any{"version": version}, "status": map[string]any{"state": state}}}
}

// A gate's kind: served, or defined by a CRD the upgrade applies; a
// namespace on a cluster-scoped kind is bad input, as is a kind neither
// serves.
func TestCheck(t *testing.T) {
	cur, err := health.Compile("true")
	require.NoError(t, err)
	_, ns, p := world(t)
	o := &upgrade.Observed{}
	p.Gates = []health.Gate{partGate(t, ns)}
	require.NoError(t, p.Check(t.Context(), o, upgrade.Change{}))

	p.Gates = []health.Gate{{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Namespace: ns, Current: cur, At: "spec.yaml:3: g"}}
	err = p.Check(t.Context(), o, upgrade.Change{})
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "spec.yaml:3: g: StorageClass is cluster-scoped: a gate on it takes no namespace")

	sprocket := health.Gate{APIVersion: "sprockets.example.com/v1", Kind: "Sprocket", Namespace: ns, Current: cur, At: "spec.yaml:4: g"}
	p.Gates = []health.Gate{sprocket}
	err = p.Check(t.Context(), o, upgrade.Change{})
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "spec.yaml:4: g: the cluster does not serve Sprocket sprockets.example.com/v1, and no CRD this upgrade applies defines it")
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "sprockets.sprockets.example.com"},
		"spec": map[string]any{"group": "sprockets.example.com", "scope": "Namespaced", "names": map[string]any{"plural": "sprockets", "kind": "Sprocket"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}}}}
	require.NoError(t, p.Check(t.Context(), o, upgrade.Change{CRDs: []map[string]any{crd}}), "a CRD the upgrade applies defines it")
}

// A gate's each that selects no object is bad input at preflight, naming
// the gate, the kind, the namespace and the selector: a mistyped
// namespace, or none (the release's), would leave the gate no group and
// nothing to wait for. A group on the cluster, or one the chart renders
// there (the apply creates it), is a selection.
func TestCheckRefusesAnEachThatSelectsNothing(t *testing.T) {
	env, ns, p := world(t)
	o := &upgrade.Observed{}
	key, err := health.CompileString("metadata.labels['example.com/node']")
	require.NoError(t, err)
	sel, err := health.ParseSelector("example.com/group=node")
	require.NoError(t, err)
	withEach := func(namespace string) health.Gate {
		g := partGate(t, ns)
		g.Each = &health.Each{APIVersion: "gates.example.com/v1", Kind: "WidgetPart", Namespace: namespace, Selector: sel, Key: key}
		return g
	}
	chart := func(manifest string) upgrade.Change {
		return upgrade.Change{Chart: &upgrade.Chart{Manifest: func(map[string]any, string, string) (string, error) { return manifest, nil }}}
	}

	p.Gates = []health.Gate{withEach(ns + "-typo")}
	err = p.Check(t.Context(), o, chart(""))
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.EqualError(t, err, "spec.yaml:9: charts[1].wait.health[1]: each selects no object: no WidgetPart gates.example.com/v1 in namespace "+ns+
		"-typo with labels example.com/group=node exists, and the chart renders none: the gate would have no group to wait for")

	p.Gates = []health.Gate{withEach("")}
	err = p.Check(t.Context(), o, chart(""))
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "no WidgetPart gates.example.com/v1 in namespace "+ns+" (the release's: each names no namespace) with labels example.com/group=node exists")

	// the chart renders one, elsewhere or not selected: still none
	const node = "apiVersion: gates.example.com/v1\nkind: WidgetPart\nmetadata:\n  name: node-1\n"
	err = p.Check(t.Context(), o, chart(node+"  namespace: elsewhere\n  labels: {example.com/group: node}\n"))
	assert.ErrorIs(t, err, outcome.ErrBadInput, "rendered in another namespace")
	err = p.Check(t.Context(), o, chart(node+"  labels: {example.com/group: other}\n"))
	assert.ErrorIs(t, err, outcome.ErrBadInput, "rendered without the label")
	require.NoError(t, p.Check(t.Context(), o, chart(node+"  labels: {example.com/group: node}\n")),
		"the chart renders one in the release's namespace: the apply creates it")

	// on the cluster: selected
	u := part(ns, "node-1", "1", "")
	u.SetLabels(map[string]string{"example.com/group": "node"})
	_, err = env.Dynamic().Resource(operator.PartGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Gates = []health.Gate{withEach(ns)}
	require.NoError(t, p.Check(t.Context(), o, chart("")))
	require.NoError(t, p.Check(t.Context(), o, upgrade.Change{}), "no chart needed when the cluster has one")
}

// BenchmarkGateExit measures the gate's own overhead: from an operator's
// write that makes a gate current to the watch judging it so (the
// informer's event, the signal, the judgement), which is what the wait's
// exit follows. The figure is in docs/performance.md.
func BenchmarkGateExit(b *testing.B) {
	env, ns, p := world(b)
	g := partGate(b, ns)
	p.Gates = []health.Gate{g}
	ctx := b.Context()
	ri := env.Dynamic().Resource(operator.PartGVR).Namespace(ns)
	u, err := ri.Create(ctx, part(ns, "p", "1", "starting"), metav1.CreateOptions{})
	require.NoError(b, err)
	w, err := p.Watch(ctx, &upgrade.Observed{})
	require.NoError(b, err)
	want := upgrade.Want{Version: "1"}
	judge := func() health.State {
		return health.Judge(g, w.Seen(nil, want)[0], health.Vars{Version: want.Version}).State
	}
	waitFor := func(s health.State) {
		for judge() != s {
			select {
			case <-w.Changed():
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
	}
	var total time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		state := "running"
		if i%2 == 1 {
			state = "starting"
		}
		u.Object["status"] = map[string]any{"state": state}
		if u, err = ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		if state == "running" {
			waitFor(health.Current)
			total += time.Since(written)
			n++
		} else {
			waitFor(health.InProgress)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(max(1, n)), "ms/write-to-current")
}
