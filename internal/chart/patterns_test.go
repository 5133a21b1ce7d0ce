package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
)

// patternsChart has the patterns real charts use around a value, one
// field each (ConfigMap rel-p, Deployment rel-app), and a Secret made anew
// on every render (rel-token).
func patternsChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "patterns")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("patterns", "1.0.0") + "appVersion: v1.0.0\n",
		"values.yaml": "image:\n  repository: registry.example/app\n  tag: \"\"\n" +
			"script: \"echo hi\"\nstripped: \"level: info\"\njson: '{\"a\":\"b\"}'\nport: 8080\nreplicas: 1\n" +
			"proxy:\n  registry:\n  repository:\n  tag:\nextraEnv:\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-p}
data:
  script: |
    {{ .Values.script }}
  stripped: |-
    {{ .Values.stripped }}
  json: {{ .Values.json | quote }}
`,
		"templates/token.yaml": `apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}-token}
data: {token: {{ randAlphaNum 16 | b64enc | quote }}}
`,
		"templates/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-app}
spec:
  replicas: {{ .Values.replicas }}
  {{- if gt (int .Values.replicas) 1 }}
  minReadySeconds: 5
  {{- end }}
  template:
    spec:
      containers:
      - name: app
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
        env:
        - {name: PORT, value: {{ .Values.port | quote }}}
        {{- range .Values.extraEnv }}
        - {name: {{ .name }}, value: {{ .value | quote }}}
        {{- end }}
        ports:
        - containerPort: {{ .Values.port }}
      - name: proxy
        image: {{ printf "%s/%s:%s" (.Values.proxy.registry | default "docker.io") (.Values.proxy.repository | default "proxy") (.Values.proxy.tag | default .Chart.AppVersion) }}
`,
	})
	return dir
}

// Each pattern: the live value an operator set, and what the reading
// answers. An answer is checked by rendering it (Map.CheckWith): every
// --set it gives renders the live value with Helm's engine, checked here
// again through strvals and a render; one that would render something
// else is no answer.
func TestProvenanceOfTheRealPatterns(t *testing.T) {
	dir := patternsChart(t)
	c, err := Load(dir)
	require.NoError(t, err)
	m, err := Trace(c, nil, "rel", "ns")
	require.NoError(t, err)
	cm := provenance.ObjectID{Kind: "ConfigMap", Name: "rel-p"}
	app := provenance.ObjectID{Kind: "Deployment", Name: "rel-app"}
	container := []any{"spec", "template", "spec", "containers", 0}
	for _, tc := range []struct {
		name   string
		id     provenance.ObjectID
		steps  []any
		live   any
		set    map[string]any // the values the answer sets; nil: no answer
		reason string
		also   []string
	}{
		{name: "an empty tag under default .Chart.AppVersion", id: app, steps: append(container, "image"),
			live: "registry.example/app:v1.0.1-hotfix", set: map[string]any{"image.tag": "v1.0.1-hotfix"}},
		{name: "a value ending a | block", id: cm, steps: []any{"data", "script"},
			live: "echo bye\n", set: map[string]any{"script": "echo bye"}},
		{name: "a |- block cannot end in a newline", id: cm, steps: []any{"data", "stripped"},
			live: "level: debug\n", reason: provenance.ReasonRendersOther},
		{name: "quoted JSON reads back unescaped", id: cm, steps: []any{"data", "json"},
			live: `{"a":"c"}`, set: map[string]any{"json": `{"a":"c"}`}},
		{name: "a value that renders two fields", id: app, steps: append(container, "env", 0, "value"),
			live: "9090", set: map[string]any{"port": int64(9090)},
			also: []string{"Deployment rel-app .spec.template.spec.containers[0].ports[0].containerPort"}},
		{name: "null values a helper defaults (traefik's image)", id: app, steps: []any{"spec", "template", "spec", "containers", 1, "image"},
			live: "registry.example/hotfix:1", set: map[string]any{"proxy.registry": "registry.example", "proxy.repository": "hotfix", "proxy.tag": "1"}},
		{name: "a number a condition also compares, found by rendering", id: app, steps: []any{"spec", "replicas"},
			live: float64(3), set: map[string]any{"replicas": float64(3)}, // as a render reads back
			also: []string{"Deployment rel-app .spec.minReadySeconds"}}, // not the Secret each render makes anew
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := m.Read(tc.id, tc.steps, tc.live, true, false)
			if tc.set == nil {
				assert.False(t, r.Mapped(), "no answer: %+v", r)
				assert.Equal(t, tc.reason, r.Reason)
				return
			}
			require.True(t, r.Mapped(), r.Reason)
			got := map[string]any{}
			for _, a := range r.Assignments {
				if a.Changed {
					got[a.Path] = a.Value
				}
			}
			assert.Equal(t, tc.set, got, "%+v", r)
			assert.Equal(t, tc.also, r.AlsoChanges)
			// the --set flags, parsed as Helm parses them, render the live value
			user := map[string]any{}
			for _, flag := range r.Set {
				kind, kv, _ := strings.Cut(flag, " ")
				switch kind {
				case "--set-string":
					require.NoError(t, strvals.ParseIntoString(kv, user))
				case "--set-json":
					require.NoError(t, strvals.ParseJSON(kv, user))
				default:
					require.NoError(t, strvals.ParseInto(kv, user))
				}
			}
			again, err := Trace(c, user, "rel", "ns")
			require.NoError(t, err)
			v, ok := provenance.At(again.Object(tc.id), tc.steps)
			require.True(t, ok)
			assert.Equal(t, tc.live, v, "what %v renders", r.Set)
		})
	}
}
