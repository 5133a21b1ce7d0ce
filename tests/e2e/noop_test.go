package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// TestNoopRunMakesThreeRequests: every opted-in node runs the Job
// once per version, and the nodes after the first only find the target
// done and ready. Such a run reads the ManagedChart and judges readiness
// with one read of the Bundle (its summary of an observed generation says
// every cluster applied and ready), confirmed by one page of its
// BundleDeployments (a ready summary can be stale: design.md §4.2), and
// nothing else: no discovery, no watch, no write, and no read of the Lease,
// which a run reads only to give it up when this node's journal says an
// earlier run was killed in its apply (freeLeftLease). On this node (which
// applied) and on another (which did not), exactly those three requests. The
// first run, an upgrade, shows that the counter counts: its reads and its
// write of the ManagedChart.
func TestNoopRunMakesThreeRequests(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := app.Options{Target: "managedchart/" + f.ns + "/" + name, ChartSource: f.charts, Version: "2.0.0",
		PolicyFile: f.policy(name)}
	logs, wc, err := f.upgradeCounting(f.node, opts)
	require.NoError(t, err, logs)
	require.NotContains(t, logs, "nothing to do", "the first run upgrades")
	managedChart := "/apis/management.cattle.io/v3/namespaces/" + f.ns + "/managedcharts/" + name
	assert.Contains(t, wc.requests(), "GET "+managedChart, "the counter sees the reads of the upgrade")
	assert.Positive(t, wc.writes.Load(), "the counter sees the writes of the upgrade")
	assert.Contains(t, wc.seen, "PUT "+managedChart, "the upgrade wrote the ManagedChart: %v", wc.seen)
	bdLists := 0
	for _, r := range wc.requests() {
		if r == "GET /apis/fleet.cattle.io/v1alpha1/bundledeployments" {
			bdLists++
		}
	}
	assert.Equal(t, 1, bdLists, "the upgrade confirms the ready summary of the Bundle's new generation once, however often it judges it ready: %v", wc.requests())

	want := []string{
		"GET " + managedChart,
		"GET /apis/fleet.cattle.io/v1alpha1/namespaces/" + f.ns + "/bundles/" + fleetsim.BundleName(name),
		"GET /apis/fleet.cattle.io/v1alpha1/bundledeployments",
	}
	for _, n := range []node{f.node, noderun.New(t, "node-2")} {
		logs, wc, err := f.upgradeCounting(n, opts)
		require.NoError(t, err, logs)
		assert.Contains(t, logs, "nothing to do")
		reqs := wc.requests()
		t.Logf("%s: %d requests\n%s", n.Name, len(reqs), strings.Join(reqs, "\n"))
		assert.ElementsMatch(t, want, reqs, "a no-op run on %s: the ManagedChart, the Bundle and one page of its BundleDeployments, once each, nothing else", n.Name)
		assert.Zero(t, wc.writes.Load(), "a no-op run wrote: %v", wc.seen)
	}
}
