package applycheck

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// A field set's path finds the value it names: fields, keys with dots,
// list elements by key (strings and numbers), by value and by index.
func TestPathLookup(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "side", "image": "side:1"},
			map[string]any{"name": "web", "image": "web:2", "ports": []any{
				map[string]any{"containerPort": int64(80), "protocol": "TCP", "name": "http"},
				map[string]any{"containerPort": float64(443), "protocol": "TCP", "name": "https"},
			}},
		}}},
		"finalizers": []any{"a", "b,c"},
	}, "metadata": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:1"}}}
	containers := []any{"spec", "template", "spec", "containers"}
	with := func(base []any, more ...any) []any { return append(append([]any{}, base...), more...) }
	port := func(n int, proto string) fieldpath.PathElement {
		return fieldpath.PathElement{Key: &value.FieldList{{Name: "containerPort", Value: value.NewValueInterface(n)}, {Name: "protocol", Value: value.NewValueInterface(proto)}}}
	}
	for _, tc := range []struct {
		path []any
		want any
	}{
		{with(containers, fieldpath.KeyByFields("name", "web"), "image"), "web:2"},
		{with(containers, fieldpath.KeyByFields("name", "side")), map[string]any{"name": "side", "image": "side:1"}},
		{with(containers, fieldpath.KeyByFields("name", "web"), "ports", port(443, "TCP"), "name"), "https"},
		{with(containers, fieldpath.KeyByFields("name", "web"), "ports", port(80, "TCP"), "name"), "http"},
		{with(containers, 1, "image"), "web:2"},
		{[]any{"spec", "finalizers", value.NewValueInterface("b,c")}, "b,c"},
		{[]any{"metadata", "annotations", "eks.amazonaws.com/role-arn"}, "arn:1"},
	} {
		fp := fieldpath.MakePathOrDie(tc.path...)
		got, ok := pathOf(fp).Lookup(obj)
		assert.True(t, ok, fp.String())
		assert.Equal(t, tc.want, got, fp.String())
	}
	for _, path := range [][]any{
		{"spec", "nothing"},
		with(containers, fieldpath.KeyByFields("name", "db"), "image"),
		{"spec", "finalizers", value.NewValueInterface("z")},
		with(containers, 5),
		{"metadata", "annotations", "eks", "amazonaws.com/role-arn"},
	} {
		fp := fieldpath.MakePathOrDie(path...)
		_, ok := pathOf(fp).Lookup(obj)
		assert.False(t, ok, fp.String())
	}
}

// The round trip of a conflict's field: a path of the applied object's
// field set, printed as the API server prints it in a conflict, is found
// again by that line (fieldPaths) and looks up the value it was made
// from, whatever its keys hold (dots, slashes, brackets, quotes).
func FuzzFieldPathRoundTrip(f *testing.F) {
	f.Add("eks.amazonaws.com/role-arn", "config.yaml", "arn:aws:iam::1:role/x", "web")
	f.Add("a", "b", "c", "d")
	f.Add(`we"ird].[key`, `=`, `\`, `x.y`)
	tc := managedfields.NewDeducedTypeConverter()
	f.Fuzz(func(t *testing.T, annotation, dataKey, val, name string) {
		if annotation == "" || dataKey == "" || name == "" || annotation == dataKey ||
			!utf8.ValidString(annotation) || !utf8.ValidString(dataKey) || !utf8.ValidString(val) || !utf8.ValidString(name) {
			return // JSON, and so the API server, has no such keys
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "annotations": map[string]any{annotation: val}},
			"data":     map[string]any{dataKey: val, "plain": "p"}}}
		paths, err := fieldPaths(tc, obj)
		if err != nil {
			t.Skip(err) // not an object the API server would type either
		}
		for _, want := range [][]any{{"metadata", "annotations", annotation}, {"data", dataKey}, {"data", "plain"}} {
			line := fieldpath.MakePathOrDie(want...).String()
			fp, ok := paths[line]
			require.True(t, ok, "%s is not found by its line", line)
			got, ok := pathOf(fp).Lookup(obj.Object)
			require.True(t, ok, line)
			wantValue, _, _ := unstructured.NestedFieldNoCopy(obj.Object, toStrings(want)...)
			require.Equal(t, wantValue, got, line)
		}
	})
}

func toStrings(steps []any) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.(string)
	}
	return out
}

// The owner's bare name is read from the API server's wording.
func TestOwnerName(t *testing.T) {
	assert.Equal(t, "kubectl-set", ownerName(`"kubectl-set" using apps/v1`))
	assert.Equal(t, "kubectl-set", ownerName(`"kubectl-set" using apps/v1 at 2026-11-25T10:00:00Z`))
	assert.Equal(t, "fleetagent", ownerName(`"fleetagent"`))
	assert.Equal(t, "odd", ownerName(`odd`))
}

// Values are shown as they are, JSON when not a string, whole, "(unset)"
// when absent; a line cuts them when long, on a rune boundary.
func TestShow(t *testing.T) {
	assert.Equal(t, "web:2", show("web:2", true))
	assert.Equal(t, "3", show(int64(3), true))
	assert.Equal(t, `{"a":"b"}`, show(map[string]any{"a": "b"}, true))
	assert.Equal(t, "(unset)", show(nil, false))
	long := show(strings.Repeat("x", 300), true)
	assert.Len(t, long, 300, "never cut: -o json shows it whole")
	assert.Len(t, []rune(Clip(long)), MaxShown+1)
	assert.Equal(t, "web:2", Clip("web:2"))
	runes := Clip(strings.Repeat("é", 100)) // 200 bytes
	assert.True(t, utf8.ValidString(runes), runes)
	assert.True(t, strings.HasSuffix(runes, "…"))
}
