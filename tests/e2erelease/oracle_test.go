package e2erelease

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// helmUpgrade upgrades release name to the example chart at version as
// Helm 4 does (the SDK's upgrade, server-side, the release's values
// reused): the oracle preflight must agree with.
func (f *fixture) helmUpgrade(name, version string) error {
	f.t.Helper()
	cfg, err := cluster.HelmConfiguration(f.helm, f.ns, "secret", nil)
	require.NoError(f.t, err)
	ch, err := loader.Load(filepath.Join(f.charts, "demo-app-"+version))
	require.NoError(f.t, err)
	up := action.NewUpgrade(cfg)
	up.Namespace, up.WaitStrategy, up.Timeout, up.ReuseValues, up.ServerSideApply = f.ns, kube.HookOnlyStrategy, 60e9, true, "true"
	_, err = up.RunWithContext(f.t.Context(), name, ch, nil)
	return err
}

// Preflight and Helm 4's own upgrade (the oracle, run as admin right
// after) agree, for chart version pairs that each break a real upgrade and
// a control beside each that does not: preflight, as the release Plan's
// ServiceAccount, refuses exactly where Helm fails, naming the cause, and
// writes nothing.
//   - Preflight renders as the cluster's Helm renders: the chart's
//     kubeVersion is checked against the cluster's version (discovery).
//   - An object of a kind the cluster does not serve at the chart's
//     version (autoscaling/v2beta2, removed in Kubernetes 1.26) is refused,
//     naming the versions it serves; so is a deployed revision whose
//     stored manifest holds a version the cluster no longer serves
//     (policy/v1beta1).
//   - An object in a namespace that does not exist (and that the chart does
//     not create) is refused, naming it.
//   - An object the API server would refuse to store, as the apply merges
//     it with the live one, is refused in the server's words: immutable
//     fields (selectors, a StatefulSet's claim templates, immutable
//     ConfigMaps and Secrets, roleRef, cluster IPs), values it rejects
//     (quantities, labels, names, two ports named alike, an unknown path
//     type, a PodDisruptionBudget's two bounds, a CronJob schedule, a port
//     out of range, negative replicas, a ConfigMap key, a container name,
//     an Ingress host, a Secret's type, a NetworkPolicy protocol), including two ports an
//     operator's patch and the chart make alike, and a custom resource's
//     field its live CRD does not declare (Helm does not upgrade crds/),
//     or that its CRD's CEL transition rule keeps.
//     A Secret's value is never printed.
func TestPreflightAgreesWithHelm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, chartDir string) // to 2.0.0
		says   string                              // preflight's refusal; "" for a control
		helm   string                              // Helm's error
		both   func(t *testing.T, chartDir string) // to 1.0.0 and 2.0.0
		live   func(f *fixture, release string)    // an operator's change after the install
	}{
		{"a Kubernetes the cluster is not", kubeVersion(">=1.99.0-0"),
			"requires kubeVersion: >=1.99.0-0 which is incompatible with Kubernetes v1.33", "requires kubeVersion", nil, nil},
		{"the cluster's Kubernetes", kubeVersion(">=1.20.0-0"), "", "", nil, nil},
		{"a removed API version", template("hpa.yaml", testchart.HPATemplate("autoscaling/v2beta2")),
			"is at autoscaling/v2beta2, which this cluster does not serve (it serves only autoscaling/v1, autoscaling/v2)", `no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta2"`, nil, nil},
		{"the served API version", template("hpa.yaml", testchart.HPATemplate("autoscaling/v2")), "", "", nil, nil},
		{"a namespace that does not exist", template("other.yaml", otherNamespaceTemplate("absent")),
			"missing namespace: {ns}-absent does not exist", `namespaces "{ns}-absent" not found`, nil, nil},
		{"a namespace that exists", template("other.yaml", otherNamespaceTemplate("present")), "", "", nil, nil},
		{"a Deployment's selector gains a label", edit("templates/deployment.yaml",
			"matchLabels: {app: {{ .Release.Name }}-web}", "matchLabels: {app: {{ .Release.Name }}-web, tier: web}",
			"labels: {app: {{ .Release.Name }}-web}", "labels: {app: {{ .Release.Name }}-web, tier: web}"),
			"rejected by the API server: Deployment {ns}/{release}-web: Deployment.apps \"{release}-web\" is invalid: spec.selector: Invalid value", "field is immutable", nil, nil},
		{"a Deployment's pod template gains a label", edit("templates/deployment.yaml",
			"labels: {app: {{ .Release.Name }}-web}", "labels: {app: {{ .Release.Name }}-web, tier: web}"), "", "", nil, nil},
		{"a quantity the server cannot parse", edit("templates/deployment.yaml", "        image:", "        resources: {requests: {cpu: \"100 m\"}}\n        image:"),
			"quantities must match the regular expression", "quantities must match the regular expression", nil, nil},
		{"a quantity", edit("templates/deployment.yaml", "        image:", "        resources: {requests: {cpu: 100m}}\n        image:"), "", "", nil, nil},
		{"a privileged container (Harvester's DaemonSets have them)", edit("templates/deployment.yaml", "        image:", "        securityContext: {privileged: true}\n        image:"), "", "", nil, nil},
		{"a StatefulSet's claim template grows", template("db.yaml", testchart.StatefulSetTemplate(0, "2Gi")),
			"rejected by the API server: StatefulSet {ns}/{release}-db", "updates to statefulset spec for fields other than",
			template("db.yaml", testchart.StatefulSetTemplate(0, "1Gi")), nil},
		{"a StatefulSet's minReadySeconds", edit("templates/db.yaml", "  replicas: 0", "  replicas: 0\n  minReadySeconds: 5"), "", "",
			template("db.yaml", testchart.StatefulSetTemplate(0, "1Gi")), nil},
		{"an operator moved a Service port the chart sets", nil,
			`spec.ports[1].name: Duplicate value: "web"`, `spec.ports[1].name: Duplicate value: "web"`,
			template("svc.yaml", serviceTemplate), movePort},
		{"a Service the operator left alone", nil, "", "", template("svc.yaml", serviceTemplate), nil},
		{"an immutable ConfigMap's data", template("frozen.yaml", frozen("ConfigMap", "data", "b", "")), "field is immutable when `immutable` is set", "field is immutable when `immutable` is set",
			template("frozen.yaml", frozen("ConfigMap", "data", "a", "")), nil},
		{"an immutable ConfigMap's labels", template("frozen.yaml", frozen("ConfigMap", "data", "a", "tier: web")), "", "",
			template("frozen.yaml", frozen("ConfigMap", "data", "a", "")), nil},
		{"an immutable Secret's data", template("frozen.yaml", frozen("Secret", "stringData", "hunter3", "")),
			"rejected by the API server: Secret {ns}/{release}-frozen: Secret {ns}/{release}-frozen is invalid: data: FieldValueForbidden (values <redacted>)", "field is immutable when `immutable` is set",
			template("frozen.yaml", frozen("Secret", "stringData", "hunter2", "")), nil},
		{"an immutable Secret's labels", template("frozen.yaml", frozen("Secret", "stringData", "hunter2", "tier: web")), "", "",
			template("frozen.yaml", frozen("Secret", "stringData", "hunter2", "")), nil},
		{"a RoleBinding's roleRef", template("rb.yaml", roleBindingTemplate("edit", "app")), "roleRef: Invalid value", "cannot change roleRef",
			template("rb.yaml", roleBindingTemplate("view", "app")), nil},
		{"a RoleBinding's subjects", template("rb.yaml", roleBindingTemplate("view", "other")), "", "",
			template("rb.yaml", roleBindingTemplate("view", "app")), nil},
		{"a Service made headless", edit("templates/svc.yaml", "spec:\n", "spec:\n  clusterIP: None\n"),
			// the Service REST storage pairs clusterIPs with a changed clusterIP before it
			// validates; the strategy alone refuses the pair as it is: the same verdict
			"Service \"{release}-web\" is invalid: spec.clusterIPs: Invalid value", "may not change once set",
			template("svc.yaml", serviceTemplate), nil},
		{"a Service gains a port", edit("templates/svc.yaml", "targetPort: 8080}]", "targetPort: 8080}, {name: metrics, port: 9090}]"), "", "",
			template("svc.yaml", serviceTemplate), nil},
		{"a label the server cannot take", template("labelled.yaml", testchart.LabelledConfigMap("not valid")), `metadata.labels: Invalid value: "not valid"`, `metadata.labels: Invalid value: "not valid"`, nil, nil},
		{"a label", template("labelled.yaml", testchart.LabelledConfigMap("valid")), "", "", nil, nil},
		{"a name the server cannot take", template("named.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-Web'}\n"),
			"a lowercase RFC 1123 subdomain must consist of", "a lowercase RFC 1123 subdomain must consist of", nil, nil},
		{"a name", template("named.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-web'}\n"), "", "", nil, nil},
		{"a PodDisruptionBudget with both bounds", template("pdb.yaml", testchart.PDBTemplate("minAvailable: 1, maxUnavailable: 1")),
			"minAvailable and maxUnavailable cannot be both set", "minAvailable and maxUnavailable cannot be both set", nil, nil},
		{"a PodDisruptionBudget", template("pdb.yaml", testchart.PDBTemplate("minAvailable: 1")), "", "", nil, nil},
		{"two container ports named alike", edit("templates/deployment.yaml", "        image:", "        ports: [{name: http, containerPort: 80}, {name: http, containerPort: 81}]\n        image:"),
			`ports[1].name: Duplicate value: "http"`, `ports[1].name: Duplicate value: "http"`, nil, nil},
		{"two container ports", edit("templates/deployment.yaml", "        image:", "        ports: [{name: http, containerPort: 80}, {name: admin, containerPort: 81}]\n        image:"), "", "", nil, nil},
		{"an Ingress path type the server does not know", template("ing.yaml", ingressTemplate("Prefixed")), "Unsupported value: \"Prefixed\"", "Unsupported value: \"Prefixed\"", nil, nil},
		{"an Ingress", template("ing.yaml", ingressTemplate("Prefix")), "", "", nil, nil},
		{"a CronJob schedule the server cannot parse", template("cron.yaml", cronJobTemplate("not a schedule")), "spec.schedule: Invalid value", "spec.schedule: Invalid value", nil, nil},
		{"a CronJob schedule", template("cron.yaml", cronJobTemplate("*/5 * * * *")), "", "", nil, nil},
		{"a Service port out of range", edit("templates/svc.yaml", "port: 80,", "port: 70000,"), "spec.ports[0].port: Invalid value: 70000", "spec.ports[0].port: Invalid value: 70000",
			template("svc.yaml", serviceTemplate), nil},
		{"a Service port", edit("templates/svc.yaml", "port: 80,", "port: 8081,"), "", "", template("svc.yaml", serviceTemplate), nil},
		{"a negative replica count", edit("templates/deployment.yaml", "{{ .Values.replicas | default 1 }}", "-1"), "spec.replicas: Invalid value: -1", "spec.replicas: Invalid value: -1", nil, nil},
		{"a revision history limit", edit("templates/deployment.yaml", "{{ .Values.replicas | default 1 }}", "1\n  revisionHistoryLimit: 5"), "", "", nil, nil},
		{"a ConfigMap key the server cannot take", template("keys.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-keys'}\ndata: {\"not a valid key!\": x}\n"),
			"a valid config key must consist of", "a valid config key must consist of", nil, nil},
		{"a ConfigMap key", template("keys.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-keys'}\ndata: {valid.key: x}\n"), "", "", nil, nil},
		{"a container name in capitals", edit("templates/deployment.yaml", "      - name: web", "      - name: Web"),
			"spec.template.spec.containers[0].name: Invalid value: \"Web\"", "spec.template.spec.containers[0].name: Invalid value: \"Web\"", nil, nil},
		{"a container image", edit("templates/deployment.yaml", `default "registry.example/web:1"`, `default "registry.example/web:2"`), "", "", nil, nil},
		{"an Ingress host the server cannot take", template("ing.yaml", strings.Replace(ingressTemplate("Prefix"), "  - http:", "  - host: Bad_Host\n    http:", 1)),
			"spec.rules[0].host: Invalid value: \"Bad_Host\"", "spec.rules[0].host: Invalid value: \"Bad_Host\"", nil, nil},
		{"an Ingress host", template("ing.yaml", strings.Replace(ingressTemplate("Prefix"), "  - http:", "  - host: web.example.com\n    http:", 1)), "", "", nil, nil},
		{"a Secret's type", template("typed.yaml", typedSecret("example.com/other")), "rejected by the API server: Secret {ns}/{release}-typed", "field is immutable",
			template("typed.yaml", typedSecret("example.com/custom")), nil},
		{"a Secret's data", edit("templates/typed.yaml", "hunter2", "hunter3"), "", "", template("typed.yaml", typedSecret("example.com/custom")), nil},
		{"a NetworkPolicy protocol the server does not know", template("np.yaml", networkPolicyTemplate("TCPX")), "Unsupported value: \"TCPX\"", "Unsupported value: \"TCPX\"", nil, nil},
		{"a NetworkPolicy", template("np.yaml", networkPolicyTemplate("TCP")), "", "", nil, nil},
		{"a Widget field only the new chart's crds/ declares", widgets("x", "y", true),
			"the cluster's CustomResourceDefinition widgets." + widgetGroup + " does not declare it", ".spec.b: field not declared in schema",
			widgets("x", "", false), waitWidgets},
		{"a Widget field the live CRD declares", widgets("z", "", true), "", "", widgets("x", "", false), waitWidgets},
		{"a Widget field its CRD's transition rule keeps", widgetsKeepingA("z"), "spec.a: Invalid value", "a may not change",
			widgetsKeepingA("x"), waitWidgets},
		{"a removed API version in the deployed manifest", nil,
			"removed API: the deployed revision's manifest holds PodDisruptionBudget {release}-web at policy/v1beta1, which this cluster no longer serves",
			"unable to build kubernetes objects from current release manifest", template("pdb.yaml", testchart.PDBTemplate("minAvailable: 1")), storedAt("policy/v1beta1")},
		{"a deployed manifest at served versions", nil, "", "", template("pdb.yaml", testchart.PDBTemplate("minAvailable: 1")), nil},
		{"a Widget under a transition rule, the field kept", widgetsKeepingA("x"), "", "", widgetsKeepingA("x"), waitWidgets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			if tc.both != nil {
				tc.both(t, filepath.Join(f.charts, "demo-app-1.0.0"))
				tc.both(t, filepath.Join(f.charts, "demo-app-2.0.0"))
			}
			if tc.change != nil {
				tc.change(t, filepath.Join(f.charts, "demo-app-2.0.0"))
			}
			name := releaseName()
			_, err := f.env.Kube().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-present"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = f.env.Kube().CoreV1().Namespaces().Delete(context.Background(), f.ns+"-present", metav1.DeleteOptions{})
			})
			// the namespaces the chart names, by name, as plan --check-chart grants them
			// and the objects of each kind the charts hold, as plan --check-chart grants them
			t.Cleanup(func() { deleteWidgetCRD(f) })
			sucNS, sa, _ := f.releasePlanRBAC(name, "- apiGroups: [coordination.k8s.io]",
				"- apiGroups: [apps]\n  resources: [deployments, statefulsets]\n  verbs: [get, list, watch, create, update, patch, delete]\n"+
					"- apiGroups: [\"\"]\n  resources: [services]\n  verbs: [get, list, watch, create, update, patch, delete]\n"+
					"- apiGroups: [autoscaling]\n  resources: [horizontalpodautoscalers]\n  verbs: [get, list, watch, create, update, patch, delete]\n"+
					"- apiGroups: [rbac.authorization.k8s.io, policy, networking.k8s.io, batch]\n  resources: [rolebindings, poddisruptionbudgets, ingresses, networkpolicies, cronjobs]\n  verbs: [get, list]\n- apiGroups: [coordination.k8s.io]",
				"  resources: [nodes]\n  verbs: [list]\n",
				"  resources: [nodes]\n  verbs: [list]\n- apiGroups: [\"\"]\n  resources: [resourcequotas]\n  verbs: [list]\n- apiGroups: ["+widgetGroup+"]\n  resources: [widgets]\n  verbs: [get, list]\n- apiGroups: [\"\"]\n  resources: [namespaces]\n  resourceNames: ["+f.ns+"-absent, "+f.ns+"-present]\n  verbs: [get]\n"+
					"- apiGroups: [\"\"]\n  resources: [configmaps]\n  resourceNames: ["+name+"-other]\n  verbs: [get]\n")
			f.install(name)
			if tc.live != nil {
				tc.live(f, name)
			}
			kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
			rbaccheck.WaitAuthorized(t, kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
				_, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-web", metav1.GetOptions{})
				return err
			})
			node := newNode(t, "node-1")
			before := len(f.writesBy())

			r := f.cli(node, "preflight", append(f.upgradeArgs(name, "2.0.0"), "--kubeconfig", kubeconfig)...)
			assert.Equal(t, before, len(f.writesBy()), "preflight writes nothing")
			assert.NotContains(t, r.Stderr+r.Stdout, "hunter", "a Secret's value is never printed")
			oracle := f.helmUpgrade(name, "2.0.0")
			if tc.says != "" {
				named := strings.NewReplacer("{ns}", f.ns, "{release}", name)
				r.RequireCode(t, outcome.ExitRefused)
				assert.Contains(t, r.Stderr, named.Replace(tc.says))
				require.Error(t, oracle, "Helm's own upgrade")
				assert.Contains(t, oracle.Error(), named.Replace(tc.helm))
				return
			}
			r.RequireCode(t, 0)
			require.NoError(t, oracle, "Helm's own upgrade")
		})
	}
}

