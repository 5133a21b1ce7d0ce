// Package pods watches, during an upgrade's wait, the pods of the new
// revision of a target's Helm release on this cluster, and says which of
// their containers cannot start, in the kubelet's words
// (ImagePullBackOff, ErrImagePull, CrashLoopBackOff, CreateContainerConfigError,
// CreateContainerError, InvalidImageName, RunContainerError). A pod
// counts when its workload is one of the revision's objects or hooks and
// it is of the workload's current revision, as the workload's controller
// tells it once it has observed the workload's change
// (status.observedGeneration at metadata.generation; until then none of
// its pods counts): a Deployment's pod of the pod-template-hash of its
// ReplicaSet of the Deployment's revision
// (deployment.kubernetes.io/revision), a StatefulSet's update revision, a
// DaemonSet's template generation, any pod of a Job. It is the
// upgrade.Pods port. Its reads are a list and watch, in each namespace
// the revision makes pods in, of the pods and of the kinds that say a
// pod's revision there: deployments and replicasets where it has a
// Deployment, statefulsets where a StatefulSet, daemonsets where a
// DaemonSet (suc.PullReads grants them); no read per pod or per look.
package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/gates"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Reasons are the kubelet's waiting reasons of a container that cannot
// start (k8s.io/kubernetes pkg/kubelet/images, container and kuberuntime).
var Reasons = []string{"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "ImageInspectError", "InvalidImageName",
	"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
	"PreCreateHookError", "PreStartHookError", "PostStartHookError"}

// Port is the upgrade.Pods of one target: its release as the health
// gates find it (gates.Released: an error marked outcome.ErrBadInput says
// it has none here).
type Port struct {
	Kube     kubernetes.Interface
	Releases *helmrelease.Client
	Target   gates.Released
	Log      *slog.Logger
}

var _ upgrade.Pods = (*Port)(nil)

// Watch is the upgrade.Pods watch: nil when the target's release is not on
// this cluster. It returns at once: the release is found and its pods
// watched in the background, again and again while the API server does
// not answer (a restart during the wait), until ctx ends; until then no
// pod is failing.
func (p *Port) Watch(ctx context.Context, o *upgrade.Observed, want upgrade.Want) (upgrade.PodWatch, error) {
	if o == nil {
		return nil, nil
	}
	ns, name, driver, err := p.Target.HelmRelease(ctx, o)
	if errors.Is(err, outcome.ErrBadInput) {
		return nil, nil // its pods are elsewhere: Fleet's reports speak for them
	}
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &watch{kube: p.Kube, ctx: ctx, log: log, version: want.Version, signal: cluster.NewSignal(), informers: map[string]cache.SharedIndexInformer{}}
	first := err
	go w.start(func() error {
		if first != nil { // the first answer failed: ask again next time
			e := first
			first = nil
			return fmt.Errorf("finding the release: %w", e)
		}
		if ns == "" {
			var ferr error
			ns, name, driver, ferr = p.Target.HelmRelease(ctx, o)
			if errors.Is(ferr, outcome.ErrBadInput) {
				return nil // elsewhere after all: no pods to watch
			}
			if ferr != nil {
				ns = ""
				return ferr
			}
		}
		rw, err := p.Releases.WatchRevisions(ctx, ns, name, driver, w.changed)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.release = rw
		w.mu.Unlock()
		w.changed()
		return nil
	})
	return w, nil
}

