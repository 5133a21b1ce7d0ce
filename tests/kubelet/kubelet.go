// Package kubelet is the tests' stand-in for what a node's kubelet and
// containerd do with a pod's images, which KWOK does not: for each
// scheduled pod held with testenv.HoldPull, it pulls every image of the
// pod as the node would (with the node's registries.yaml and the pod's
// pull secrets and its ServiceAccount's, as the kubelet hands them to
// containerd) and for the node's platform. A pod whose images all pull
// loses its hold, and KWOK runs it; any other gets the kubelet's own
// waiting reasons on the container that cannot pull: ErrImagePull, then
// ImagePullBackOff, with the messages a kubelet writes.
//
// A pod may also ask, by the annotation Mode, for what a node does that
// no registry shows: a pull that fails on the node's disk, a container
// that crash-loops, a missing ConfigMap key, a pull that backs off for a
// while and then succeeds, a slow start.
//
// Its pulls are an oracle for the image check, so they share none of
// its code: the hosts.toml k3s writes from registries.yaml (hosts.go,
// held to k3s's own test cases in hosts_test.go, as package registries
// is), the order and credentials containerd pulls with (pull.go) and a
// minimal containerd fetch of the manifest and config (fetch.go) are
// written apart from packages registries and imagecheck, from k3s's and
// containerd's rules.
package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/credentialprovider"
	credentialsecrets "k8s.io/kubernetes/pkg/credentialprovider/secrets"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// BackOff is how long a pod stays in ErrImagePull before the kubelet
// reports ImagePullBackOff (a real kubelet: its first back-off, 10 s).
const BackOff = time.Second

// Mode is the annotation by which a held pod asks for a node's failure;
// its values are the Mode* constants (none: the pull decides).
const Mode = "testenv.chart-upgrader.io/kubelet"

const (
	// ModeDiskFull: the pull fails while unpacking (no space left on
	// device): ErrImagePull, then ImagePullBackOff, over and over.
	ModeDiskFull = "disk-full"
	// ModeCrashLoop: the container crash-loops, in the status writes a
	// kubelet makes (pkg/kubelet convertToAPIContainerStatuses): running
	// for CrashRun (Ready when it has no readiness probe), terminated
	// with exit 2 and a panic, waiting in CrashLoopBackOff for the
	// back-off (10 s doubling, capped at CrashBackOffCap as a kubelet's
	// maxContainerRestartPeriod can be, KEP-4603), running again with the
	// restart count one higher, and so on.
	ModeCrashLoop = "crash-loop"
	// ModeConfigError: CreateContainerConfigError, a ConfigMap key
	// missing.
	ModeConfigError = "config-error"
	// ModeBriefBackOff: ImagePullBackOff for BriefBackOff, then the pull
	// succeeds and KWOK runs the pod.
	ModeBriefBackOff = "brief-backoff"
	// ModeSlow: ContainerCreating for BriefBackOff, then KWOK runs it.
	ModeSlow = "slow"
)

// CrashRun is how long a ModeCrashLoop container runs before it exits;
// CrashBackOffCap the kubelet's longest restart back-off here.
const (
	CrashRun        = 1500 * time.Millisecond
	CrashBackOffCap = time.Second
)

// BriefBackOff is how long ModeBriefBackOff and ModeSlow hold a pod.
const BriefBackOff = 3 * time.Second

// Kubelet decides the image pulls of held pods.
type Kubelet struct {
	Kube kubernetes.Interface
	// Registries is the path of the nodes' registries.yaml ("": none).
	Registries string
	// NoDefaultEndpoint is k3s's --disable-default-registry-endpoint.
	NoDefaultEndpoint bool
	Log               *slog.Logger

	node    *node
	mu      sync.Mutex
	decided map[types.UID]bool
}

// Start runs k until ctx ends: it watches every pod.
func (k *Kubelet) Start(ctx context.Context) error {
	k.decided = map[types.UID]bool{}
	if k.Log == nil {
		k.Log = slog.New(slog.DiscardHandler)
	}
	n, err := newNode(k.Registries, k.NoDefaultEndpoint)
	if err != nil {
		return fmt.Errorf("the test kubelet's registries.yaml: %w", err)
	}
	k.node = n
	f := informers.NewSharedInformerFactory(k.Kube, 0)
	pods := f.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.see(ctx, o) },
		UpdateFunc: func(_, o any) { k.see(ctx, o) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the test kubelet's pod informer did not sync")
		}
	}
	return nil
}

// see decides a held, scheduled pod once, in the background.
func (k *Kubelet) see(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Annotations[testenv.HoldAnnotation] != testenv.HoldPull || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return
	}
	k.mu.Lock()
	seen := k.decided[pod.UID]
	k.decided[pod.UID] = true
	k.mu.Unlock()
	if !seen {
		go k.decide(ctx, pod.DeepCopy())
	}
}

