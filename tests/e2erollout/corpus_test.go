package e2erollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// rolloutTimeout is how long an applier's upgrade may take to roll out
// before the oracle calls it failed: KWOK's pods are Ready within a
// second or two of being scheduled.
const rolloutTimeout = 15 * time.Second

// rolloutCase is one upgrade of the corpus: 2.0.0's values over 1.0.0's,
// the cluster's state (made after 1.0.0 is installed, or before when
// early), and preflight's refusal ("" for a control, which must roll out).
type rolloutCase struct {
	name    string
	changes map[string]any
	early   func(t *testing.T, env *testenv.Env, ns string) // before the install
	state   func(t *testing.T, env *testenv.Env, ns string) // after it
	says    string
}

// cases are, for each of Pod Security, ResourceQuota, LimitRange,
// scheduling and ValidatingAdmissionPolicy, two upgrades that do not roll
// out and a control that does.
var cases = []rolloutCase{
	{"pod security: a privileged container under restricted", map[string]any{"privileged": true}, enforce("restricted"), nil,
		`its pods violate PodSecurity "restricted:latest"`},
	{"pod security: a hostPath under baseline", map[string]any{"hostPath": true}, enforce("baseline"), nil,
		`its pods violate PodSecurity "baseline:latest"`},
	{"pod security: another request under restricted", map[string]any{"cpu": "150m"}, enforce("restricted"), nil, ""},
	{"quota: more pods than it holds", map[string]any{"replicas": 3}, nil, quota(corev1.ResourceList{"pods": resource.MustParse("2")}),
		"exceeded quota"},
	{"quota: more CPU than it holds", map[string]any{"cpu": "600m"}, nil, quota(corev1.ResourceList{"requests.cpu": resource.MustParse("500m")}),
		"exceeded quota"},
	{"quota: a Service more than it counts", map[string]any{"services": 2}, nil, quota(corev1.ResourceList{"count/services": resource.MustParse("1")}),
		"exceeded quota"},
	{"quota: within it", map[string]any{"replicas": 2}, nil, quota(corev1.ResourceList{"pods": resource.MustParse("4"), "requests.cpu": resource.MustParse("1")}), ""},
	{"limit range: a limit above its max", map[string]any{"cpuLimit": "1"}, nil, limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}), "maximum cpu usage per Container is 500m, but limit is 1"},
	{"limit range: a request below its min", map[string]any{"memory": "16Mi"}, nil, limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Min: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}), "minimum memory usage per Container is 32Mi"},
	{"limit range: within it", map[string]any{"cpuLimit": "400m"}, nil, limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}), ""},
	{"scheduling: more CPU than any node has", map[string]any{"cpu": "64"}, nil, nil, "Insufficient cpu"},
	{"scheduling: a node selector only a tainted node has", map[string]any{"nodeSelector": map[string]any{"pool": "tainted"}}, nil, nil,
		"untolerated taint"},
	{"scheduling: the tainted node, tolerated", map[string]any{"nodeSelector": map[string]any{"pool": "tainted"},
		"tolerations": []any{map[string]any{"key": "dedicated", "value": "rollout", "effect": "NoSchedule"}}}, nil, nil, ""},
	{"admission policy: more replicas than it allows", map[string]any{"replicas": 3}, nil,
		policy("apps", "deployments", "object.spec.replicas <= 2", "at most 2 replicas"), "denied request: at most 2 replicas"},
	{"admission policy: a ConfigMap key it forbids", map[string]any{"data": map[string]any{"a": "x", "forbidden": "y"}}, nil,
		policy("", "configmaps", "!has(object.data) || !('forbidden' in object.data)", "no forbidden key"), "denied request: no forbidden key"},
	{"admission policy: replicas it allows", map[string]any{"replicas": 2}, nil,
		policy("apps", "deployments", "object.spec.replicas <= 2", "at most 2 replicas"), ""},
}

// kindRun installs chart at 1.0.0 as release rel in namespace ns, and
// returns how to run a chart-upgrader command on the target, to 2.0.0,
// as the kind's Plan ServiceAccount, and the oracle: the kind's applier's
// upgrade to 2.0.0, nil when it rolled out.
type kindRun func(t *testing.T, env *testenv.Env, chart, ns, rel string) (run func(command string, args ...string) noderun.Result, oracle func() error)

// kinds are the three kinds, each with its kindRun.
var kinds = []struct {
	name string
	run  kindRun
}{{"release", releaseKind}, {"helmchart", helmChartKind}, {"managedchart", managedChartKind}}