// serviceTemplate is a Service with one port, named web.
const serviceTemplate = `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-web
spec:
  selector: {app: {{ .Release.Name }}-web}
  ports: [{name: web, port: 80, targetPort: 8080}]
`

// movePort is an operator's kubectl patch --type=json of the release's
// Service: its port 80 moved to 8080, under kubectl's field manager.
func movePort(f *fixture, release string) {
	f.t.Helper()
	_, err := f.env.Kube().CoreV1().Services(f.ns).Patch(f.t.Context(), release+"-web", types.JSONPatchType,
		[]byte(`[{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}]`), metav1.PatchOptions{FieldManager: "kubectl-patch"})
	require.NoError(f.t, err)
}

// edit replaces, in the chart file at path, each old of pairs with the new
// after it (each must be there).
func edit(path string, pairs ...string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		file := filepath.Join(dir, path)
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		text := string(data)
		for i := 0; i+1 < len(pairs); i += 2 {
			require.Contains(t, text, pairs[i], file)
			text = strings.ReplaceAll(text, pairs[i], pairs[i+1])
		}
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
	}
}

// frozen is an immutable ConfigMap or Secret whose field (data,
// stringData) holds a: value, with labels when not "".
func frozen(kind, field, value, labels string) string {
	return "apiVersion: v1\nkind: " + kind + "\nmetadata:\n  name: {{ .Release.Name }}-frozen\n  labels: {" + labels + "}\nimmutable: true\n" + field + ": {a: " + value + "}\n"
}

