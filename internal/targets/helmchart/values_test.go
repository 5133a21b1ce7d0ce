package helmchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestUserValuesCombinesAsKlipperHelmPassesThem(t *testing.T) {
	h := &HelmChart{Namespace: "kube-system", Name: "app",
		ValuesContent: "image:\n  tag: v1\nreplicas: 1\nnote: from-content\n",
		Values:        map[string]any{"replicas": int64(2), "extra": map[string]any{"a": "b"}},
		Set: []SetEntry{
			{Key: "enabled", Value: "true"},      // typed: --set
			{Key: "image.tag", Value: "v1,beta"}, // --set-string, comma escaped
			{Key: "port", Value: int64(8080)},    // --set
			{Key: "version", Value: "1.10"},      // --set-string keeps a string
			{Key: "nothing", Value: "NULL"},      // --set null
		}}
	got, err := UserValues(h)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"image": map[string]any{"tag": "v1,beta"}, "replicas": int64(2), "note": "from-content",
		"extra": map[string]any{"a": "b"}, "enabled": true, "port": int64(8080), "version": "1.10", "nothing": nil,
	}, got)
}

func TestUserValuesRefusesBadInputNamingTheField(t *testing.T) {
	for name, h := range map[string]*HelmChart{
		"not YAML":         {Namespace: "ns", Name: "a", ValuesContent: "a: [1, 2\n"},
		"not a map":        {Namespace: "ns", Name: "a", ValuesContent: "- 1\n- 2\n"},
		"unparsable set":   {Namespace: "ns", Name: "a", Set: []SetEntry{{Key: "a[x]", Value: "1"}}},
		"set into a value": {Namespace: "ns", Name: "a", ValuesContent: "a: 1\n", Set: []SetEntry{{Key: "a.b", Value: int64(1)}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := UserValues(h)
			require.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Contains(t, err.Error(), "helmchart/ns/a spec.")
		})
	}
}

func TestWriteBackDecidesEverySetEntry(t *testing.T) {
	set := []SetEntry{
		{Key: "image.tag", Value: "v1"},       // the merge dropped the pin: dropped
		{Key: "replicas", Value: int64(2)},    // unchanged: kept
		{Key: "resources.cpu", Value: "250m"}, // max decided 500m: rewritten
		{Key: "list[0]", Value: "a"},          // reaches into a list: folded
		{Key: "ratio", Value: "x"},            // now a fraction: folded
		{Key: "flag", Value: "false"},         // typed bool, now true: rewritten as "true"
		{Key: "obj", Value: "s"},              // now a map: folded
	}
	u := map[string]any{
		"replicas":  int64(2),
		"resources": map[string]any{"cpu": "500m", "memory": "1Gi"},
		"list":      []any{"a"},
		"ratio":     0.5,
		"flag":      true,
		"obj":       map[string]any{"k": "v"},
		"other":     "from valuesContent",
	}
	w, err := WriteBack(u, set)
	require.NoError(t, err)
	fates := map[string]SetFate{}
	for _, n := range w.Notes {
		fates[n.Key] = n.Fate
	}
	assert.Equal(t, map[string]SetFate{"image.tag": SetDropped, "replicas": SetKept, "resources.cpu": SetRewritten,
		"list[0]": SetFolded, "ratio": SetFolded, "flag": SetRewritten, "obj": SetFolded}, fates)
	assert.Equal(t, []SetEntry{{Key: "replicas", Value: int64(2)}, {Key: "resources.cpu", Value: "500m"},
		{Key: "flag", Value: "true"}}, w.Set)
	back, err := UserValues(&HelmChart{Namespace: "ns", Name: "a", ValuesContent: w.ValuesContent, Set: w.Set})
	require.NoError(t, err)
	want, _ := values.Normalize(u).(map[string]any)
	assert.Equal(t, want, back, "the written HelmChart gives the merged values back")
	assert.NotContains(t, w.ValuesContent, "replicas", "a set entry's value is not repeated in valuesContent")
}

func TestWriteBackWithoutSet(t *testing.T) {
	w, err := WriteBack(map[string]any{"a": int64(1)}, nil)
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", w.ValuesContent)
	assert.Empty(t, w.Set)
	w, err = WriteBack(map[string]any{}, nil)
	require.NoError(t, err)
	assert.Empty(t, w.ValuesContent)
}