func TestPreflightPredictsTheRollout(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					env := testenv.ForTest(t)
					shared(t, env)
					ns := env.Namespace(t)
					chart, rel := name("r"), name("rel")
					writeCharts(t, chart, tc.changes)
					if tc.early != nil {
						tc.early(t, env, ns)
					}
					run, oracle := k.run(t, env, chart, ns, rel)
					if tc.state != nil {
						tc.state(t, env, ns)
					}
					before := len(noderun.Writes(t, env, ns))
					r := run("preflight")
					assert.Equal(t, before, len(noderun.Writes(t, env, ns)), "preflight writes nothing")
					err := oracle()
					if tc.says == "" {
						r.RequireCode(t, 0)
						require.NoError(t, err, "the applier's upgrade rolls out")
						return
					}
					r.RequireCode(t, outcome.ExitRefused)
					assert.Contains(t, r.Stderr, tc.says)
					require.Error(t, err, "the applier's upgrade does not roll out")
				})
			}
		})
	}
}

// releaseKind: a release Helm 4 installed (server-side, --wait); the
// oracle is Helm 4's upgrade --wait.
func releaseKind(t *testing.T, env *testenv.Env, chart, ns, rel string) (func(string, ...string) noderun.Result, func() error) {
	helm := cluster.NewHelmGetter(env.Config())
	cfg, err := cluster.HelmConfiguration(helm, ns, cluster.SecretDriver, nil)
	require.NoError(t, err)
	ch, err := loader.Load(chartDir(chart, "1.0.0"))
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout, in.ServerSideApply = rel, ns, kube.StatusWatcherStrategy, 2*rolloutTimeout, true
	_, err = in.RunWithContext(t.Context(), ch, map[string]any{})
	require.NoError(t, err)
	sucNS := env.Namespace(t)
	sa := "chart-upgrader-release-" + rel
	kubeconfig := planServiceAccount(t, env, "release/10-rbac.yaml", "release", sa, sucNS, chart, ns, rel, nil, nil,
		"namespace: demo-system", "namespace: "+ns, "namespace: system-upgrade", "namespace: "+sucNS,
		"resourceNames: [demo-system]", "resourceNames: ["+ns+"]", "name: chart-upgrader-release\n", "name: "+sa+"\n")
	helmWrites(t, env, ns, sucNS, sa)
	n := imagesNode(t)
	run := func(command string, args ...string) noderun.Result {
		return n.Run(t.Context(), env, command, append([]string{"--target", "release/" + ns + "/" + rel, "--chart-source", world.charts,
			"--version", "2.0.0", "--kubeconfig", kubeconfig, "--registries-config", images.registries}, args...)...)
	}
	oracle := func() error {
		ch, err := loader.Load(chartDir(chart, "2.0.0"))
		require.NoError(t, err)
		up := action.NewUpgrade(cfg)
		up.Namespace, up.WaitStrategy, up.Timeout, up.ServerSideApply = ns, kube.StatusWatcherStrategy, rolloutTimeout, "true"
		_, err = up.RunWithContext(t.Context(), rel, ch, map[string]any{})
		return err
	}
	return run, oracle
}

// helmWrites grants ServiceAccount sa of sucNS Helm's writes on the
// chart's kinds in ns, as plans/release/10-rbac.yaml says to add them for
// a chart (its Deployment, Services, ConfigMap and hook Job).
func helmWrites(t *testing.T, env *testenv.Env, ns, sucNS, sa string) {
	chartKinds(t, env, ns, sucNS, sa, "get, list, watch, create, update, patch, delete")
}

