package pods_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/pods"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// release is a target whose release is in one namespace, or elsewhere.
type release struct{ ns, name string }

func (r release) HelmRelease(context.Context, *upgrade.Observed) (string, string, string, error) {
	if r.ns == "" {
		return "", "", "", outcome.BadInput(assert.AnError)
	}
	return r.ns, r.name, "secret", nil
}

const workloads = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: r.example.com/web:2}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: r.example.com/db:2}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: r.example.com/agent:2}]}
`

const hook = `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: post-install}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: r.example.com/migrate:2}]
`

// The new revision's pods that cannot start, and only those: a
// Deployment's pod of its current ReplicaSet (not of the old one), a
// StatefulSet's of its update revision, a DaemonSet's of its template
// generation, a hook Job's; not a pod of another workload; nothing before
// the release is at the version waited for, nothing for a release
// elsewhere.
func TestFailing(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	newRevision(t, env, ns)

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	port := &pods.Port{Kube: env.Kube(), Target: release{ns, "app"},
		Releases: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(), RESTMapper: mapper}}
	w, err := port.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotNil(t, w)
	var failing []upgrade.PodFailure
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		failing = w.Failing()
		assert.Len(c, failing, 4)
	}, 30*time.Second, 50*time.Millisecond, "the failing pods of the new revision")
	got := lines(failing)
	assert.Equal(t, []string{
		"pod " + ns + "/agent-new (DaemonSet " + ns + "/agent), container agent, image r.example.com/agent:2: ImagePullBackOff: Back-off pulling image \"r.example.com/x:2\"",
		"pod " + ns + "/db-0 (StatefulSet " + ns + "/db), container db, image r.example.com/db:2: CrashLoopBackOff: back-off 40s; last exit code 2 after 4 restarts: panic: bad config",
		"pod " + ns + "/migrate-x (Job " + ns + "/migrate), container migrate, image r.example.com/migrate:2: ImagePullBackOff: Back-off pulling image \"r.example.com/x:2\"",
		"pod " + ns + "/web-new-1 (Deployment " + ns + "/web), container web, image r.example.com/web:2: ImagePullBackOff: Back-off pulling image \"r.example.com/x:2\"",
	}, got)

	// waited for at another version: the revision is not the upgrade's,
	// none of its pods counts. A watch starts empty and fills in the
	// background, so an empty answer at once proves nothing: a second
	// watch of the upgrade's version, asked for after at1 and doing the
	// same reads, is the control. Once it lists its four, at1 has had its
	// release and, had it taken the revision, its pods too; it must still
	// have none, and keep none.
	at1, err := port.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "1.0.0"})
	require.NoError(t, err)
	require.NotNil(t, at1)
	control, err := port.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotNil(t, control)
	require.Eventually(t, func() bool { return len(control.Failing()) == 4 }, 30*time.Second, 50*time.Millisecond,
		"the control watch lists the new revision's failing pods")
	assert.Empty(t, at1.Failing(), "at 1.0.0, once the control listed the pods")
	assert.Never(t, func() bool { return len(at1.Failing()) > 0 }, time.Second, 50*time.Millisecond,
		"at 1.0.0, no pod of the release at 2.0.0 counts")
	assert.Empty(t, at1.Failing(), "at 1.0.0, a second later")
	assert.Equal(t, got, lines(w.Failing()), "the first watch, listed long since, still says the same")
	assert.False(t, w.Podless(), "its revision makes pods")
	assert.False(t, at1.Podless(), "a revision never seen is not known to make no pod")
	// a release elsewhere: no watch
	elsewhere := &pods.Port{Kube: env.Kube(), Target: release{}, Releases: port.Releases}
	nw, err := elsewhere.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	assert.Nil(t, nw)
}

// A revision none of whose objects or hooks makes pods is podless once
// seen: the wait has nothing to settle.
func TestPodlessRevision(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	install(t, env, ns, map[string]string{"config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config}\ndata: {a: b}\n"})
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	port := &pods.Port{Kube: env.Kube(), Target: release{ns, "app"},
		Releases: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(), RESTMapper: mapper}}
	w, err := port.Watch(t.Context(), &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotNil(t, w)
	require.Eventually(t, w.Podless, 30*time.Second, 20*time.Millisecond, "a ConfigMap makes no pod")
	assert.Empty(t, w.Failing())
}

// lines are fs as the progress line says them, sorted.
func lines(fs []upgrade.PodFailure) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	sort.Strings(out)
	return out
}

// install installs chart app 2.0.0 of templates as release app in ns,
// its hooks not run (no controller runs a hook's Job here).
func install(t *testing.T, env *testenv.Env, ns string, templates map[string]string) {
	t.Helper()
	dir, err := testchart.Write(t.TempDir(), testchart.Chart{Name: "app", Version: "2.0.0", Values: map[string]any{}, Templates: templates})
	require.NoError(t, err)
	cfg, err := cluster.HelmConfiguration(cluster.NewHelmGetter(env.Config()), ns, "secret", nil)
	require.NoError(t, err)
	ch, err := loader.Load(dir)
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout = "app", ns, kube.HookOnlyStrategy, 5*time.Second
	in.DisableHooks = true
	_, err = in.RunWithContext(t.Context(), ch, map[string]any{})
	require.NoError(t, err)
}

// observe writes the status a workload's controller writes once it has
// acted on the workload's latest change: status.observedGeneration at
// metadata.generation (no controller runs here).
func observe(t *testing.T, env *testenv.Env, ns, kind, name string) {
	t.Helper()
	observeBehind(t, env, ns, kind, name, 0)
}

// observeBehind writes status.observedGeneration behind generations
// before metadata.generation: the controller has not yet acted on the
// workload's last behind changes.
func observeBehind(t *testing.T, env *testenv.Env, ns, kind, name string, behind int64) {
	t.Helper()
	ctx, apps := t.Context(), env.Kube().AppsV1()
	var err error
	switch kind {
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			d.Status.ObservedGeneration = d.Generation - behind
			_, err = apps.Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	case "StatefulSet":
		var s *appsv1.StatefulSet
		if s, err = apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			s.Status.ObservedGeneration = s.Generation - behind
			_, err = apps.StatefulSets(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		}
	case "DaemonSet":
		var d *appsv1.DaemonSet
		if d, err = apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			d.Status.ObservedGeneration = d.Generation - behind
			_, err = apps.DaemonSets(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	default:
		t.Fatalf("no status of %s to write", kind)
	}
	require.NoError(t, err)
}

// newRevision installs release app at 2.0.0 in ns (workloads and hook)
// with the objects and pods its controllers would have made: the
// Deployment at revision 2 with its two ReplicaSets, the StatefulSet's
// update revision, the DaemonSet's template generation, each observed;
// failing pods of the new revisions, of the old ones and of another
// workload, and one running.
func newRevision(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	ctx := t.Context()
	install(t, env, ns, map[string]string{"workloads.yaml": workloads, "hook.yaml": hook})

	apps := env.Kube().AppsV1()
	// as the controllers would have them: the Deployment at revision 2
	// with its two ReplicaSets, the StatefulSet's update revision, the
	// DaemonSet's template generation
	patch := func(err error) { require.NoError(t, err) }
	_, err := apps.Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"2"}}}`), metav1.PatchOptions{})
	patch(err)
	for _, w := range []string{"Deployment web", "StatefulSet db", "DaemonSet agent"} {
		kind, name, _ := strings.Cut(w, " ")
		observe(t, env, ns, kind, name)
	}
	web, err := apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	for rev, name := range map[string]string{"1": "web-old", "2": "web-new"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"deployment.kubernetes.io/revision": rev},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(web, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Selector: web.Spec.Selector, Template: web.Spec.Template}}
		_, err := apps.ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	db, err := apps.StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	db.Status.UpdateRevision, db.Status.CurrentRevision = "db-new", "db-old"
	_, err = apps.StatefulSets(ns).UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	agent, err := apps.DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	require.NoError(t, err)

	yes := true
	owned := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	rsUID := func(name string) types.UID {
		rs, err := apps.ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return rs.UID
	}
	pullBackOff := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "r.example.com/x:2"`}}}
	code := int32(2)
	crash := corev1.ContainerStatus{RestartCount: 4, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: "panic: bad config\n"}}}
	running := corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	mk := func(name, container, image string, labels map[string]string, refs []metav1.OwnerReference, st corev1.ContainerStatus) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: refs},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: image}}}}
		created, err := env.Kube().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		st.Name, st.Image = container, image
		created.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		_, err = env.Kube().CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	mk("web-new-1", "web", "r.example.com/web:2", nil, owned("apps/v1", "ReplicaSet", "web-new", rsUID("web-new")), pullBackOff)
	mk("web-new-2", "web", "r.example.com/web:2", nil, owned("apps/v1", "ReplicaSet", "web-new", rsUID("web-new")), running)
	mk("web-old-1", "web", "r.example.com/web:1", nil, owned("apps/v1", "ReplicaSet", "web-old", rsUID("web-old")), crash)
	mk("db-0", "db", "r.example.com/db:2", map[string]string{"controller-revision-hash": "db-new"}, owned("apps/v1", "StatefulSet", "db", db.UID), crash)
	mk("db-1", "db", "r.example.com/db:1", map[string]string{"controller-revision-hash": "db-old"}, owned("apps/v1", "StatefulSet", "db", db.UID), crash)
	gen := agent.Annotations["deprecated.daemonset.template.generation"]
	require.NotEmpty(t, gen, "the API server numbers a DaemonSet's template generations")
	mk("agent-new", "agent", "r.example.com/agent:2", map[string]string{"pod-template-generation": gen}, owned("apps/v1", "DaemonSet", "agent", agent.UID), pullBackOff)
	mk("agent-old", "agent", "r.example.com/agent:1", map[string]string{"pod-template-generation": "0"}, owned("apps/v1", "DaemonSet", "agent", agent.UID), pullBackOff)
	mk("migrate-x", "migrate", "r.example.com/migrate:2", nil, owned("batch/v1", "Job", "migrate", "00000000-0000-0000-0000-000000000001"), pullBackOff)
	mk("other-x", "x", "r.example.com/x:2", nil, owned("batch/v1", "Job", "someone-elses", "00000000-0000-0000-0000-000000000002"), crash)
}

// workload is a Deployment, StatefulSet or DaemonSet name of the chart
// (app: name).
func workload(kind, name string) string {
	extra := ""
	if kind == "StatefulSet" {
		extra = "\n  serviceName: " + name
	}
	return "apiVersion: apps/v1\nkind: " + kind + "\nmetadata: {name: " + name + "}\nspec:" + extra + `
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: main, image: r.example.com/` + name + `:2}]}
---
`
}

// failingPod makes pod name of ns, of owner's kind and name, with
// labels, its container in ImagePullBackOff.
func failingPod(t *testing.T, env *testenv.Env, ns, name string, labels map[string]string, kind string, owner metav1.Object) {
	t.Helper()
	ctx := t.Context()
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "r.example.com/" + name}}}}
	created, err := env.Kube().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "r.example.com/" + name,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off"}}}}
	_, err = env.Kube().CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// replicaSet makes ReplicaSet name of Deployment d at revision, with
// pod-template-hash hash, as the Deployment controller does.
func replicaSet(t *testing.T, env *testenv.Env, d *appsv1.Deployment, name, revision, hash string) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: hash}
	template := *d.Spec.Template.DeepCopy()
	template.Labels = labels
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations:     map[string]string{"deployment.kubernetes.io/revision": revision},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	created, err := env.Kube().AppsV1().ReplicaSets(d.Namespace).Create(t.Context(), rs, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// A workload whose controller has not yet observed its change
// (metadata.generation ahead of status.observedGeneration) tells no
// current revision: none of its pods counts, not the old ones (they may
// fail for reasons the upgrade did not cause) nor those of the revision
// it names, until the controller catches up; then its new pods count,
// its old ones still not. Controls of each kind, observed, whose pods
// count from the first list, prove the informers had every object (all
// made before the watch) when the changed ones' pods did not count.
func TestNotCountedUntilTheControllerObservedTheChange(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	install(t, env, ns, map[string]string{"workloads.yaml": workload("Deployment", "web") + workload("Deployment", "api") +
		workload("StatefulSet", "db") + workload("StatefulSet", "cache") + workload("DaemonSet", "agent") + workload("DaemonSet", "log")})
	apps := env.Kube().AppsV1()
	// web names revision 2 (its new ReplicaSet made), api revision 1 (a
	// Deployment's annotations are of its generation: written first)
	_, err := apps.Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"2"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = apps.Deployments(ns).Patch(ctx, "api", types.MergePatchType, []byte(`{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	// web, db, agent changed (a generation more), their controllers a
	// generation behind; api, cache, log observed
	change := []byte(`{"spec":{"minReadySeconds":1}}`)
	for _, w := range []string{"Deployment web", "StatefulSet db", "DaemonSet agent"} {
		kind, name, _ := strings.Cut(w, " ")
		switch kind {
		case "Deployment":
			_, err = apps.Deployments(ns).Patch(ctx, name, types.MergePatchType, change, metav1.PatchOptions{})
		case "StatefulSet":
			_, err = apps.StatefulSets(ns).Patch(ctx, name, types.MergePatchType, change, metav1.PatchOptions{})
		case "DaemonSet":
			_, err = apps.DaemonSets(ns).Patch(ctx, name, types.MergePatchType, change, metav1.PatchOptions{})
		}
		require.NoError(t, err)
		observeBehind(t, env, ns, kind, name, 1)
	}
	for _, w := range []string{"Deployment api", "StatefulSet cache", "DaemonSet log"} {
		kind, name, _ := strings.Cut(w, " ")
		observe(t, env, ns, kind, name)
	}

	web, err := apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Greater(t, web.Generation, web.Status.ObservedGeneration)
	api, err := apps.Deployments(ns).Get(ctx, "api", metav1.GetOptions{})
	require.NoError(t, err)
	web1, web2 := replicaSet(t, env, web, "web-5d8f9c7b6", "1", "5d8f9c7b6"), replicaSet(t, env, web, "web-7c4b8d9f5", "2", "7c4b8d9f5")
	api1 := replicaSet(t, env, api, "api-6f7d8b9c4", "1", "6f7d8b9c4")
	failingPod(t, env, ns, "web-5d8f9c7b6-aaaaa", map[string]string{"app": "web", "pod-template-hash": "5d8f9c7b6"}, "ReplicaSet", web1)
	failingPod(t, env, ns, "web-7c4b8d9f5-bbbbb", map[string]string{"app": "web", "pod-template-hash": "7c4b8d9f5"}, "ReplicaSet", web2)
	failingPod(t, env, ns, "api-6f7d8b9c4-ccccc", map[string]string{"app": "api", "pod-template-hash": "6f7d8b9c4"}, "ReplicaSet", api1)

	// db's update revision db-2, cache's cache-1
	for name, revision := range map[string]string{"db": "db-2", "cache": "cache-1"} {
		sts, err := apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		sts.Status.UpdateRevision = revision
		sts, err = apps.StatefulSets(ns).UpdateStatus(ctx, sts, metav1.UpdateOptions{})
		require.NoError(t, err)
		failingPod(t, env, ns, name+"-0", map[string]string{"app": name, "controller-revision-hash": revision}, "StatefulSet", sts)
	}
	for _, name := range []string{"agent", "log"} {
		ds, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		gen := ds.Annotations["deprecated.daemonset.template.generation"]
		require.NotEmpty(t, gen)
		failingPod(t, env, ns, name+"-zzzzz", map[string]string{"app": name, "pod-template-generation": gen}, "DaemonSet", ds)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	port := &pods.Port{Kube: env.Kube(), Target: release{ns, "app"},
		Releases: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(), RESTMapper: mapper}}
	w, err := port.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotNil(t, w)
	podsOf := func() []string {
		var out []string
		for _, f := range w.Failing() {
			out = append(out, strings.TrimPrefix(f.Pod, ns+"/"))
		}
		sort.Strings(out)
		return out
	}
	controls := []string{"api-6f7d8b9c4-ccccc", "cache-0", "log-zzzzz"}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Subset(c, podsOf(), controls) }, 30*time.Second, 50*time.Millisecond,
		"the observed controls' failing pods count")
	assert.Equal(t, controls, podsOf(), "no pod of a workload whose controller has not observed its change counts")
	assert.Never(t, func() bool { return !assert.ObjectsAreEqual(controls, podsOf()) }, time.Second, 50*time.Millisecond,
		"no pod of a workload whose controller has not observed its change counts, a second on")

	// the controllers catch up: the new revisions' pods count, web's old
	// ReplicaSet's still not
	for _, w := range []string{"Deployment web", "StatefulSet db", "DaemonSet agent"} {
		kind, name, _ := strings.Cut(w, " ")
		observe(t, env, ns, kind, name)
	}
	all := []string{"agent-zzzzz", "api-6f7d8b9c4-ccccc", "cache-0", "db-0", "log-zzzzz", "web-7c4b8d9f5-bbbbb"}
	assert.Eventually(t, func() bool { return assert.ObjectsAreEqual(all, podsOf()) }, 30*time.Second, 50*time.Millisecond,
		"once observed, the new revisions' failing pods count")
	assert.Equal(t, all, podsOf())
}

