package chart

import (
	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// webChart is a chart made to show every way a value reaches a field.
func webChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "web")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("web", "1.0.0"),
		"values.yaml": `web:
  image:
    repository: registry.example/web
    tag: "1"
  replicas: 2
  args: ["--color", "blue"]
  resources:
    limits: {cpu: 500m}
  mode: fast
config:
  retention: 7d
password: hunter2
debug: false
`,
		"templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.web.replicas }}
  revisionHistoryLimit: 5
  template:
    spec:
      terminationGracePeriodSeconds: {{ add .Values.web.replicas 28 }}
      containers:
      - name: web
        image: "{{ .Values.web.image.repository }}:{{ .Values.web.image.tag }}"
        args: {{ toJson .Values.web.args }}
        resources: {{ toYaml .Values.web.resources | nindent 10 }}
        env:
        - name: MODE
          value: {{ .Values.web.mode | upper | quote }}
        - name: DEBUG
          value: {{ .Values.debug | quote }}
{{- if eq .Values.web.mode "fast" }}
        - name: FAST
          value: "yes"
{{- end }}
`,
		"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  retention: {{ .Values.config.retention | quote }}
  fixed: "hard-coded"
`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
data:
  password: {{ .Values.password | b64enc }}
`,
	})
	return dir
}

func traceOf(t *testing.T, dir string, user map[string]any) *provenance.Map {
	t.Helper()
	c, err := Load(dir)
	require.NoError(t, err)
	m, err := Trace(c, user, "rel", "ns")
	require.NoError(t, err)
	return m
}

func assignments(s provenance.Source) map[string]any {
	out := map[string]any{}
	for _, a := range s.Assignments {
		out[a.Path] = a.Value
	}
	return out
}

func TestTraceSplitsALiveFieldBackIntoItsValues(t *testing.T) {
	m := traceOf(t, webChart(t), nil)
	dep := provenance.ObjectID{Kind: "Deployment", Name: "rel-web"}
	container := []any{"spec", "template", "spec", "containers", 0}
	at := func(rest ...any) []any { return append(append([]any(nil), container...), rest...) }

	image := m.Explain(dep, at("image"), "registry.example/web:1-hotfix", true)
	require.Empty(t, image.Reason)
	require.Equal(t, map[string]any{"web.image.repository": "registry.example/web", "web.image.tag": "1-hotfix"}, assignments(image))
	require.False(t, image.Assignments[0].Changed)
	require.True(t, image.Assignments[1].Changed)

	// a number keeps its type; a field of one value takes the live value
	replicas := m.Explain(dep, []any{"spec", "replicas"}, int64(5), true)
	require.Equal(t, map[string]any{"web.replicas": int64(5)}, assignments(replicas))

	// a list element, from toJson: the path names the element
	arg := m.Explain(dep, at("args", 1), "green", true)
	require.Equal(t, map[string]any{"web.args[1]": "green"}, assignments(arg))
	require.Equal(t, []string{"web", "args"}, provenance.Unit(arg.Assignments[0].At))

	// toYaml: a leaf maps, and so does a key the live object adds
	cpu := m.Explain(dep, at("resources", "limits", "cpu"), "1", true)
	require.Equal(t, map[string]any{"web.resources.limits.cpu": "1"}, assignments(cpu))
	mem := m.Explain(dep, at("resources", "limits", "memory"), "1Gi", true)
	require.Equal(t, map[string]any{"web.resources.limits.memory": "1Gi"}, assignments(mem))
	require.Contains(t, mem.Note, "toYaml")

	// a quoted value in a ConfigMap
	cm := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "rel-config"}, []any{"data", "retention"}, "30d", true)
	require.Equal(t, map[string]any{"config.retention": "30d"}, assignments(cm))

	// b64enc: read back through base64
	sec := m.Explain(provenance.ObjectID{Kind: "Secret", Name: "rel-auth"}, []any{"data", "password"}, "c2VjcmV0", true)
	require.Equal(t, map[string]any{"password": "secret"}, assignments(sec))
	require.Contains(t, sec.Note, "base64")
}

func TestTraceNamesWhyAFieldMapsToNoValue(t *testing.T) {
	m := traceOf(t, webChart(t), nil)
	dep := provenance.ObjectID{Kind: "Deployment", Name: "rel-web"}
	env := func(i int) []any { return []any{"spec", "template", "spec", "containers", 0, "env", i, "value"} }
	for _, tc := range []struct {
		name  string
		id    provenance.ObjectID
		steps []any
		want  string
	}{
		{"hard-coded", dep, []any{"spec", "revisionHistoryLimit"}, provenance.ReasonNoValue},
		{"hard-coded in a ConfigMap", provenance.ObjectID{Kind: "ConfigMap", Name: "rel-config"}, []any{"data", "fixed"}, provenance.ReasonNoValue},
		{"arithmetic", dep, []any{"spec", "template", "spec", "terminationGracePeriodSeconds"}, provenance.ReasonTransformed},
		// web.mode is tested in a condition too: never marked
		{"upper of a value a condition tests", dep, env(0), provenance.ReasonNoValue},
		{"a boolean", dep, env(1), provenance.ReasonNoValue},
		// the condition goes as it really does: its literal is a literal
		{"a literal under a condition on a string", dep, env(2), provenance.ReasonNoValue},
		{"a field the chart does not render", dep, []any{"spec", "paused"}, provenance.ReasonNotRendered},
		{"an object the chart does not render", provenance.ObjectID{Kind: "Service", Name: "rel-web"}, []any{"spec"}, provenance.ReasonNoObject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := m.Explain(tc.id, tc.steps, "x", true)
			require.False(t, s.Mapped(), "%+v", s)
			require.Equal(t, tc.want, s.Reason)
		})
	}
	// a live value that drops the template's literal text
	s := m.Explain(dep, []any{"spec", "template", "spec", "containers", 0, "image"}, "web-hotfix", true)
	require.True(t, strings.HasPrefix(s.Reason, provenance.ReasonNoFit), s.Reason)
}

func TestTraceOfSplitsTheLeastChange(t *testing.T) {
	m := traceOf(t, webChart(t), map[string]any{"web": map[string]any{"image": map[string]any{"repository": "registry:5000/web"}}})
	s := m.Explain(provenance.ObjectID{Kind: "Deployment", Name: "rel-web"}, []any{"spec", "template", "spec", "containers", 0, "image"}, "registry:5000/web:2", true)
	require.Equal(t, map[string]any{"web.image.repository": "registry:5000/web", "web.image.tag": "2"}, assignments(s))
}

func TestTraceFollowsSubchartsAndGlobals(t *testing.T) {
	m := traceOf(t, appChart(t), map[string]any{"sub": map[string]any{"color": "green"}})
	color := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "sub"}, []any{"data", "color"}, "blue", true)
	require.Equal(t, map[string]any{"sub.color": "blue"}, assignments(color))
	require.Equal(t, "green", color.Assignments[0].Was)
	region := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "sub"}, []any{"data", "region"}, "us", true)
	require.Equal(t, map[string]any{"global.region": "us"}, assignments(region))
	// printf "%s:%s" keeps the text, and the schema's integer is no obstacle
	image := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "rel"}, []any{"data", "image"}, "example.com/app:v1.1.0", true)
	require.Equal(t, map[string]any{"image.repository": "example.com/app", "image.tag": "v1.1.0"}, assignments(image))
	replicas := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "rel"}, []any{"data", "replicas"}, "4", true)
	require.Equal(t, map[string]any{"replicas": int64(4)}, assignments(replicas))
	// an object whose name a value makes is still found by its real name
	depth := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "deeper-1"}, []any{"metadata", "name"}, "deeper-5", true)
	require.Equal(t, map[string]any{"sub.deeper.depth": int64(5)}, assignments(depth))
}

func TestTraceOfTheBundledExample(t *testing.T) {
	vals, err := readYAMLFile(filepath.Join("..", "..", "package", "examples", "values.yaml"))
	require.NoError(t, err)
	m := traceOf(t, filepath.Join("..", "..", "package", "examples", "charts", "demo-app-1.0.0"), vals)
	cm := provenance.ObjectID{Kind: "ConfigMap", Name: "rel-config"}
	image := m.Explain(cm, []any{"data", "webhookImage"}, "registry.example.com/demo/webhook:v0.4.1-hotfix", true)
	require.Equal(t, map[string]any{"webhook.image.repository": "registry.example.com/demo/webhook", "webhook.image.tag": "v0.4.1-hotfix"}, assignments(image))
	// toJson | quote of a map: each value inside the JSON text
	req := m.Explain(cm, []any{"data", "requests"}, `{"cpu":"100m","memory":"1Gi"}`, true)
	require.Equal(t, "1Gi", assignments(req)["resources.requests.memory"])
	require.Equal(t, map[string]any{"promote.clusterDNS": "10.53.0.10"}, assignments(m.Explain(cm, []any{"data", "clusterDNS"}, "10.53.0.10", true)))
	sc := m.Explain(provenance.ObjectID{Kind: "StorageClass", Name: "rel-longhorn"}, []any{"parameters", "numberOfReplicas"}, "3", true)
	require.Equal(t, map[string]any{"storageClass.replicaCount": int64(3)}, assignments(sc))
	require.Equal(t, provenance.ReasonNoValue, m.Explain(provenance.ObjectID{Kind: "StorageClass", Name: "rel-longhorn"}, []any{"provisioner"}, "x", true).Reason)
}

func readYAMLFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return values.Parse(data)
}

func TestTraceOfAWholeList(t *testing.T) {
	m := traceOf(t, webChart(t), nil)
	args := m.Explain(provenance.ObjectID{Kind: "Deployment", Name: "rel-web"}, []any{"spec", "template", "spec", "containers", 0, "args"}, []any{"--color", "red"}, true)
	require.Equal(t, map[string]any{"web.args": []any{"--color", "red"}}, assignments(args))
	r := m.Read(provenance.ObjectID{Kind: "Deployment", Name: "rel-web"}, []any{"spec", "template", "spec", "containers", 0, "args", 1}, "red", true, false)
	require.Equal(t, []string{`--set-json web.args=["--color","red"]`}, r.Set)
	require.Equal(t, []string{"{path: web.args, policy: adopt}"}, r.Rules)
}

// A chart that refuses a marker in some values (a version given to
// semverCompare, through a helper or not, outside a condition's own
// pipeline) is traced with those values alone unmarked: found by
// bisection, named in the reason of a field they render.
func TestTraceOfAChartThatRefusesSomeMarkers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loop")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("loop", "1.0.0"),
		"values.yaml": "workers: 2\nimage: registry.example/w:1\nport: 8080\nkubeVersion: \"\"\nversion: 1.0.0\n",
		"templates/_helpers.tpl": `{{- define "loop.kubeVersion" -}}
{{- default .Capabilities.KubeVersion.Version .Values.kubeVersion -}}
{{- end -}}`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: loop}
data:
  image: {{ .Values.image | quote }}
  port: {{ .Values.port | quote }}
  workers: {{ .Values.workers | quote }}
  kube: {{ include "loop.kubeVersion" . | quote }}
  version: {{ .Values.version | quote }}
{{- $old := semverCompare "<1.25-0" (include "loop.kubeVersion" .) }}
{{- $new := semverCompare ">=2.0.0" .Values.version }}
`,
	})
	m := traceOf(t, dir, nil)
	cm := provenance.ObjectID{Kind: "ConfigMap", Name: "loop"}
	require.Equal(t, map[string]any{"image": "registry.example/w:2"}, assignments(m.Explain(cm, []any{"data", "image"}, "registry.example/w:2", true)))
	require.Equal(t, map[string]any{"workers": int64(3)}, assignments(m.Explain(cm, []any{"data", "workers"}, "3", true)))
	for _, field := range []string{"version", "kube"} {
		src := m.Explain(cm, []any{"data", field}, "3.0.0", true)
		require.False(t, src.Mapped(), field)
		require.Contains(t, src.Reason, "the chart refuses a marker in kubeVersion, version (", field)
	}
}

