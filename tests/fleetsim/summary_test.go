package fleetsim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBundleDeploymentState(t *testing.T) {
	const staged = "s-new:1"
	ready := bdView{StagedID: staged, DeploymentID: staged, AppliedID: staged, Ready: true, NonModified: true}
	for _, tc := range []struct {
		name        string
		edit        func(*bdView)
		want        string
		unavailable bool
	}{
		{"ready", func(*bdView) {}, StateReady, false},
		{"spec not caught up", func(v *bdView) { v.StagedID = "s-old:1" }, StatePending, true},
		{"failed deploy", func(v *bdView) { v.DeployFailed = true }, StateErrApplied, false},
		{"not applied yet", func(v *bdView) { v.AppliedID = "s-old:1" }, StateWaitApplied, true},
		{"applied, not ready", func(v *bdView) { v.Ready = false }, StateNotReady, true},
		{"paused with staged changes", func(v *bdView) { v.DeploymentID, v.AppliedID = "s-old:1", "s-old:1" }, StateOutOfSync, false},
		{"drifted", func(v *bdView) { v.NonModified = false }, StateModified, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ready
			tc.edit(&v)
			require.Equal(t, tc.want, v.state(staged))
			require.Equal(t, tc.unavailable, v.unavailable(staged))
		})
	}
}

func TestComputeBundleStatus(t *testing.T) {
	const staged = "s-abc:1"
	ok := bdView{Cluster: "local", StagedID: staged, DeploymentID: staged, AppliedID: staged, Ready: true, NonModified: true}
	st := computeBundleStatus(7, 1, []bdView{ok}, staged, "fleet-local")
	require.EqualValues(t, 7, st.ObservedGeneration)
	require.Equal(t, bundleSummary{Ready: 1, DesiredReady: 1}, st.Summary)
	require.Equal(t, "1/1", st.Display.ReadyClusters)
	require.Equal(t, []condition{{Type: "Ready", Status: "True"}}, st.Conditions)

	failed := ok
	failed.Cluster, failed.DeployFailed, failed.DeployError, failed.Ready = ClusterName(1), true, "boom", false
	st = computeBundleStatus(7, 3, []bdView{failed, ok}, staged, "fleet-local")
	require.Equal(t, 1, st.Summary.Ready)
	require.Equal(t, 1, st.Summary.ErrApplied)
	require.Equal(t, 1, st.Summary.Pending, "a missing BundleDeployment is pending")
	require.Equal(t, 2, st.Unavailable)
	require.Equal(t, "1/3", st.Display.ReadyClusters)
	require.Equal(t, StateErrApplied, st.Display.State)
	require.Equal(t, []nonReadyResource{{Name: "fleet-local/sim-0001", State: StateErrApplied, Message: "boom"}}, st.Summary.NonReadyResources)
	require.Equal(t, "False", st.Conditions[0].Status)
	require.Equal(t, "ErrApplied(1) [Cluster fleet-local/sim-0001: boom]; Pending(1)", st.Conditions[0].Message)
}

func TestNonReadyResourcesAreCapped(t *testing.T) {
	var views []bdView
	for i := range 25 {
		views = append(views, bdView{Cluster: ClusterName(i), StagedID: "s", DeploymentID: "s", AppliedID: "s"})
	}
	st := computeBundleStatus(1, 25, views, "s", "ws")
	require.Equal(t, 25, st.Summary.NotReady)
	require.Len(t, st.Summary.NonReadyResources, maxNonReadyResources)
	require.True(t, strings.HasPrefix(st.Conditions[0].Message, "NotReady(25) [Cluster ws/local, Cluster ws/sim-0001"))
}

