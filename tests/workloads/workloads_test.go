// Package workloads_test proves the workloads mode of tests/testenv: real
// kube-controller-manager and kube-scheduler, KWOK as the kubelet of fake
// Nodes. Deployments roll out, stall on pods held not ready, Jobs complete
// or fail, and garbage collection and namespace deletion work.
package workloads_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Workloads: true}) }

// waitLimit bounds every wait: a safety net against a hang, not an
// assertion on how long anything takes.
const waitLimit = 2 * time.Minute

// until watches the object named name in ns (from rc, resource) until cond
// holds for it, and returns it.
func until[T runtime.Object](t *testing.T, rc rest.Interface, resource, ns, name string, cond func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	lw := cache.NewListWatchFromClient(rc, resource, ns, fields.OneTermEqualSelector("metadata.name", name))
	example := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
	ev, err := watchtools.UntilWithSync(ctx, lw, example, nil, func(ev watch.Event) (bool, error) {
		obj, ok := ev.Object.(T)
		return ok && ev.Type != watch.Deleted && cond(obj), nil
	})
	require.NoError(t, err, "waiting for %s %s/%s", resource, ns, name)
	return ev.Object.(T)
}

func deployment(name string, replicas int32, image string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: image,
				}}},
			},
		},
	}
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// rolledOut is kubectl rollout status's test: the controller has seen the
// last spec, every replica is updated and available, and the new
// ReplicaSet is complete.
func rolledOut(d *appsv1.Deployment) bool {
	p := condition(d, appsv1.DeploymentProgressing)
	return d.Status.ObservedGeneration == d.Generation &&
		d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.AvailableReplicas == *d.Spec.Replicas &&
		d.Status.Replicas == *d.Spec.Replicas &&
		p != nil && p.Status == corev1.ConditionTrue && p.Reason == "NewReplicaSetAvailable"
}

// ofGeneration holds cond only for a Deployment at generation gen or later:
// the first object a watch lists may predate the write just made (a list
// served from the watch cache), and its status, complete for the old
// template, would otherwise satisfy cond.
func ofGeneration(gen int64, cond func(*appsv1.Deployment) bool) func(*appsv1.Deployment) bool {
	return func(d *appsv1.Deployment) bool { return d.Generation >= gen && cond(d) }
}

// stalled: the controller has given up waiting for progress.
func stalled(d *appsv1.Deployment) bool {
	p := condition(d, appsv1.DeploymentProgressing)
	return d.Status.ObservedGeneration == d.Generation &&
		p != nil && p.Status == corev1.ConditionFalse && p.Reason == "ProgressDeadlineExceeded"
}

func pods(t *testing.T, kube kubernetes.Interface, ns string, sel map[string]string) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	require.NoError(t, err)
	return list.Items
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// A Deployment rolls out on the fake Nodes, an image change rolls out to a
// new ReplicaSet, and deleting the Deployment deletes its ReplicaSets and
// Pods (garbage collection, KWOK's pod deletion).
func TestDeploymentRollout(t *testing.T) {
	t.Parallel()
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	kube := env.Kube()
	apps := kube.AppsV1().RESTClient()
	ctx := t.Context()

	_, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2, "registry.invalid/web:1"), metav1.CreateOptions{})
	require.NoError(t, err)
	d := until(t, apps, "deployments", ns, "web", rolledOut)
	require.EqualValues(t, 2, d.Status.UpdatedReplicas)
	require.EqualValues(t, 2, d.Status.AvailableReplicas)
	require.EqualValues(t, 2, d.Status.ReadyReplicas)
	require.Equal(t, "NewReplicaSetAvailable", condition(d, appsv1.DeploymentProgressing).Reason)

	running := pods(t, kube, ns, map[string]string{"app": "web"})
	require.Len(t, running, 2)
	for _, p := range running {
		require.Contains(t, env.Nodes(), p.Spec.NodeName, "scheduled on a fake node")
		require.Equal(t, corev1.PodRunning, p.Status.Phase)
		require.Equal(t, corev1.ConditionTrue, podCondition(&p, corev1.PodReady))
		require.NotEmpty(t, p.Status.PodIP)
	}

	d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/web:2"
	updated, err := kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	until(t, apps, "deployments", ns, "web", ofGeneration(updated.Generation, rolledOut))

	rss, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, rss.Items, 2, "one ReplicaSet per template")
	images := map[string]int32{}
	for _, rs := range rss.Items {
		images[rs.Spec.Template.Spec.Containers[0].Image] = rs.Status.ReadyReplicas
	}
	require.Equal(t, map[string]int32{"registry.invalid/web:1": 0, "registry.invalid/web:2": 2}, images)
	for _, p := range pods(t, kube, ns, map[string]string{"app": "web"}) {
		if p.DeletionTimestamp == nil {
			require.Equal(t, "registry.invalid/web:2", p.Spec.Containers[0].Image)
		}
	}

	require.NoError(t, kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	waitGone(t, cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "pods", ns, fields.Everything()), &corev1.Pod{})
	rss, err = kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, rss.Items, "the garbage collector deletes the ReplicaSets")
}

