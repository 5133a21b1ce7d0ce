package fleetsim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// The simulator survives an API server restart in the middle of an upgrade.
// Not parallel: Go runs it before every parallel test of the package starts,
// so the restart of the shared API server disturbs no other test.
func TestAPIServerRestartDuringUpgrade(t *testing.T) {
	f, bundle := deployed(t, fleetsim.Options{})
	f.chart("demo", "3.0.0", map[string]any{"color": "blue"})
	f.upgrade("2.0.0")
	start := time.Now()
	require.NoError(t, f.env.StopAPIServer())
	t.Logf("stopped the API server in %v", time.Since(start))
	require.NoError(t, f.env.StartAPIServer(t.Context()))
	t.Logf("restarted the API server in %v", time.Since(start))
	b2, _ := f.waitReadyAfter("demo", "2.0.0", bundle.GetGeneration())
	t.Logf("ready %v after the restart began", time.Since(start))
	require.Equal(t, "2.0.0", f.configMap("demo")["chartVersion"])

	f.upgrade("3.0.0")
	f.waitReadyAfter("demo", "3.0.0", b2.GetGeneration())
	require.Equal(t, "3.0.0", f.configMap("demo")["chartVersion"])
}
