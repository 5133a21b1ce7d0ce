package gates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// The pure part of checkGroups: which rendered objects an each selects
// (its namespace, its selector), and the refusal when none is, naming
// the gate, the kind, the namespace (the release's when the each names
// none) and the selector.
func TestSelectsAnyAndNoGroups(t *testing.T) {
	sel, err := health.ParseSelector("example.com/group=node")
	require.NoError(t, err)
	e := health.Each{APIVersion: "longhorn.io/v1beta2", Kind: "Node", Selector: sel}
	node := func(ns string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": map[string]any{"name": "n"}}}
		u.SetNamespace(ns)
		u.SetLabels(labels)
		return u
	}
	group := map[string]string{"example.com/group": "node"}
	assert.False(t, selectsAny(e, "longhorn-system", nil), "nothing rendered")
	assert.False(t, selectsAny(e, "longhorn-system", []*unstructured.Unstructured{node("elsewhere", group)}), "another namespace")
	assert.False(t, selectsAny(e, "longhorn-system", []*unstructured.Unstructured{node("longhorn-system", nil)}), "not selected")
	assert.True(t, selectsAny(e, "longhorn-system", []*unstructured.Unstructured{node("longhorn-system", nil), node("longhorn-system", group)}))
	assert.True(t, selectsAny(e, "", []*unstructured.Unstructured{node("", group)}), "cluster-scoped")
	assert.True(t, selectsAny(health.Each{Kind: "Node"}, "ns", []*unstructured.Unstructured{node("ns", nil)}), "no selector: all")

	g := health.Gate{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Namespace: "longhorn-system", At: "spec.yaml:14: charts[1].wait.health[2]",
		Each: &health.Each{APIVersion: "longhorn.io/v1beta2", Kind: "Node", Namespace: "longhorn-sytem", Selector: sel}}
	err = noGroups(g, "longhorn-sytem")
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.EqualError(t, err, "spec.yaml:14: charts[1].wait.health[2]: each selects no object: no Node longhorn.io/v1beta2 in namespace longhorn-sytem "+
		"with labels example.com/group=node exists, and the chart renders none: the gate would have no group to wait for")
	g.Each.Namespace, g.Each.Selector = "", nil
	assert.EqualError(t, noGroups(g, "harvester-system"), "spec.yaml:14: charts[1].wait.health[2]: each selects no object: no Node longhorn.io/v1beta2 "+
		"in namespace harvester-system (the release's: each names no namespace) exists, and the chart renders none: the gate would have no group to wait for")
}
