package chart

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
)

// gatewayChart has the shapes of issue 56 that take more than one value
// changed at once, which the corpus's generator (one value at a time)
// does not make: an image set to a new tag without the default's digest,
// two arguments added to a map ranged into args, an upper-cased value, a
// key added to a toYaml ConfigMap.
func gatewayChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gw")
	gatewayFiles(t, dir)
	return dir
}

func gatewayFiles(t testing.TB, dir string) {
	t.Helper()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("gw", "1.0.0"),
		"values.yaml": `image: {registry: registry.example, image: gw, tag: "1.0", digest: "sha256:0123"}
extraArgs: {}
logLevel: info
metrics: {enabled: false, port: 9100}
config: {keep-alive: "75", workers: "4"}
hosts: [a.example, b.example]
`,
		"templates/gw.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: gw
spec:
  template:
    spec:
      containers:
      - name: gw
        image: "{{ .Values.image.registry }}/{{ .Values.image.image }}:{{ .Values.image.tag }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ end }}"
        args:
        - --log-level={{ .Values.logLevel | upper }}
        {{- range $k, $v := .Values.extraArgs }}
        - --{{ $k }}={{ $v }}
        {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: gw
spec:
  ports:
  - {name: http, port: 80}
  {{- if .Values.metrics.enabled }}
  - {name: metrics, port: {{ .Values.metrics.port }}}
  {{- end }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: gw
data:
  hosts: {{ join "," .Values.hosts | quote }}
  config.yaml: |
    {{- toYaml .Values.config | nindent 4 }}
`,
	})
}

func TestReadThroughTheOtherBranchOfACondition(t *testing.T) {
	m := traceOf(t, gatewayChart(t), nil)
	dep := provenance.ObjectID{Kind: "Deployment", Name: "gw"}
	container := []any{"spec", "template", "spec", "containers", 0}
	read := func(id provenance.ObjectID, steps []any, live any) provenance.Reading {
		t.Helper()
		r := m.Read(id, steps, live, true, false)
		require.True(t, r.Mapped(), "%v: %s", steps, r.Reason)
		return r
	}

	// a tag without the digest: the digest emptied, the tag read back
	r := read(dep, append(container, "image"), "registry.example/gw:1.1")
	assert.Equal(t, map[string]any{"image.digest": "", "image.tag": "1.1", "image.registry": "registry.example", "image.image": "gw"}, assignments(r.Source))
	assert.Equal(t, provenance.ConditionNote, r.Note)
	assert.ElementsMatch(t, []string{"{path: image.digest, policy: adopt}", "{path: image.tag, policy: adopt}"}, r.Rules)

	// two arguments a range over an empty map adds, and an upper-cased value
	r = read(dep, append(container, "args"), []any{"--log-level=DEBUG", "--enable-ssl-passthrough=true", "--v=3"})
	got := assignments(r.Source)
	assert.Equal(t, map[string]any{"enable-ssl-passthrough": "true", "v": "3"}, got["extraArgs"])
	assert.Equal(t, "debug", strings.ToLower(fmt.Sprint(got["logLevel"])), "upper read back")

	// a port a switch adds, the live one with the API server's protocol
	svc := provenance.ObjectID{Kind: "Service", Name: "gw"}
	r = read(svc, []any{"spec", "ports"}, []any{
		map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"},
		map[string]any{"name": "metrics", "port": int64(9100), "protocol": "TCP"}})
	assert.Equal(t, []string{"--set metrics.enabled=true"}, r.Set)

	// a key added to a toYaml block: the map read back as YAML
	r = read(provenance.ObjectID{Kind: "ConfigMap", Name: "gw"}, []any{"data", "config.yaml"}, "keep-alive: \"75\"\nssl: TLSv1.3\nworkers: \"4\"\n")
	assert.Equal(t, provenance.NoteYAML, r.Note)
	assert.Equal(t, map[string]any{"keep-alive": "75", "ssl": "TLSv1.3", "workers": "4"}, assignments(r.Source)["config"])

	// a list joined, an element added
	r = read(provenance.ObjectID{Kind: "ConfigMap", Name: "gw"}, []any{"data", "hosts"}, "a.example,b.example,c.example")
	assert.Equal(t, provenance.NoteJoin, r.Note)
	assert.Equal(t, []string{`--set-json hosts=["a.example","b.example","c.example"]`}, r.Set)

	// the registry too: three values at once, read in the same trace
	r = read(dep, append(container, "image"), "other.example/gw:1.1")
	assert.Equal(t, "other.example", assignments(r.Source)["image.registry"])

	// what no setting renders stays unanswered, and says why
	r = m.Read(dep, append(container, "image"), "gw-hotfix", true, false)
	assert.False(t, r.Mapped())
	assert.NotEmpty(t, r.Reason)
}

// A Secret's key from b64enc of a password with a random default: read
// back through the password's condition, offered as --set-file from the
// live Secret, never with the value.
func TestReadOfASecretWithARandomDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("auth", "1.0.0"),
		"values.yaml": "auth: {password: \"\"}\n",
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: auth
data:
  {{- if .Values.auth.password }}
  password: {{ .Values.auth.password | b64enc | quote }}
  {{- else }}
  password: {{ randAlphaNum 16 | b64enc | quote }}
  {{- end }}
`,
	})
	m := traceOf(t, dir, nil)
	id := provenance.ObjectID{Kind: "Secret", Namespace: "ns", Name: "auth"}
	r := m.Read(id, []any{"data", "password"}, base64.StdEncoding.EncodeToString([]byte("Pa55-hotfix")), true, true)
	require.True(t, r.Mapped(), r.Reason)
	assert.Equal(t, []string{"{path: auth.password, policy: adopt}"}, r.Rules)
	assert.Equal(t, []string{"--set-file auth.password=<(kubectl get secret -n ns auth -o jsonpath='{.data.password}' | base64 -d)"}, r.Set)
	assert.Equal(t, "Pa55-hotfix", r.Adopt[0].Value, "adopt writes the value, never shown")
}