// roleBindingTemplate binds ClusterRole role to ServiceAccount subject.
func roleBindingTemplate(role, subject string) string {
	return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: '{{ .Release.Name }}-rb'}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\n" +
		"subjects: [{kind: ServiceAccount, name: " + subject + ", namespace: '{{ .Release.Namespace }}'}]\n"
}

// ingressTemplate is an Ingress to the release's Service with pathType.
func ingressTemplate(pathType string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: '{{ .Release.Name }}-web'}\nspec:\n  rules:\n  - http:\n      paths:\n" +
		"      - {path: /, pathType: " + pathType + ", backend: {service: {name: '{{ .Release.Name }}-web', port: {number: 80}}}}\n"
}

// cronJobTemplate is a suspended CronJob on schedule.
func cronJobTemplate(schedule string) string {
	return "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: '{{ .Release.Name }}-cron'}\nspec:\n  schedule: \"" + schedule + "\"\n  suspend: true\n" +
		"  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: registry.example/c:1}]}}}}\n"
}

// typedSecret is a Secret of type.
func typedSecret(secretType string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata: {name: '{{ .Release.Name }}-typed'}\ntype: " + secretType + "\nstringData: {a: hunter2}\n"
}

// networkPolicyTemplate lets the release's pods in on port 80 of protocol.
func networkPolicyTemplate(protocol string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: '{{ .Release.Name }}-web'}\n" +
		"spec: {podSelector: {matchLabels: {app: '{{ .Release.Name }}-web'}}, ingress: [{ports: [{port: 80, protocol: " + protocol + "}]}]}\n"
}

