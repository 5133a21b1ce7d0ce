//go:build testseams

// The differential test of the conflict check: for each case of a corpus,
// the real kube-apiserver (tests/testenv) applies the chart's object in a
// server-side dry run without force, and the check computes the conflicts
// from what may be read; both must name exactly the same fields and
// managers. scripts/test runs it (-tags testseams, with
// KUBEBUILDER_ASSETS).

package applycheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{AuditLog: true}) // the audit log: BenchmarkPreflight300 counts requests
}

// step is one write made before the check: an apply (server-side, forced)
// or an update (a patch, as kubectl patch, edit, scale and set make) by
// manager.
type step struct {
	manager string
	apply   bool
	body    string // YAML: the applied object, or the merge patch
}

// diffCase is one case of the corpus: base applied as "helm", then the
// steps, then want checked as "helm".
type diffCase struct {
	name      string
	base      string
	steps     []step
	want      string
	conflicts int // how many conflicts the server names (a guard that the case tests what it says)
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        args: [--port=8080]
        env:
        - {name: MODE, value: fast}
        - {name: LEVEL, value: "1"}
        ports:
        - {containerPort: 8080, protocol: TCP, name: http}
        - {containerPort: 8125, protocol: UDP, name: stats}
      - name: sidecar
        image: registry.example/side:1
`

// deploymentWith is deployment with old replaced by new.
func deploymentWith(old, new string) string {
	if !strings.Contains(deployment, old) {
		panic("deploymentWith: " + old)
	}
	return strings.Replace(deployment, old, new, 1)
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.diff.example.com}
spec:
  group: diff.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              owner: {type: string}
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    count: {type: integer}
              tags:
                type: array
                items: {type: string}
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
`

const widget = `apiVersion: diff.example.com/v1
kind: Widget
metadata: {name: w1}
spec:
  size: 3
  owner: team-a
  parts:
  - {name: bolt, count: 4}
  - {name: nut, count: 4}
  tags: [a, b]
  config:
    retention: 7d
    nested: {level: 1}
`

func widgetWith(old, new string) string {
	if !strings.Contains(widget, old) {
		panic("widgetWith: " + old)
	}
	return strings.Replace(widget, old, new, 1)
}

var corpus = []diffCase{
	{name: "container by name, image set by kubectl set image (Update)",
		base:      deployment,
		steps:     []step{{manager: "kubectl-set", body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1-hotfix"}]}}}}`}},
		want:      deploymentWith("registry.example/web:1", "registry.example/web:2"),
		conflicts: 1},
	{name: "a hotfix conflicts where the chart keeps its old value, not in the other container",
		base:      deployment,
		steps:     []step{{manager: "kubectl-set", body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1-hotfix"}]}}}}`}},
		want:      strings.Replace(deployment, "registry.example/side:1", "registry.example/side:2", 1),
		conflicts: 1},
	{name: "env by name",
		base:      deployment,
		steps:     []step{{manager: "kubectl-edit", body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"MODE","value":"safe"}]}]}}}}`}},
		want:      deploymentWith("{name: MODE, value: fast}", "{name: MODE, value: faster}"),
		conflicts: 1},
	{name: "ports by containerPort and protocol",
		base: deployment,
		steps: []step{{manager: "other-applier", apply: true, body: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        ports:
        - {containerPort: 8125, protocol: UDP, name: metrics}
`}},
		want:      deploymentWith("{containerPort: 8125, protocol: UDP, name: stats}", "{containerPort: 8125, protocol: UDP, name: statsd}"),
		conflicts: 1},
	{name: "replicas by kubectl scale (Update), the chart changes them",
		base:      deployment,
		steps:     []step{{manager: "kubectl-scale", body: `{"spec":{"replicas":5}}`}},
		want:      deploymentWith("replicas: 2", "replicas: 3"),
		conflicts: 1},
	{name: "atomic list: args",
		base:      deployment,
		steps:     []step{{manager: "kubectl-edit", body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--port=9090"]}]}}}}`}},
		want:      deploymentWith("args: [--port=8080]", "args: [--port=8080, --verbose]"),
		conflicts: 1},
	{name: "granular map: a label",
		base:      deployment,
		steps:     []step{{manager: "kubectl-label", body: `{"metadata":{"labels":{"tier":"back"}}}`}},
		want:      deploymentWith("tier: front", "tier: middle"),
		conflicts: 1},
	{name: "shared ownership: the same value set by two managers",
		base:  deployment,
		steps: []step{{manager: "kubectl-set", body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:2"}]}}}}`}},
		want:  deploymentWith("registry.example/web:1", "registry.example/web:2")},
	{name: "a field of another manager the chart does not set",
		base:  deployment,
		steps: []step{{manager: "kubectl-annotate", body: `{"metadata":{"annotations":{"team":"ops"}},"spec":{"template":{"spec":{"containers":[{"name":"web","imagePullPolicy":"Always"}]}}}}`}},
		want:  deploymentWith("registry.example/web:1", "registry.example/web:2")},
	{name: "plain map: a ConfigMap key by kubectl patch, another by an applier",
		base: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {replicaCount: \"2\", mode: a, level: \"1\"}\n",
		steps: []step{
			{manager: "kubectl-patch", body: `{"data":{"replicaCount":"9"}}`},
			{manager: "other-applier", apply: true, body: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {mode: b}\n"},
		},
		want:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {replicaCount: \"3\", mode: c, level: \"1\"}\n",
		conflicts: 2},
	{name: "a Secret",
		base:      "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: b25l, user: YWRtaW4=}\ntype: Opaque\n",
		steps:     []step{{manager: "kubectl-patch", body: `{"data":{"password":"aG90Zml4"}}`}},
		want:      "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: dHdv, user: YWRtaW4=}\ntype: Opaque\n",
		conflicts: 1},
	{name: "a cluster-scoped object, an atomic list of rules",
		base:      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: diff-reader}\nrules:\n- {apiGroups: [\"\"], resources: [configmaps], verbs: [get]}\n",
		steps:     []step{{manager: "kubectl-edit", body: `{"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}]}`}},
		want:      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: diff-reader}\nrules:\n- {apiGroups: [\"\"], resources: [configmaps, secrets], verbs: [get]}\n",
		conflicts: 1},
	{name: "a Service's ports by port and protocol",
		base:      "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec:\n  selector: {app: web}\n  ports:\n  - {port: 80, protocol: TCP, targetPort: 8080, name: http}\n",
		steps:     []step{{manager: "kubectl-patch", body: `{"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":9090,"name":"http"}]}}`}},
		want:      "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec:\n  selector: {app: web}\n  ports:\n  - {port: 80, protocol: TCP, targetPort: 8081, name: http}\n",
		conflicts: 1},
	{name: "a CRD object with a structural schema: a scalar and a list-map entry",
		base: widget,
		steps: []step{
			{manager: "kubectl-patch", body: `{"spec":{"size":5}}`},
			{manager: "other-applier", apply: true, body: "apiVersion: diff.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec:\n  parts:\n  - {name: nut, count: 8}\n"},
		},
		want:      widgetWith("{name: nut, count: 4}", "{name: nut, count: 6}"),
		conflicts: 2},
	{name: "a CRD object with a structural schema: the chart changes the scalar too",
		base:      widget,
		steps:     []step{{manager: "kubectl-patch", body: `{"spec":{"size":5}}`}},
		want:      widgetWith("size: 3", "size: 4"),
		conflicts: 1},
	{name: "a CRD object: an atomic list",
		base:      widget,
		steps:     []step{{manager: "kubectl-edit", body: `{"spec":{"tags":["a","b","c"]}}`}},
		want:      widgetWith("tags: [a, b]", "tags: [a]"),
		conflicts: 1},
	{name: "x-kubernetes-preserve-unknown-fields",
		base:      widget,
		steps:     []step{{manager: "kubectl-edit", body: `{"spec":{"config":{"retention":"30d","nested":{"level":2}}}}`}},
		want:      widgetWith("level: 1", "level: 3"),
		conflicts: 2},
}

func TestConflictsAreExactlyTheServersOwn(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	crd := decode(t, widgetCRD)
	_, err := env.Dynamic().Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: "test", Force: true})
	require.NoError(t, err)
	waitServed(t, env, schema.GroupVersion{Group: "diff.example.com", Version: "v1"})

	names := map[string]bool{}
	for _, c := range corpus {
		require.False(t, names[c.name], "a case named twice: %s", c.name)
		names[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t)
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
			base := decode(t, c.base)
			client := resource(t, env.Dynamic(), mapper, base, ns)
			if base.GetKind() == "ClusterRole" {
				base.SetName(base.GetName() + "-" + ns)
				t.Cleanup(func() { _ = client.Delete(context.Background(), base.GetName(), metav1.DeleteOptions{}) })
			}
			_, err := client.Apply(ctx, base.GetName(), base, metav1.ApplyOptions{FieldManager: "helm", Force: true})
			require.NoError(t, err)
			for _, s := range c.steps {
				if s.apply {
					o := decode(t, s.body)
					o.SetName(base.GetName())
					_, err = client.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: s.manager, Force: true})
				} else {
					// kubectl's patch: strategic for Kubernetes' own kinds,
					// a JSON merge patch for a custom resource
					patch := types.StrategicMergePatchType
					if base.GetKind() == "Widget" {
						patch = types.MergePatchType
					}
					_, err = client.Patch(ctx, base.GetName(), patch, []byte(s.body), metav1.PatchOptions{FieldManager: s.manager})
				}
				require.NoError(t, err, "step of %s", s.manager)
			}
			want := decode(t, c.want)
			want.SetName(base.GetName())

			server := serverConflicts(t, client, want)
			res, err := applycheck.New(env.Kube(), env.Dynamic(), mapper, nil).Check(ctx,
				applycheck.Request{Manifest: manifestOf(t, want), Namespace: ns, Manager: "helm"})
			require.NoError(t, err)
			require.Empty(t, res.NotChecked)
			require.Equal(t, 1, res.Checked)
			var ours []string
			for _, k := range res.Conflicts {
				ours = append(ours, k.Field+" "+k.Owner)
				if want.GetKind() == "Secret" {
					assert.Equal(t, "<redacted>", k.Live)
					assert.Equal(t, "<redacted>", k.New)
				}
			}
			sort.Strings(ours)
			assert.Equal(t, server, ours, "the check and the API server disagree")
			assert.Len(t, server, c.conflicts, "the case's own premise: the conflicts the server names")
			t.Logf("the server and the check: %v", server)
		})
	}
}

// serverConflicts are the conflicts the API server names for a dry-run
// apply of want as "helm" without force: "field owner" each, sorted.
func serverConflicts(t *testing.T, client dynamic.ResourceInterface, want *unstructured.Unstructured) []string {
	t.Helper()
	data, err := json.Marshal(want.Object)
	require.NoError(t, err)
	force := false
	_, err = client.Patch(t.Context(), want.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "helm", Force: &force})
	if err == nil {
		return nil
	}
	var st apierrors.APIStatus
	require.True(t, errors.As(err, &st), "%v", err)
	require.Equal(t, int32(409), st.Status().Code, "%v", err)
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field+" "+strings.TrimPrefix(c.Message, "conflict with "))
	}
	sort.Strings(out)
	return out
}

