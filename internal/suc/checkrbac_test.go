package suc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func object(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

// rulesByRole reads CheckRBAC's output: for each Role (by namespace) or
// the ClusterRole (""), its group/resource rules.
func rulesByRole(t *testing.T, out []byte) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind     string
			Metadata struct{ Namespace string }
			Rules    []struct {
				APIGroups []string `json:"apiGroups"`
				Resources []string
			}
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj.Kind != "Role" && obj.Kind != "ClusterRole" {
			continue
		}
		for _, r := range obj.Rules {
			got[obj.Metadata.Namespace] = append(got[obj.Metadata.Namespace], r.APIGroups[0]+"/"+r.Resources[0])
		}
	}
	return got
}

// A kind that neither the chart's CRDs nor Kubernetes' own kinds give the
// scope of (a ClusterIssuer whose CRD cert-manager's chart installed) is
// scoped, and its resource named, by the cluster's discovery when there
// is one; without, it is taken as namespaced.
func TestCheckRBACScopesOtherChartsKindsByDiscovery(t *testing.T) {
	objs := []*unstructured.Unstructured{
		object("cert-manager.io/v1", "ClusterIssuer", "letsencrypt"),
		object("cert-manager.io/v1", "Issuer", "local"),
		object("example.com/v1", "Widget", "w"),
		object("v1", "ConfigMap", "c"),
	}
	opts := CheckRBACOptions{Name: "p-conflict-check", Namespace: "system-upgrade", ServiceAccount: "p", ReleaseNamespace: "apps"}

	out, err := CheckRBAC(objs, opts)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"apps": {"/configmaps", "/resourcequotas", "cert-manager.io/clusterissuers", "cert-manager.io/issuers", "example.com/widgets"},
		"": {"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations"}},
		rulesByRole(t, out), "without discovery: namespaced, the resource guessed")

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"},
		schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"},
		schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuer"}, meta.RESTScopeRoot)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"},
		schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"},
		schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuer"}, meta.RESTScopeNamespace)
	mapper.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgetry"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widget"}, meta.RESTScopeRoot)
	opts.Mapper = mapper
	out, err = CheckRBAC(objs, opts)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{
		"apps": {"/configmaps", "/resourcequotas", "cert-manager.io/issuers"},
		"":     {"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "cert-manager.io/clusterissuers", "example.com/widgetry"},
	}, rulesByRole(t, out), "with discovery: the cluster's scope and resource; ConfigMap, which the mapper does not know, by Kubernetes' own table")
}

// Each namespace the chart's objects go into is granted get by name
// (never list): preflight reads it to know a new object's namespace
// exists, and the labels admission matches (Pod Security, webhooks and
// policies); one the chart creates is one of its objects. The release's
// too.
func TestCheckRBACGrantsTheNamespacesTheChartNames(t *testing.T) {
	in := func(ns string, o *unstructured.Unstructured) *unstructured.Unstructured { o.SetNamespace(ns); return o }
	objs := []*unstructured.Unstructured{
		in("longhorn-system", object("v1", "ConfigMap", "settings")),
		in("kube-system", object("v1", "Service", "snap")),
		in("made", object("v1", "ConfigMap", "x")),
		object("v1", "Namespace", "made"),
		object("v1", "ConfigMap", "in-release"),
	}
	out, err := CheckRBAC(objs, CheckRBACOptions{Name: "p", Namespace: "system-upgrade", ServiceAccount: "p", ReleaseNamespace: "apps"})
	require.NoError(t, err)
	assert.Contains(t, string(out), "resourceNames:\n  - apps\n  - kube-system\n  - longhorn-system\n  - made\n  resources:\n  - namespaces\n  verbs:\n  - get\n")
}

// apply.crds adds rules on exactly the chart's CRDs: none for skip;
// create, and get/list/patch/watch by name for create; list on their
// objects and get on a conversion webhook's Service for createReplace;
// update on the objects and the CRDs' status with migrate.
func TestCheckRBACForTheChartsCRDs(t *testing.T) {
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  conversion: {strategy: Webhook, webhook: {clientConfig: {service: {namespace: hooks, name: widget-conv}}}}
`), &crd.Object))
	objs := []*unstructured.Unstructured{object("v1", "ConfigMap", "a")}
	opts := func(policy string, migrate bool) CheckRBACOptions {
		return CheckRBACOptions{Name: "p", Namespace: "system-upgrade", ServiceAccount: "sa", ReleaseNamespace: "apps",
			CRDs: []*unstructured.Unstructured{crd}, CRDPolicy: policy, CRDMigrate: migrate}
	}
	for _, tc := range []struct {
		policy  string
		migrate bool
		cluster []string
		text    []string
	}{
		{"skip", false, []string{"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations"}, nil},
		{"create", false, []string{"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/customresourcedefinitions"}, nil},
		{"createReplace", false, []string{"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/customresourcedefinitions", "example.com/widgets"},
			[]string{"resourceNames:\n  - widget-conv\n  resources:\n  - services\n  verbs:\n  - get"}},
		{"createReplace", true, []string{"/namespaces", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/customresourcedefinitions",
			"apiextensions.k8s.io/customresourcedefinitions/status", "example.com/widgets"},
			[]string{"resources:\n  - widgets\n  verbs:\n  - list\n  - update"}},
	} {
		out, err := CheckRBAC(objs, opts(tc.policy, tc.migrate))
		require.NoError(t, err)
		assert.Equal(t, tc.cluster, rulesByRole(t, out)[""], "%s migrate=%v", tc.policy, tc.migrate)
		for _, want := range tc.text {
			assert.Contains(t, string(out), want)
		}
		if tc.policy != "skip" {
			assert.Contains(t, string(out), "resourceNames:\n  - widgets.example.com\n  resources:\n  - customresourcedefinitions\n  verbs:\n  - get\n  - list\n  - patch\n  - watch")
		}
	}
}

// A chart with a workload is granted what preflight reads to judge its
// pods: the LimitRanges of its namespace, the nodes and the pods bound to
// them; every chart, the quotas of its namespaces and the admission
// policies and webhooks. All are lists, none a write.
func TestCheckRBACGrantsWhatTheRolloutChecksRead(t *testing.T) {
	out, err := CheckRBAC([]*unstructured.Unstructured{object("apps/v1", "Deployment", "web"), object("v1", "ConfigMap", "c")},
		CheckRBACOptions{Name: "p", Namespace: "system-upgrade", ServiceAccount: "p", ReleaseNamespace: "apps"})
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{
		"apps": {"/configmaps", "/limitranges", "/resourcequotas", "apps/deployments"},
		"":     {"/namespaces", "/nodes", "admissionregistration.k8s.io/mutatingwebhookconfigurations"},
	}, rulesByRole(t, out))
	for _, want := range []string{"resources:\n  - nodes\n  - pods\n  verbs:\n  - list",
		"resources:\n  - mutatingwebhookconfigurations\n  - validatingadmissionpolicies\n  - validatingadmissionpolicybindings\n  - validatingwebhookconfigurations\n  verbs:\n  - list"} {
		assert.Contains(t, string(out), want)
	}
	assert.NotRegexp(t, `verbs:\n(  - (get|list|watch)\n)*  - (create|update|patch|delete)`, string(out))
}
