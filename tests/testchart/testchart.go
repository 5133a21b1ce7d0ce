// Package testchart writes small real Helm charts to disk for tests: a
// Chart.yaml, a values.yaml and templates, nothing else.
package testchart

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Chart describes a chart to write.
type Chart struct {
	Name    string
	Version string
	// Values are the chart's default values (values.yaml).
	Values map[string]any
	// Templates maps file names under templates/ to their content.
	Templates map[string]string
	// CRDs maps file names under crds/ to their content.
	CRDs map[string]string
	// Subcharts are written under charts/ and listed as dependencies in
	// Chart.yaml, each with its Condition when it has one.
	Subcharts []Chart
	// Condition is this chart's condition as a subchart ("" for none).
	Condition string
}

// Write writes c into dir/<name>-<version> and returns that directory. It
// fails if the directory exists.
func Write(dir string, c Chart) (string, error) {
	root := filepath.Join(dir, c.Name+"-"+c.Version)
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", fmt.Errorf("creating chart directory: %w", err)
	}
	return root, writeInto(root, c)
}

// writeInto writes c's files into root, its subcharts under root/charts.
func writeInto(root string, c Chart) error {
	meta := map[string]any{"apiVersion": "v2", "name": c.Name, "version": c.Version, "type": "application"}
	var deps []map[string]any
	for _, sub := range c.Subcharts {
		d := map[string]any{"name": sub.Name, "version": sub.Version}
		if sub.Condition != "" {
			d["condition"] = sub.Condition
		}
		deps = append(deps, d)
		if err := writeInto(filepath.Join(root, "charts", sub.Name), sub); err != nil {
			return err
		}
	}
	if deps != nil {
		meta["dependencies"] = deps
	}
	metaYAML, err := yaml.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encoding Chart.yaml of %s %s: %w", c.Name, c.Version, err)
	}
	values, err := yaml.Marshal(c.Values)
	if err != nil {
		return fmt.Errorf("encoding values.yaml of %s %s: %w", c.Name, c.Version, err)
	}
	files := map[string][]byte{"Chart.yaml": metaYAML, "values.yaml": values}
	for name, body := range c.Templates {
		files[filepath.Join("templates", name)] = []byte(body)
	}
	for name, body := range c.CRDs {
		files[filepath.Join("crds", name)] = []byte(body)
	}
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// ConfigMapTemplate renders one ConfigMap named after the release, with a
// data key per top-level entry of .Values.data and the chart version.
const ConfigMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  chartVersion: {{ .Chart.Version | quote }}
{{- range $k, $v := .Values.data }}
  {{ $k }}: {{ $v | toString | quote }}
{{- end }}
`

// ConfigMapChart is a chart whose only object is ConfigMapTemplate, with
// default values {data: defaults}.
func ConfigMapChart(name, version string, defaults map[string]any) Chart {
	return Chart{
		Name: name, Version: version,
		Values:    map[string]any{"data": defaults},
		Templates: map[string]string{"configmap.yaml": ConfigMapTemplate},
	}
}

// DeploymentTemplate renders a Deployment named after the release with
// .Values.replicas (default 1) pods of image .Values.webImage; when
// .Values.hold is set, its pod template carries the test environment's
// hold annotation with that value (tests/testenv: "not-ready" keeps the
// pods from becoming Ready, so the rollout never completes).
const DeploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicas | default 1 }}
  progressDeadlineSeconds: {{ .Values.progressDeadlineSeconds | default 600 }}
  selector:
    matchLabels: {app: {{ .Release.Name }}-web}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-web}
      {{- with .Values.hold }}
      annotations: {testenv.chart-upgrader.io/hold: {{ . | quote }}}
      {{- end }}
    spec:
      containers:
      - name: web
        image: {{ .Values.webImage | default "registry.example/web:1" | quote }}
`

// HookJobTemplate renders a pre-upgrade hook Job, <release>-migrate,
// whose pod the test environment holds Running (tests/testenv's hold
// annotation, "not-ready": a Job's pod that never finishes) until a test
// removes the annotation (testenv.ReleaseHold): Helm waits for it
// meanwhile, the new revision pending-upgrade.
const HookJobTemplate = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {testenv.chart-upgrader.io/hold: not-ready}
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.example/migrate:1
`

// HotfixTemplate renders, from .Values.web, what an operator hotfixes:
// a Deployment <release>-web whose image is
// {{ .Values.web.image.repository }}:{{ .Values.web.image.tag }} (kubectl
// set image), whose replicas are .Values.web.replicas (kubectl scale) and
// whose revisionHistoryLimit is hard-coded, and a ConfigMap
// <release>-web-config whose retention key is .Values.web.retention
// (kubectl patch).
const HotfixTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.web.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels: {app: {{ .Release.Name }}-web}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-web}
    spec:
      containers:
      - name: web
        image: "{{ .Values.web.image.repository }}:{{ .Values.web.image.tag }}"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-web-config
  namespace: {{ .Release.Namespace }}
data:
  retention: {{ .Values.web.retention | quote }}
`

// HotfixValues are HotfixTemplate's default values, the image at tag.
func HotfixValues(tag string) map[string]any {
	return map[string]any{"web": map[string]any{
		"image":     map[string]any{"repository": "registry.example/web", "tag": tag},
		"replicas":  1,
		"retention": "7d",
	}}
}

