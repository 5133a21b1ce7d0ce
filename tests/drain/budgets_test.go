package drain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func n(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }

// TestBudgets: each case's prediction against the real kubectl drain of
// node a. Pods are placed on a alone (b cordoned meanwhile), then b is
// opened for the replacements the case allows.
func TestBudgets(t *testing.T) {
	t.Parallel()
	alwaysAllow := policyv1.AlwaysAllow
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		want  []string // blockers, none for a control
	}{
		{"a budget at zero", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2]})
			f.budget("web", map[string]string{"app": "web"}, n(2), nil, nil, 2)
		}, []string{"PodDisruptionBudget " + "%ns/web allows no disruption", "it needs 2 healthy pods and has 2"}},
		{"maxUnavailable 0", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2]})
			f.budget("web", map[string]string{"app": "web"}, nil, n(0), nil, 2)
		}, []string{"%ns/web allows no disruption"}},
		{"spent by an unready pod on another node", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2], labels: map[string]string{"tier": "c"}})
			f.setUnschedulable(f.nodes[0], true)
			f.deploy(workload{name: "late", replicas: 1, on: f.nodes[1:3], labels: map[string]string{"tier": "c"}, hold: testenv.HoldNotReady})
			f.setUnschedulable(f.nodes[0], false)
			f.budget("tier", map[string]string{"tier": "c"}, n(2), nil, nil, 3)
		}, []string{"%ns/tier allows no disruption", "it needs 2 healthy pods and has 2"}},
		{"control: the same, every pod ready, the replacement fits b", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2], labels: map[string]string{"tier": "c"}})
			f.setUnschedulable(f.nodes[0], true)
			f.deploy(workload{name: "late", replicas: 1, on: f.nodes[1:3], labels: map[string]string{"tier": "c"}})
			f.setUnschedulable(f.nodes[0], false)
			f.budget("tier", map[string]string{"tier": "c"}, n(2), nil, nil, 3)
		}, nil},
		{"two pods of one budget whose replacement fits no other node", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:1]})
			f.budget("web", map[string]string{"app": "web"}, nil, n(1), nil, 2)
		}, []string{"%ns/web allows 1 disruption(s) for the 2 of its pods drained", "fits no other node", "didn't match Pod's node affinity/selector"}},
		{"control: two pods of one budget, the replacement fits b", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2]})
			f.budget("web", map[string]string{"app": "web"}, nil, n(1), nil, 2)
		}, nil},
		{"two budgets on one pod", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 2, on: f.nodes[:2]})
			f.budget("web", map[string]string{"app": "web"}, nil, n(2), nil, 2)
			f.budget("web-too", map[string]string{"app": "web"}, nil, n(2), nil, 2)
		}, []string{"2 PodDisruptionBudgets select it", "answers 500"}},
		{"an unready pod under IfHealthyBudget", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 1, on: f.nodes[:1], hold: testenv.HoldNotReady})
			f.budget("web", map[string]string{"app": "web"}, n(1), nil, nil, 1)
		}, []string{"%ns/web allows no disruption", "it needs 1 healthy pods and has 0"}},
		{"control: an unready pod under AlwaysAllow", func(f *fixture) {
			f.deploy(workload{name: "web", replicas: 1, on: f.nodes[:1], hold: testenv.HoldNotReady})
			f.budget("web", map[string]string{"app": "web"}, n(1), nil, &alwaysAllow, 1)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			// the pods go to a first: b is cordoned while they are made
			f.setUnschedulable(f.nodes[1], true)
			tc.setup(f)
			f.setUnschedulable(f.nodes[1], false)
			d := drainpredict.Drain{}
			p := f.predict(f.nodes[0], d)
			err := f.kubectlDrain(f.nodes[0], d)
			var want []string
			for _, w := range tc.want {
				want = append(want, replaceNS(w, f.ns))
			}
			f.agree(p, err, want...)
		})
	}
}

// TestKubectlFilters: DaemonSet, emptyDir and unmanaged pods, each
// refused without its flag and drained with it; --pod-selector leaves out
// what it does not select; a completed pod skips its budget.
func TestKubectlFilters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		drain drainpredict.Drain
		want  []string
	}{
		{"no flags", drainpredict.Drain{}, []string{
			"kubectl drain cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
			"kubectl drain cannot delete Pods with local storage (use --delete-emptydir-data to override)",
			"kubectl drain cannot delete Pods that declare no controller (use --force to override)"}},
		{"ignore-daemonsets alone", drainpredict.Drain{IgnoreDaemonSets: true}, []string{
			"use --delete-emptydir-data", "use --force"}},
		{"control: every flag", drainpredict.Drain{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true}, nil},
		{"control: a selector that leaves the refused pods out", drainpredict.Drain{PodSelector: "app=web"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 2)
			a := f.nodes[0]
			f.setUnschedulable(f.nodes[1], true)
			f.deploy(workload{name: "web", replicas: 1, on: f.nodes})
			f.deploy(workload{name: "scratch", replicas: 1, on: f.nodes, emptyDir: true})
			f.daemonSet("agent", a)
			f.barePod("bare", a)
			f.completedPod("done", a)
			f.budget("done", map[string]string{"app": "done"}, n(1), nil, nil, 1)
			f.setUnschedulable(f.nodes[1], false)
			p := f.predict(a, tc.drain)
			err := f.kubectlDrain(a, tc.drain)
			f.agree(p, err, tc.want...)
		})
	}
}

// daemonSet runs a DaemonSet's pod on node.
func (f *fixture) daemonSet(name, node string) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	spec := f.podSpec([]string{node}, false, "")
	_, err := f.kube.AppsV1().DaemonSets(f.ns).Create(f.t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.waitPods("app="+name, 1, true)
}

// barePod creates a pod no controller manages, bound to node.
func (f *fixture) barePod(name, node string) {
	f.t.Helper()
	spec := f.podSpec([]string{node}, false, "")
	spec.NodeName = node
	_, err := f.kube.CoreV1().Pods(f.ns).Create(f.t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.waitPods("app="+name, 1, true)
}

// completedPod runs a Job whose pod completes on node.
func (f *fixture) completedPod(name, node string) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	spec := f.podSpec([]string{node}, false, "")
	spec.RestartPolicy = corev1.RestartPolicyNever
	_, err := f.kube.BatchV1().Jobs(f.ns).Create(f.t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := f.kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(l.Items) == 1 && l.Items[0].Status.Phase == corev1.PodSucceeded, err
	}))
}

// replaceNS puts the test's namespace for %ns.
func replaceNS(s, ns string) string { return strings.ReplaceAll(s, "%ns", ns) }
