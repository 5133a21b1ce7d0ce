package crds

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// crdYAML is a Widget CRD of example.com with versions, each "name",
// "name*" (storage) or "name-" (not served).
func crdYAML(scope, kind string, versions ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: " + scope +
		"\n  names: {plural: widgets, singular: widget, kind: " + kind + ", listKind: " + kind + "List}\n  versions:\n")
	for _, v := range versions {
		name, storage := strings.CutSuffix(v, "*")
		name, unserved := strings.CutSuffix(name, "-")
		b.WriteString("  - {name: " + name + ", served: " + map[bool]string{true: "false", false: "true"}[unserved] +
			", storage: " + map[bool]string{true: "true", false: "false"}[storage] + ", schema: {openAPIV3Schema: {type: object}}}\n")
	}
	return b.String()
}

func parse(t *testing.T, docs ...string) []CRD {
	t.Helper()
	var files []upgrade.CRDFile
	for i, d := range docs {
		files = append(files, upgrade.CRDFile{Path: "demo/crds/" + string(rune('a'+i)) + ".yaml", Data: []byte(d)})
	}
	cs, err := Parse(files)
	require.NoError(t, err)
	return cs
}

// live is the cluster's CRD as yaml, with its status.storedVersions.
func live(t *testing.T, yaml string, stored ...string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	c := parse(t, yaml)[0].Typed.DeepCopy()
	c.Status.StoredVersions = stored
	return c
}

// Each verdict of Judge, and the refusals that name the CRD, its file
// and the way out.
func TestJudge(t *testing.T) {
	chart := parse(t, crdYAML("Namespaced", "Widget", "v1", "v2*"))[0]
	for _, tc := range []struct {
		name   string
		policy Policy
		live   Live
		action Action
		says   []string
	}{
		{"missing: created", Create, Live{}, ActionCreate, nil},
		{"missing, createReplace: created", CreateReplace, Live{}, ActionCreate, nil},
		{"a create the server refuses", Create, Live{Refusal: "forbidden"}, ActionRefused, []string{"the API server refuses it (dry run): forbidden"}},
		{"a CRD the process may not read", CreateReplace, Live{Unread: true, Refusal: "forbidden: the process may not get it"}, ActionRefused,
			[]string{"CustomResourceDefinition widgets.example.com (demo/crds/a.yaml): forbidden: the process may not get it"}},
		{"exists, create: kept as it is", Create, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v1*"), "v1"), Differs: true}, ActionKept, nil},
		{"the same", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v1", "v2*"), "v2")}, ActionUnchanged, nil},
		{"a version added", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v1*"), "v1"), Differs: true}, ActionReplace, nil},
		{"the scope changed", CreateReplace, Live{CRD: live(t, crdYAML("Cluster", "Widget", "v1*"), "v1"), Differs: true}, ActionRefused,
			[]string{"CustomResourceDefinition widgets.example.com (demo/crds/a.yaml): its scope would change from Cluster to Namespaced"}},
		{"the kind changed", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Gadget", "v1*"), "v1"), Differs: true}, ActionRefused,
			[]string{"its kind would change from Gadget to Widget"}},
		{"a stored version dropped", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v0", "v1*"), "v0", "v1"), Differs: true,
			Refusal: "status.storedVersions[0]: Invalid value"}, ActionRefused,
			[]string{"status.storedVersions holds v0, which the new CRD drops", "migrate the objects to v2 and trim status.storedVersions first, or keep v0 in spec.versions"}},
		{"objects, every stored version still served", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v1*"), "v1"), Differs: true,
			Objects: Objects{Count: 5, First: []string{"a/w1", "a/w2", "b/w3"}}}, ActionReplace, nil},
		{"a missing conversion webhook", CreateReplace, Live{CRD: live(t, crdYAML("Namespaced", "Widget", "v1*"), "v1"), Differs: true,
			MissingService: "system/widget-webhook"}, ActionRefused, []string{"its conversion webhook calls the Service system/widget-webhook, which does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Judge(tc.policy, false, chart, tc.live)
			assert.Equal(t, tc.action, d.Action, "%+v", d)
			assert.Equal(t, len(tc.says) > 0, len(d.Refused) > 0, "%+v", d)
			for _, s := range tc.says {
				assert.Contains(t, strings.Join(d.Refused, "\n"), s)
			}
			if tc.name == "a stored version dropped" || tc.name == "a CRD the process may not read" {
				assert.Len(t, d.Refused, 1, "our words, not the server's again")
			}
		})
	}
}

// A stored version the new CRD keeps without serving is refused only
// while objects exist, counted and the first few named.
func TestUnservedStoredVersion(t *testing.T) {
	chart := parse(t, crdYAML("Namespaced", "Widget", "v1-", "v2*"))[0]
	was := live(t, crdYAML("Namespaced", "Widget", "v1*"), "v1")
	assert.Equal(t, []string{"v1"}, Unserving(chart, was))
	assert.Empty(t, Unserving(chart, live(t, crdYAML("Namespaced", "Widget", "v1*", "v2"), "v2")), "not stored at v1")

	d := Judge(CreateReplace, false, chart, Live{CRD: was, Differs: true, Objects: Objects{Count: 5, First: []string{"a/w1", "a/w2", "b/w3"}}})
	require.Equal(t, ActionRefused, d.Action)
	assert.Contains(t, d.Refused[0], "version v1 would no longer be served while 5 (a/w1, a/w2, b/w3, …) objects exist")
	d = Judge(CreateReplace, false, chart, Live{CRD: was, Differs: true})
	assert.Equal(t, ActionReplace, d.Action, "no object: nothing to lose")
}

// What is not a CRD, or one CRD two ways, is bad input naming the file;
// the same CRD twice is read once.
func TestParseBadInput(t *testing.T) {
	good := crdYAML("Namespaced", "Widget", "v1*")
	cs := parse(t, good, good)
	require.Len(t, cs, 1, "the same CRD in two subcharts")
	assert.Equal(t, "demo/crds/a.yaml", cs[0].From)
	assert.Equal(t, "widgets.example.com", cs[0].Name())

	for _, tc := range []struct{ name, doc, says string }{
		{"a ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", `demo/crds/a.yaml: a ConfigMap "x" is not a CustomResourceDefinition`},
		{"v1beta1", strings.Replace(good, "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1), "apiextensions.k8s.io/v1beta1, which Kubernetes no longer serves"},
		{"an unknown field", strings.Replace(good, "  scope:", "  scopes: Cluster\n  scope:", 1), `unknown field "spec.scopes"`},
		{"a name that is not plural.group", strings.Replace(good, "name: widgets.example.com", "name: widget.example.com", 1), "its name must be spec.names.plural.spec.group, widgets.example.com"},
		{"not YAML", "kind: [", "demo/crds/a.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]upgrade.CRDFile{{Path: "demo/crds/a.yaml", Data: []byte(tc.doc)}})
			require.Error(t, err)
			assert.True(t, errors.Is(err, outcome.ErrBadInput), "%v", err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	other := strings.Replace(good, "scope: Namespaced", "scope: Cluster", 1)
	_, err := Parse([]upgrade.CRDFile{{Path: "demo/crds/a.yaml", Data: []byte(good)}, {Path: "demo/charts/sub/crds/b.yaml", Data: []byte(other)}})
	require.Error(t, err)
	assert.True(t, errors.Is(err, outcome.ErrBadInput))
	assert.Contains(t, err.Error(), "demo/charts/sub/crds/b.yaml: the CustomResourceDefinition widgets.example.com differs from the one demo/crds/a.yaml defines")
}
