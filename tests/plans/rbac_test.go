package plans

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The target of the RBAC test: the bundled example chart.
const demo = "demo-app"

// world is the RBAC test's cluster: plans/10-rbac.yaml applied with its
// namespaces moved to fresh ones (fleet-local → target, harvester-system →
// release, system-upgrade → suc) and its names to the demo target.
type world struct {
	env                  *testenv.Env
	target, release, suc string
	rbac                 []*unstructured.Unstructured
	sa                   string // the ServiceAccount's user name
	kubeconfig           string // impersonates the ServiceAccount
	charts               string
}

// The ServiceAccount from plans/10-rbac.yaml can run a whole upgrade of the
// bundled example (the Plan's way: spec from the environment, version from
// SYSTEM_UPGRADE_PLAN_LATEST_VERSION) and `status`; it uses every rule it
// is granted and is refused anything else.
func TestRBACIsSufficientAndTight(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.readyNode(t, "rbac-node-1")
	w.install(t)

	// the upgrade, as the Plan's Job runs it, as the ServiceAccount
	specFile := w.specFile(t)
	host := t.TempDir()
	for k, v := range map[string]string{
		suc.SpecEnv:                          specFile,
		"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "2.0.0",
		"SYSTEM_UPGRADE_NODE_NAME":           "rbac-node-1",
		"SYSTEM_UPGRADE_PLAN_NAME":           "chart-upgrader",
		"SYSTEM_UPGRADE_POD_NAME":            "apply-chart-upgrader-on-rbac-node-1-with-0123",
		"KUBECONFIG":                         w.kubeconfig,
	} {
		t.Setenv(k, v)
	}
	local := []string{"--host-root", host, "--termination-log", filepath.Join(host, "termination-log"), "--log-format", "json"}
	code, stdout, stderr := noderun.CLI(t, append([]string{"upgrade", "--require-nodes-ready"}, local...)...).Outputs()
	require.Equal(t, 0, code, "upgrade as %s:\n%s\n%s", w.sa, stderr, stdout)
	assert.NotContains(t, strings.ToLower(stderr), "forbidden")
	assert.NotContains(t, stderr, "could not record event")
	assert.Contains(t, stdout, "upgraded managedchart/"+w.target+"/"+demo+" 1.0.0 → 2.0.0")
	// the conflict check covered every object of the chart, with reads alone
	assert.Contains(t, stderr, "conflict check: 3 objects checked against their managedFields as fleetagent")
	assert.NotContains(t, stderr, "not checked")

	tc := &managedchart.Client{Dynamic: w.env.Dynamic(), Kube: w.env.Kube()}
	mc, found, err := tc.Get(ctx, w.target, demo)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "2.0.0", mc.Version)
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash])

	code, stdout, stderr = noderun.CLI(t, append([]string{"status", "--target", "managedchart/" + w.target + "/" + demo}, local...)...).Outputs()
	require.Equal(t, 0, code, "status as %s:\n%s\n%s", w.sa, stderr, stdout)
	assert.Contains(t, stdout, managedchart.BackupName(demo, "1.0.0"))

	// every request the ServiceAccount made was allowed, and every rule
	// it has was used
	used, denied := w.requests(t)
	assert.Empty(t, denied, "requests the RBAC refused")
	granted := w.granted(t)
	t.Logf("the ServiceAccount used:\n  %s", strings.Join(used, "\n  "))
	assert.Equal(t, granted, used, "granted but unused: %v\nused but not granted: %v", minus(granted, used), minus(used, granted))

	w.refusals(t)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	env := testenv.ForTest(t)
	w := &world{env: env, target: env.Namespace(t), release: env.Namespace(t), suc: env.Namespace(t)}
	w.sa = "system:serviceaccount:" + w.suc + ":" + suc.DefaultServiceAccount

	text := replaceAll(t, "plans/10-rbac.yaml", planFile(t, "10-rbac.yaml"),
		"namespace: fleet-local", "namespace: "+w.target,
		"namespace: harvester-system", "namespace: "+w.release,
		"namespace: system-upgrade", "namespace: "+w.suc,
		"resourceNames: [harvester-crd, harvester]", "resourceNames: ["+demo+"]",
		"resourceNames: [mcc-harvester-crd, mcc-harvester]", "resourceNames: ["+managedchart.BundleName(demo)+"]",
		"resourceNames: [harvester-longhorn]", "resourceNames: ["+demo+"-longhorn]",
		"resourceNames: [harvester-system]", "resourceNames: ["+w.release+"]")
	// the Roles of the Harvester spec's other live and once sources (kube-system,
	// longhorn-system) and of its health gates: the example spec reads none of
	// them, so they are left out here, and TestSpecSecretAgreesWithPlansAndRBAC
	// checks they grant what the Harvester spec reads
	for _, o := range objects(t, "10-rbac.yaml", text) {
		if o.GetName() == "chart-upgrader-sources" || o.GetName() == "chart-upgrader-gates" {
			continue
		}
		w.rbac = append(w.rbac, o)
	}
	require.Len(t, w.rbac, 7, "10-rbac.yaml: the ServiceAccount, two Roles and their bindings, the ClusterRole and its binding")
	for _, o := range w.rbac {
		y, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		for _, old := range []string{"harvester", "fleet-local", "system-upgrade"} {
			require.NotContains(t, string(y), old, "a name the test does not move is left in 10-rbac.yaml")
		}
	}
	// the conflict check's read-only RBAC, as the plans' README says to
	// make it: derived from the chart by `plan --check-chart`
	code, out, stderr := noderun.CLI(t, "plan", "--image", "registry.example/chart-upgrader", "--version", "2.0.0", "--namespace", w.suc,
		"--check-chart", filepath.Join(repoRoot(t), "package", "examples", "charts", "demo-app-2.0.0"), "--check-release", w.release+"/"+demo).Outputs()
	require.Equal(t, 0, code, stderr)
	for _, o := range objects(t, "plan --check-chart", out) {
		if o.GetKind() != "Plan" {
			w.rbac = append(w.rbac, o)
		}
	}
	w.create(t, w.rbac)
	w.kubeconfig = w.impersonating(t)
	w.waitAuthorized(t)

	w.charts = t.TempDir()
	require.NoError(t, example.CopyDir(filepath.Join(repoRoot(t), "package", "examples", "charts"), w.charts))
	_, stopSim, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(w.charts), Namespace: w.target})
	require.NoError(t, err)
	t.Cleanup(stopSim)
	return w
}