// Two elements of one list in one field are adopted as one list with both
// replaced.
func TestReadOfTwoElementsOfOneList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pair")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("pair", "1.0.0"),
		"values.yaml": "hosts: [a.example, b.example, c.example]\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: pair}
data:
  pair: "{{ index .Values.hosts 0 }},{{ index .Values.hosts 1 }}"
`,
	})
	m := traceOf(t, dir, nil)
	r := m.Read(provenance.ObjectID{Kind: "ConfigMap", Name: "pair"}, []any{"data", "pair"}, "x.example,y.example", true, false)
	require.Len(t, r.Adopt, 1)
	require.Equal(t, []any{"x.example", "y.example", "c.example"}, r.Adopt[0].Value)
	require.Equal(t, []string{`--set-json hosts=["x.example","y.example","c.example"]`}, r.Set)
	require.Equal(t, []string{"{path: hosts, policy: adopt}"}, r.Rules)
}

// A workload under a condition on its kind (traefik's and ingress-nginx's
// `if eq .Values.controller.kind "Deployment"`) is traced: the values a
// condition tests are left unmarked, so the condition goes as it really
// does; a subchart's conditions are found under its name.
func TestAWorkloadUnderAKindConditionIsTraced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ingress")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("ingress", "1.0.0") + "dependencies:\n- name: backend\n  version: 0.1.0\n",
		"values.yaml": "controller:\n  kind: Deployment\n  image: registry.example/ctl:1\nglobal:\n  region: \"\"\n",
		"templates/controller.yaml": `{{- if eq .Values.controller.kind "Deployment" }}
