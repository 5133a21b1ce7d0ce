package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// assertAppliedRecord checks the annotations record an apply of version
// with the values the target holds.
func assertAppliedRecord(t *testing.T, mc *managedchart.ManagedChart, version string) {
	t.Helper()
	assert.Equal(t, version, mc.Version)
	assert.Equal(t, version, mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash], "the annotated hash is the hash of the values")
	assert.NotEmpty(t, mc.Annotations[managedchart.AnnotationAppliedAt])
}

func TestWaitTimeoutSaysWhatWasAwaited(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// without a Helm timeout: the agent reports the deployment applied and
	// NotReady, naming the resource (with one, Fleet says WaitApplied
	// until Helm's own wait ends)
	f.patchManagedChart(t.Context(), name, `{"spec":{"timeoutSeconds":null}}`)
	f.awaitObserved(name, "ready without a Helm timeout", func(mc *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.HelmTimeoutSeconds == 0 && b.Status.Summary.Ready == 1
	})
	opts := f.upgradeOpts(name, "2.0.0", f.policy(name))
	opts.Timeout = 3 * time.Second
	// preflight saw it Ready; from the apply on, nothing becomes ready
	logs, _, err := f.upgradeCounting(f.node, opts, func(_ context.Context, attempt int) {
		if attempt == 1 {
			f.sim.SetFault(f.ns, name, fleetsim.Fault{NeverReady: true})
		}
	})
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitTimeout, outcome.Code(err), "error: %v", err)
	t.Logf("timed out: %v", err)
	msg := err.Error()
	assert.Contains(t, msg, "not ready after 3s waiting for version 2.0.0")
	assert.Contains(t, msg, "clusters are not ready", "what was awaited")
	assert.Contains(t, msg, "not ready yet", "the non-ready resource, from Fleet")
	assert.Contains(t, logs, `"msg":"waiting"`, "progress while waiting")
	assert.Contains(t, logs, `"progress":"ready 0/1`)
	term, rerr := os.ReadFile(f.node.TermLog)
	require.NoError(t, rerr)
	assert.True(t, strings.HasPrefix(string(term), "exit 4: "), string(term))
	// it did apply: the annotations say what it waited for
	assertAppliedRecord(t, f.get(name), "2.0.0")
}

func TestWaitStaleStatusNeverCountsAsReady(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// Fleet stops reporting: the Bundle keeps saying Ready for the old
	// generation, and nothing is deployed
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Stale: true})
	args := f.upgradeArgs(name, "2.0.0", f.policy(name))
	r := f.cli(f.node, "upgrade", append(args, "--timeout", "3s")...)
	require.Equal(t, outcome.ExitTimeout, r.Code, "stale status counted as ready; stdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	assert.NotContains(t, r.Stdout, "upgraded managedchart/")
	assert.Contains(t, r.Stderr, "not ready after 3s")
	assert.Contains(t, r.Stderr, "not observed yet", "the stale generation is named")
	assert.Contains(t, r.Stderr, `"msg":"waiting"`)
	cm := f.configMap(name + "-config")
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0", cm["image"], "nothing was deployed while stale")

	// Fleet catches up; a re-run finishes the job
	f.sim.SetFault(f.ns, name, fleetsim.Fault{})
	r = f.cli(f.node, "upgrade", args...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	assert.Contains(t, r.Stdout, "managedchart/"+f.ns+"/"+name)
	mc := f.get(name)
	assertAppliedRecord(t, mc, "2.0.0")
	assert.Equal(t, "1.0.0", mc.Annotations[managedchart.AnnotationPreviousVersion])
	assert.Len(t, f.backups(name), 1)
	assert.Equal(t, "registry.example.com/demo/app:v2.0.0", f.configMap(name + "-config")["image"])
	assert.False(t, f.leaseHeld(name), "the run that completed released the lease")
}

func TestWaitReturnsOnlyAfterTheReadyStatusWrite(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const delay = 2 * time.Second
	f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: delay})
	start := time.Now()
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	returned := time.Now()
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	rt := f.sim.ReadyTimes(f.ns, name)
	require.False(t, rt.Bundle.IsZero())
	assert.True(t, rt.Bundle.After(start), "the last ready write is from before the upgrade: %v", rt)
	assert.GreaterOrEqual(t, rt.Bundle.Sub(start), delay, "the simulator held readiness back for the delay")
	assert.True(t, returned.After(rt.Bundle), "the upgrade returned at %v, before Fleet's ready write at %v",
		returned.Format(time.StampMicro), rt.Bundle.Format(time.StampMicro))
	assert.Contains(t, r.Stderr, `"msg":"waiting"`)
	assertAppliedRecord(t, f.get(name), "2.0.0")
	t.Logf("ready write %s after start, returned %s after it", rt.Bundle.Sub(start).Round(time.Millisecond),
		returned.Sub(rt.Bundle).Round(time.Microsecond))
}

// Fleet's bundle controller writes the Bundle status as a merge patch
// against its cache: a patch for the new generation can carry
// observedGeneration alone over the previous generation's Ready summary
// (fleetsim replays it: Fault.StatusRace). The wait must not take that for
// ready: a ready summary is confirmed by the BundleDeployments, so the
// upgrade returns only after Fleet's real ready write, here held back by
// the agent's Delay well past the race.
func TestAStaleReadySummaryNeverEndsTheWait(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const race, delay = time.Second, 3 * time.Second
	f.sim.SetFault(f.ns, name, fleetsim.Fault{StatusRace: race, Delay: delay})
	start := time.Now()
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	returned := time.Now()
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	assert.Contains(t, r.Stderr, "summary says ready, its BundleDeployments do not yet", "the stale Ready summary was seen and not trusted")
	rt := f.sim.ReadyTimes(f.ns, name)
	require.False(t, rt.Bundle.IsZero())
	assert.GreaterOrEqual(t, rt.Bundle.Sub(start), delay, "Fleet's ready write came after the delay")
	assert.True(t, returned.After(rt.Bundle), "the upgrade returned at %v, before Fleet's ready write at %v",
		returned.Format(time.StampMicro), rt.Bundle.Format(time.StampMicro))
}
