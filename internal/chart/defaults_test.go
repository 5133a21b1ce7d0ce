package chart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func TestDefaults(t *testing.T) {
	c, err := Load(appChart(t))
	require.NoError(t, err)

	got, err := Defaults(c)
	require.NoError(t, err)

	global := map[string]any{"region": "eu"}
	want := map[string]any{
		"replicas": int64(1),
		"image":    map[string]any{"repository": "example.com/app", "tag": "v1.0.0"},
		"global":   global,
		"explode":  false,
		"sub": map[string]any{
			"enabled": true,
			"color":   "blue", // the parent's value wins
			"size":    int64(3),
			"global":  global,
			"deeper": map[string]any{
				"depth":  int64(1), // sub's value over deeper's own default
				"name":   "deep",
				"global": global,
			},
		},
	}
	assert.Equal(t, want, got)

	t.Run("no aliasing", func(t *testing.T) {
		got["image"].(map[string]any)["tag"] = "changed"
		got["sub"].(map[string]any)["color"] = "changed"
		again, err := Defaults(c)
		require.NoError(t, err)
		assert.Equal(t, want, again)
		assert.Equal(t, "v1.0.0", c.Values["image"].(map[string]any)["tag"])
		assert.Equal(t, "red", c.Dependencies()[0].Values["color"])
	})
}

func TestDefaultsDisabledAndAliasedSubcharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "top")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("top", "1.0.0") + `dependencies:
- name: opt
  version: 1.0.0
  condition: opt.enabled
  tags: [extras]
- name: opt
  alias: second
  version: 1.0.0
`,
		"values.yaml":                 "tags:\n  extras: false\nopt:\n  enabled: false\n",
		"charts/opt/Chart.yaml":       chartfile("opt", "1.0.0"),
		"charts/opt/values.yaml":      "enabled: true\nport: 80\n",
		"charts/opt/templates/x.yaml": "{{ fail \"never rendered by Defaults\" }}\n",
	})
	c, err := Load(dir)
	require.NoError(t, err)
	got, err := Defaults(c)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"tags":   map[string]any{"extras": false},
		"opt":    map[string]any{"enabled": false, "port": int64(80), "global": map[string]any{}},
		"second": map[string]any{"enabled": true, "port": int64(80), "global": map[string]any{}},
	}, got)
	// The chart itself is untouched: one subchart, dependencies as written.
	assert.Len(t, c.Dependencies(), 1)
	require.Len(t, c.Metadata.Dependencies, 2)
	assert.Equal(t, "opt", c.Metadata.Dependencies[1].Name)
	assert.Equal(t, "opt.enabled", c.Metadata.Dependencies[0].Condition)
}

func TestDefaultsBadChart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "top")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":            chartfile("top", "1.0.0"),
		"values.yaml":           "sub: not-a-map\n",
		"charts/sub/Chart.yaml": chartfile("sub", "0.1.0"),
	})
	c, err := Load(dir)
	require.NoError(t, err)
	_, err = Defaults(c)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "top-1.0.0")

	_, err = Defaults(nil)
	require.ErrorIs(t, err, outcome.ErrBadInput)
}

// Keys keep what the chart and its subcharts set to null, which Defaults
// (Helm's coalescing) drops: longhorn's defaultSettings.defaultDataPath: ~
// is a key the chart reads.
func TestKeysKeepNullDefaults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":                chartfile("store", "1.0.0") + "dependencies:\n- name: engine\n  version: 0.1.0\n",
		"values.yaml":               "defaultSettings:\n  defaultDataPath: ~\n  replicaCount: 3\n",
		"templates/cm.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"charts/engine/Chart.yaml":  chartfile("engine", "0.1.0"),
		"charts/engine/values.yaml": "nodeSelector: null\n",
	})
	c, err := Load(dir)
	require.NoError(t, err)
	d, keys, err := DefaultsAndKeys(c)
	require.NoError(t, err)
	assert.NotContains(t, d["defaultSettings"], "defaultDataPath")
	only, err := Defaults(c)
	require.NoError(t, err)
	assert.Equal(t, only, d, "the same defaults as Defaults")
	assert.Equal(t, map[string]any{"defaultDataPath": nil, "replicaCount": int64(3)}, keys["defaultSettings"])
	assert.Contains(t, keys["engine"], "nodeSelector")
}
