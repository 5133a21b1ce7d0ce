package e2erelease

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/hotfix"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// shapesTemplate has shapes of real charts (Harvester's, and the charts
// that annotate a ServiceAccount for a cloud IAM role): a CRD template
// that carries a status: block and creationTimestamp: null, as
// controller-gen writes them; a ConfigMap whose data key and annotation
// hold dots; and a workload under a condition on its kind, its tag
// `default .Chart.AppVersion`, a port without a protocol, a fieldRef
// without an apiVersion and empty tolerations (each of which the API
// server fills in or drops).
const shapesTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{{ .Release.Namespace }}.example.com
  creationTimestamp: null
spec:
  group: {{ .Release.Namespace }}.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
status:
  acceptedNames: {kind: "", plural: ""}
  conditions: []
  storedVersions: []
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-shapes
  annotations:
    eks.amazonaws.com/role-arn: {{ .Values.shapes.roleArn | quote }}
data:
  config.yaml: {{ .Values.shapes.config | quote }}
{{- if eq .Values.shapes.kind "Deployment" }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-agent
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}-agent}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}-agent}}
    spec:
      tolerations: []
      containers:
      - name: agent
        image: "registry.example/agent:{{ .Values.shapes.tag | default .Chart.AppVersion }}"
        ports:
        - containerPort: 8080
          name: http
        env:
        - name: NODE
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
{{- end }}
`

// storeSubchart writes subchart store into the example chart at version,
// with the shapes of Longhorn's and the snapshot controller's charts: a
// default set to null (defaultSettings.defaultDataPath: ~), a map its
// template renders whole (with .Values.settings, toYaml .), and in its
// crds/ a cluster-scoped kind (named in group, as crds/ is not templated)
// that its templates make an object of.
func storeSubchart(t *testing.T, charts, version, group string) {
	t.Helper()
	dir := filepath.Join(charts, "demo-app-"+version)
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), append(meta, "dependencies:\n- name: store\n  version: 0.1.0\n"...), 0o644))
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: snapclasses.` + group + `
spec:
  group: ` + group + `
  names: {kind: SnapClass, listKind: SnapClassList, plural: snapclasses, singular: snapclass}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "charts"), 0o755))
	_, err = testchart.Write(filepath.Join(dir, "charts"), testchart.Chart{Name: "store", Version: "0.1.0",
		Values: map[string]any{"defaultSettings": map[string]any{"defaultDataPath": nil, "replicaCount": 3},
			"settings": map[string]any{"mode": "fast"}},
		CRDs: map[string]string{"snapclasses.yaml": crd},
		Templates: map[string]string{"store.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-store
data:
  replicas: {{ .Values.defaultSettings.replicaCount | quote }}
  dataPath: {{ .Values.defaultSettings.defaultDataPath | default "/var/lib/store" | quote }}
{{- with .Values.settings }}
{{ toYaml . | indent 2 }}
{{- end }}
---
apiVersion: ` + group + `/v1
kind: SnapClass
metadata:
  name: {{ .Release.Name }}-class
driver: store
`}})
	require.NoError(t, err)
	// testchart.Write names the directory store-0.1.0; Helm finds a
	// subchart by its Chart.yaml, whatever the directory
}

// Fields of shapesTemplate's ConfigMap, as the API server prints them.
const (
	dottedKeyField  = ".data.config.yaml"
	roleAnnotation  = ".metadata.annotations.eks.amazonaws.com/role-arn"
	hotfixRole      = "arn:aws:iam::1:role/hotfix"
	hotfixConfig    = "level: debug"
	upgradeConfig   = "level: warn"
	installedRole   = "arn:aws:iam::1:role/web"
	installedConfig = "level: info"
)