apiVersion: apps/v1
kind: Deployment
metadata: {name: ctl}
spec:
  template:
    spec:
      containers:
      - name: ctl
        image: {{ .Values.controller.image }}
{{- else if eq .Values.controller.kind "DaemonSet" }}
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ctl}
{{- end }}
`,
		"charts/backend/Chart.yaml":  chartfile("backend", "0.1.0"),
		"charts/backend/values.yaml": "mode: web\nport: 8080\n",
		"charts/backend/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: backend}
data:
{{- if .Values.global.region }}
  region: here
{{- end }}
{{- with .Values.mode }}
  mode: {{ . }}
{{- end }}
  port: {{ .Values.port | quote }}
`,
	})
	c, err := Load(dir)
	require.NoError(t, err)
	effective, err := chartvalues.CoalesceValues(c, map[string]any{})
	require.NoError(t, err)
	// the kind, which eq tests, and the empty region, which a marker
	// would make true; not the mode, which with asks only whether it is
	// empty, and which a marker keeps non-empty
	require.ElementsMatch(t, [][]string{{"controller", "kind"}, {"backend", "global", "region"}, {"global", "region"}}, conditionValues(c, effective, templateTestsCache{}))
	m := traceOf(t, dir, nil)
	image := m.Explain(provenance.ObjectID{Kind: "Deployment", Name: "ctl"},
		[]any{"spec", "template", "spec", "containers", 0, "image"}, "registry.example/ctl:2", true)
	require.Equal(t, map[string]any{"controller.image": "registry.example/ctl:2"}, assignments(image))
	port := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "backend"}, []any{"data", "port"}, "9090", true)
	require.Equal(t, map[string]any{"backend.port": int64(9090)}, assignments(port), "a number keeps its type")
	mode := m.Explain(provenance.ObjectID{Kind: "ConfigMap", Name: "backend"}, []any{"data", "mode"}, "batch", true)
	require.Equal(t, map[string]any{"backend.mode": "batch"}, assignments(mode), "a value with binds is traced")
}

