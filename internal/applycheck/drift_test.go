package applycheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
)

func configMap(data map[string]any, annotations map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "app", "annotations": annotations}, "data": data}}
}

// A field whose live value differs is drift, whoever changed it; a field
// another manager owns is drift even at the rendered value; a field only
// the applier owns at the rendered value is not. Keys with dots are read
// by their structured path.
func TestFieldDrift(t *testing.T) {
	rendered := configMap(map[string]any{"retention": "7d", "level": "info", "shared": "x"},
		map[string]any{"example.com/tier": "gold", "app.kubernetes.io/name": "web"})
	live := configMap(map[string]any{"retention": "30d", "level": "info", "shared": "x"},
		map[string]any{"example.com/tier": "silver", "app.kubernetes.io/name": "web"})
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "helm", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:data":{"f:retention":{},"f:level":{},"f:shared":{}},"f:metadata":{"f:annotations":{"f:example.com/tier":{},"f:app.kubernetes.io/name":{}}}}`)}},
		{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:data":{"f:retention":{},"f:shared":{}}}`)}},
	})
	fields, err := FieldDrift(managedfields.NewDeducedTypeConverter(), nil, rendered, live, "helm")
	require.NoError(t, err)
	got := map[string]Drifted{}
	for _, f := range fields {
		got[f.Field] = f
	}
	require.Len(t, got, 3, "%+v", fields)
	r := got[".data.retention"]
	assert.True(t, r.Differs)
	assert.Equal(t, "30d", r.Live)
	assert.Equal(t, []string{"kubectl-patch (Update)"}, r.Managers)
	assert.Equal(t, "kubectl-patch", r.Owner)
	assert.Equal(t, []any{"data", "retention"}, r.Steps)
	s := got[".data.shared"]
	assert.False(t, s.Differs, "shared at the rendered value")
	tier := got[".metadata.annotations.example.com/tier"]
	assert.True(t, tier.Differs)
	assert.Equal(t, "silver", tier.Live)
	assert.Equal(t, []any{"metadata", "annotations", "example.com/tier"}, tier.Steps)
	assert.Empty(t, tier.Managers, "changed by a manager that kept no record of it")
}

// What no one but the API server and the applier sets is no drift: the
// status a chart renders into a kind with a status subresource (a CRD
// template with a status: block, as Harvester's), the metadata the API
// server sets (creationTimestamp: null, as controller-gen writes it), and
// Helm's ownership metadata; a field beside them is.
func TestFieldDriftLeavesOutWhatTheServerSets(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	obj := func(status map[string]any, group string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "widgets.example.com", "creationTimestamp": nil,
				"annotations": map[string]any{"meta.helm.sh/release-name": "web", "example.com/tier": "gold"},
				"labels":      map[string]any{"app.kubernetes.io/managed-by": "Helm"}},
			"spec":   map[string]any{"group": group},
			"status": status}}
		u.SetGroupVersionKind(gvk)
		return u
	}
	rendered := obj(map[string]any{"acceptedNames": map[string]any{"kind": "", "plural": ""}, "storedVersions": []any{}}, "example.com")
	live := obj(map[string]any{"acceptedNames": map[string]any{"kind": "Widget", "plural": "widgets"}, "storedVersions": []any{"v1"}}, "example.org")
	live.SetCreationTimestamp(metav1.Now())
	live.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "other", "example.com/tier": "gold"})
	live.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "Fleet"})
	reset := map[fieldpath.APIVersion]fieldpath.Filter{"apiextensions.k8s.io/v1": fieldpath.NewExcludeSetFilter(statusSet)}
	fields, err := FieldDrift(managedfields.NewDeducedTypeConverter(), reset, rendered, live, "helm")
	require.NoError(t, err)
	require.Len(t, fields, 1, "%+v", fields)
	assert.Equal(t, ".spec.group", fields[0].Field)

	// without a status subresource, status is the object's own field (its
	// names rendered "" and filled by no recorded manager are taken as
	// the server's defaults)
	fields, err = FieldDrift(managedfields.NewDeducedTypeConverter(), nil, rendered, live, "helm")
	require.NoError(t, err)
	assert.Len(t, fields, 2, "%+v", fields) // spec.group, storedVersions
}