// widgetGroup is the API group of the Widgets of the oracle's charts:
// their CRD is cluster-wide, so the group is this test process's own.
var widgetGroup = "oracle-" + strings.ToLower(rand.Text()[:8]) + ".example.com"

// widgets gives the chart a Widget whose spec.a is a and, when b is not
// "", spec.b b; and, in crds/, the Widget CRD, with spec.b when
// declareB. Helm installs crds/ on install only, so the CRD stays the
// install's.
func widgets(a, b string, declareB bool) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		spec := "{a: " + a + "}"
		if b != "" {
			spec = "{a: " + a + ", b: " + b + "}"
		}
		template("widget.yaml", "apiVersion: "+widgetGroup+"/v1\nkind: Widget\nmetadata:\n  name: {{ .Release.Name }}-w\nspec: "+spec+"\n")(t, dir)
		props := "a: {type: string}"
		if declareB {
			props += ", b: {type: string}"
		}
		crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + widgetGroup + `}
spec:
  group: ` + widgetGroup + `
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
          spec: {type: object, properties: {` + props + `}}
`
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "crds"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "crds", "widgets.yaml"), []byte(crd), 0o644))
	}
}

// storedAt rewrites the release's deployed record as a Helm on an older
// cluster would have stored it: its PodDisruptionBudget at apiVersion.
func storedAt(apiVersion string) func(f *fixture, release string) {
	return func(f *fixture, release string) {
		f.rewriteRecord(release, 1, "apiVersion: policy/v1\nkind: PodDisruptionBudget", "apiVersion: "+apiVersion+"\nkind: PodDisruptionBudget")
	}
}