// chartKinds grants ServiceAccount sa of sucNS verbs on the kinds of the
// chart's objects in ns (beside ConfigMaps, which the plans' RBAC has):
// for a HelmChart, the get, list and watch its readiness needs, as
// plans/k3s/10-rbac.yaml says to add them for a chart.
func chartKinds(t *testing.T, env *testenv.Env, ns, sucNS, sa, verbs string) {
	rbaccheck.Create(t, env, rbaccheck.Decode(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: `+sa+`-helm-writes, namespace: `+ns+`}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [`+verbs+`]
- apiGroups: [""]
  resources: [services]
  verbs: [`+verbs+`]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [`+verbs+`]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: `+sa+`-helm-writes, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: `+sa+`-helm-writes}
subjects: [{kind: ServiceAccount, name: `+sa+`, namespace: `+sucNS+`}]
`))
}

// helmChartKind: a HelmChart helm-controller installed (its Job, run by
// tests/klipperhelm); the oracle is its Job's upgrade, then the rollout
// of what it deployed, judged as the wait judges a HelmChart.
func helmChartKind(t *testing.T, env *testenv.Env, chart, ns, rel string) (func(string, ...string) noderun.Result, func() error) {
	hcNS, sucNS := env.Namespace(t), env.Namespace(t)
	hc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
		"metadata": map[string]any{"name": rel, "namespace": hcNS},
		"spec": map[string]any{"chart": chart, "version": "1.0.0", "chartContent": chartContent(t, chart, "1.0.0"), "targetNamespace": ns,
			"failurePolicy": "abort"}}}
	_, err := env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(hcNS).Create(t.Context(), hc, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, waitHelmChart(t, env, hcNS, rel, "1.0.0", 2*rolloutTimeout), "the install rolls out")
	sa := "chart-upgrader-helmchart-" + rel
	kubeconfig := planServiceAccount(t, env, "k3s/10-rbac.yaml", "helmchart", sa, sucNS, chart, ns, rel, nil, nil,
		"name: chart-upgrader-helmchart\n", "name: "+sa+"\n",
		"namespace: kube-system", "namespace: "+hcNS, "namespace: demo-system", "namespace: "+ns, "namespace: system-upgrade", "namespace: "+sucNS,
		"resourceNames: [demo-app]", "resourceNames: ["+rel+"]", "resourceNames: [helm-install-demo-app]", "resourceNames: [helm-install-"+rel+"]",
		"resourceNames: [demo-system]", "resourceNames: ["+ns+"]")
	chartKinds(t, env, ns, sucNS, sa, "get, list, watch")
	n := imagesNode(t)
	run := func(command string, args ...string) noderun.Result {
		return n.Run(t.Context(), env, command, append([]string{"--target", "helmchart/" + hcNS + "/" + rel, "--chart-source", world.charts,
			"--version", "2.0.0", "--kubeconfig", kubeconfig, "--registries-config", images.registries}, args...)...)
	}
	oracle := func() error {
		patch := map[string]any{"spec": map[string]any{"version": "2.0.0", "chartContent": chartContent(t, chart, "2.0.0")}}
		u, err := env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(hcNS).Get(t.Context(), rel, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, patch["spec"].(map[string]any)["version"], "spec", "version"))
		require.NoError(t, unstructured.SetNestedField(u.Object, patch["spec"].(map[string]any)["chartContent"], "spec", "chartContent"))
		_, err = env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(hcNS).Update(t.Context(), u, metav1.UpdateOptions{})
		require.NoError(t, err)
		return waitHelmChart(t, env, hcNS, rel, "2.0.0", rolloutTimeout)
	}
	return run, oracle
}

// waitHelmChart waits until HelmChart ns/name is ready at version as the
// wait judges it (its Job, its release, the release's objects).
func waitHelmChart(t *testing.T, env *testenv.Env, ns, name, version string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	target := helmchart.New(&helmchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}, ns, name, helmchart.DefaultOptions)
	w, err := target.Watch(ctx)
	if err != nil {
		return err
	}
	_, err = upgrade.WaitReady(ctx, w, upgrade.Want{Version: version}, upgrade.WaitOptions{Heartbeat: time.Hour})
	return err
}

// managedChartKind: a ManagedChart the Fleet simulator deploys (its
// agent runs Helm 4 on this cluster and judges the objects by kstatus);
// the oracle is the simulator's upgrade of it, waited for as the wait
// judges a ManagedChart.
func managedChartKind(t *testing.T, env *testenv.Env, chart, ns, rel string) (func(string, ...string) noderun.Result, func() error) {
	mcNS, sucNS := env.Namespace(t), env.Namespace(t)
	_, err := example.InstallAndWait(t.Context(), env, example.Install{Namespace: mcNS, Name: rel, Chart: chart, Version: "1.0.0",
		ReleaseNamespace: ns, Values: map[string]any{}}, 2*rolloutTimeout)
	require.NoError(t, err, "the install rolls out")
	kubeconfig := planServiceAccount(t, env, "10-rbac.yaml", "managedchart", "chart-upgrader-"+rel, sucNS, chart, ns, rel,
		[]string{"chart-upgrader-sources", "chart-upgrader-gates"}, nil,
		"namespace: fleet-local", "namespace: "+mcNS, "namespace: harvester-system", "namespace: "+ns, "namespace: system-upgrade", "namespace: "+sucNS,
		"resourceNames: [harvester-crd, harvester]", "resourceNames: ["+rel+"]",
		"resourceNames: [mcc-harvester-crd, mcc-harvester]", "resourceNames: ["+managedchart.BundleName(rel)+"]",
		"resourceNames: [harvester-system]", "resourceNames: ["+ns+"]", "name: chart-upgrader\n", "name: chart-upgrader-"+rel+"\n")
	n := imagesNode(t)
	run := func(command string, args ...string) noderun.Result {
		return n.Run(t.Context(), env, command, append([]string{"--target", "managedchart/" + mcNS + "/" + rel, "--chart-source", world.charts,
			"--version", "2.0.0", "--kubeconfig", kubeconfig, "--registries-config", images.registries}, args...)...)
	}
	oracle := func() error {
		u, err := env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(mcNS).Get(t.Context(), rel, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, "2.0.0", "spec", "version"))
		_, err = env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(mcNS).Update(t.Context(), u, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err = example.WaitReady(t.Context(), env, mcNS, rel, upgrade.Want{Version: "2.0.0"}, rolloutTimeout)
		return err
	}
	return run, oracle
}

// enforce labels the namespace with a Pod Security enforce level.
func enforce(level string) func(*testing.T, *testenv.Env, string) {
	return func(t *testing.T, env *testenv.Env, ns string) {
		patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"` + level + `"}}}`)
		_, err := env.Kube().CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
}