// A release of a chart with the shapes of real ones, installed by Helm 4
// server-side: the CRD's status, which the API server resets and then
// owns through its status subresource, is no conflict and no drift (it
// was six refusals on Harvester's chart), so preflight passes without
// force and drift of the untouched release lists nothing; after an
// operator's patch of a dotted data key and a dotted annotation, drift
// and preflight name each by its field, with its live and new values and
// the value that renders it (a key with dots is never split), and an
// upgrade with adopt rules on those values goes through without force.
// The chart has a subchart (storeSubchart): drift without a chart source
// compares the stored manifest alone (Helm's release record holds no
// subcharts), each row without its values, saying --chart-source gives
// them; with one it compares in values terms; an
// install-time value under a null default and one under a map the
// subchart renders whole are kept, no orphan warned.
// All as the release Plan's ServiceAccount, with the rules its chart
// needs (the CRD by name), nothing refused.
func TestAChartOfRealShapesUpgradesWithoutForce(t *testing.T) {
	f := newFixture(t, "")
	for _, v := range []string{"1.0.0", "2.0.0"} {
		require.NoError(t, writeTemplate(f.charts, v, "shapes.yaml", shapesTemplate))
	}
	group := f.ns + ".store.example.com"
	for _, v := range []string{"1.0.0", "2.0.0"} {
		storeSubchart(t, f.charts, v, group)
	}
	f.addValues("1.0.0", map[string]any{"shapes": map[string]any{"roleArn": installedRole, "config": installedConfig, "kind": "Deployment", "tag": ""}})
	f.addValues("2.0.0", map[string]any{"shapes": map[string]any{"roleArn": installedRole, "config": upgradeConfig, "kind": "Deployment", "tag": ""}})
	name := releaseName()
	// the chart's Deployment and CRD: Helm's verbs on them, the CRD by name
	sucNS, sa, _ := f.releasePlanRBAC(name,
		"- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]",
		"  resources: [nodes]\n  verbs: [list]\n",
		"  resources: [nodes]\n  verbs: [list]\n- apiGroups: [apiextensions.k8s.io]\n  resources: [customresourcedefinitions]\n  resourceNames: [widgets."+f.ns+".example.com]\n  verbs: [get, list, watch, patch, update]\n"+
			"- apiGroups: ["+group+"]\n  resources: [snapclasses]\n  verbs: [get, list, watch, create, update, patch, delete]\n")
	// an install-time setting under a null default, and one the subchart
	// passes through whole: keys of the chart, no orphans
	f.installWith(name, map[string]any{"store": map[string]any{"defaultSettings": map[string]any{"defaultDataPath": "/data"},
		"settings": map[string]any{"tier": "gold"}}}, true)
	// the CRDs' schemas are published a moment after Helm created them
	for _, g := range []string{group, f.ns + ".example.com"} {
		require.NoError(t, f.env.WaitOpenAPI(t.Context(), schema.GroupVersion{Group: g, Version: "v1"}))
	}
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
		return err
	})
	node := newNode(t, "node-1")
	cli := func(command string, args ...string) result {
		t.Helper()
		return f.cli(node, command, append(args, "--kubeconfig", kubeconfig)...)
	}

	// Helm's release record holds the chart without its subchart: without
	// a chart source drift compares the stored manifest alone, and says
	// how to get values terms
	r := cli("drift", "--target", f.target(name), "-o", "json")
	r.RequireCode(t, 0)
	var bare app.DriftOutput
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &bare), r.Stdout)
	assert.Empty(t, bare.Fields, "the untouched release, by its stored manifest")
	assert.Contains(t, bare.Note, "without its subcharts (store)")
	assert.Contains(t, bare.Note, "--chart-source")

	r = cli("drift", "--target", f.target(name), "--chart-source", f.charts, "-o", "json")
	r.RequireCode(t, 0)
	var drift app.DriftOutput
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &drift), r.Stdout)
	assert.Empty(t, drift.Fields, "the untouched release: no one changed anything (the CRD's status is the API server's, "+
		"the port's protocol, the fieldRef's apiVersion and the empty tolerations are its defaults)")
	assert.Empty(t, drift.NotChecked)
	assert.Empty(t, drift.Missing)

	r = cli("preflight", f.upgradeArgs(name, "2.0.0")...)
	require.Equal(t, 0, r.Code, "the CRD template's status is no conflict\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	assert.NotContains(t, r.Stderr, ".status.acceptedNames")

	_, err := f.env.Kubectl(t.Context(), "-n", f.ns, "patch", "configmap", name+"-shapes", "-p",
		`{"metadata":{"annotations":{"eks.amazonaws.com/role-arn":"`+hotfixRole+`"}},"data":{"config.yaml":"`+hotfixConfig+`"}}`)
	require.NoError(t, err)
	before := len(f.writesBy())

	// without a chart: each row, no values
	r = cli("drift", "--target", f.target(name))
	r.RequireCode(t, 0)
	for _, want := range []string{dottedKeyField, roleAnnotation, "not adoptable: no chart at hand to read it in values terms"} {
		assert.Contains(t, r.Stdout, want)
	}
	r = cli("drift", "--target", f.target(name), "--chart-source", f.charts, "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	drift = app.DriftOutput{}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &drift), r.Stdout)
	got := map[string]string{}
	for _, d := range drift.Fields {
		if d.Object == "ConfigMap "+f.ns+"/"+name+"-shapes" {
			got[d.Field] = d.Live + " ← " + d.Rendered + " by " + d.Reading.Paths()
		}
	}
	assert.Equal(t, map[string]string{
		dottedKeyField: hotfixConfig + " ← " + installedConfig + " by shapes.config",
		roleAnnotation: hotfixRole + " ← " + installedRole + " by shapes.roleArn",
	}, got)

	r = cli("preflight", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		dottedKeyField + ` is owned by "kubectl-patch" using v1 (live: ` + hotfixConfig + `; the upgrade sets: ` + upgradeConfig + `)`,
		roleAnnotation + ` is owned by "kubectl-patch" using v1 (live: ` + hotfixRole + `; the upgrade sets: ` + installedRole + `)`,
		"{path: shapes.config, policy: adopt}",
		"{path: shapes.roleArn, policy: adopt}",
	} {
		assert.Contains(t, r.Stderr, want)
	}
	assert.NotContains(t, r.Stderr, "(unread)")
	assert.NotContains(t, r.Stderr, "eks.amazonaws[")
	assert.Equal(t, before, len(f.writesBy()), "nothing written by the refusal")

	policy := hotfix.WithRules(t, f.policy(name), "- {path: shapes.config, policy: adopt}\n- {path: shapes.roleArn, policy: adopt}\n")
	r = cli("upgrade", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", policy, "--timeout", "60s")
	r.RequireCode(t, 0)
	assert.NotContains(t, r.Stdout+r.Stderr, "orphan", "a null default and a map passed through are keys of the chart")
	h := f.history(name)
	require.Len(t, h, 2)
	assert.Equal(t, "2.0.0", h[1].Chart.Metadata.Version)
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), name+"-shapes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, hotfixConfig, cm.Data["config.yaml"], "the hotfix is kept")
	assert.Equal(t, hotfixRole, cm.Annotations["eks.amazonaws.com/role-arn"], "the hotfix is kept")
	store, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), name+"-store", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"replicas": "3", "dataPath": "/data", "mode": "fast", "tier": "gold"}, store.Data,
		"the subchart's install-time settings are kept")
	_, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
}
