package values

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// namedValues is a map type of its own, as Helm's common.Values is.
type namedValues map[string]any

// DeepCopy copies every map and list (a named map type becomes
// map[string]any), keeps nil nil, and shares nothing the copy could
// change; Equal compares numbers by value whatever holds them.
func TestDeepCopyAndEqual(t *testing.T) {
	orig := map[string]any{"a": map[string]any{"b": []any{1, map[string]any{"c": "d"}}}, "n": namedValues{"x": []any{"y"}},
		"nilList": []any(nil), "nilMap": map[string]any(nil)}
	cp := DeepCopy(orig).(map[string]any)
	assert.Equal(t, map[string]any{"x": []any{"y"}}, cp["n"], "a named map type is copied as map[string]any")
	assert.Nil(t, cp["nilList"])
	assert.Nil(t, cp["nilMap"])
	cp["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	cp["n"].(map[string]any)["x"].([]any)[0] = "changed"
	assert.Equal(t, "d", orig["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"], "the original is untouched")
	assert.Equal(t, "y", orig["n"].(namedValues)["x"].([]any)[0])

	for _, tc := range []struct {
		a, b any
		want bool
	}{
		{80, int64(80), true},
		{80, 80.0, true},
		{json.Number("80"), 80, true},
		{80, "80", false},
		{map[string]any{"a": []any{1, 2}}, map[string]any{"a": []any{int64(1), 2.0}}, true},
		{map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, false},
		{[]any{1, 2}, []any{2, 1}, false},
		{nil, nil, true},
		{nil, "", false},
	} {
		assert.Equal(t, tc.want, Equal(tc.a, tc.b), "Equal(%#v, %#v)", tc.a, tc.b)
	}
}
