package fleetsim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// recorder keeps every watch event of one object, in order.
type recorder struct {
	mu     sync.Mutex
	events []*unstructured.Unstructured
}

// record watches object ns/name of gvr from resourceVersion rv until ctx ends.
func (f *fixture) record(ctx context.Context, gvr schema.GroupVersionResource, ns, name, rv string) *recorder {
	f.t.Helper()
	w, err := f.dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
	require.NoError(f.t, err)
	r := &recorder{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				r.mu.Lock()
				r.events = append(r.events, u)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *recorder) all() []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*unstructured.Unstructured(nil), r.events...)
}

// An upgrade without a Helm timeout, event by event, as real Fleet v0.16
// writes it: the Bundle keeps its old status (Ready, observedGeneration one
// behind) for a moment after the spec change; the BundleDeployment gets
// the new deploymentID while it still says ready with the old
// appliedDeploymentID; its ready field is dropped, never false, while not
// ready; it has no observedGeneration; its display lags the rest of its
// status by one write; and the ManagedChart shows its new generation with
// the old Bundle's status copied.
func TestUpgradeTimelineAsFleetWritesIt(t *testing.T) {
	t.Parallel()
	f, bundle := deployed(t, fleetsim.Options{})
	f.sim.SetFault(f.ns, "demo", fleetsim.Fault{Delay: time.Second})
	oldBD := f.localBD("demo")
	oldID := str(oldBD, "status", "appliedDeploymentID")
	mc, err := f.dyn.Resource(fleetsim.ManagedChartsGVR).Namespace(f.ns).Get(t.Context(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bdEvents := f.record(ctx, fleetsim.BundleDeploymentsGVR, oldBD.GetNamespace(), oldBD.GetName(), oldBD.GetResourceVersion())
	bundleEvents := f.record(ctx, fleetsim.BundlesGVR, f.ns, "mcc-demo", bundle.GetResourceVersion())
	mcEvents := f.record(ctx, fleetsim.ManagedChartsGVR, f.ns, "demo", mc.GetResourceVersion())

	f.upgradeNoHelmWait("2.0.0")
	f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	require.Eventually(t, func() bool {
		evs := bdEvents.all()
		return len(evs) > 0 && str(evs[len(evs)-1], "status", "display", "state") == fleetsim.StateReady &&
			str(evs[len(evs)-1], "status", "appliedDeploymentID") != oldID
	}, waitTimeout, 10*time.Millisecond, "the display catches up")

	// the Bundle: its first event of the new generation carries the old status
	var firstNew *unstructured.Unstructured
	for _, b := range bundleEvents.all() {
		if b.GetGeneration() > bundle.GetGeneration() {
			firstNew = b
			break
		}
	}
	require.NotNil(t, firstNew)
	require.Equal(t, bundle.GetGeneration(), num(firstNew, "status", "observedGeneration"), "one behind")
	require.Equal(t, "True", condStatus(firstNew, "Ready"), "the old Ready")

	// the BundleDeployment
	var staleReady, notReady, displayBehind, displayCaughtUp bool
	for _, bd := range bdEvents.all() {
		_, hasObserved, _ := unstructured.NestedFieldNoCopy(bd.Object, "status", "observedGeneration")
		require.False(t, hasObserved, "a BundleDeployment has no observedGeneration")
		ready, hasReady, _ := unstructured.NestedBool(bd.Object, "status", "ready")
		require.True(t, !hasReady || ready, "ready is never written false")
		newID := str(bd, "spec", "deploymentID") != oldID
		applied := newID && str(bd, "status", "appliedDeploymentID") == str(bd, "spec", "deploymentID")
		switch {
		case newID && str(bd, "status", "appliedDeploymentID") == oldID && ready:
			staleReady = true
		case applied && !hasReady:
			notReady = true
		case applied && ready && condStatus(bd, "Ready") == "True" && str(bd, "status", "display", "state") == fleetsim.StateNotReady:
			displayBehind = true
		case applied && ready && str(bd, "status", "display", "state") == fleetsim.StateReady && displayBehind:
			displayCaughtUp = true
		}
	}
	require.True(t, staleReady, "new deploymentID, old appliedDeploymentID, still ready")
	require.True(t, notReady, "applied, ready absent")
	require.True(t, displayBehind, "ready and Ready=True, display still NotReady")
	require.True(t, displayCaughtUp, "then display Ready")

	// the ManagedChart: new generation, the old Bundle status
	var mcStale bool
	for _, m := range mcEvents.all() {
		if m.GetGeneration() > mc.GetGeneration() && num(m, "status", "observedGeneration") == bundle.GetGeneration() &&
			condStatus(m, "Ready") == "True" {
			mcStale = true
			break
		}
	}
	require.True(t, mcStale, "the ManagedChart's new generation with the old Bundle's Ready status")
}
