package suc

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestGateReadsListAndWatchWhereEachGateReads(t *testing.T) {
	cur, err := health.Compile("true")
	require.NoError(t, err)
	sel, err := health.ParseSelector("app=im")
	require.NoError(t, err)
	gates := []health.Gate{
		{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt", Current: cur}, // the release's
		{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Namespace: "longhorn-system", Selector: sel, Current: cur, // an operator's, one per Longhorn node
			Each: &health.Each{APIVersion: "longhorn.io/v1beta2", Kind: "Node", Namespace: "longhorn-system"}},
		{APIVersion: "apps/v1", Kind: "DaemonSet", Selector: sel, Current: cur},              // the release's namespace
		{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Selector: sel, Current: cur}, // cluster-scoped
	}
	kv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": map[string]any{"name": "kv", "namespace": "virt"}}}
	r := SpecReads{}
	r.GateReads(gates, []*unstructured.Unstructured{kv}, "apps", Scope(nil, nil))
	lw := []string{"list", "watch"}
	assert.Equal(t, SpecReads{
		"virt":            {{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: lw}},
		"apps":            {{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: lw}, {APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: lw}},
		"longhorn-system": {{APIGroups: []string{"longhorn.io"}, Resources: []string{"instancemanagers"}, Verbs: lw}, {APIGroups: []string{"longhorn.io"}, Resources: []string{"nodes"}, Verbs: lw}},
		"":                {{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: lw}},
	}, r)

	// merged into the chart's RBAC, one Role per namespace
	out, err := CheckRBAC(nil, CheckRBACOptions{Name: "p", Namespace: "system-upgrade", ServiceAccount: "p", ReleaseNamespace: "apps", Spec: r})
	require.NoError(t, err)
	assert.Contains(t, string(out), "# Also the reads of the upgrade spec (--check-spec)")
	assert.Contains(t, string(out), "namespace: longhorn-system")
}

// The sources of live and once rules are granted get by name, in their
// namespace; a cluster-scoped one cluster-wide.
func TestRuleReadsGetEachSourceByName(t *testing.T) {
	expr, err := values.ParseExpr(".value")
	require.NoError(t, err)
	rule := func(path, apiVersion, kind, ns, name string) values.Rule {
		p, err := values.ParsePattern(path)
		require.NoError(t, err)
		r, err := values.NewRule(p, values.PolicyLive, &values.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}, expr)
		require.NoError(t, err)
		return r
	}
	r := SpecReads{}
	r.RuleReads([]values.Rule{
		rule("a", "longhorn.io/v1beta2", "Setting", "longhorn-system", "node-drain-policy"),
		rule("b", "longhorn.io/v1beta2", "Setting", "longhorn-system", "detach-manually-attached-volumes-when-cordoned"),
		rule("c", "storage.k8s.io/v1", "StorageClass", "", "harvester-longhorn"),
		rule("d", "v1", "Secret", "kube-system", "snapshot-validation-webhook-tls"),
	}, Scope(nil, nil))
	get := []string{"get"}
	assert.Equal(t, SpecReads{
		"longhorn-system": {{APIGroups: []string{"longhorn.io"}, Resources: []string{"settings"}, ResourceNames: []string{"detach-manually-attached-volumes-when-cordoned", "node-drain-policy"}, Verbs: get}},
		"":                {{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, ResourceNames: []string{"harvester-longhorn"}, Verbs: get}},
		"kube-system":     {{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"snapshot-validation-webhook-tls"}, Verbs: get}},
	}, r)
}

// The image check's and the wait's reads: get on each pod's
// ServiceAccount and its pull secrets, by name; list and watch on the
// pods, and on the deployments and replicasets of a Deployment's
// namespace, the statefulsets of a StatefulSet's, the daemonsets of a
// DaemonSet's (none for a Job); merged per namespace.
func TestPullReads(t *testing.T) {
	got := PullReads([]PullRead{
		{Namespace: "apps", Kind: "Deployment", ServiceAccount: "web", Secrets: []string{"regcred"}},
		{Namespace: "apps", Kind: "StatefulSet", ServiceAccount: "default"},
		{Namespace: "jobs", Kind: "Job", ServiceAccount: "default", Secrets: []string{"b", "a"}},
		{Namespace: "agents", Kind: "DaemonSet", ServiceAccount: "default"},
	})
	get := []string{"get"}
	pods := PolicyRuleOf("", "pods", nil, "list", "watch")
	assert.Equal(t, SpecReads{
		"apps": {{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"default", "web"}, Verbs: get},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"regcred"}, Verbs: get}, pods,
			PolicyRuleOf("apps", "deployments", nil, "list", "watch"), PolicyRuleOf("apps", "replicasets", nil, "list", "watch"),
			PolicyRuleOf("apps", "statefulsets", nil, "list", "watch")},
		"jobs": {{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"default"}, Verbs: get},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a", "b"}, Verbs: get}, pods},
		"agents": {{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"default"}, Verbs: get}, pods,
			PolicyRuleOf("apps", "daemonsets", nil, "list", "watch")},
	}, got)
}

// PolicyRuleOf is a rule of one resource of group.
func PolicyRuleOf(group, resource string, names []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, ResourceNames: names, Verbs: verbs}
}
