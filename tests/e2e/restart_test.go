package e2e

import (
	"context"
	"testing"
	"time"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// TestAPIServerRestartDuringWait stops the shared API server: it must not
// run in parallel with other tests.
func TestAPIServerRestartDuringWait(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: 6 * time.Second})

	done := make(chan result, 1)
	go func() { done <- f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...) }()

	// the apply is done once the target carries our record
	f.awaitObserved(name, "the apply", func(mc *managedchart.ManagedChart, _ *managedchart.Bundle) bool {
		return mc.Annotations[managedchart.AnnotationVersion] == "2.0.0"
	})
	applied := time.Now()
	select {
	case r := <-done:
		t.Fatalf("the upgrade finished before the API server restart (exit %d): raise the Delay", r.Code)
	default:
	}

	down := true
	t.Cleanup(func() { // never leave the shared control plane down
		if down {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_ = f.env.StartAPIServer(ctx)
		}
	})
	require.NoError(t, f.env.StopAPIServer())
	time.Sleep(2 * time.Second) // the outage itself, not a wait for a condition
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, f.env.StartAPIServer(ctx))
	down = false
	restarted := time.Now()

	var r result
	select {
	case r = <-done:
		t.Logf("upgrade returned %s after the restart", time.Since(restarted).Round(time.Millisecond))
	case <-time.After(90 * time.Second):
		t.Fatal("the upgrade did not finish within 90s of the API server restart")
	}
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	assert.Contains(t, r.Stdout, "upgraded "+f.targetRef(name)+" 1.0.0 → 2.0.0")
	assert.Contains(t, r.Stderr, `"msg":"phase done","target":"`+f.targetRef(name)+`","phase":"wait"`)
	mc := f.get(name)
	assertAppliedRecord(t, mc, "2.0.0")
	assert.Len(t, f.backups(name), 1)
	assert.Equal(t, "registry.example.com/demo/app:v2.0.0", f.configMap(name + "-config")["image"])
	assert.False(t, f.leaseHeld(name), "the lease is released")
	rt := f.sim.ReadyTimes(f.ns, name)
	assert.True(t, rt.Bundle.After(applied), "the ready write is of the new deployment")
	t.Logf("API server back %s after the apply; Fleet ready %s after the apply; upgrade done %s after the restart",
		restarted.Sub(applied).Round(time.Millisecond), rt.Bundle.Sub(applied).Round(time.Millisecond),
		time.Since(restarted).Round(time.Millisecond))
}