// start runs begin until it succeeds, a second apart, until w's context
// ends.
func (w *watch) start(begin func() error) {
	for {
		err := begin()
		if err == nil {
			return
		}
		w.log.Warn("the pods of the new revision are not watched yet", "error", err.Error())
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// watch is the live view of one release's new pods.
type watch struct {
	kube    kubernetes.Interface
	ctx     context.Context
	log     *slog.Logger
	version string
	signal  cluster.Signal

	mu        sync.Mutex
	release   *helmrelease.Watcher
	revision  int
	workloads map[string]bool                      // "Kind namespace/name" of the revision's objects and hooks that make pods
	informers map[string]cache.SharedIndexInformer // "resource namespace": the pods, and what says their revision
}

func (w *watch) Changed() <-chan struct{} { return w.signal }

// Podless: the revision at the version was seen, and none of its objects
// or hooks makes pods.
func (w *watch) Podless() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.workloads != nil && len(w.workloads) == 0
}

// changed takes a new revision at the version in, watching the pods of
// the namespaces it makes pods in, and there the workloads (and a
// Deployment's ReplicaSets) that say which pods are of their current
// revision, and signals.
func (w *watch) changed() {
	defer w.signal.Notify()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.release == nil {
		return // still listing: Watch calls this once it is done
	}
	rel := w.release.Newest()
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil || rel.Chart.Metadata.Version != w.version {
		return
	}
	if rel.Version == w.revision && w.workloads != nil {
		return
	}
	w.revision, w.workloads = rel.Version, workloadsOf(rel, w.log)
	for key := range w.workloads {
		kind, _, _ := strings.Cut(key, " ")
		ns := namespaceOf(key)
		for _, resource := range append([]string{"pods"}, revisionReads[kind]...) {
			w.inform(resource, ns)
		}
	}
}

// revisionReads are, by the kind of a revision's workload, the resources
// of its namespace that say which of its pods are of its current
// revision (a Job's and a Pod's need none).
var revisionReads = map[string][]string{
	"Deployment":  {"deployments", "replicasets"},
	"StatefulSet": {"statefulsets"},
	"DaemonSet":   {"daemonsets"},
}

// inform lists and watches resource (pods, or one of revisionReads) in
// ns, once, signalling on each of its events. w.mu is held.
func (w *watch) inform(resource, ns string) {
	key := resource + " " + ns
	if _, ok := w.informers[key]; ok {
		return
	}
	var (
		client rest.Interface = w.kube.AppsV1().RESTClient()
		obj    runtime.Object
	)
	switch resource {
	case "pods":
		client, obj = w.kube.CoreV1().RESTClient(), &corev1.Pod{}
	case "deployments":
		obj = &appsv1.Deployment{}
	case "replicasets":
		obj = &appsv1.ReplicaSet{}
	case "statefulsets":
		obj = &appsv1.StatefulSet{}
	case "daemonsets":
		obj = &appsv1.DaemonSet{}
	default:
		return
	}
	lw := cache.NewListWatchFromClient(client, resource, ns, fields.Everything())
	inf := cluster.Informer(w.ctx, w.log, resource, lw, obj)
	if _, err := inf.AddEventHandler(cluster.OnEvent(w.signal.Notify)); err != nil {
		return
	}
	go inf.Run(w.ctx.Done())
	w.informers[key] = inf
}

// workloadsOf are the objects of rel's manifest and hooks that make pods.
func workloadsOf(rel *release.Release, log *slog.Logger) map[string]bool {
	out := map[string]bool{}
	texts := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		if h != nil {
			texts = append(texts, h.Manifest)
		}
	}
	for _, text := range texts {
		objs, err := manifest.Objects(text)
		if err != nil {
			log.Warn("reading the release's manifest for its pods", "error", err.Error())
			continue
		}
		for _, o := range objs {
			if !manifest.MakesPods(o.GroupVersionKind().GroupKind()) {
				continue
			}
			ns := o.GetNamespace()
			if ns == "" {
				ns = rel.Namespace
			}
			out[o.GetKind()+" "+ns+"/"+o.GetName()] = true
		}
	}
	return out
}

