package pods_test

import (
	"context"
	"sort"
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
	dir, err := testchart.Write(t.TempDir(), testchart.Chart{Name: "app", Version: "2.0.0", Values: map[string]any{},
		Templates: map[string]string{"workloads.yaml": workloads, "hook.yaml": hook}})
	require.NoError(t, err)
	cfg, err := cluster.HelmConfiguration(cluster.NewHelmGetter(env.Config()), ns, "secret", nil)
	require.NoError(t, err)
	ch, err := loader.Load(dir)
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout = "app", ns, kube.HookOnlyStrategy, 5*time.Second
	in.DisableHooks = true // no controller runs the hook's Job here
	_, err = in.RunWithContext(ctx, ch, map[string]any{})
	require.NoError(t, err)

	apps := env.Kube().AppsV1()
	// as the controllers would have them: the Deployment at revision 2
	// with its two ReplicaSets, the StatefulSet's update revision, the
	// DaemonSet's template generation
	patch := func(err error) { require.NoError(t, err) }
	_, err = apps.Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"2"}}}`), metav1.PatchOptions{})
	patch(err)
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
	lines := func(fs []upgrade.PodFailure) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.String())
		}
		sort.Strings(out)
		return out
	}
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
	// a release elsewhere: no watch
	elsewhere := &pods.Port{Kube: env.Kube(), Target: release{}, Releases: port.Releases}
	nw, err := elsewhere.Watch(ctx, &upgrade.Observed{}, upgrade.Want{Version: "2.0.0"})
	require.NoError(t, err)
	assert.Nil(t, nw)
}