// quota creates a ResourceQuota of hard in the namespace and waits until
// the quota controller has counted what is there (status.used).
func quota(hard corev1.ResourceList) func(*testing.T, *testenv.Env, string) {
	return func(t *testing.T, env *testenv.Env, ns string) {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		_, err := env.Kube().CoreV1().ResourceQuotas(ns).Create(t.Context(), q, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := env.Kube().CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for k := range hard {
				if _, ok := got.Status.Used[k]; !ok {
					return false, nil
				}
			}
			return true, nil
		}), "the quota controller counts the namespace")
	}
}

// limitRange creates a LimitRange of item in the namespace.
func limitRange(item corev1.LimitRangeItem) func(*testing.T, *testenv.Env, string) {
	return func(t *testing.T, env *testenv.Env, ns string) {
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
		_, err := env.Kube().CoreV1().LimitRanges(ns).Create(t.Context(), lr, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// policy creates a ValidatingAdmissionPolicy on group/resource whose
// validation is expression (message when false), bound with Deny to the
// case's namespace, and waits until the API server enforces it.
func policy(group, res, expression, message string) func(*testing.T, *testenv.Env, string) {
	return func(t *testing.T, env *testenv.Env, ns string) {
		adm := env.Kube().AdmissionregistrationV1()
		fail := admissionregistrationv1.Fail
		_, err := adm.ValidatingAdmissionPolicies().Create(t.Context(), &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{res}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = adm.ValidatingAdmissionPolicyBindings().Create(t.Context(), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: ns,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), ns, metav1.DeleteOptions{})
			_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
		// enforced once a dry run of what it refuses is refused
		probe := &unstructured.Unstructured{}
		if res == "configmaps" {
			probe.Object = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "probe", "namespace": ns},
				"data": map[string]any{"forbidden": "y"}}
		} else {
			probe.Object = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "probe", "namespace": ns},
				"spec": map[string]any{"replicas": int64(3), "selector": map[string]any{"matchLabels": map[string]any{"p": "p"}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"p": "p"}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}}}}
		}
		gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
		if res == "deployments" {
			gvr = schemaGVR("apps", "v1", "deployments")
		}
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := env.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
		}), "the API server enforces the policy")
	}
}

func schemaGVR(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// Admission webhooks stay unseen: preflight names, per webhook of the
// cluster, the objects of the upgrade it will be called for (its rules,
// namespace and object selectors matched as the API server matches
// them), as a warning, and passes; a webhook whose selector leaves the
// release's namespace out is not named.
func TestPreflightNamesTheWebhooksItCannotJudge(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	ns := env.Namespace(t)
	chart, rel := name("r"), name("rel")
	writeCharts(t, chart, map[string]any{"replicas": 2})
	run, _ := releaseKind(t, env, chart, ns, rel)
	ignore, none := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:1/never-called"
	hook := func(name, nsName string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: &url},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsName}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps", ""}, APIVersions: []string{"*"}, Resources: []string{"deployments", "configmaps"}}}}}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("check.example.com", ns), hook("elsewhere.example.com", ns+"-other")}}
	_, err := env.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	r := run("preflight", "-o", "json")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, `"kind": "admission-webhook"`)
	assert.Contains(t, r.Stdout, "2 objects of the upgrade go through admission webhook ValidatingWebhookConfiguration "+ns+": check.example.com (failurePolicy Ignore)")
	assert.Contains(t, r.Stdout, "Deployment "+ns+"/"+rel+"-web (UPDATE)")
	assert.Contains(t, r.Stdout, "ConfigMap "+ns+"/"+rel+"-config (UPDATE)")
	assert.NotContains(t, r.Stdout, "elsewhere.example.com")
}