// Conditional probing is bounded: once a trace's MaxRetraces traces are
// made, a field it cannot read says so.
func TestConditionalProbingIsBounded(t *testing.T) {
	// three letters make a word (wordsOf): field fixedXyz is most like the
	// switches swXyz…, a set of its own for each field
	word := func(i int) string { return string(rune('A'+i/26)) + string(rune('a'+i%26)) + "x" }
	var vals, tpl strings.Builder
	fields := provenance.MaxRetraces/provenance.MaxConditionProbes + 2
	for f := range fields {
		for k := range provenance.MaxConditionProbes {
			sw := "sw" + word(f) + word(100+k)
			fmt.Fprintf(&vals, "%s: false\n", sw)
			fmt.Fprintf(&tpl, "  {{- if .Values.%s }}\n  %s: \"on\"\n  {{- end }}\n", sw, sw)
		}
		fmt.Fprintf(&tpl, "  fixed%s: \"a\"\n", word(f))
	}
	dir := filepath.Join(t.TempDir(), "many")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":        chartfile("many", "1.0.0"),
		"values.yaml":       vals.String(),
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\ndata:\n" + tpl.String(),
	})
	m := traceOf(t, dir, nil)
	id := provenance.ObjectID{Kind: "ConfigMap", Name: "many"}
	var reasons []string
	for f := range fields {
		r := m.Read(id, []any{"data", "fixed" + word(f)}, "b", true, false)
		require.False(t, r.Mapped())
		reasons = append(reasons, r.Reason)
	}
	assert.NotContains(t, reasons[0], provenance.ReasonBudget, "the first fields are probed as far as a field may be")
	assert.Contains(t, reasons[0], fmt.Sprintf("conditional probing tried the %d likeliest of", provenance.MaxConditionProbes), "the field's own bound, said")
	assert.Contains(t, reasons[fields-1], provenance.ReasonBudget)
}

// The values conditions test, as conditional probing takes them: a key
// index reads, the texts and numbers a comparison compares with, a range.
func TestTestedValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tests")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("tests", "1.0.0"),
		"values.yaml": "args: {}\nkind: Deployment\nreplicas: 1\nlist: []\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: tests
data:
  {{- if ne (index .Values.args "update-status") "false" }}
  a: "1"
  {{- end }}
  {{- if eq .Values.kind "DaemonSet" }}
  b: "1"
  {{- end }}
  {{- if gt (int .Values.replicas) 1 }}
  c: "1"
  {{- end }}
  {{- range .Values.list }}
  d: {{ . }}
  {{- end }}
`,
	})
	c, err := Load(dir)
	require.NoError(t, err)
	got := map[string]provenance.Tested{}
	for _, tv := range testedValues(c, map[string]any{}, templateTestsCache{}) {
		got[strings.Join(tv.At, ".")] = tv
	}
	require.Contains(t, got, "args.update-status", "index tests the key")
	require.NotContains(t, got, "args", "not the map")
	assert.Equal(t, []any{"DaemonSet"}, got["kind"].Literals)
	assert.Equal(t, []any{int64(1)}, got["replicas"].Literals)
	assert.True(t, got["list"].Ranged)
}

// BenchmarkReadThroughACondition is one trace of gatewayChart and one
// field read through the other branch of a condition: the image set to a
// tag without the default's digest (one more trace, and its check).
func BenchmarkReadThroughACondition(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "gw")
	gatewayFiles(b, dir)
	c, err := Load(dir)
	require.NoError(b, err)
	steps := []any{"spec", "template", "spec", "containers", 0, "image"}
	for b.Loop() {
		m, err := Trace(c, nil, "rel", "ns")
		if err != nil {
			b.Fatal(err)
		}
		if r := m.Read(provenance.ObjectID{Kind: "Deployment", Name: "gw"}, steps, "registry.example/gw:1.1", true, false); !r.Mapped() {
			b.Fatal(r.Reason)
		}
	}
}