// waitGone watches what lw lists until nothing is left.
func waitGone(t *testing.T, lw cache.ListerWatcher, obj runtime.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	// The informer updates the store before it passes the event on.
	var store cache.Store
	_, err := watchtools.UntilWithSync(ctx, lw, obj, func(s cache.Store) (bool, error) {
		store = s
		return len(s.List()) == 0, nil
	}, func(watch.Event) (bool, error) { return len(store.List()) == 0, nil })
	require.NoError(t, err, "waiting for every %T to be gone", obj)
}

// Pods held not ready (testenv.HoldAnnotation) run but never become
// available: a new Deployment stalls with no available replica, and an
// update to a held template stalls with the old replicas still serving.
func TestHeldPodsStallRollout(t *testing.T) {
	t.Parallel()
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	kube := env.Kube()
	apps := kube.AppsV1().RESTClient()
	ctx := t.Context()
	deadline := int32(5)

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		d := deployment("held", 2, "registry.invalid/held:1")
		d.Spec.ProgressDeadlineSeconds = &deadline
		d.Spec.Template.Annotations = map[string]string{testenv.HoldAnnotation: testenv.HoldNotReady}
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)

		d = until(t, apps, "deployments", ns, "held", stalled)
		require.EqualValues(t, 0, d.Status.AvailableReplicas)
		require.EqualValues(t, 0, d.Status.ReadyReplicas)
		require.EqualValues(t, 2, d.Status.UpdatedReplicas)
		held := pods(t, kube, ns, map[string]string{"app": "held"})
		require.Len(t, held, 2, "the pods exist")
		for _, p := range held {
			require.Equal(t, corev1.PodRunning, p.Status.Phase)
			require.Equal(t, corev1.ConditionFalse, podCondition(&p, corev1.PodReady))
			require.Len(t, p.Status.ContainerStatuses, 1)
			cs := p.Status.ContainerStatuses[0]
			require.False(t, cs.Ready)
			require.NotNil(t, cs.State.Running, "the container runs")
		}
	})

	t.Run("update", func(t *testing.T) {
		t.Parallel()
		d := deployment("upgrade", 2, "registry.invalid/upgrade:1")
		d.Spec.ProgressDeadlineSeconds = &deadline
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
		d = until(t, apps, "deployments", ns, "upgrade", rolledOut)

		d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/upgrade:2"
		d.Spec.Template.Annotations = map[string]string{testenv.HoldAnnotation: testenv.HoldNotReady}
		updated, err := kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
		d = until(t, apps, "deployments", ns, "upgrade", ofGeneration(updated.Generation, stalled))
		// 25% surge of 2 rounds up to one new pod; 25% unavailable rounds
		// down to none: both old pods keep serving
		require.EqualValues(t, 2, d.Status.AvailableReplicas)
		require.EqualValues(t, 1, d.Status.UpdatedReplicas)
		require.EqualValues(t, 3, d.Status.Replicas)
	})
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func job(name, hold string) *batchv1.Job {
	backoff := int32(0)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "job", Image: "registry.invalid/job:1"}},
			}},
		},
	}
	if hold != "" {
		j.Spec.Template.Annotations = map[string]string{testenv.HoldAnnotation: hold}
	}
	return j
}

