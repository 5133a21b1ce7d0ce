package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// TestNoopRunMakesAtMostThreeRequests: every opted-in node runs the Job
// once per version, and the nodes after the first only find the target
// done and ready. Such a run reads the ManagedChart, confirms readiness
// with one read of the Bundle (its summary of an observed generation says
// every cluster applied and ready: no list of BundleDeployments), and
// reads the Lease to give it up should a killed run of this node have left
// it held: no discovery, no watch, no write. On this node (which applied)
// and on another (which did not), the same.
func TestNoopRunMakesAtMostThreeRequests(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := app.Options{Target: "managedchart/" + f.ns + "/" + name, ChartSource: f.charts, Version: "2.0.0",
		PolicyFile: f.policy(name)}
	logs, _, err := f.upgradeCounting(f.node, opts)
	require.NoError(t, err, logs)

	for _, n := range []node{f.node, newNode(t, "node-2")} {
		logs, wc, err := f.upgradeCounting(n, opts)
		require.NoError(t, err, logs)
		assert.Contains(t, logs, "nothing to do")
		reqs := wc.requests()
		t.Logf("%s: %d requests\n%s", n.name, len(reqs), strings.Join(reqs, "\n"))
		assert.LessOrEqual(t, len(reqs), 3, "a no-op run on %s: the ManagedChart, the Lease, the Bundle", n.name)
		assert.Zero(t, wc.writes.Load(), "a no-op run wrote: %v", wc.seen)
		for _, r := range reqs {
			assert.NotContains(t, r, "watch=true", "a no-op run starts no watch")
			assert.NotContains(t, r, "bundledeployments", "the Bundle's summary confirms readiness")
			assert.NotRegexp(t, `^GET /apis?$`, r, "a no-op run needs no discovery")
		}
	}
}