// create creates objects as the admin.
func (w *world) create(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	m := mapper(t, w.env)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		res := w.env.Dynamic().Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(o.GetNamespace()).Create(t.Context(), o, metav1.CreateOptions{})
		} else {
			_, err = res.Create(t.Context(), o, metav1.CreateOptions{})
			// cluster-scoped: shared by every test of the API server
			t.Cleanup(func() { _ = res.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
		}
		require.NoError(t, err, "creating %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// impersonating writes a kubeconfig that reaches the test API server with
// the admin's credentials, acting as the ServiceAccount.
func (w *world) impersonating(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(w.env.KubeconfigPath())
	require.NoError(t, err)
	require.NotEmpty(t, cfg.AuthInfos)
	for _, user := range cfg.AuthInfos {
		user.Impersonate = w.sa
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + w.suc, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-chart-upgrader")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// clients act as the ServiceAccount.
func (w *world) clients(t *testing.T) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", w.kubeconfig)
	require.NoError(t, err)
	// the test's own probes are not the tool's requests: requests leaves
	// them out (waitAuthorized's first tries are refused until the
	// authorizer's cache has the new bindings)
	cfg.UserAgent = probeAgent
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return kube, dyn
}

// probeAgent is the user agent of the test's own requests as the
// ServiceAccount.
const probeAgent = "chart-upgrader-tests/probe"

// waitAuthorized returns once the API server's authorizer knows each
// binding (it reads RBAC objects from a cache; there is nothing to watch).
func (w *world) waitAuthorized(t *testing.T) {
	t.Helper()
	kube, dyn := w.clients(t)
	ctx := t.Context()
	for what, try := range map[string]func() error{
		"Role chart-upgrader-target": func() error {
			_, err := dyn.Resource(managedchart.ManagedChartGVR).Namespace(w.target).Get(ctx, demo, metav1.GetOptions{})
			return err
		},
		"Role chart-upgrader-release": func() error {
			_, err := kube.CoreV1().Secrets(w.release).List(ctx, metav1.ListOptions{})
			return err
		},
		"ClusterRole chart-upgrader": func() error {
			_, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		},
		"Role chart-upgrader-conflict-check": func() error {
			_, err := kube.CoreV1().ConfigMaps(w.release).Get(ctx, demo+"-config", metav1.GetOptions{})
			return err
		},
		"ClusterRole chart-upgrader-conflict-check": func() error {
			_, err := kube.StorageV1().StorageClasses().Get(ctx, demo+"-longhorn", metav1.GetOptions{})
			return err
		},
	} {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			err := try()
			return err == nil || apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "%s never took effect for %s", what, w.sa)
	}
}

// readyNode creates a Node reporting Ready (envtest runs no kubelet).
func (w *world) readyNode(t *testing.T, name string) {
	t.Helper()
	nodes := w.env.Kube().CoreV1().Nodes()
	n, err := nodes.Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	_, err = nodes.UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// install creates the demo ManagedChart at 1.0.0 with the installer's
// values (package/examples/values.yaml), released into the release
// namespace, and waits until the simulator has deployed it.
func (w *world) install(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "package", "examples", "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	_, err = example.InstallAndWait(t.Context(), w.env, example.Install{Namespace: w.target, Name: demo, Version: "1.0.0",
		ReleaseNamespace: w.release, Values: values}, 60*time.Second)
	require.NoError(t, err)
}

// specFile writes the bundled example's upgrade spec
// (package/examples/spec.yaml), moved to the test's namespaces and charts,
// where SUC would mount the Plan's spec Secret, and returns its path.
func (w *world) specFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "package", "examples", "spec.yaml"))
	require.NoError(t, err)
	text := replaceAll(t, "package/examples/spec.yaml", string(data),
		"{kind: ManagedChart, namespace: fleet-local, name: "+demo+"}", "{kind: ManagedChart, namespace: "+w.target+", name: "+demo+"}",
		"source: charts}", "source: "+w.charts+"}",
		"namespace: demo-system", "namespace: "+w.release,
		"wait: {timeout: 5m}", "wait: {timeout: 2m}")
	dir := filepath.Join(t.TempDir(), "run", "system-upgrade", "secrets", suc.DefaultSpecSecret)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, suc.SpecKey)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// auditEvent is the part of an audit event the test reads.
