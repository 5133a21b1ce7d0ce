package drainpredict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/kubectl/pkg/drain"
)

// kubectlFilters is kubectl drain's own pod filters (k8s.io/kubectl
// pkg/drain GetPodsForDeletion, the code kubectl drain and SUC's drain
// run): DaemonSet pods, mirror pods, pods with emptyDir data, pods no
// controller manages, each refused unless its flag is given. One refused
// pod stops the whole node's drain before any eviction. Its DaemonSet
// GETs are answered from one LIST.
type kubectlFilters struct{}

func (kubectlFilters) Name() string { return "kubectl" }

func (kubectlFilters) Reads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"list"}},
	}
}

// refusal is one of kubectl's aggregated errors: "cannot delete MESSAGE:
// ns/a, ns/b".
var refusal = regexp.MustCompile(`^cannot delete (.*): ([^:]+)$`)

// flagHint is the flag kubectl names in a refusal.
var flagHint = regexp.MustCompile(`\(use (--[a-z-]+) to [a-z]+\)`)

func (kubectlFilters) Judge(ctx context.Context, w *World, p *Prediction) error {
	h := &drain.Helper{Ctx: ctx, Client: listedDaemonSets{Interface: w.c.Kube, w: w}, Force: w.opts.Drain.Force,
		IgnoreAllDaemonSets: w.opts.Drain.IgnoreDaemonSets, DeleteEmptyDirData: w.opts.Drain.DeleteEmptyDirData,
		PodSelector: w.opts.Drain.PodSelector, SkipWaitForDeleteTimeoutSeconds: w.opts.Drain.SkipWaitForDeleteTimeout,
		Out: io.Discard, ErrOut: io.Discard}
	w.requests.Add(1)
	list, errs := h.GetPodsForDeletion(w.Node.Name)
	if list == nil && len(errs) > 0 {
		return fmt.Errorf("listing the pods of node %q as kubectl drain does: %w", w.Node.Name, errors.Join(errs...))
	}
	pods := map[string]*corev1.Pod{}
	all := list.Pods()
	for i := range all {
		pods[podName(&all[i])] = &all[i]
	}
	for _, err := range errs {
		m := refusal.FindStringSubmatch(err.Error())
		if m == nil {
			p.block(Finding{Rule: "kubectl", Why: "kubectl drain refuses: " + err.Error()})
			continue
		}
		unblock := "remove the pod or give the drain the flag kubectl names"
		if f := flagHint.FindStringSubmatch(m[1]); f != nil {
			unblock = "give the drain " + f[1]
		}
		for _, name := range strings.Split(m[2], ", ") {
			p.block(Finding{Rule: "kubectl", Pod: name, Why: "kubectl drain cannot delete " + m[1] +
				"; one such pod stops the whole drain before any eviction", Unblock: unblock})
		}
	}
	if ws := list.Warnings(); ws != "" {
		for _, part := range strings.Split(ws, "; ") {
			p.warn(Finding{Rule: "kubectl", Why: "kubectl drain: " + part})
		}
	}
	// kubectl's own warning for emptyDir data is overwritten by its later
	// filters: the cost is said here
	for i := range all {
		if local := emptyDirs(&all[i]); len(local) > 0 && all[i].Status.Phase != corev1.PodSucceeded && all[i].Status.Phase != corev1.PodFailed {
			p.warn(Finding{Rule: "kubectl", Pod: podName(&all[i]), Owner: ownerOf(&all[i]),
				Why: "the drain deletes its emptyDir data (" + strings.Join(local, ", ") + ")"})
		}
	}
	w.Evict = all
	return nil
}

// emptyDirs names the pod's emptyDir volumes.
func emptyDirs(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			out = append(out, v.Name)
		}
	}
	return out
}

// listedDaemonSets is the client kubectl's filters run with: its
// DaemonSet GETs (one per DaemonSet pod on the node) are answered from
// one LIST of the DaemonSets, made on the first.
type listedDaemonSets struct {
	kubernetes.Interface
	w *World
}

func (c listedDaemonSets) AppsV1() appsv1client.AppsV1Interface {
	return listedAppsV1{AppsV1Interface: c.Interface.AppsV1(), w: c.w}
}

type listedAppsV1 struct {
	appsv1client.AppsV1Interface
	w *World
}

func (a listedAppsV1) DaemonSets(namespace string) appsv1client.DaemonSetInterface {
	return listedDaemonSetClient{DaemonSetInterface: a.AppsV1Interface.DaemonSets(namespace), all: a.AppsV1Interface.DaemonSets(metav1.NamespaceAll), namespace: namespace, w: a.w}
}

type listedDaemonSetClient struct {
	appsv1client.DaemonSetInterface
	all       appsv1client.DaemonSetInterface
	namespace string
	w         *World
}

// Get answers from the memoized LIST, with the API server's NotFound for
// one that is not there (kubectl's filter tells a deleted DaemonSet by
// it).
func (d listedDaemonSetClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*appsv1.DaemonSet, error) {
	v, err := d.w.remember("daemonsets", func() (any, error) {
		d.w.requests.Add(1)
		l, err := d.all.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
	if err != nil {
		return nil, err
	}
	for _, ds := range v.([]appsv1.DaemonSet) {
		if ds.Namespace == d.namespace && ds.Name == name {
			return &ds, nil
		}
	}
	return nil, apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
}
