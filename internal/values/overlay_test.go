package values

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOverlayMergesMapsAndReplacesTheRest(t *testing.T) {
	base := map[string]any{"a": map[string]any{"b": int64(1), "c": "x"}, "l": []any{"1"}, "s": "keep"}
	over := map[string]any{"a": map[string]any{"b": int64(2)}, "l": []any{"2"}, "n": map[string]any{"m": true}}
	got := Overlay(base, over)
	require.Equal(t, map[string]any{"a": map[string]any{"b": int64(2), "c": "x"}, "l": []any{"2"}, "s": "keep",
		"n": map[string]any{"m": true}}, got)
	require.Equal(t, int64(1), base["a"].(map[string]any)["b"], "base unchanged")
}

func TestShadowedNamesEveryPathTheOverlaySetsAgain(t *testing.T) {
	merged := map[string]any{"image": map[string]any{"tag": "v2", "repo": "r"}, "replicas": int64(3), "cfg": "flat",
		"only": "mine"}
	over := map[string]any{"image": map[string]any{"tag": "v9"}, "replicas": int64(3), "cfg": map[string]any{"x": int64(1)},
		"other": "not in merged"}
	ws := Shadowed(merged, over, "HelmChartConfig kube-system/app")
	var paths []string
	for _, w := range ws {
		require.Equal(t, WarnOverriddenByConfig, w.Kind)
		require.NotContains(t, w.Message, "v9", "a message never quotes a value")
		paths = append(paths, w.Path)
	}
	require.Equal(t, []string{"cfg", "image.tag", "replicas"}, paths)
	require.Contains(t, ws[2].Message, "the same value")
	require.Contains(t, ws[1].Message, "a different value")
	require.Empty(t, Shadowed(merged, nil, "x"))
}