// A value a condition tests is left unmarked, and found by rendering:
// inside an argument with text around it (a port, a protocol the
// template lowers), or as the empty value a `default` falls back from,
// named as the field is or standing where the release namespace stands
// (traefik's ports, namespaceOverride and published service).
func TestReadOfValuesAConditionTests(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "edge")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("edge", "1.0.0"),
		"values.yaml": "namespaceOverride: \"\"\nports:\n  web: {port: 8000, protocol: TCP}\n  admin: {port: 9000, protocol: TCP}\n",
		"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: edge
  namespace: {{ .Values.namespaceOverride | default .Release.Namespace }}
spec:
  template:
    spec:
      containers:
      - name: edge
        args:
        {{- if gt (int .Values.ports.web.port) 1024 }}
        - "--entryPoints.web.address=:{{ .Values.ports.web.port }}/{{ .Values.ports.web.protocol | lower }}"
        {{- end }}
        - "--entryPoints.admin.address=:{{ .Values.ports.admin.port }}/{{ .Values.ports.admin.protocol | lower }}"
        - "--publishedService={{ .Values.namespaceOverride | default .Release.Namespace }}/edge"
`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: edge}
data:
  {{- if eq .Values.ports.admin.protocol "UDP" }}
  datagrams: "on"
  {{- end }}
  port: "{{ .Values.ports.web.port }}"
`,
		"templates/ns.yaml": `{{- if .Values.namespaceOverride }}
apiVersion: v1
kind: Namespace
metadata: {name: {{ .Values.namespaceOverride }}}
{{- end }}
`,
	})
	m := traceOf(t, dir, nil)
	dep := provenance.ObjectID{Kind: "Deployment", Name: "edge"}
	args := []any{"spec", "template", "spec", "containers", 0, "args"}

	port := m.Read(dep, append(args, 0), "--entryPoints.web.address=:8080/tcp", true, false)
	require.True(t, port.Mapped(), port.Reason)
	require.Equal(t, []string{"--set ports.web.port=8080"}, port.Set)
	require.Equal(t, provenance.ProbeNote, port.Note)
	require.Equal(t, []string{"ConfigMap edge .data.port"}, port.AlsoChanges)

	protocol := m.Read(dep, append(args, 1), "--entryPoints.admin.address=:9000/udp", true, false)
	require.True(t, protocol.Mapped(), protocol.Reason)
	require.Equal(t, []string{"--set-string ports.admin.protocol=udp"}, protocol.Set)

	ns := m.Read(dep, []any{"metadata", "namespace"}, "edge-system", true, false)
	require.True(t, ns.Mapped(), ns.Reason)
	require.Equal(t, []string{"--set-string namespaceOverride=edge-system"}, ns.Set)
	require.Equal(t, []string{"Deployment edge-system/edge (a new object)", "Namespace edge-system (a new object)"}, ns.AlsoChanges)

	// the release namespace a default falls back to, inside a flag
	published := m.Read(dep, append(args, 2), "--publishedService=edge-system/edge", true, false)
	require.True(t, published.Mapped(), published.Reason)
	require.Equal(t, []string{"--set-string namespaceOverride=edge-system"}, published.Set)

	// a text the value cannot render is not read back
	other := m.Read(dep, append(args, 0), "--entryPoints.web.address=8080", true, false)
	require.False(t, other.Mapped())
}