func decode(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(text), &u.Object))
	return u
}

func manifestOf(t *testing.T, objs ...*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		fmt.Fprintf(&b, "---\n%s", data)
	}
	return b.String()
}

func resource(t *testing.T, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured, ns string) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err)
	if m.Scope.Name() == "namespace" {
		obj.SetNamespace(ns)
		return dyn.Resource(m.Resource).Namespace(ns)
	}
	return dyn.Resource(m.Resource)
}

// waitServed waits until the API server serves gv and publishes its
// OpenAPI v3 schema.
func waitServed(t *testing.T, env *testenv.Env, gv schema.GroupVersion) {
	t.Helper()
	require.NoError(t, env.WaitOpenAPI(t.Context(), gv))
}

// An object the new chart adds that exists without the release's
// ownership metadata is named, with what it lacks (as Helm 4 says it); one
// that carries this release's metadata, and one the deployed manifest has
// already, is not.
func TestObjectsTheChartAddsMustBeTheReleases(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	create := func(name string, labels, annotations map[string]string) {
		o := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+"}\ndata: {a: b}\n")
		o.SetLabels(labels)
		o.SetAnnotations(annotations)
		_, err := env.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
			Apply(ctx, name, o, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
		require.NoError(t, err)
	}
	helm := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	create("stray", nil, nil)
	create("other-release", helm, map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": ns})
	create("adoptable", helm, map[string]string{"meta.helm.sh/release-name": "app", "meta.helm.sh/release-namespace": ns})
	create("deployed", nil, nil)
	cm := func(name string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {a: b}\n"
	}
	res, err := applycheck.New(env.Kube(), env.Dynamic(), mapper, nil).Check(ctx, applycheck.Request{
		Manifest: cm("stray") + cm("other-release") + cm("adoptable") + cm("deployed") + cm("new"),
		Old:      cm("deployed"), Namespace: ns, Release: "app", Manager: "helm"})
	require.NoError(t, err)
	var got []string
	for _, u := range applycheck.FindingsOf[applycheck.Unowned](res.Findings) {
		got = append(got, u.Object+": "+u.Why)
	}
	assert.Equal(t, []string{
		"ConfigMap " + ns + `/stray: label "app.kubernetes.io/managed-by" missing: must be set to "Helm"; annotation "meta.helm.sh/release-name" missing: must be set to "app"; annotation "meta.helm.sh/release-namespace" missing: must be set to "` + ns + `"`,
		"ConfigMap " + ns + `/other-release: annotation "meta.helm.sh/release-name" must equal "app": current value is "other"`,
	}, got)
}
