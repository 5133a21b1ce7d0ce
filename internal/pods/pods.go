// Package pods watches, during an upgrade's wait, the pods of the new
// revision of a target's Helm release on this cluster, and says which of
// their containers cannot start, in the kubelet's words
// (ImagePullBackOff, ErrImagePull, CrashLoopBackOff, CreateContainerConfigError,
// CreateContainerError, InvalidImageName, RunContainerError). A pod
// counts when its workload is one of the revision's objects or hooks and
// it is of the workload's current revision, as the workload's controller
// tells it: a Deployment's ReplicaSet of the Deployment's revision
// (deployment.kubernetes.io/revision), a StatefulSet's update revision, a
// DaemonSet's template generation, any pod of a Job. It is the
// upgrade.Pods port. Its reads are a list and watch of pods in each
// namespace the revision makes pods in, and gets of the workloads and
// ReplicaSets of failing pods only.
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
	"k8s.io/client-go/kubernetes"
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
	w := &watch{kube: p.Kube, ctx: ctx, log: log, version: want.Version, signal: cluster.NewSignal(), pods: map[string]cache.SharedIndexInformer{}}
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
	workloads map[string]bool // "Kind namespace/name" of the revision's objects and hooks that make pods
	pods      map[string]cache.SharedIndexInformer
}

func (w *watch) Changed() <-chan struct{} { return w.signal }

// changed takes a new revision at the version in, watching the pods of
// the namespaces it makes pods in, and signals.
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
		ns := namespaceOf(key)
		if _, ok := w.pods[ns]; ok {
			continue
		}
		lw := cache.NewListWatchFromClient(w.kube.CoreV1().RESTClient(), "pods", ns, fields.Everything())
		inf := cluster.Informer(w.ctx, w.log, "pods", lw, &corev1.Pod{})
		if _, err := inf.AddEventHandler(cluster.OnEvent(w.signal.Notify)); err != nil {
			continue
		}
		go inf.Run(w.ctx.Done())
		w.pods[ns] = inf
	}
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
	workloads, informers := w.workloads, make([]cache.SharedIndexInformer, 0, len(w.pods))
	for _, inf := range w.pods {
		informers = append(informers, inf)
	}
	w.mu.Unlock()
	if workloads == nil {
		return nil
	}
	current := &currentRevision{kube: w.kube, ctx: w.ctx, seen: map[string]bool{}}
	var out []upgrade.PodFailure
	for _, inf := range informers {
		for _, obj := range inf.GetStore().List() {
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
// each workload and ReplicaSet read once.
type currentRevision struct {
	kube kubernetes.Interface
	ctx  context.Context
	seen map[string]bool // "Kind namespace/name[/revision]" → current
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
		return c.deployment(ns, ref.Name, workloads)
	case "StatefulSet":
		key := "StatefulSet " + ns + "/" + ref.Name
		if !workloads[key] {
			return key, false
		}
		return key, c.once(key+"/"+pod.Labels[appsv1.ControllerRevisionHashLabelKey], func() bool {
			sts, err := c.kube.AppsV1().StatefulSets(ns).Get(c.ctx, ref.Name, metav1.GetOptions{})
			return err == nil && sts.Status.UpdateRevision == pod.Labels[appsv1.ControllerRevisionHashLabelKey]
		})
	case "DaemonSet":
		key := "DaemonSet " + ns + "/" + ref.Name
		if !workloads[key] {
			return key, false
		}
		generation := pod.Labels[templateGenerationLabel]
		return key, c.once(key+"/"+generation, func() bool {
			ds, err := c.kube.AppsV1().DaemonSets(ns).Get(c.ctx, ref.Name, metav1.GetOptions{})
			return err == nil && ds.Annotations[appsv1.DeprecatedTemplateGeneration] == generation
		})
	}
	return "", false
}

// deployment is the Deployment of ReplicaSet rs, and whether rs is of its
// revision, as the Deployment controller numbers them.
func (c *currentRevision) deployment(ns, rs string, workloads map[string]bool) (string, bool) {
	r, err := c.kube.AppsV1().ReplicaSets(ns).Get(c.ctx, rs, metav1.GetOptions{})
	if err != nil {
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
	revision := r.Annotations[revisionAnnotation]
	return key, c.once(key+"/"+revision, func() bool {
		d, err := c.kube.AppsV1().Deployments(ns).Get(c.ctx, owner.Name, metav1.GetOptions{})
		return err == nil && revision != "" && d.Annotations[revisionAnnotation] == revision
	})
}

// templateGenerationLabel is the DaemonSet controller's label of the
// template generation a pod was made from.
const templateGenerationLabel = "pod-template-generation"

// revisionAnnotation is the Deployment controller's revision of a
// Deployment and of each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

func (c *currentRevision) once(key string, f func() bool) bool {
	if v, ok := c.seen[key]; ok {
		return v
	}
	v := f()
	c.seen[key] = v
	return v
}