// widgetsKeepingA is widgets(a, "", false) whose CRD's rule says spec.a
// may not change (a CEL transition rule).
func widgetsKeepingA(a string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		widgets(a, "", false)(t, dir)
		edit("crds/widgets.yaml", "a: {type: string}", `a: {type: string, x-kubernetes-validations: [{rule: "self == oldSelf", message: "a may not change"}]}`)(t, dir)
	}
}

// waitWidgets waits for the API server to publish the Widgets' schema,
// which preflight reads.
func waitWidgets(f *fixture, _ string) {
	f.t.Helper()
	require.NoError(f.t, f.env.WaitOpenAPI(f.t.Context(), schema.GroupVersion{Group: widgetGroup, Version: "v1"}))
}

// deleteWidgetCRD deletes the Widget CRD, if a case installed it.
func deleteWidgetCRD(f *fixture) {
	_, _ = f.env.Kubectl(context.Background(), "delete", "crd", "widgets."+widgetGroup, "--ignore-not-found")
}

// otherNamespaceTemplate is a ConfigMap in namespace <release
// namespace>-suffix.
func otherNamespaceTemplate(suffix string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-other\n  namespace: {{ .Release.Namespace }}-" + suffix + "\ndata: {a: b}\n"
}

// kubeVersion sets the chart's kubeVersion.
func kubeVersion(constraint string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		require.NoError(t, testchart.SetKubeVersion(dir, constraint))
	}
}

// template adds a template to the chart.
func template(name, body string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", name), []byte(body), 0o644))
	}
}