func namespaceOf(key string) string {
	_, rest, _ := strings.Cut(key, " ")
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

// Failing is the upgrade.PodWatch view.
func (w *watch) Failing() []upgrade.PodFailure {
	w.mu.Lock()
	workloads, pods := w.workloads, make([]cache.Store, 0, len(w.informers))
	current := &currentRevision{stores: make(map[string]cache.Store, len(w.informers)), replicaSets: map[string]*appsv1.ReplicaSet{}}
	for key, inf := range w.informers {
		current.stores[key] = inf.GetStore()
		if resource, _, _ := strings.Cut(key, " "); resource == "pods" {
			pods = append(pods, inf.GetStore())
		}
	}
	w.mu.Unlock()
	if workloads == nil {
		return nil
	}
	var out []upgrade.PodFailure
	for _, store := range pods {
		for _, obj := range store.List() {
			pod, ok := obj.(*corev1.Pod)
			if !ok || pod.DeletionTimestamp != nil {
				continue
			}
			fs := failures(pod)
			if len(fs) == 0 {
				continue
			}
			workload, ok := current.of(pod, workloads)
			if !ok {
				continue
			}
			for _, f := range fs {
				f.Workload = workload
				out = append(out, f)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// failures are pod's containers that cannot start, as the kubelet's
// status shows them in each of its writes: waiting for one of Reasons;
// terminated with a non-zero exit (between a crash and its back-off); or
// running again after a non-zero exit (between two back-offs, Ready when
// it has no readiness probe), which is failing only while its restart
// count keeps rising (the wait's clock judges that: Running).
func failures(pod *corev1.Pod) []upgrade.PodFailure {
	images := map[string]string{}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	var out []upgrade.PodFailure
	add := func(kind string, sts []corev1.ContainerStatus) {
		for _, st := range sts {
			f := upgrade.PodFailure{Pod: pod.Namespace + "/" + pod.Name, Container: kind + " " + st.Name, Image: images[st.Name], Restarts: st.RestartCount}
			if t := st.LastTerminationState.Terminated; t != nil {
				f.LastExit, f.LastMessage = exit(t)
			}
			switch {
			case st.State.Waiting != nil && isReason(st.State.Waiting.Reason):
				f.Reason, f.Message = st.State.Waiting.Reason, st.State.Waiting.Message
				f.Crashed = f.Reason == "CrashLoopBackOff"
			case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
				t := st.State.Terminated
				f.LastExit, f.LastMessage = exit(t)
				f.Reason, f.Message, f.Crashed = t.Reason, fmt.Sprintf("exited with code %d", t.ExitCode), true
				if f.Reason == "" {
					f.Reason = "Error"
				}
			case st.State.Running != nil && st.RestartCount > 0 && f.LastExit != nil && *f.LastExit != 0:
				f.Reason, f.Message = "Restarted", fmt.Sprintf("running again after exit code %d", *f.LastExit)
				f.Crashed, f.Running = true, true
			default:
				continue
			}
			if !f.Crashed && f.Reason != "RunContainerError" {
				f.LastExit, f.LastMessage = nil, ""
			}
			out = append(out, f)
		}
	}
	add("init container", pod.Status.InitContainerStatuses)
	add("container", pod.Status.ContainerStatuses)
	return out
}

// exit is a termination's exit code and its message (its reason when it
// has none).
func exit(t *corev1.ContainerStateTerminated) (*int32, string) {
	code := t.ExitCode
	msg := strings.TrimSpace(t.Message)
	if msg == "" {
		msg = t.Reason
	}
	return &code, msg
}

func isReason(r string) bool {
	for _, x := range Reasons {
		if r == x {
			return true
		}
	}
	return false
}

// currentRevision tells, for one look, which workload of the revision a
// pod belongs to and whether it is of the workload's current revision,
// from the informers' stores (no request), each Deployment's current
// ReplicaSet found once.
type currentRevision struct {
	stores      map[string]cache.Store        // "resource namespace"
	replicaSets map[string]*appsv1.ReplicaSet // "namespace/name" of a Deployment → its current ReplicaSet (nil: none yet)
}

// get is the object name of resource in ns as its informer has it, nil
// when it has none (not listed yet, or no such object).
func (c *currentRevision) get(resource, ns, name string) any {
	store := c.stores[resource+" "+ns]
	if store == nil {
		return nil
	}
	obj, ok, err := store.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj
}

// observed says whether a workload's controller has acted on its
// latest change (status.observedGeneration at metadata.generation):
// until then the revision it tells is the one before the change.
func observed(meta metav1.ObjectMeta, observedGeneration int64) bool {
	return observedGeneration >= meta.Generation
}

// of is the workload of pod ("Kind namespace/name") when it is one of
// workloads and pod is of its current revision.
func (c *currentRevision) of(pod *corev1.Pod, workloads map[string]bool) (string, bool) {
	ref := metav1.GetControllerOf(pod)
	ns := pod.Namespace
	if ref == nil {
		key := "Pod " + ns + "/" + pod.Name
		return key, workloads[key]
	}
	switch ref.Kind {
	case "Job":
		key := "Job " + ns + "/" + ref.Name
		return key, workloads[key]
	case "ReplicaSet":
		return c.deployment(pod, ref.Name, workloads)
	case "StatefulSet":
		key := "StatefulSet " + ns + "/" + ref.Name
		if !workloads[key] {
			return key, false
		}
		sts, _ := c.get("statefulsets", ns, ref.Name).(*appsv1.StatefulSet)
		return key, sts != nil && observed(sts.ObjectMeta, sts.Status.ObservedGeneration) && sts.Status.UpdateRevision != "" &&
			pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision
	case "DaemonSet":
		key := "DaemonSet " + ns + "/" + ref.Name
		if !workloads[key] {
			return key, false
		}
		ds, _ := c.get("daemonsets", ns, ref.Name).(*appsv1.DaemonSet)
		generation := pod.Labels[templateGenerationLabel]
		return key, ds != nil && observed(ds.ObjectMeta, ds.Status.ObservedGeneration) && generation != "" &&
			ds.Annotations[appsv1.DeprecatedTemplateGeneration] == generation
	}
	return "", false
}

// deployment is the Deployment of pod's ReplicaSet rs, and whether pod is
// of the Deployment's current revision: of the pod-template-hash of its
// ReplicaSet of the Deployment's revision, as the Deployment controller
// numbers them (that ReplicaSet itself when it has no hash).
func (c *currentRevision) deployment(pod *corev1.Pod, rs string, workloads map[string]bool) (string, bool) {
	ns := pod.Namespace
	r, _ := c.get("replicasets", ns, rs).(*appsv1.ReplicaSet)
	if r == nil {
		return "", false
	}
	owner := metav1.GetControllerOf(r)
	if owner == nil || owner.Kind != "Deployment" {
		return "", false
	}
	key := "Deployment " + ns + "/" + owner.Name
	if !workloads[key] {
		return key, false
	}
	cur := c.currentReplicaSet(ns, owner.Name)
	if cur == nil {
		return key, false
	}
	if hash := cur.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != "" {
		return key, pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash
	}
	return key, r.UID == cur.UID
}

// currentReplicaSet is the ReplicaSet of Deployment ns/name whose
// revision is the Deployment's, once the Deployment controller has
// observed the Deployment's change; nil before, or when the informers
// have neither yet.
func (c *currentRevision) currentReplicaSet(ns, name string) *appsv1.ReplicaSet {
	key := ns + "/" + name
	if cur, ok := c.replicaSets[key]; ok {
		return cur
	}
	c.replicaSets[key] = nil
	d, _ := c.get("deployments", ns, name).(*appsv1.Deployment)
	if d == nil || !observed(d.ObjectMeta, d.Status.ObservedGeneration) || d.Annotations[revisionAnnotation] == "" {
		return nil
	}
	store := c.stores["replicasets "+ns]
	if store == nil {
		return nil
	}
	for _, obj := range store.List() {
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok || rs.Annotations[revisionAnnotation] != d.Annotations[revisionAnnotation] {
			continue
		}
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			c.replicaSets[key] = rs
			return rs
		}
	}
	return nil
}

// templateGenerationLabel is the DaemonSet controller's label of the
// template generation a pod was made from.
const templateGenerationLabel = "pod-template-generation"

// revisionAnnotation is the Deployment controller's revision of a
// Deployment and of each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"
