package e2erelease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
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
			require.Equal(t, tc.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			d, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(t.Context(), name+"-web", metav1.GetOptions{})
			require.NoError(t, err)
			if tc.code == 0 {
				assert.Equal(t, d.Status.Replicas, d.Status.AvailableReplicas, "ready only once the rollout completed")
				assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
				return
			}
			assert.Contains(t, r.stderr, "Deployment "+f.ns+"/"+name+"-web", "Fleet's nonReadyStatus names the stalled Deployment")
			assert.Less(t, d.Status.UpdatedReplicas+0, d.Status.Replicas+1)
		})
	}
}
