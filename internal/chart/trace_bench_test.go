package chart

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
)

// harvesterValues are the real Harvester values (the chart's v1.4.3
// defaults with the installer's and an operator's values over them), as
// one tree: a few hundred leaves to mark.
func harvesterValues(tb testing.TB) map[string]any {
	tb.Helper()
	dir := filepath.Join("..", "values", "testdata", "harvester")
	var out map[string]any
	for _, f := range []string{"values-v1.4.3.yaml", "user-values.yaml"} {
		v, err := readYAMLFile(filepath.Join(dir, f))
		require.NoError(tb, err)
		out = overlay(out, v)
	}
	return out
}

func overlay(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			dst[k] = overlay(dm, sm)
			continue
		}
		dst[k] = v
	}
	return dst
}

// bigChart writes a chart of 300 objects, ten kinds of 30, every one
// made of values: the shape of Harvester's chart.
func bigChart(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "big")
	var vals strings.Builder
	vals.WriteString("apps:\n")
	for i := range 30 {
		fmt.Fprintf(&vals, "  a%02d: {image: {repository: registry.example/app%d, tag: v1.%d.0}, replicas: %d, port: %d, host: a%d.example, data: {retention: %dd, level: info}}\n",
			i, i, i, 1+i%3, 8000+i, i, i+1)
	}
	each := func(body string) string {
		return "{{- range $name, $a := .Values.apps }}\n---\n" + body + "{{- end }}\n"
	}
	writeFiles(tb, dir, map[string]string{
		"Chart.yaml":  chartfile("big", "1.0.0"),
		"values.yaml": vals.String(),
		"templates/configmap.yaml": each(`apiVersion: v1
kind: ConfigMap
metadata: {name: {{ $name }}-cm}
data: {retention: {{ $a.data.retention | quote }}, level: {{ $a.data.level | quote }}}
`),
		"templates/secret.yaml": each(`apiVersion: v1
kind: Secret
metadata: {name: {{ $name }}-s}
data: {host: {{ $a.host | b64enc }}}
`),
		"templates/service.yaml": each(`apiVersion: v1
kind: Service
metadata: {name: {{ $name }}}
spec:
  selector: {app: {{ $name }}}
  ports: [{port: 80, targetPort: {{ $a.port }}, name: http}]
`),
		"templates/sa.yaml": each("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: {{ $name }}-sa}\n"),
		"templates/role.yaml": each(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: {{ $name }}-role}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get], resourceNames: ["{{ $name }}-cm"]}]
`),
		"templates/rolebinding.yaml": each(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: {{ $name }}-rb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ $name }}-role}
subjects: [{kind: ServiceAccount, name: {{ $name }}-sa}]
`),
		"templates/cronjob.yaml": each(`apiVersion: batch/v1
kind: CronJob
metadata: {name: {{ $name }}-cj}
spec:
  schedule: "0 * * * *"
  jobTemplate: {spec: {template: {spec: {restartPolicy: OnFailure, containers: [{name: c, image: "{{ $a.image.repository }}:{{ $a.image.tag }}"}]}}}}
`),
		"templates/ingress.yaml": each(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: {{ $name }}}
spec:
  rules: [{host: {{ $a.host }}, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: {{ $name }}, port: {number: 80}}}}]}}]
`),
		"templates/deployment.yaml": each(`apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ $name }}}
spec:
  replicas: {{ $a.replicas }}
  selector: {matchLabels: {app: {{ $name }}}}
  template:
    metadata: {labels: {app: {{ $name }}}}
    spec:
      containers:
      - name: web
        image: "{{ $a.image.repository }}:{{ $a.image.tag }}"
        resources: {{ toYaml $.Values.resources | nindent 10 }}
`),
		"templates/pdb.yaml": each(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: {{ $name }}}
spec: {minAvailable: {{ $a.replicas }}, selector: {matchLabels: {app: {{ $name }}}}}
`),
	})
	return dir
}

// BenchmarkTrace measures value provenance (chart.Trace: the chart
// rendered as it is and with every value of the real Harvester values
// marked, then paired) and the reading back of one field, on the bundled
// example and on a chart of 300 objects. Not a test: the figures are in
// docs/performance.md (scripts/bench).
func BenchmarkTrace(b *testing.B) {
	example := filepath.Join("..", "..", "package", "examples", "charts", "demo-app-2.0.0")
	for _, tc := range []struct {
		name, dir string
		id        provenance.ObjectID
		steps     []any
		live      string
	}{
		{"example", example,
			provenance.ObjectID{Kind: "ConfigMap", Name: "rel-config"}, []any{"data", "webhookImage"}, "rancher/harvester-webhook:v0.4.1-hotfix"},
		{"example-generating-certs", example,
			provenance.ObjectID{Kind: "ConfigMap", Name: "rel-config"}, []any{"data", "webhookImage"}, "rancher/harvester-webhook:v0.4.1-hotfix"},
		{"300-objects", bigChart(b),
			provenance.ObjectID{Kind: "Deployment", Name: "a17"}, []any{"spec", "template", "spec", "containers", 0, "image"}, "registry.example/app17:v1.17.0-hotfix"},
	} {
		c, err := Load(tc.dir)
		require.NoError(b, err)
		user := harvesterValues(b)
		if tc.dir == example {
			ex, err := readYAMLFile(filepath.Join("..", "..", "package", "examples", "values.yaml"))
			require.NoError(b, err)
			user = overlay(user, ex)
			delete(user, "kubeVip") // 2.0.0 no longer has its config (the example's migration)
			if tc.name == "example" {
				// as the example policy's once rules pin them: without, each
				// render generates a CA and a certificate (RSA keys)
				user = overlay(user, map[string]any{"webhook": map[string]any{"certs": map[string]any{"cert": "a PEM certificate", "key": "a PEM key"}}})
			}
		}
		_, marks := provenance.Mark(user)
		b.Run(tc.name, func(b *testing.B) {
			var m *provenance.Map
			for b.Loop() {
				if m, err = Trace(c, user, "rel", "ns"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(marks.Len()), "user-values-marked")
			r := m.Read(tc.id, tc.steps, tc.live, true, false)
			if !r.Adoptable() || len(r.Rules) != 1 {
				b.Fatalf("%s: %+v", tc.name, r)
			}
		})
	}
}
