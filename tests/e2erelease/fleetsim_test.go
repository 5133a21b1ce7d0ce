package e2erelease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The Fleet simulator on a control plane whose workloads run judges a
// deployment ready from the live objects (LiveReadiness): a ManagedChart
// upgrade waits for the Deployment's real rollout, and a rollout that
// stalls is what Fleet reports and what the wait names.
func TestFleetSimulatorJudgesRealWorkloads(t *testing.T) {
	for _, tc := range []struct {
		name, hold string
		code       int
	}{{"rolls out", "", 0}, {"stalls", "not-ready", outcome.ExitTimeout}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.hold)
			name := releaseName()
			_, stop, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: f.env.Config(), Loader: fleetsim.DirLoader(f.charts),
				Namespace: f.ns, LiveReadiness: true})
			require.NoError(t, err)
			t.Cleanup(stop)
			_, err = example.InstallAndWait(t.Context(), f.env, example.Install{Namespace: f.ns, Name: name, Version: "1.0.0",
				Values: example.UserValues()}, 90*time.Second)
			require.NoError(t, err)
			r := f.cli(newNode(t, "node-1"), "upgrade", "--target", "managedchart/"+f.ns+"/"+name, "--chart-source", f.charts,
				"--version", "2.0.0", "--policy", f.policy(name), "--timeout", "15s")
			r.RequireCode(t, tc.code)
			d, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(t.Context(), name+"-web", metav1.GetOptions{})
			require.NoError(t, err)
			if tc.code == 0 {
				assert.Equal(t, d.Status.Replicas, d.Status.AvailableReplicas, "ready only once the rollout completed")
				assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
				return
			}
			assert.Contains(t, r.Stderr, "Deployment "+f.ns+"/"+name+"-web", "Fleet's nonReadyStatus names the stalled Deployment")
			// the stall Fleet reported is the Deployment's own: 2.0.0's
			// template (its pods held not ready) was applied and rolled out
			// to new pods, none of which became available, so the old pods
			// still serve
			assert.Equal(t, testenv.HoldNotReady, d.Spec.Template.Annotations[testenv.HoldAnnotation], "2.0.0's template was applied")
			d = deploymentUntil(t, f, name+"-web", func(d *appsv1.Deployment) bool {
				return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas
			})
			assert.Equal(t, d.Status.Replicas-d.Status.UpdatedReplicas, d.Status.AvailableReplicas,
				"only the old ReplicaSet's pods are available: none of 2.0.0's became ready (%+v)", d.Status)
			assert.Greater(t, d.Status.Replicas, d.Status.UpdatedReplicas,
				"the old ReplicaSet was not scaled down: the rollout never completed (%+v)", d.Status)
		})
	}
}

// deploymentUntil reads, then if need be watches, the Deployment name in
// the fixture's namespace until cond holds for it (the controller catching
// up with a spec), and returns it. The limit is a safety net against a
// hang, not an assertion on how long anything takes.
func deploymentUntil(t *testing.T, f *fixture, name string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	d, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	if cond(d) {
		return d
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	lw := cache.NewListWatchFromClient(f.env.Kube().AppsV1().RESTClient(), "deployments", f.ns, fields.OneTermEqualSelector("metadata.name", name))
	ev, err := watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, nil, func(ev watch.Event) (bool, error) {
		d, ok := ev.Object.(*appsv1.Deployment)
		return ok && ev.Type != watch.Deleted && cond(d), nil
	})
	require.NoError(t, err, "waiting for Deployment %s/%s", f.ns, name)
	return ev.Object.(*appsv1.Deployment)
}