// An image's digest or tag a condition tests, and an existing secret a
// name falls back from, are found by rendering (bitnami's and grafana's
// image helpers, `existingSecret`).
func TestReadOfAnImagesDigestAndAnExistingSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "web")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":  chartfile("web", "1.0.0") + "appVersion: 1.0.0\n",
		"values.yaml": "image: {registry: registry.example, repository: team/web, tag: \"\", digest: \"\"}\nauth: {existingSecret: \"\"}\n",
		"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata:
      labels:
        app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
    spec:
      containers:
      - name: web
        image: {{ .Values.image.registry }}/{{ .Values.image.repository }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ else }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ end }}
      volumes:
      - name: auth
        secret:
          secretName: {{ .Values.auth.existingSecret | default (printf "%s-auth" .Release.Name) }}
`,
		"templates/secret.yaml": `{{- if not .Values.auth.existingSecret }}
apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}-auth}
{{- end }}
{{- if .Values.image.tag }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: pinned}
{{- end }}
`,
	})
	m := traceOf(t, dir, nil)
	dep := provenance.ObjectID{Kind: "Deployment", Name: "web"}
	image := []any{"spec", "template", "spec", "containers", 0, "image"}

	digest := m.Read(dep, image, "registry.example/team/web@sha256:0123", true, false)
	require.True(t, digest.Mapped(), digest.Reason)
	require.Equal(t, []string{"--set-string image.digest=sha256:0123"}, digest.Set)

	tag := m.Read(dep, image, "registry.example/team/web:1.0.1", true, false)
	require.True(t, tag.Mapped(), tag.Reason)
	require.Equal(t, []string{"--set-string image.tag=1.0.1"}, tag.Set)
	require.Contains(t, tag.AlsoChanges, "ConfigMap pinned (a new object)")

	label := m.Read(dep, []any{"spec", "template", "metadata", "labels", "app.kubernetes.io/version"}, "1.0.1", true, false)
	require.True(t, label.Mapped(), label.Reason)
	require.Equal(t, []string{"--set-string image.tag=1.0.1"}, label.Set)

	secret := m.Read(dep, []any{"spec", "template", "spec", "volumes", 0, "secret", "secretName"}, "web-credentials", true, false)
	require.True(t, secret.Mapped(), secret.Reason)
	require.Equal(t, []string{"--set-string auth.existingSecret=web-credentials"}, secret.Set)
}
