package drain

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

var planGVR = schema.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}

// sucPlan creates a system-upgrade-controller Plan whose drain is drain
// (nil: none), concurrency, upgrading applying now.
func (f *fixture) sucPlan(name string, drain map[string]any, concurrency int64, applying []string) {
	f.t.Helper()
	spec := map[string]any{"concurrency": concurrency, "serviceAccountName": "upgrader", "version": "v1.34.2+k3s1",
		"nodeSelector": map[string]any{"matchLabels": map[string]any{groupKey: f.group}},
		"upgrade":      map[string]any{"image": "rancher/k3s-upgrade"}}
	if drain != nil {
		spec["drain"] = drain
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
		"metadata": map[string]any{"name": name, "namespace": f.ns}, "spec": spec}}
	res := f.env.Dynamic().Resource(planGVR).Namespace(f.ns)
	created, err := res.Create(f.t.Context(), u, metav1.CreateOptions{})
	require.NoError(f.t, err)
	if len(applying) > 0 {
		apps := make([]any, len(applying))
		for i, a := range applying {
			apps[i] = a
		}
		created.Object["status"] = map[string]any{"applying": apps}
		_, err = res.UpdateStatus(f.t.Context(), created, metav1.UpdateOptions{})
		require.NoError(f.t, err)
	}
}