// failure is a container that cannot pull, in the kubelet's words.
type failure struct {
	container, image, message string
	init                      bool
}

// decide pulls pod's images and lets KWOK run it, or reports why not.
func (k *Kubelet) decide(ctx context.Context, pod *corev1.Pod) {
	node, err := k.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		k.Log.Error("test kubelet: reading the pod's node", "pod", pod.Name, "error", err)
		return
	}
	platform := platforms.Platform{OS: node.Status.NodeInfo.OperatingSystem, Architecture: node.Status.NodeInfo.Architecture}
	cri, err := k.credentials(ctx, pod)
	if err != nil {
		k.Log.Error("test kubelet: reading the pod's pull secrets", "pod", pod.Name, "error", err)
		return
	}
	if k.mode(ctx, pod) {
		return
	}
	var failed *failure
	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i, c := range containers {
		if msg := k.pull(ctx, c.Image, platform, cri); msg != "" {
			failed = &failure{container: c.Name, image: c.Image, message: msg, init: i < len(pod.Spec.InitContainers)}
			break
		}
	}
	if failed == nil {
		if err := testenv.ReleaseHold(ctx, k.Kube, pod.Namespace, pod.Name); err != nil {
			k.Log.Error("test kubelet: releasing the pod", "pod", pod.Name, "error", err)
		}
		return
	}
	k.report(ctx, pod, failed, "ErrImagePull", failed.message)
	select {
	case <-ctx.Done():
		return
	case <-time.After(BackOff):
	}
	k.report(ctx, pod, failed, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", failed.image, failed.message))
}

// mode plays what pod's Mode asks for, and says whether it asked for
// anything.
func (k *Kubelet) mode(ctx context.Context, pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	c := pod.Spec.Containers[0]
	f := &failure{container: c.Name, image: c.Image}
	switch pod.Annotations[Mode] {
	case ModeDiskFull:
		img, _ := parseImage(c.Image)
		f.message = fmt.Sprintf("rpc error: code = Unknown desc = failed to pull and unpack image %q: failed to extract layer "+
			"sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef: write /var/lib/rancher/rke2/agent/containerd/"+
			"io.containerd.snapshotter.v1.overlayfs/snapshots/312/fs/usr/lib/libc.so.6: no space left on device", img.ref)
		for k.alive(ctx, pod) {
			k.report(ctx, pod, f, "ErrImagePull", f.message)
			if !sleep(ctx, BackOff) {
				return true
			}
			k.report(ctx, pod, f, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", c.Image, f.message))
			if !sleep(ctx, BackOff) {
				return true
			}
		}
	case ModeCrashLoop:
		k.crashLoop(ctx, pod, c)
	case ModeConfigError:
		k.report(ctx, pod, f, "CreateContainerConfigError", fmt.Sprintf("couldn't find key missing-key in ConfigMap %s/settings", pod.Namespace))
	case ModeBriefBackOff, ModeSlow:
		if pod.Annotations[Mode] == ModeBriefBackOff {
			k.report(ctx, pod, f, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: rpc error: code = Unavailable desc = connection reset by peer", c.Image))
		}
		if sleep(ctx, BriefBackOff) {
			if err := testenv.ReleaseHold(ctx, k.Kube, pod.Namespace, pod.Name); err != nil && ctx.Err() == nil {
				k.Log.Error("test kubelet: releasing the pod", "pod", pod.Name, "error", err)
			}
		}
	default:
		return false
	}
	return true
}

// crashLoop plays c's crash loop until pod is gone: running, terminated,
// backing off, running again, as a kubelet writes each.
func (k *Kubelet) crashLoop(ctx context.Context, pod *corev1.Pod, c corev1.Container) {
	ready := c.ReadinessProbe == nil // no probe: Ready once it runs
	var last *corev1.ContainerStateTerminated
	for restarts := int32(0); k.alive(ctx, pod); restarts++ {
		started := metav1.Now()
		running := corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts, Ready: ready, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
		if last != nil {
			running.LastTerminationState = corev1.ContainerState{Terminated: last}
		}
		k.containerStatus(ctx, pod, running, corev1.PodRunning)
		if !sleep(ctx, CrashRun) {
			return
		}
		last = &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "panic: invalid configuration: listen.port must be a number",
			StartedAt: started, FinishedAt: metav1.Now()}
		k.containerStatus(ctx, pod, corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts, Started: ptr(false),
			State: corev1.ContainerState{Terminated: last}}, corev1.PodRunning)
		if !sleep(ctx, 200*time.Millisecond) {
			return
		}
		backOff := min(backOffOf(restarts+1), CrashBackOffCap)
		k.containerStatus(ctx, pod, corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts, Started: ptr(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backOff, c.Name, pod.Name, pod.Namespace, pod.UID)}},
			LastTerminationState: corev1.ContainerState{Terminated: last}}, corev1.PodRunning)
		if !sleep(ctx, backOff) {
			return
		}
	}
}