// HPATemplate is a HorizontalPodAutoscaler of the example chart's
// Deployment at apiVersion (a template).
func HPATemplate(apiVersion string) string {
	return `apiVersion: ` + apiVersion + `
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .Release.Name }}-web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}-web}
  minReplicas: 1
  maxReplicas: 3
`
}

// FrozenConfigMap is an immutable ConfigMap, <release>-frozen, holding
// value, with labels (a template).
func FrozenConfigMap(value, labels string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ .Release.Name }}-frozen'\n  labels: {" + labels + "}\nimmutable: true\ndata: {a: " + value + "}\n"
}

// LabelledConfigMap is a ConfigMap, <release>-labelled, whose label tier
// is value (a template).
func LabelledConfigMap(value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-labelled\n  labels: {tier: \"" + value + "\"}\n"
}

// SetKubeVersion sets the kubeVersion of the chart in dir.
func SetKubeVersion(dir, constraint string) error {
	meta := filepath.Join(dir, "Chart.yaml")
	data, err := os.ReadFile(meta)
	if err != nil {
		return err
	}
	return os.WriteFile(meta, append(data, "kubeVersion: \""+constraint+"\"\n"...), 0o644)
}

// PDBTemplate is a PodDisruptionBudget of the example chart's pods,
// <release>-web, with bounds ("minAvailable: 1") (a template).
func PDBTemplate(bounds string) string {
	return "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: '{{ .Release.Name }}-web'}\n" +
		"spec: {" + bounds + ", selector: {matchLabels: {app: '{{ .Release.Name }}-web'}}}\n"
}

// StatefulSetTemplate renders a StatefulSet, <release>-db, with replicas
// and a claim template asking for storage (with no replicas it is ready
// without a volume provisioner).
func StatefulSetTemplate(replicas int, storage string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-db
spec:
  replicas: %d
  serviceName: {{ .Release.Name }}-db
  selector: {matchLabels: {app: {{ .Release.Name }}-db}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}-db}}
    spec: {containers: [{name: db, image: registry.example/db:1}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: %s}}}
`, replicas, storage)
}

// GadgetCRD is a CustomResourceDefinition of the namespaced kind Gadget
// in group, with versions, each "name" or "name*" (the storage version),
// each declaring spec.a, and spec.b when withB. Every version declares
// the same fields: without a conversion webhook an object is stored as
// written, and the API server's field manager types an object last
// applied at v1 by v1's schema.
func GadgetCRD(group string, withB bool, versions ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets." + group + "}\nspec:\n  group: " + group +
		"\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}\n  versions:\n")
	props := "a: {type: string}"
	if withB {
		props += ", b: {type: string}"
	}
	for _, v := range versions {
		name, storage := strings.CutSuffix(v, "*")
		b.WriteString("  - name: " + name + "\n    served: true\n    storage: " + strconv.FormatBool(storage) +
			"\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {" + props + "}}}}}\n")
	}
	return b.String()
}

// GadgetTemplate is a Gadget <release>-g at group/version with spec.a x
// and, when withB, spec.b bee.
func GadgetTemplate(group, version string, withB bool) string {
	spec := "{a: x}"
	if withB {
		spec = "{a: x, b: bee}"
	}
	return "apiVersion: " + group + "/" + version + "\nkind: Gadget\nmetadata:\n  name: {{ .Release.Name }}-g\nspec: " + spec + "\n"
}

// WriteGadget gives the chart in dir the CRD crd in crds/gadgets.yaml and
// GadgetTemplate(group, version, withB) in templates/gadget.yaml.
func WriteGadget(dir, crd, group, version string, withB bool) error {
	if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "crds", "gadgets.yaml"), []byte(crd), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "templates", "gadget.yaml"), []byte(GadgetTemplate(group, version, withB)), 0o644)
}

// WriteGadgets gives demo-app-1.0.0 and demo-app-2.0.0 under charts the
// Gadget CRD of group and a Gadget: 1.0.0 at v1 without spec.b; 2.0.0
// with v2 added as the storage version and spec.b declared, its Gadget
// at v2 with spec.b.
func WriteGadgets(charts, group string) error {
	if err := WriteGadget(filepath.Join(charts, "demo-app-1.0.0"), GadgetCRD(group, false, "v1*"), group, "v1", false); err != nil {
		return err
	}
	return WriteGadget(filepath.Join(charts, "demo-app-2.0.0"), GadgetCRD(group, true, "v1", "v2*"), group, "v2", true)
}

// WriteGadgetsDroppingV1 is WriteGadgets and a demo-app-3.0.0 under
// charts: 2.0.0 whose CRD drops v1 (the version 1.0.0 stored objects at).
func WriteGadgetsDroppingV1(charts, group string) error {
	if err := WriteGadgets(charts, group); err != nil {
		return err
	}
	two, three := filepath.Join(charts, "demo-app-2.0.0"), filepath.Join(charts, "demo-app-3.0.0")
	err := filepath.WalkDir(two, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(two, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(three, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			data = []byte(strings.ReplaceAll(string(data), "version: 2.0.0", "version: 3.0.0"))
		}
		return os.WriteFile(filepath.Join(three, rel), data, 0o644)
	})
	if err != nil {
		return err
	}
	return WriteGadget(three, GadgetCRD(group, true, "v2*"), group, "v2", true)
}