type auditEvent struct {
	AuditID          string `json:"auditID"`
	Verb             string `json:"verb"`
	UserAgent        string `json:"userAgent"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// scope names where a request or a rule applies.
func (w *world) scope(namespace string) string {
	switch namespace {
	case "":
		return "cluster"
	case w.target:
		return "target"
	case w.release:
		return "release"
	default:
		return "namespace " + namespace
	}
}

// permission is "<scope> <group>/<resource> <verb>".
func permission(scope, group, resource, verb string) string {
	return scope + " " + group + "/" + resource + " " + verb
}

// requests reads the audit log: the permissions the ServiceAccount's
// requests needed, and the requests refused.
func (w *world) requests(t *testing.T) (used []string, denied []string) {
	t.Helper()
	f, err := os.Open(w.env.AuditLogPath())
	require.NoError(t, err)
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != w.sa || ev.ObjectRef == nil {
			continue
		}
		if ev.UserAgent == probeAgent {
			continue // the test's own probe, not the tool
		}
		ref := ev.ObjectRef
		if ref.Resource == "selfsubjectaccessreviews" || ref.Resource == "selfsubjectrulesreviews" {
			continue // allowed to every authenticated user (system:basic-user)
		}
		if ref.APIGroup == "" && ref.Resource == "namespaces" {
			ref.Namespace = "" // a Namespace is cluster-scoped, though the audit names it as its own namespace
		}
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		p := permission(w.scope(ref.Namespace), ref.APIGroup, resource, ev.Verb)
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
			denied = append(denied, p+" "+ref.Name)
			continue
		}
		if !seen[p] {
			seen[p] = true
			used = append(used, p)
		}
	}
	require.NoError(t, sc.Err())
	slices.Sort(used)
	return used, denied
}

// granted lists the permissions of the applied RBAC.
func (w *world) granted(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range rbacRules(t, w.rbac) {
		for _, g := range r.groups {
			for _, res := range r.resources {
				for _, v := range r.verbsSet {
					out = append(out, permission(w.scope(r.namespace), g, res, v))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// refusals: what the ServiceAccount must not do is refused.
func (w *world) refusals(t *testing.T) {
	ctx := t.Context()
	kube, dyn := w.clients(t)
	other := w.env.Namespace(t)
	admin := w.env.Dynamic().Resource(managedchart.ManagedChartGVR)
	for ns, name := range map[string]string{other: demo, w.target: "other-chart"} {
		_, err := admin.Namespace(ns).Create(ctx, managedChart(ns, name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	mcs := dyn.Resource(managedchart.ManagedChartGVR)
	mine, err := mcs.Namespace(w.target).Get(ctx, demo, metav1.GetOptions{})
	require.NoError(t, err, "the ServiceAccount reads its target")
	elsewhere, err := admin.Namespace(other).Get(ctx, demo, metav1.GetOptions{})
	require.NoError(t, err)
	sibling, err := admin.Namespace(w.target).Get(ctx, "other-chart", metav1.GetOptions{})
	require.NoError(t, err)
	merge := []byte(`{"spec":{"paused":true}}`)
	backup := managedchart.BackupName(demo, "1.0.0")

	for what, try := range map[string]func() error{
		"list secrets in kube-system": func() error {
			_, err := kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"list secrets in all namespaces": func() error {
			_, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		},
		"update a managedchart in another namespace": func() error {
			_, err := mcs.Namespace(other).Update(ctx, elsewhere, metav1.UpdateOptions{})
			return err
		},
		"get a managedchart in another namespace": func() error {
			_, err := mcs.Namespace(other).Get(ctx, demo, metav1.GetOptions{})
			return err
		},
		"update another managedchart of the target namespace": func() error {
			_, err := mcs.Namespace(w.target).Update(ctx, sibling, metav1.UpdateOptions{})
			return err
		},
		"list every managedchart of the target namespace": func() error {
			_, err := mcs.Namespace(w.target).List(ctx, metav1.ListOptions{})
			return err
		},
		"delete the managedchart": func() error {
			return mcs.Namespace(w.target).Delete(ctx, demo, metav1.DeleteOptions{})
		},
		"patch the managedchart": func() error {
			_, err := mcs.Namespace(w.target).Patch(ctx, demo, types.MergePatchType, merge, metav1.PatchOptions{})
			return err
		},
		"update the managedchart's status": func() error {
			_, err := mcs.Namespace(w.target).UpdateStatus(ctx, mine, metav1.UpdateOptions{})
			return err
		},
		"create a managedchart": func() error {
			_, err := mcs.Namespace(w.target).Create(ctx, managedChart(w.target, "new-chart"), metav1.CreateOptions{})
			return err
		},
		"update the bundle": func() error {
			b, err := w.env.Dynamic().Resource(managedchart.BundleGVR).Namespace(w.target).Get(ctx, managedchart.BundleName(demo), metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = dyn.Resource(managedchart.BundleGVR).Namespace(w.target).Update(ctx, b, metav1.UpdateOptions{})
			return err
		},
		"get a bundledeployment by name": func() error {
			_, err := dyn.Resource(managedchart.BundleDeploymentGVR).Namespace(fleetsim.ClusterNamespace(w.target)).
				Get(ctx, fleetsim.BundleDeploymentName(managedchart.BundleName(demo), fleetsim.LocalCluster), metav1.GetOptions{})
			return err
		},
		"delete the backup secret": func() error {
			return kube.CoreV1().Secrets(w.target).Delete(ctx, backup, metav1.DeleteOptions{})
		},
		"update the backup secret": func() error {
			s, err := w.env.Kube().CoreV1().Secrets(w.target).Get(ctx, backup, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = kube.CoreV1().Secrets(w.target).Update(ctx, s, metav1.UpdateOptions{})
			return err
		},
		"create a secret in the release namespace": func() error {
			_, err := kube.CoreV1().Secrets(w.release).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"delete the lease": func() error {
			return kube.CoordinationV1().Leases(w.target).Delete(ctx, "chart-upgrader-"+demo, metav1.DeleteOptions{})
		},
		"get another storageclass": func() error {
			_, err := kube.StorageV1().StorageClasses().Get(ctx, "standard", metav1.GetOptions{})
			return err
		},
		"patch a chart object for real (the conflict check only reads)": func() error {
			_, err := kube.CoreV1().ConfigMaps(w.release).Patch(ctx, demo+"-config", types.MergePatchType, []byte(`{"data":{"x":"y"}}`), metav1.PatchOptions{})
			return err
		},
		"apply a chart object in a dry run (RBAC cannot grant it alone)": func() error {
			_, err := kube.CoreV1().ConfigMaps(w.release).Patch(ctx, demo+"-config", types.ApplyPatchType,
				[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+demo+`-config"},"data":{"x":"y"}}`),
				metav1.PatchOptions{FieldManager: "fleetagent", DryRun: []string{metav1.DryRunAll}})
			return err
		},
		"update the chart's Secret": func() error {
			s, err := w.env.Kube().CoreV1().Secrets(w.release).Get(ctx, demo+"-webhook-certs", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = kube.CoreV1().Secrets(w.release).Update(ctx, s, metav1.UpdateOptions{})
			return err
		},
		"list configmaps in the release namespace (one object: get by name)": func() error {
			_, err := kube.CoreV1().ConfigMaps(w.release).List(ctx, metav1.ListOptions{})
			return err
		},
		"patch the storageclass": func() error {
			_, err := kube.StorageV1().StorageClasses().Patch(ctx, demo+"-longhorn", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		"get a node": func() error {
			_, err := kube.CoreV1().Nodes().Get(ctx, "rbac-node-1", metav1.GetOptions{})
			return err
		},
		"patch a node (cordon)": func() error {
			_, err := kube.CoreV1().Nodes().Patch(ctx, "rbac-node-1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
			return err
		},
		"list pods": func() error {
			_, err := kube.CoreV1().Pods(w.release).List(ctx, metav1.ListOptions{})
			return err
		},
		"list its own plans": func() error {
			_, err := dyn.Resource(testenv.PlansGVR).Namespace(w.suc).List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		err := try()
		assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
	}
}

func managedChart(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "management.cattle.io/v3", "kind": "ManagedChart",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"chart": "not-served", "version": "1.0.0", "repoName": "none", "paused": true},
	}}
}