// containerStatus writes st as the pod's one container status, the pod
// Ready as st is.
func (k *Kubelet) containerStatus(ctx context.Context, pod *corev1.Pod, st corev1.ContainerStatus, phase corev1.PodPhase) {
	ready, reason := corev1.ConditionFalse, "ContainersNotReady"
	if st.Ready {
		ready, reason = corev1.ConditionTrue, ""
	}
	status := map[string]any{"phase": phase, "containerStatuses": []corev1.ContainerStatus{st},
		"conditions": []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: ready, Reason: reason}, {Type: corev1.ContainersReady, Status: ready, Reason: reason}}}
	k.patchStatus(ctx, pod, status)
}

func ptr[T any](v T) *T { return &v }

// backOffOf is the kubelet's back-off after restarts: 10 s doubling to
// 5 min.
func backOffOf(restarts int32) time.Duration {
	d := 10 * time.Second
	for i := int32(1); i < restarts && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// alive says whether pod still exists and is not being deleted.
func (k *Kubelet) alive(ctx context.Context, pod *corev1.Pod) bool {
	p, err := k.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	return err == nil && p.UID == pod.UID && p.DeletionTimestamp == nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// pull is "" when ref pulls for platform, else containerd's error as the
// kubelet reports it.
func (k *Kubelet) pull(ctx context.Context, ref string, platform platforms.Platform, cri map[string][]authn.Authenticator) string {
	img, err := parseImage(ref)
	if err != nil {
		return fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", ref, ref, err)
	}
	// one pull per matching credential, the first that pulls winning, the
	// last one's error reported (pkg/kubelet/images pullImage)
	creds := cri[ref]
	if len(creds) == 0 {
		creds = []authn.Authenticator{nil}
	}
	var said []answer
	for _, cred := range creds {
		if said, err = k.node.pull(ctx, img, platform, cred); err == nil {
			break
		}
	}
	for _, a := range said {
		k.Log.Debug("test kubelet: pull", "image", img.ref, "url", a.url, "platforms", len(a.platforms), "error", a.err)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// credentials are, for each image the pod runs, every credential of its
// pull secrets that matches it, in the kubelet's order: the kubelet's own
// keyring (k8s.io/kubernetes pkg/credentialprovider) over the pod's
// imagePullSecrets, or its ServiceAccount's when it names none, as the
// ServiceAccount admission plugin copies them.
func (k *Kubelet) credentials(ctx context.Context, pod *corev1.Pod) (map[string][]authn.Authenticator, error) {
	var names []string
	for _, s := range pod.Spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		acct, err := k.Kube.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, sa, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			for _, s := range acct.ImagePullSecrets {
				names = append(names, s.Name)
			}
		}
	}
	var secrets []corev1.Secret
	for _, name := range names {
		s, err := k.Kube.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // the kubelet pulls without it
		}
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, *s)
	}
	keyring, err := credentialsecrets.MakeDockerKeyring(secrets, &credentialprovider.BasicDockerKeyring{})
	if err != nil {
		return nil, err
	}
	out := map[string][]authn.Authenticator{}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		matched, _ := keyring.Lookup(c.Image)
		for _, m := range matched {
			out[c.Image] = append(out[c.Image], authn.FromConfig(authn.AuthConfig{Username: m.Username, Password: m.Password, Auth: m.Auth,
				IdentityToken: m.IdentityToken, RegistryToken: m.RegistryToken}))
		}
	}
	return out, nil
}

// report sets the waiting state of the container that cannot pull (the
// others of the pod waiting on PodInitializing or ContainerCreating), as
// a kubelet does.
func (k *Kubelet) report(ctx context.Context, pod *corev1.Pod, f *failure, reason, message string) {
	waiting := func(c corev1.Container, init bool) corev1.ContainerStatus {
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
		if !init && len(pod.Spec.InitContainers) == 0 {
			st.State.Waiting.Reason = "ContainerCreating"
		}
		if c.Name == f.container && init == f.init {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: message}
		}
		return st
	}
	status := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: "ContainersNotInitialized"},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [" + f.container + "]"},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
	}}
	if !f.init {
		status.Conditions[1] = corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	}
	for _, c := range pod.Spec.InitContainers {
		status.InitContainerStatuses = append(status.InitContainerStatuses, waiting(c, true))
	}
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, waiting(c, false))
	}
	k.patchStatus(ctx, pod, status)
}

// patchStatus merges status into pod's.
func (k *Kubelet) patchStatus(ctx context.Context, pod *corev1.Pod, status any) {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return
	}
	if _, err := k.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && ctx.Err() == nil {
		k.Log.Warn("test kubelet: writing the pod's status", "pod", pod.Name, "error", err)
	}
}
