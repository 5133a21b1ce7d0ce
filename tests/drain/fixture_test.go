// Package drain holds the drain prediction (node preflight) to the real
// drain: for every case a real kube-apiserver, kube-controller-manager
// (its disruption controller writes the budgets' status, its ReplicaSet
// controller recreates evicted pods), kube-scheduler and KWOK nodes of the
// test's own; the prediction is made first, then the real `kubectl drain`
// runs with a short timeout, and the two must agree: every blocker the
// prediction names holds the real drain, every control drains.
package drain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Workloads: true, ExtraCRDDir: "testdata/crds"})
}

// groupKey labels and taints a test's own nodes: its pods tolerate and
// select them, the other tests' pods stay off them.
const groupKey = "drain-test.chart-upgrader.io/group"

// oracleTimeout is the real drain's: a drain the prediction calls blocked
// must still be running when it passes; one it calls finishing, done
// well before.
const oracleTimeout = "15s"

// fixture is one test's world: a namespace, and nodes of its own.
type fixture struct {
	t     *testing.T
	env   *testenv.Env
	kube  kubernetes.Interface
	ns    string
	group string
	nodes []string // a, b, c…
}

// newFixture makes n nodes of the test's own, named <group>-a, -b, ….
func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	f := &fixture{t: t, env: env, kube: env.Kube(), ns: env.Namespace(t)}
	f.group = strings.TrimPrefix(f.ns, "test")
	if len(f.group) > 40 {
		f.group = f.group[len(f.group)-40:]
	}
	f.group = strings.Trim(f.group, "-")
	for i := range n {
		name := fmt.Sprintf("%s-%c", f.group, 'a'+i)
		require.NoError(t, env.AddFakeNode(t.Context(), name, map[string]string{groupKey: f.group},
			[]corev1.Taint{{Key: groupKey, Value: f.group, Effect: corev1.TaintEffectNoSchedule}}))
		f.nodes = append(f.nodes, name)
		t.Cleanup(func() {
			_ = f.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return f
}

// workload is a Deployment of the test's: replicas pods labelled app=name
// (plus labels), on the given nodes (required node affinity), tolerating
// the group's taint.
type workload struct {
	name     string
	replicas int32
	on       []string
	labels   map[string]string
	hold     string // testenv.HoldAnnotation's value
	emptyDir bool
	cpu      string // request per pod
}

func (f *fixture) podSpec(on []string, emptyDir bool, cpu string) corev1.PodSpec {
	spec := corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		Tolerations:  []corev1.Toleration{{Key: groupKey, Operator: corev1.TolerationOpEqual, Value: f.group, Effect: corev1.TaintEffectNoSchedule}},
		NodeSelector: map[string]string{groupKey: f.group},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: on}}}}}}},
		TerminationGracePeriodSeconds: new(int64),
	}
	if emptyDir {
		spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	if cpu != "" {
		spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return spec
}

// deploy creates w and waits until its pods are placed (and Ready unless
// held).
func (f *fixture) deploy(w workload) {
	f.t.Helper()
	labels := map[string]string{"app": w.name}
	for k, v := range w.labels {
		labels[k] = v
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: f.podSpec(w.on, w.emptyDir, w.cpu)}
	if w.hold != "" {
		tmpl.Annotations = map[string]string{testenv.HoldAnnotation: w.hold}
	}
	_, err := f.kube.AppsV1().Deployments(f.ns).Create(f.t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Spec: appsv1.DeploymentSpec{Replicas: &w.replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}},
			Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.waitPods("app="+w.name, int(w.replicas), w.hold == "")
}

// waitPods waits until n pods match selector, all bound (and Ready when
// ready).
func (f *fixture) waitPods(selector string, n int, ready bool) {
	f.t.Helper()
	var last []corev1.Pod
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := f.kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		last = l.Items
		if len(l.Items) != n {
			return false, nil
		}
		for _, p := range l.Items {
			if p.Spec.NodeName == "" || (ready && !isReady(&p)) || (!ready && p.Status.Phase != corev1.PodRunning) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(f.t, err, "pods %s: %d, want %d", selector, len(last), n)
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// budget creates a PodDisruptionBudget over app in values and waits until
// the disruption controller has observed it, counting pods.
func (f *fixture) budget(name string, selector map[string]string, minAvailable, maxUnavailable *intstr.IntOrString, policy *policyv1.UnhealthyPodEvictionPolicyType, pods int32) {
	f.t.Helper()
	_, err := f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Create(f.t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, MinAvailable: minAvailable,
			MaxUnavailable: maxUnavailable, UnhealthyPodEvictionPolicy: policy},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.waitBudget(name, pods)
}

// waitBudget waits until the disruption controller has written budget
// name's status for its current generation, with expected pods.
func (f *fixture) waitBudget(name string, pods int32) {
	f.t.Helper()
	var last *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = b
		return b.Status.ObservedGeneration == b.Generation && b.Status.ExpectedPods == pods, nil
	})
	require.NoError(f.t, err, "budget %s: %+v", name, last)
}

// setUnschedulable cordons or uncordons a node, as kubectl cordon does.
func (f *fixture) setUnschedulable(node string, on bool) {
	f.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	_, err := f.kube.CoreV1().Nodes().Patch(f.t.Context(), node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

// predict predicts the drain of node as admin.
func (f *fixture) predict(node string, d drainpredict.Drain) *drainpredict.Prediction {
	f.t.Helper()
	start := time.Now()
	p, err := drainpredict.Predict(f.t.Context(), drainpredict.Clients{Kube: f.kube, Dynamic: f.env.Dynamic()}, drainpredict.Options{Node: node, Drain: d})
	took := time.Since(start)
	require.NoError(f.t, err)
	var b strings.Builder
	require.NoError(f.t, p.WriteText(&b))
	f.t.Logf("prediction (%s, %d requests):\n%s", took.Round(time.Millisecond), p.Requests, b.String())
	return p
}

// kubectlDrain runs the real kubectl drain of node with oracleTimeout and
// the flags d says: nil when it finished.
func (f *fixture) kubectlDrain(node string, d drainpredict.Drain) error {
	args := []string{"drain", node, "--timeout=" + oracleTimeout, "--grace-period=0"}
	if d.IgnoreDaemonSets {
		args = append(args, "--ignore-daemonsets")
	}
	if d.DeleteEmptyDirData {
		args = append(args, "--delete-emptydir-data")
	}
	if d.Force {
		args = append(args, "--force")
	}
	if d.PodSelector != "" {
		args = append(args, "--pod-selector="+d.PodSelector)
	}
	out, err := f.env.Kubectl(f.t.Context(), args...)
	f.t.Logf("kubectl drain %s: %v\n%s", node, err, out)
	return err
}

// agree: the prediction and the real drain agree; a blocked prediction
// names each of wantBlockers (substrings) in some blocker.
func (f *fixture) agree(p *drainpredict.Prediction, drainErr error, wantBlockers ...string) {
	f.t.Helper()
	if len(wantBlockers) == 0 {
		assert.True(f.t, p.Finishes(), "predicted blockers: %v", p.Blockers)
		assert.NoError(f.t, drainErr, "the real drain did not finish")
		return
	}
	assert.False(f.t, p.Finishes(), "predicted to finish")
	assert.Error(f.t, drainErr, "the real drain finished though blocked was predicted")
	var all []string
	for _, b := range p.Blockers {
		all = append(all, b.String())
	}
	joined := strings.Join(all, "\n")
	for _, w := range wantBlockers {
		assert.Contains(f.t, joined, w)
	}
}
