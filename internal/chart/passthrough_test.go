package chart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTemplatePassedThrough(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       [][]string
	}{
		{"toYaml call", `annotations: {{ toYaml .Values.podAnnotations | nindent 4 }}`, [][]string{{"podAnnotations"}}},
		{"toYaml in a pipe", `{{ .Values.a.b | toYaml }}`, [][]string{{"a", "b"}}},
		{"toJson", `{{ toJson $.Values.config }}`, [][]string{{"config"}}},
		{"tpl", `{{ tpl .Values.extra . }}`, [][]string{{"extra"}}},
		{"nested pipe", `{{ printf "%s" (toYaml .Values.x) }}`, [][]string{{"x"}}},
		{"range", `{{ range $k, $v := .Values.env }}{{ $k }}{{ end }}`, [][]string{{"env"}}},
		{"with then toYaml of the dot", `{{- with .Values.settings }}{{ toYaml . }}{{ end }}`, [][]string{{"settings"}}},
		{"with then the dot through a pipe", `{{ with .Values.s }}{{ if true }}{{ . | toJson }}{{ end }}{{ end }}`, [][]string{{"s"}}},
		{"with reading a field is not whole", `{{ with .Values.svc }}{{ .port }}{{ end }}`, nil},
		{"a field printed is not whole", `{{ .Values.image.tag }}`, nil},
		{"a condition is not whole", `{{ if .Values.enabled }}x{{ end }}`, nil},
		{"in a define", `{{ define "x" }}{{ toYaml .Values.labels }}{{ end }}`, [][]string{{"labels"}}},
		{"does not parse", `{{ toYaml .Values.x `, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, templatePassedThrough("templates/t.yaml", tc.text))
		})
	}
}

// Keys are open below a map the templates render whole: a user key
// there (a subchart's toYaml'd settings, an annotation) is no orphan,
// while a map read key by key keeps its keys.
func TestKeysOpenWhatTheChartPassesThrough(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":                      chartfile("store", "1.0.0") + "dependencies:\n- name: engine\n  version: 0.1.0\n",
		"values.yaml":                     "podAnnotations: {team: a}\nservice: {port: 80}\n",
		"templates/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations: {{ toYaml .Values.podAnnotations | nindent 4 }}\ndata:\n  port: {{ .Values.service.port | quote }}\n",
		"charts/engine/Chart.yaml":        chartfile("engine", "0.1.0"),
		"charts/engine/values.yaml":       "settings: {dataPath: /var/lib}\n",
		"charts/engine/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: engine}\ndata:\n{{- with .Values.settings }}\n{{ toYaml . | indent 2 }}\n{{- end }}\n",
	})
	c, err := Load(dir)
	require.NoError(t, err)
	d, keys, err := DefaultsAndKeys(c)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, keys["podAnnotations"])
	assert.Equal(t, map[string]any{}, keys["engine"].(map[string]any)["settings"])
	assert.Equal(t, map[string]any{"port": int64(80)}, keys["service"], "read key by key: its keys stay")
	assert.Equal(t, map[string]any{"team": "a"}, d["podAnnotations"], "the defaults are untouched")
}