// KWOK runs no container: a Job's pod goes Running, then Succeeded with
// exit code 0, and the Job completes; held "fail", the pod fails with exit
// code 1 and the Job fails; held "not-ready", the pod stays Running.
func TestJobs(t *testing.T) {
	t.Parallel()
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	kube := env.Kube()
	batch := kube.BatchV1().RESTClient()
	ctx := t.Context()

	t.Run("complete", func(t *testing.T) {
		t.Parallel()
		_, err := kube.BatchV1().Jobs(ns).Create(ctx, job("ok", ""), metav1.CreateOptions{})
		require.NoError(t, err)
		j := until(t, batch, "jobs", ns, "ok", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
		require.EqualValues(t, 1, j.Status.Succeeded)
		require.EqualValues(t, 0, j.Status.Failed)
		require.NotNil(t, j.Status.CompletionTime)
		ps := pods(t, kube, ns, map[string]string{"job-name": "ok"})
		require.Len(t, ps, 1)
		require.Equal(t, corev1.PodSucceeded, ps[0].Status.Phase)
		require.EqualValues(t, 0, ps[0].Status.ContainerStatuses[0].State.Terminated.ExitCode)
	})

	t.Run("fail", func(t *testing.T) {
		t.Parallel()
		_, err := kube.BatchV1().Jobs(ns).Create(ctx, job("bad", testenv.HoldFail), metav1.CreateOptions{})
		require.NoError(t, err)
		j := until(t, batch, "jobs", ns, "bad", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) != nil })
		require.Equal(t, "BackoffLimitExceeded", jobCondition(j, batchv1.JobFailed).Reason)
		require.EqualValues(t, 1, j.Status.Failed)
		ps := pods(t, kube, ns, map[string]string{"job-name": "bad"})
		require.Len(t, ps, 1)
		require.Equal(t, corev1.PodFailed, ps[0].Status.Phase)
		require.EqualValues(t, 1, ps[0].Status.ContainerStatuses[0].State.Terminated.ExitCode)
	})

	t.Run("running", func(t *testing.T) {
		t.Parallel()
		_, err := kube.BatchV1().Jobs(ns).Create(ctx, job("hung", testenv.HoldNotReady), metav1.CreateOptions{})
		require.NoError(t, err)
		j := until(t, batch, "jobs", ns, "hung", func(j *batchv1.Job) bool {
			return j.Status.Active == 1 && j.Status.Ready != nil
		})
		require.Nil(t, jobCondition(j, batchv1.JobComplete))
		ps := pods(t, kube, ns, map[string]string{"job-name": "hung"})
		require.Len(t, ps, 1)
		p := until(t, kube.CoreV1().RESTClient(), "pods", ns, ps[0].Name, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning
		})
		require.Equal(t, corev1.ConditionFalse, podCondition(p, corev1.PodReady))
	})
}

// The namespace controller runs: a deleted namespace goes away, with its
// content.
func TestNamespaceDeletion(t *testing.T) {
	t.Parallel()
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	kube := env.Kube()
	ctx := t.Context()
	_, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("doomed", 1, "registry.invalid/doomed:1"), metav1.CreateOptions{})
	require.NoError(t, err)
	until(t, kube.AppsV1().RESTClient(), "deployments", ns, "doomed", rolledOut)

	require.NoError(t, kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	waitGone(t, cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "namespaces", "", fields.OneTermEqualSelector("metadata.name", ns)), &corev1.Namespace{})
	_, err = kube.AppsV1().Deployments(ns).Get(ctx, "doomed", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the namespace's content is gone: %v", err)
}
