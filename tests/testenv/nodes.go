package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// createFakeNodes creates the Nodes KWOK manages. A Node may carry its
// status at creation: capacity and addresses are set here, the conditions
// by KWOK.
func (e *Env) createFakeNodes(ctx context.Context) error {
	for i := range FakeNodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := e.createFakeNode(ctx, name, i+1, map[string]string{"type": "kwok"}, nil); err != nil {
			return err
		}
		e.nodes = append(e.nodes, name)
	}
	return nil
}

// fakeNodeCapacity is each fake Node's.
var fakeNodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("32"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// createFakeNode creates one Node KWOK manages, with labels (beyond the
// hostname, os and arch ones) and taints, address 10.250.<ip/256>.<ip%256>.
func (e *Env) createFakeNode(ctx context.Context, name string, ip int, labels map[string]string, taints []corev1.Taint) error {
	l := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	for k, v := range labels {
		l[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{KWOKNodeAnnotation: "fake"}, Labels: l},
		Status: corev1.NodeStatus{
			Capacity:    fakeNodeCapacity,
			Allocatable: fakeNodeCapacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.250.%d.%d", ip/256, ip%256)},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating fake node %s: %w", name, err)
	}
	// Admission (TaintNodesByCondition) gives a new Node the taint
	// node.kubernetes.io/not-ready, which the node lifecycle controller
	// would lift once the Node is Ready; that controller does not run.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		return err
	}
	if _, err := e.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the taints of fake node %s: %w", name, err)
	}
	return nil
}

// AddFakeNode adds a fake Node in the workloads mode, with labels and
// taints of a test's own, and returns once KWOK has made it Ready. A test
// that cordons, drains or fills nodes makes its own (a taint of its own
// keeps the other tests' pods off them).
func (e *Env) AddFakeNode(ctx context.Context, name string, labels map[string]string, taints []corev1.Taint) error {
	if len(e.procs) == 0 {
		return fmt.Errorf("adding fake node %s: the workloads mode does not run", name)
	}
	e.mu.Lock()
	e.extraNodes++
	ip := 256 + e.extraNodes
	e.mu.Unlock()
	if err := e.createFakeNode(ctx, name, ip, labels, taints); err != nil {
		return err
	}
	return e.pollWorkloads(ctx, "fake node "+name+" to become Ready (KWOK)", func(ctx context.Context) (bool, error) {
		node, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && nodeReady(node), nil
	})
}

// workloadsTimeout bounds each step of waitWorkloads.
const workloadsTimeout = time.Minute

// waitWorkloads returns once every fake Node is Ready (KWOK runs), the
// namespace "default" has its ServiceAccount (kube-controller-manager runs)
// and a probe pod has been scheduled and become Ready (kube-scheduler runs),
// the probe deleted again. It fails at once when a component exits.
func (e *Env) waitWorkloads(ctx context.Context) error {
	core := e.kube.CoreV1()
	if err := e.pollWorkloads(ctx, "the fake nodes to become Ready (KWOK)", func(ctx context.Context) (bool, error) {
		for _, name := range e.nodes {
			node, err := core.Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if err := e.pollWorkloads(ctx, "the default ServiceAccount (kube-controller-manager)", func(ctx context.Context) (bool, error) {
		_, err := core.ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return err
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-probe", Namespace: metav1.NamespaceSystem},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "probe", Image: "testenv.invalid/probe:1"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := core.Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe pod: %w", err)
	}
	var last *corev1.Pod
	if err := e.pollWorkloads(ctx, "the probe pod to be scheduled and Ready (kube-scheduler, KWOK)", func(ctx context.Context) (bool, error) {
		pod, err := core.Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return pod.Spec.NodeName != "" && podReady(pod), nil
	}); err != nil {
		if last != nil {
			return fmt.Errorf("%w; the probe pod: node %q, phase %q, conditions %+v", err, last.Spec.NodeName, last.Status.Phase, last.Status.Conditions)
		}
		return err
	}
	if err := core.Pods(probe.Namespace).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the probe pod: %w", err)
	}
	return e.pollWorkloads(ctx, "the probe pod to be deleted (KWOK)", func(ctx context.Context) (bool, error) {
		_, err := core.Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// pollWorkloads polls cond until it holds, a component exits or
// workloadsTimeout passes. Freshly started components offer nothing to
// watch for, hence the polling.
func (e *Env) pollWorkloads(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, workloadsTimeout, true,
		func(ctx context.Context) (bool, error) {
			for _, p := range e.procs {
				if err := p.exited(); err != nil {
					return false, err
				}
			}
			return cond(ctx)
		})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, e.logDir)
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
