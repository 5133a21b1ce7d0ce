// Package nodes tests chart-upgrader's cordon, drain and uncordon against a
// real API server. There is no kubelet and no scheduler: the tests create
// Nodes, and Pods already bound to them, and set the status a kubelet
// would; without a kubelet, a pod evicted with a grace period stays
// Terminating, so the drains that must finish evict with grace period 0.
package nodes

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/node"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// fixture is one test's world: a namespace and a node of its own on the
// shared API server, and the owners its pods can point to.
type fixture struct {
	t    *testing.T
	env  *testenv.Env
	kube kubernetes.Interface
	ns   string
	node string
	rs   *appsv1.ReplicaSet
	ds   *appsv1.DaemonSet
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	f := &fixture{t: t, env: env, kube: env.Kube(), ns: env.Namespace(t)}
	f.node = f.newNode(false)
	labels := map[string]string{"owner": "rs"}
	rs, err := f.kube.AppsV1().ReplicaSets(f.ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ds, err := f.kube.AppsV1().DaemonSets(f.ns).Create(t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "ds"}},
			Template: podTemplate(map[string]string{"owner": "ds"})},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.rs, f.ds = rs, ds
	return f
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}}}
}

// newNode creates a Node, already cordoned (by "someone else") when asked.
func (f *fixture) newNode(unschedulable bool) string {
	f.t.Helper()
	n, err := f.kube.CoreV1().Nodes().Create(f.t.Context(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-", Labels: map[string]string{"test": "node"}},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	return n.Name
}

// podSpec says what kind of pod to create.
type podSpec struct {
	name     string
	labels   map[string]string
	owner    string // "rs", "ds" or "" (a bare pod)
	emptyDir bool
	// grace is the pod's terminationGracePeriodSeconds; nil leaves the
	// API server's default (30 s).
	grace *int64
}

// pod creates a pod bound to the fixture's node and marks it Running and
// Ready, as the kubelet would: the eviction API ignores
// PodDisruptionBudgets for Pending pods.
func (f *fixture) pod(s podSpec) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: f.ns, Labels: s.labels},
		Spec: corev1.PodSpec{NodeName: f.node, TerminationGracePeriodSeconds: s.grace,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
	}
	controller := true
	switch s.owner {
	case "rs":
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: f.rs.Name, UID: f.rs.UID, Controller: &controller}}
	case "ds":
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet",
			Name: f.ds.Name, UID: f.ds.UID, Controller: &controller}}
	}
	if s.emptyDir {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	}
	ctx := f.t.Context()
	p, err := f.kube.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(f.t, err)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	p, err = f.kube.CoreV1().Pods(f.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	return p
}

// pdb creates a PodDisruptionBudget with minAvailable 1 over the pods
// matching labels, and sets the status the disruption controller would
// for one healthy pod: no disruption allowed.
func (f *fixture) pdb(name string, labels map[string]string) {
	f.t.Helper()
	ctx := f.t.Context()
	one := intstr.FromInt32(1)
	b, err := f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	b.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: b.Generation,
		DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	_, err = f.kube.PolicyV1().PodDisruptionBudgets(f.ns).UpdateStatus(ctx, b, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

// getNode reads a node.
func (f *fixture) getNode(name string) *corev1.Node {
	f.t.Helper()
	n, err := f.kube.CoreV1().Nodes().Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return n
}

// exists reports whether the pod (this very one, by UID) is still there,
// and whether it is terminating.
func (f *fixture) exists(p *corev1.Pod) (there, terminating bool) {
	f.t.Helper()
	got, err := f.kube.CoreV1().Pods(p.Namespace).Get(f.t.Context(), p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, false
	}
	require.NoError(f.t, err)
	if got.UID != p.UID {
		return false, false
	}
	return true, got.DeletionTimestamp != nil
}

// requireGone and requireThere check pods after a drain.
func (f *fixture) requireGone(pods ...*corev1.Pod) {
	f.t.Helper()
	for _, p := range pods {
		there, _ := f.exists(p)
		require.False(f.t, there, "pod %s should be evicted", p.Name)
	}
}

func (f *fixture) requireThere(pods ...*corev1.Pod) {
	f.t.Helper()
	for _, p := range pods {
		there, terminating := f.exists(p)
		require.True(f.t, there && !terminating, "pod %s should be left running", p.Name)
	}
}

// requireCordonedByUs checks the node is unschedulable with our record.
func (f *fixture) requireCordonedByUs(name string) {
	f.t.Helper()
	n := f.getNode(name)
	require.True(f.t, n.Spec.Unschedulable, "node %s unschedulable", name)
	require.Contains(f.t, n.Annotations, node.AnnotationCordoned, "node %s carries the cordon record", name)
}

// requireSchedulable checks the node is schedulable without our record.
func (f *fixture) requireSchedulable(name string) {
	f.t.Helper()
	n := f.getNode(name)
	require.False(f.t, n.Spec.Unschedulable, "node %s schedulable", name)
	require.NotContains(f.t, n.Annotations, node.AnnotationCordoned, "node %s without the cordon record", name)
}

func grace(s int64) *int64 { return &s }

// buffer is a bytes.Buffer safe for the drain's goroutines.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// racingKube is the real client, with a hook run once just before the
// first node patch: another writer changing the node between our read and
// our write.
type racingKube struct {
	kubernetes.Interface
	mu     sync.Mutex
	before func()
}

func (r *racingKube) CoreV1() corev1client.CoreV1Interface {
	return racingCore{CoreV1Interface: r.Interface.CoreV1(), r: r}
}

type racingCore struct {
	corev1client.CoreV1Interface
	r *racingKube
}

func (c racingCore) Nodes() corev1client.NodeInterface {
	return racingNodes{NodeInterface: c.CoreV1Interface.Nodes(), r: c.r}
}

type racingNodes struct {
	corev1client.NodeInterface
	r *racingKube
}

func (n racingNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	n.r.mu.Lock()
	before := n.r.before
	n.r.before = nil
	n.r.mu.Unlock()
	if before != nil {
		before()
	}
	return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
}
