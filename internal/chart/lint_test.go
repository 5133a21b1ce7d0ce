package chart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegeneratedData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gen")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("gen", "1.0.0"),
		// Reported.
		"templates/webhook.yaml": `{{- $ca := genCA "webhook-ca" 365 }}
{{- $cert := genSignedCert "webhook" nil nil 365 $ca }}
caBundle: {{ $ca.Cert | b64enc }}
`,
		"templates/time.yaml":     "stamp: {{ now | date \"2006-01-02\" }}\n",
		"templates/in-range.yaml": "{{ range .Values.users }}{{ if .admin }}{{ with .name }}pw: {{ randAscii 12 }}{{ end }}{{ end }}{{ end }}\n",
		"templates/chained.yaml":  "year: {{ (now).Year }}\n",
		"templates/_helpers.tpl": `{{/* A password, new at every render. */}}
{{- define "gen.password" -}}
{{ randAlpha 8 }}
{{- end -}}
`,
		"templates/broken.yaml": "{{ if }}\nid: {{ uuidv4 }}\n", // does not parse; still scanned
		// Not reported.
		"templates/guarded.yaml": `{{- $old := lookup "v1" "Secret" .Release.Namespace "gen" }}
password: {{ if $old }}{{ $old.data.password }}{{ else }}{{ randAlphaNum 16 }}{{ end }}
`,
		"templates/quiet.yaml": `{{/* uses now and genCA only in comments */}}
{{- /* randAlphaNum 5 */ -}}
a: {{ .Values.now }}
b: {{ $.Values.genCA }}
c: {{ "now" }} {{ ` + "`uuidv4`" + ` }}
{{- $now := .Values.x }}
d: {{ $now }}
e: {{ nowhere . }}
f: {{ include "gen.other" . }}
`,
		"templates/broken-quiet.yaml": "{{ if }}\n{{/* now */}}{{ .Values.now }}{{ \"genCA\" }}{{ $uuidv4 }}\n",
		"templates/NOTES.txt":         "Installed at {{ now }}.\n",
		"templates/plain.yaml":        "now: genCA\n",

		"charts/sub/Chart.yaml":                        chartfile("sub", "0.1.0"),
		"charts/sub/templates/x.yaml":                  "id: {{ uuidv4 }}\n",
		"charts/sub/templates/y.yaml":                  "{{ if lookup \"v1\" \"ConfigMap\" \"\" \"y\" }}{{ else }}k: {{ genPrivateKey \"rsa\" }}{{ end }}\n",
		"charts/sub/charts/deeper/Chart.yaml":          chartfile("deeper", "0.2.0"),
		"charts/sub/charts/deeper/templates/y.yaml":    "pin: {{ randNumeric 4 }}\n",
		"charts/sub/charts/deeper/templates/_cert.tpl": "{{ define \"c\" }}{{ genSelfSignedCert \"x\" nil nil 1 }}{{ end }}\n",
	})
	c, err := Load(dir)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"charts/sub/charts/deeper/templates/_cert.tpl",
		"charts/sub/charts/deeper/templates/y.yaml",
		"charts/sub/templates/x.yaml",
		"templates/_helpers.tpl",
		"templates/broken.yaml",
		"templates/chained.yaml",
		"templates/in-range.yaml",
		"templates/time.yaml",
		"templates/webhook.yaml",
	}, RegeneratedData(c))
}

func TestRegeneratedDataNone(t *testing.T) {
	c := loadApp(t) // its only generator is guarded by lookup; NOTES.txt is skipped
	assert.Empty(t, RegeneratedData(c))
	assert.Empty(t, RegeneratedData(nil))
}

func TestScanCalls(t *testing.T) {
	got := scanCalls(`x {{- now }} {{ .a.now }} {{ $now }} {{/* genCA */}} {{ "randAlpha" }} {{ printf "%s" (uuidv4) -}} y {{ 'a' }}`)
	assert.True(t, got["now"])
	assert.True(t, got["uuidv4"])
	assert.True(t, got["printf"])
	assert.False(t, got["genCA"])
	assert.False(t, got["randAlpha"])
	assert.False(t, got["a"])
}