func TestMergeConditionsKeepsTimestamps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := mergeConditions(nil, []condition{{Type: "Ready", Status: "False", Message: "a"}}, t0)
	old := []any{map[string]any{"type": "Ready", "status": "False", "message": "a",
		"lastUpdateTime": first[0].LastUpdateTime, "lastTransitionTime": first[0].LastTransitionTime}}
	same := mergeConditions(old, []condition{{Type: "Ready", Status: "False", Message: "a"}}, t0.Add(time.Hour))
	require.Equal(t, first, same)
	msg := mergeConditions(old, []condition{{Type: "Ready", Status: "False", Message: "b"}}, t0.Add(time.Hour))
	require.Equal(t, "2026-01-01T01:00:00Z", msg[0].LastUpdateTime)
	require.Equal(t, "2026-01-01T00:00:00Z", msg[0].LastTransitionTime)
	flip := mergeConditions(old, []condition{{Type: "Ready", Status: "True"}}, t0.Add(time.Hour))
	require.Equal(t, "2026-01-01T01:00:00Z", flip[0].LastTransitionTime)
}

func TestDeploymentIDIsContentAddressed(t *testing.T) {
	opts := map[string]any{"defaultNamespace": "ns", "helm": map[string]any{"timeoutSeconds": int64(600)}}
	a, err := deploymentID("demo", "1.0.0", map[string]any{"a": 1, "b": map[string]any{"c": "d", "e": "f"}}, opts)
	require.NoError(t, err)
	b, err := deploymentID("demo", "1.0.0", map[string]any{"b": map[string]any{"e": "f", "c": "d"}, "a": 1}, opts)
	require.NoError(t, err)
	require.Equal(t, a, b, "map order does not matter")
	require.Regexp(t, `^s-[0-9a-f]{64}:[0-9a-f]{12}$`, a)

	v2, _ := deploymentID("demo", "2.0.0", map[string]any{"a": 1, "b": map[string]any{"c": "d", "e": "f"}}, opts)
	require.NotEqual(t, strings.Split(a, ":")[0], strings.Split(v2, ":")[0])
	bumped, _ := deploymentID("demo", "1.0.0", map[string]any{"a": 1, "b": map[string]any{"c": "d", "e": "f"}},
		map[string]any{"defaultNamespace": "ns", "helm": map[string]any{"timeoutSeconds": int64(601)}})
	require.Equal(t, strings.Split(a, ":")[0], strings.Split(bumped, ":")[0], "options change the second part only")
	require.NotEqual(t, a, bumped)
}

func TestNames(t *testing.T) {
	require.Equal(t, "cluster-fleet-local-local-1a3d67d0a899", ClusterNamespace("fleet-local"))
	long := ClusterNamespace(strings.Repeat("a", 63))
	require.LessOrEqual(t, len(long), 63)
	require.NotEqual(t, long, ClusterNamespace(strings.Repeat("a", 62)))
	for i := range 1001 {
		require.Equal(t, i, clusterIndex(ClusterName(i)))
	}
	require.Equal(t, -1, clusterIndex("elsewhere"))
	name, ok := managedChartOf(BundleName("harvester"))
	require.True(t, ok)
	require.Equal(t, "harvester", name)
}

func TestSpread(t *testing.T) {
	require.Equal(t, time.Duration(0), spread(0, 3, 10))
	require.Equal(t, time.Second, spread(10*time.Second, 0, 10))
	require.Equal(t, 10*time.Second, spread(10*time.Second, 9, 10))
}

// A field the API server defaulted inside a list item (a container's
// imagePullPolicy) is no drift; a changed item is, and the list is patched
// whole.
func TestMergePatchOfListsOfMaps(t *testing.T) {
	desired := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "a:1"}}}}
	live := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "a:1",
		"imagePullPolicy": "IfNotPresent"}}}}
	_, differs := mergePatch(desired, live)
	assert.False(t, differs)
	live["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "a:2"
	patch, differs := mergePatch(desired, live)
	assert.True(t, differs)
	assert.Equal(t, map[string]any{"spec": map[string]any{"containers": desired["spec"].(map[string]any)["containers"]}}, patch)
	live["spec"].(map[string]any)["containers"] = []any{}
	_, differs = mergePatch(desired, live)
	assert.True(t, differs, "a list of another length differs")
}