// asPlanAccount are clients acting as the Plan's ServiceAccount, with
// the RBAC `chart-upgrader plan --kind node` derives for the prediction
// (drainpredict.RBAC) and nothing else; and a kubeconfig file for them.
func (f *fixture) asPlanAccount() (drainpredict.Clients, string) {
	f.t.Helper()
	ctx := f.t.Context()
	sa := "upgrader"
	_, err := f.kube.CoreV1().ServiceAccounts(f.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	role := f.ns + "-drain-preflight"
	_, err = f.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: drainpredict.RBAC()}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	_, err = f.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: f.ns}}}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.t.Cleanup(func() {
		_ = f.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
		_ = f.kube.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	path := rbaccheck.Impersonating(f.t, f.env, "system:serviceaccount:"+f.ns+":"+sa, f.ns)
	// the authorizer reads RBAC from a cache: wait until the role holds
	rbaccheck.WaitAuthorized(f.t, path, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(f.t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(f.t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(f.t, err)
	return drainpredict.Clients{Kube: kube, Dynamic: dyn}, path
}

// twoNodesOfOneBudget: web-a's pod on a, web-b's on b, both allowed on a
// and b (or on every node of the group when anywhere), one budget over
// both allowing one disruption.
func (f *fixture) twoNodesOfOneBudget(anywhere bool) {
	on := f.nodes[:2]
	if anywhere {
		on = f.nodes
	}
	f.setUnschedulable(f.nodes[1], true)
	f.deploy(workload{name: "web-a", replicas: 1, on: on, labels: map[string]string{"tier": "w"}})
	f.setUnschedulable(f.nodes[1], false)
	f.setUnschedulable(f.nodes[0], true)
	f.setUnschedulable(f.nodes[2], true)
	f.deploy(workload{name: "web-b", replicas: 1, on: on, labels: map[string]string{"tier": "w"}})
	f.setUnschedulable(f.nodes[0], false)
	f.setUnschedulable(f.nodes[2], false)
	f.budget("tier", map[string]string{"tier": "w"}, nil, n(1), nil, 2)
}

// drainTogether drains nodes at once with kubectl, as a Plan of that
// concurrency does: nil when every drain finished.
func (f *fixture) drainTogether(nodes []string, d drainpredict.Drain) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() { errs[i] = f.kubectlDrain(node, d) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestPlanConcurrency: with concurrency 2 the Plan drains a and b at
// once; a budget allowing one disruption over a pod on each finishes only
// when a replacement fits a third node. Predicted as the Plan's
// ServiceAccount, with the RBAC derived for it.
func TestPlanConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		anywhere bool
		want     []string
	}{
		{"the replacement fits neither drained node's", false, []string{"%ns/tier allows 1 disruption(s) for the 2 of its pods drained (1 more on the nodes the Plan upgrades at the same time)"}},
		{"control: the replacement fits c", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			f.twoNodesOfOneBudget(tc.anywhere)
			f.sucPlan("k3s-server", map[string]any{}, 2, f.nodes[:2])
			clients, _ := f.asPlanAccount()
			d, plan, ok, err := drainpredict.PlanDrain(t.Context(), clients, f.ns, "k3s-server")
			require.NoError(t, err)
			require.True(t, ok)
			p, err := drainpredict.Predict(t.Context(), clients, drainpredict.Options{Node: f.nodes[0], Drain: d, Plan: plan})
			require.NoError(t, err)
			assert.Empty(t, p.NotChecked, "as the Plan's ServiceAccount, everything was read")
			// alone, a's drain would finish either way
			alone, err := drainpredict.Predict(t.Context(), clients, drainpredict.Options{Node: f.nodes[0], Drain: d})
			require.NoError(t, err)
			assert.True(t, alone.Finishes(), "%v", alone.Blockers)
			var want []string
			for _, w := range tc.want {
				want = append(want, replaceNS(w, f.ns))
			}
			f.agree(p, f.drainTogether(f.nodes[:2], d), want...)
		})
	}
}

// TestPlanDrain: a Plan's drain as SUC runs it, through the CLI as its
// prepare step runs, as the Plan's ServiceAccount: SUC's defaults let DaemonSet and emptyDir
// pods go and leave SUC's own Job pod; an integer timeout is
// nanoseconds; a Plan without drain drains nothing.
func TestPlanDrain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	a := f.nodes[0]
	f.setUnschedulable(f.nodes[1], true)
	f.deploy(workload{name: "scratch", replicas: 1, on: f.nodes, emptyDir: true})
	f.daemonSet("agent", a)
	f.setUnschedulable(f.nodes[1], false)
	// the Job pod of SUC on the node: no controller kubectl knows, and
	// SUC's label
	job := f.podSpec([]string{a}, false, "")
	job.NodeName = a
	_, err := f.kube.CoreV1().Pods(f.ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "apply-k3s-server-on-a",
		Labels: map[string]string{"upgrade.cattle.io/controller": "system-upgrade-controller", "app": "suc-job"}}, Spec: job}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitPods("app=suc-job", 1, true)
	f.sucPlan("defaults", map[string]any{"timeout": "5m"}, 1, []string{a})
	f.sucPlan("nanoseconds", map[string]any{"timeout": int64(300)}, 1, []string{a})
	f.sucPlan("no-drain", nil, 1, nil)
	_, kubeconfig := f.asPlanAccount()
	term := filepath.Join(t.TempDir(), "termination-log")
	preflight := func(plan string, extra ...string) noderun.Result {
		return noderun.CLI(t, append([]string{"node", "preflight", "--kubeconfig", kubeconfig, "--node", a, "--plan", plan, "--plan-namespace", f.ns,
			"--termination-log", term}, extra...)...)
	}

	t.Run("SUC's defaults", func(t *testing.T) {
		r := preflight("defaults", "-o", "json")
		require.Equal(t, outcome.ExitOK, r.Code, r.Stderr)
		var p drainpredict.Prediction
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &p), r.Stdout)
		assert.True(t, p.Finishes(), "%v", p.Blockers)
		assert.Equal(t, 1, p.Evicted, "the emptyDir pod; the DaemonSet's stays, SUC's Job pod is left out")
		logged, err := os.ReadFile(term)
		require.NoError(t, err)
		assert.Equal(t, "ok: the drain of node "+a+" would finish: 1 pod(s) evicted, 2 warning(s)\n", string(logged))
		var warnings []string
		for _, w := range p.Warnings {
			warnings = append(warnings, w.String())
		}
		assert.Contains(t, strings.Join(warnings, "\n"), "kubectl: kubectl drain: ignoring DaemonSet-managed Pods: "+f.ns+"/agent-")
		assert.Contains(t, strings.Join(warnings, "\n"), "the drain deletes its emptyDir data (scratch)")
	})
	t.Run("an integer timeout is nanoseconds", func(t *testing.T) {
		r := preflight("nanoseconds")
		assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
		assert.Contains(t, r.Stdout, "spec.drain.timeout 300 is an integer, which system-upgrade-controller passes to kubectl as 300ns")
		logged, err := os.ReadFile(term)
		require.NoError(t, err)
		assert.Contains(t, string(logged), "exit 3: the drain of node \""+a+"\" would not finish: 1 blocker(s): plan: Plan "+f.ns+"/nanoseconds: spec.drain.timeout 300")
		// the real drain SUC would run gives up at once
		err = f.kubectlDrainArgs(a, "--timeout=300ns", "--ignore-daemonsets", "--delete-emptydir-data", "--pod-selector=!upgrade.cattle.io/controller")
		assert.Error(t, err)
	})
	t.Run("no drain", func(t *testing.T) {
		r := preflight("no-drain")
		assert.Equal(t, outcome.ExitOK, r.Code, r.Stderr)
		assert.Equal(t, "Plan "+f.ns+"/no-drain has no spec.drain: its Jobs drain nothing\n", r.Stdout)
	})
	t.Run("a Plan that does not exist", func(t *testing.T) {
		r := preflight("nope")
		assert.Equal(t, outcome.ExitBadInput, r.Code, r.Stderr)
		assert.Contains(t, r.Stderr, "--plan: Plan "+f.ns+"/nope not found")
	})
	t.Run("the real drain SUC runs finishes", func(t *testing.T) {
		require.NoError(t, f.kubectlDrainArgs(a, "--timeout=30s", "--ignore-daemonsets", "--delete-emptydir-data", "--pod-selector=!upgrade.cattle.io/controller"))
	})
}

// kubectlDrainArgs runs the real kubectl drain of node with args.
func (f *fixture) kubectlDrainArgs(node string, args ...string) error {
	out, err := f.env.Kubectl(f.t.Context(), append([]string{"drain", node, "--grace-period=0"}, args...)...)
	f.t.Logf("kubectl drain %s %v: %v\n%s", node, args, err, out)
	return err
}

// TestPlanFromTheEnvironment: in a Plan's prepare step the Plan and the
// node are SUC's environment variables (not parallel: it sets them).
func TestPlanFromTheEnvironment(t *testing.T) {
	f := newFixture(t, 1)
	f.sucPlan("from-env", nil, 1, nil)
	t.Setenv("SYSTEM_UPGRADE_PLAN_NAME", "from-env")
	t.Setenv("SYSTEM_UPGRADE_NODE_NAME", f.nodes[0])
	r := noderun.CLI(t, "node", "preflight", "--kubeconfig", f.env.KubeconfigPath(), "--plan-namespace", f.ns, "--termination-log", "")
	assert.Equal(t, outcome.ExitOK, r.Code, r.Stderr)
	assert.Equal(t, "Plan "+f.ns+"/from-env has no spec.drain: its Jobs drain nothing\n", r.Stdout)
}
