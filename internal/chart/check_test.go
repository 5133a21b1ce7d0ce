package chart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func loadApp(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := Load(appChart(t))
	require.NoError(t, err)
	return c
}

func TestCheckPasses(t *testing.T) {
	c := loadApp(t)
	for name, vals := range map[string]map[string]any{
		"no user values":  nil,
		"empty":           {},
		"customised":      {"replicas": int64(3), "image": map[string]any{"tag": "v1.1.0"}, "sub": map[string]any{"color": "green"}},
		"required is set": {"needName": true, "name": "x"},
		// The condition drops sub, so neither its schema nor its templates count.
		"disabled subchart": {"sub": map[string]any{"enabled": false, "color": "pink"}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.NoError(t, Check(c, vals))
		})
	}
}

func TestCheckRefuses(t *testing.T) {
	c := loadApp(t)
	tests := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"schema", map[string]any{"replicas": int64(0)}, []string{"validating the merged values against chart app-1.0.0", "replicas", "minimum"}},
		{"schema type", map[string]any{"replicas": "two"}, []string{"replicas", "integer"}},
		{"subchart schema", map[string]any{"sub": map[string]any{"color": "pink"}}, []string{"sub:", "/color", "must be one of"}},
		{"fail", map[string]any{"explode": true}, []string{"rendering chart app-1.0.0 with the merged values", "app/templates/cm.yaml", "boom"}},
		{"required", map[string]any{"needName": true}, []string{"name is required"}},
		{"required in a subchart", map[string]any{"sub": map[string]any{"color": nil}}, []string{"app/charts/sub/templates/cm.yaml", "color is required"}},
		{"invalid YAML", map[string]any{"badYAML": true}, []string{"templates/cm.yaml", "YAML"}},
		{"type mismatch", map[string]any{"sub": "none"}, []string{`the values of subchart "sub" must be a map, not string`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(c, tt.vals)
			require.Error(t, err)
			assert.Equal(t, outcome.ExitRefused, outcome.Code(err), "%v", err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestCheckReleaseAndLookup(t *testing.T) {
	// Release name is the chart name, namespace "default", IsUpgrade true, and
	// lookup finds nothing: a template that insists otherwise fails.
	dir := filepath.Join(t.TempDir(), "rel")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("rel", "0.3.0"),
		"templates/check.yaml": `{{- if ne .Release.Name "rel" }}{{ fail (printf "name %s" .Release.Name) }}{{ end }}
{{- if ne .Release.Namespace "default" }}{{ fail "namespace" }}{{ end }}
{{- if not .Release.IsUpgrade }}{{ fail "not an upgrade" }}{{ end }}
{{- if lookup "v1" "Namespace" "" "default" }}{{ fail "lookup found something" }}{{ end }}
{{- if not (.Capabilities.APIVersions.Has "apps/v1") }}{{ fail "capabilities" }}{{ end }}
`,
	})
	c, err := Load(dir)
	require.NoError(t, err)
	assert.NoError(t, Check(c, nil))
}

func TestCheckDoesNotMutate(t *testing.T) {
	c := loadApp(t)
	vals := map[string]any{"sub": map[string]any{"enabled": false}, "image": map[string]any{"tag": "v2"}}
	wantVals := copyMap(vals)
	wantChartValues := copyMap(c.Values)
	wantSubValues := copyMap(c.Dependencies()[0].Values)
	wantDep := *c.Metadata.Dependencies[0]

	require.NoError(t, Check(c, vals))
	require.Error(t, Check(c, map[string]any{"explode": true}))

	assert.Equal(t, wantVals, vals)
	assert.Equal(t, wantChartValues, c.Values)
	assert.Equal(t, wantSubValues, c.Dependencies()[0].Values)
	require.Len(t, c.Dependencies(), 1, "the disabled subchart is still there")
	require.Len(t, c.Metadata.Dependencies, 1)
	assert.Equal(t, wantDep, *c.Metadata.Dependencies[0])
	// And the subchart is checked again once enabled.
	require.ErrorIs(t, Check(c, map[string]any{"sub": map[string]any{"color": "pink"}}), outcome.ErrRefused)
}

func TestCheckUninstallable(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"lib/Chart.yaml": chartfile("lib", "1.0.0") + "type: library\n",
		"missing/Chart.yaml": chartfile("missing", "1.0.0") + `dependencies:
- name: gone
  version: 1.0.0
`,
	})
	for name, want := range map[string]string{"lib": "library chart", "missing": "missing from charts/: gone"} {
		c, err := Load(filepath.Join(dir, name))
		require.NoError(t, err)
		err = Check(c, nil)
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, want)
	}
}