// A value named like a secret, rendered into a ConfigMap, is read back
// redacted: its values and the --set line never show it.
func TestReadFieldRedactsSecretValues(t *testing.T) {
	vals := map[string]any{"auth": map[string]any{"password": "hunter2"}, "level": "info"}
	marked, marks := provenance.Mark(vals)
	real := []provenance.Doc{{Source: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {password: hunter2, level: info}\n"}}
	traced := []provenance.Doc{{Source: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {password: " +
		marked["auth"].(map[string]any)["password"].(string) + ", level: " + marked["level"].(string) + "}\n"}}
	m, err := provenance.Trace(real, traced, marks, vals)
	require.NoError(t, err)
	id := provenance.ObjectID{Kind: "ConfigMap", Name: "web"}

	r, secret := readField(m, id, []any{"data", "password"}, "hunter3", true, false)
	assert.True(t, secret)
	assert.Empty(t, r.Set, "no flag: one with the value redacted would render the redaction")
	assert.Equal(t, []string{"{path: auth.password, policy: adopt}"}, r.Rules)
	assert.Contains(t, r.Says(), "a secret: adopt takes it from the cluster")
	assert.Equal(t, provenance.Redacted, r.Assignments[0].Value)
	assert.Equal(t, provenance.Redacted, r.Assignments[0].Was)
	assert.Equal(t, "hunter3", r.Adopt[0].Value, "what adopt writes is kept, never shown")
	assert.NotContains(t, r.Says(), "hunter")

	r, secret = readField(m, id, []any{"data", "level"}, "debug", true, false)
	assert.False(t, secret)
	assert.Equal(t, []string{"--set-string level=debug"}, r.Set)
}

// What Harvester's chart renders and the API server leaves out or fills
// in is no drift: a field rendered null or "" (the server defaults it;
// no other manager owns it), and an empty or zero value its types omit;
// the same fields set otherwise are.
func TestFieldDriftOfEmptyAndNullFields(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rendered, live any // the field's values; live nil: unset
		drift          bool
		editor         bool // another manager (kubectl edit) owns the field
	}{
		{"rendered null, the server's default live", nil, int64(1), false, false},
		{"rendered null, a map live", nil, map[string]any{"a": "b"}, false, false},
		{"false, unset live", false, nil, false, false},
		{"empty string, unset live", "", nil, false, false},
		{"zero, unset live", int64(0), nil, false, false},
		{"empty list, unset live", []any{}, nil, false, false},
		{"true, unset live", true, nil, true, false},
		{"a string, unset live", "x", nil, true, false},
		{"false, true live", false, true, true, false},
		{"empty string, a value another manager set", "", "x", true, true},
		{"empty string, the server's default live", "", "Cluster", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := func(v any, set bool) *unstructured.Unstructured {
				spec := map[string]any{"other": "same"}
				if set {
					spec["field"] = v
				}
				return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
					"metadata": map[string]any{"name": "w", "namespace": "app"}, "spec": spec}}
			}
			live := obj(tc.live, tc.live != nil)
			if tc.editor {
				live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:field":{}}}`)}}})
			}
			fields, err := FieldDrift(managedfields.NewDeducedTypeConverter(), nil, obj(tc.rendered, true), live, "helm")
			require.NoError(t, err)
			if !tc.drift {
				assert.Empty(t, fields)
				return
			}
			require.Len(t, fields, 1, "%+v", fields)
			assert.Equal(t, ".spec.field", fields[0].Field)
		})
	}
}

// A Role the chart renders with rules: [] is stored without rules (the
// API server omits an empty list) or, for a ClusterRole, with rules:
// null: no drift, whether or not the applier's entry names the field.
func TestFieldDriftOfAnEmptyRoleRules(t *testing.T) {
	role := func(rules any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": map[string]any{"name": "r", "namespace": "app"}}}
		if rules != nil {
			u.Object["rules"] = rules
		}
		return u
	}
	live := role(nil)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "helm", Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:rules":{}}`)}}})
	fields, err := FieldDrift(managedfields.NewDeducedTypeConverter(), nil, role([]any{}), live, "helm")
	require.NoError(t, err)
	assert.Empty(t, fields)
	fields, err = FieldDrift(managedfields.NewDeducedTypeConverter(), nil, role([]any{}), role([]any{}), "helm")
	require.NoError(t, err)
	assert.Empty(t, fields)
	// a ClusterRole's rules have no omitempty: the server stores null
	stored := role(nil)
	stored.Object["rules"] = nil
	fields, err = FieldDrift(managedfields.NewDeducedTypeConverter(), nil, role([]any{}), stored, "helm")
	require.NoError(t, err)
	assert.Empty(t, fields)
	// and a list with rules against null is drift
	fields, err = FieldDrift(managedfields.NewDeducedTypeConverter(), nil, role([]any{map[string]any{"verbs": []any{"get"}}}), stored, "helm")
	require.NoError(t, err)
	assert.NotEmpty(t, fields)
}
