package applycheck

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A printed field path finds the value it names: fields, list elements by
// key (strings and numbers), by value and by index.
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
	}}
	for path, want := range map[string]any{
		`.spec.template.spec.containers[name="web"].image`:                                        "web:2",
		`.spec.template.spec.containers[name="side"]`:                                             map[string]any{"name": "side", "image": "side:1"},
		`.spec.template.spec.containers[name="web"].ports[containerPort=443,protocol="TCP"].name`: "https",
		`.spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].name`:  "http",
		`.spec.template.spec.containers[1].image`:                                                 "web:2",
		`.spec.finalizers[="b,c"]`:                                                                "b,c",
	} {
		p, err := ParsePath(path)
		require.NoError(t, err, path)
		got, ok := p.Lookup(obj)
		assert.True(t, ok, path)
		assert.Equal(t, want, got, path)
	}
	for _, path := range []string{`.spec.nothing`, `.spec.template.spec.containers[name="db"].image`, `.spec.finalizers[="z"]`, `.spec.template.spec.containers[5]`} {
		p, err := ParsePath(path)
		require.NoError(t, err, path)
		_, ok := p.Lookup(obj)
		assert.False(t, ok, path)
	}
}

// A path that is not one is an error naming it.
func TestParsePathRefusesBadPaths(t *testing.T) {
	for _, bad := range []string{`spec`, `.spec[name="x"`, `.spec..x`, `.spec[name]`, `.spec[=nope]`} {
		_, err := ParsePath(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), strconv.Quote(bad))
	}
}

// The owner's bare name is read from the API server's wording.
func TestOwnerName(t *testing.T) {
	assert.Equal(t, "kubectl-set", ownerName(`"kubectl-set" using apps/v1`))
	assert.Equal(t, "kubectl-set", ownerName(`"kubectl-set" using apps/v1 at 2026-11-25T10:00:00Z`))
	assert.Equal(t, "fleetagent", ownerName(`"fleetagent"`))
	assert.Equal(t, "odd", ownerName(`odd`))
}

// Values are shown as they are, JSON when not a string, cut when long,
// "(unset)" when absent.
func TestShow(t *testing.T) {
	assert.Equal(t, "web:2", show("web:2", true))
	assert.Equal(t, "3", show(int64(3), true))
	assert.Equal(t, `{"a":"b"}`, show(map[string]any{"a": "b"}, true))
	assert.Equal(t, "(unset)", show(nil, false))
	long := show(string(make([]byte, 300)), true)
	assert.Len(t, []rune(long), maxShown+1)
}
