package fleetsim_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// A simulator for all namespaces, as the demo runs it, on Harvester's
// fleet-local. It needs its own control plane: it would serve the other
// tests' namespaces too.
func TestAllNamespacesFleetLocal(t *testing.T) {
	t.Parallel()
	env, err := testenv.Start(t.Context(), testenv.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	_, err = env.Kube().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-local"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	f := &fixture{t: t, env: env, ns: "fleet-local", charts: t.TempDir(), dyn: env.Dynamic()}
	sim, err := fleetsim.New(fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(f.charts)})
	require.NoError(t, err)
	f.sim = sim
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.NoError(t, sim.WaitForSync(t.Context()))

	f.chart("harvester", "1.0.0", map[string]any{"color": "blue"})
	f.createManagedChart("harvester", "1.0.0", map[string]any{"data": map[string]any{"color": "red"}})
	f.waitReady("harvester", "1.0.0")
	bd := f.localBD("harvester")
	require.Equal(t, "cluster-fleet-local-local-1a3d67d0a899", bd.GetNamespace())
	require.Equal(t, "red", f.configMap("harvester")["color"])
}