// requests counts a client's requests by verb and resource ("get
// replicasets", "list pods", "watch deployments").
type requests struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		for i, p := range parts {
			if p != "namespaces" || len(parts) < i+3 {
				continue
			}
			verb := strings.ToLower(req.Method)
			switch {
			case req.Method != http.MethodGet:
			case req.URL.Query().Get("watch") == "true":
				verb = "watch"
			case len(parts) == i+3:
				verb = "list"
			}
			r.mu.Lock()
			r.n[verb+" "+parts[i+2]]++
			r.mu.Unlock()
			break
		}
		return rt.RoundTrip(req)
	})
}

// gets are the gets counted of the workloads and ReplicaSets.
func (r *requests) gets() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.n {
		switch k {
		case "get replicasets", "get deployments", "get statefulsets", "get daemonsets":
			out[k] = v
		}
	}
	return out
}

func (r *requests) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Which pods are the new revision's is read from informers of the
// workloads and ReplicaSets (a list and a watch of each in the
// namespace), never by a get: looked at many times with several failing
// pods, of new and old ReplicaSets, a StatefulSet and a DaemonSet, the
// watch makes no get of a workload or ReplicaSet, before its informers
// listed or after.
func TestFailingReadsFromInformers(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	newRevision(t, env, ns)

	counted := &requests{n: map[string]int{}}
	cfg := env.Config()
	cfg.Wrap(counted.wrap)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	port := &pods.Port{Kube: kube, Target: release{ns, "app"},
		Releases: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(), RESTMapper: mapper}}
	w, err := port.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotNil(t, w)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, w.Failing(), 4) }, 30*time.Second, 50*time.Millisecond,
		"the failing pods of the new revision")
	for range 50 {
		require.Len(t, w.Failing(), 4)
	}
	assert.Empty(t, counted.gets(), "no get of a workload or ReplicaSet, in 50 looks and before")
	for _, resource := range []string{"pods", "deployments", "replicasets", "statefulsets", "daemonsets"} {
		assert.Positive(t, counted.count("list "+resource), "a list of %s", resource)
		assert.Positive(t, counted.count("watch "+resource), "a watch of %s", resource)
	}
}
