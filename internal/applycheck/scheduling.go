package applycheck

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/chart-upgrader/chart-upgrader/internal/placement"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the scheduling check: each pod the upgrade makes
// (pods.go) placed on the cluster's nodes by the scheduler's own filter
// plugins (NodeUnschedulable, TaintToleration, NodeAffinity,
// NodeResourcesFit, in the default profile's order), each node's free
// resources being its allocatable minus what the pods bound to it
// request, the pods the rollout replaces left out. A pod no node takes
// stays Pending: the upgrade's wait runs out.

// WarnDaemonSetUnschedulable: a DaemonSet's pod fits no node it would
// run on; WarnSchedulingNotChecked: the cluster lists no node.
const (
	WarnDaemonSetUnschedulable values.WarningKind = "daemonset-unschedulable"
	WarnSchedulingNotChecked   values.WarningKind = "scheduling-not-checked"
)

// The resources the check reads.
var (
	nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsResource  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

func init() {
	manifestChecks = append(manifestChecks, checkScheduling)
}

// Unschedulable is a workload some of whose pods fit no node.
type Unschedulable struct {
	Object    string // Kind namespace/name
	Placed    int64  // of Pods, the pods that found a node
	Pods      int64
	Message   string // the scheduler's: "0/3 nodes are available: 3 Insufficient cpu."
	DaemonSet bool
}

// Verdict is a refusal, a warning for a DaemonSet.
func (u Unschedulable) Verdict(Applier) (string, *values.Warning) {
	if u.DaemonSet {
		return "", &values.Warning{Kind: WarnDaemonSetUnschedulable, Path: u.Object, Message: u.String()}
	}
	return u.String(), nil
}

// String names the workload, how many pods fit, and the scheduler's
// words for the rest.
func (u Unschedulable) String() string {
	if u.DaemonSet {
		return fmt.Sprintf("unschedulable: %s: its pod fits %d of the %d nodes it would run on: %s", u.Object, u.Placed, u.Pods, u.Message)
	}
	return fmt.Sprintf("unschedulable: %s: %d of its %d pods fit no node (%s); they would stay Pending and the upgrade's wait would run out",
		u.Object, u.Pods-u.Placed, u.Pods, u.Message)
}

// NoNodes: the cluster lists no node, so the pods the upgrade makes were
// not placed.
type NoNodes struct{ Rollouts int }

// Verdict is a warning, whoever applies.
func (n NoNodes) Verdict(Applier) (string, *values.Warning) {
	return "", &values.Warning{Kind: WarnSchedulingNotChecked, Path: "nodes",
		Message: fmt.Sprintf("scheduling not checked: the cluster lists no node, so the pods of %d workloads of the upgrade were placed nowhere", n.Rollouts)}
}

// checkScheduling reads the nodes and the pods bound to them once, and
// places each rollout's pods, in manifest order, each on the feasible
// node with the most free CPU (the pods placed before it counted).
func checkScheduling(ctx context.Context, s Scope, res *Result) error {
	rollouts := s.rollouts()
	if len(rollouts) == 0 {
		return nil
	}
	plugins, err := placement.Filters(ctx)
	if err != nil {
		return fmt.Errorf("building the scheduler's filters: %w", err)
	}
	nodes, pods, unread, err := s.nodesAndPods(ctx, res)
	if err != nil {
		return err
	}
	if unread != "" {
		res.NotChecked = append(res.NotChecked, "scheduling not checked: "+unread)
		return nil
	}
	if len(nodes) == 0 {
		// a control plane with no node at all (or none this process
		// sees): nothing to place on, and nothing that says where pods go
		res.Findings = append(res.Findings, NoNodes{Rollouts: len(rollouts)})
		return nil
	}
	replaced := replacedPods(rollouts, pods)
	infos := make([]*framework.NodeInfo, 0, len(nodes))
	for i := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(&nodes[i])
		for j := range pods {
			p := &pods[j]
			if p.Spec.NodeName == nodes[i].Name && !replaced[p.UID] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				ni.AddPod(p)
			}
		}
		infos = append(infos, ni)
	}
	for _, r := range rollouts {
		if r.Kind == "DaemonSet" {
			if f := placeDaemonSet(ctx, plugins, r, infos); f != nil {
				res.Findings = append(res.Findings, *f)
			}
			continue
		}
		want := r.Replicas
		switch {
		case r.Kind == "Pod":
			want = 1
		case r.Scale: // the pods there stay, on their nodes
			want = max(0, r.Replicas-r.OldReplicas)
		}
		var placed int64
		var lastErr error
		for i := range want {
			pod := r.Pod()
			pod.UID = types.UID(fmt.Sprintf("%s-%d", r.Object, i))
			node, err := placement.Schedule(ctx, plugins, pod, infos)
			if err != nil {
				lastErr = err
				break
			}
			node.AddPod(pod)
			placed++
		}
		if lastErr != nil {
			res.Findings = append(res.Findings, Unschedulable{Object: r.Object, Placed: placed, Pods: want, Message: lastErr.Error()})
		}
	}
	return nil
}

// nodesAndPods lists the nodes and the pods bound to a node that have
// not ended, once per check of a manifest; unread says why they could
// not be listed (the rule to add).
func (s Scope) nodesAndPods(ctx context.Context, res *Result) ([]corev1.Node, []corev1.Pod, string, error) {
	type read struct {
		nodes  []corev1.Node
		pods   []corev1.Pod
		unread string
		err    error
	}
	r := s.Memo("nodes-and-pods", func() any {
		var out read
		res.Requests++
		nl, err := s.Checker.Reader.Dynamic.Resource(nodesResource).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			return read{unread: "this process may not list the nodes: " + clusterListRule(nodesResource)}
		}
		if err != nil {
			return read{err: fmt.Errorf("listing the nodes: %w", err)}
		}
		res.Requests++
		pl, err := s.Checker.Reader.Dynamic.Resource(podsResource).List(ctx, metav1.ListOptions{
			FieldSelector: placement.BoundPods})
		if apierrors.IsForbidden(err) {
			return read{unread: "this process may not list the pods bound to nodes (their requests use the nodes' resources): " + clusterListRule(podsResource)}
		}
		if err != nil {
			return read{err: fmt.Errorf("listing the pods bound to nodes: %w", err)}
		}
		out.nodes = make([]corev1.Node, len(nl.Items))
		for i := range nl.Items {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(nl.Items[i].Object, &out.nodes[i]); err != nil {
				return read{err: fmt.Errorf("reading node %s: %w", nl.Items[i].GetName(), err)}
			}
		}
		out.pods = make([]corev1.Pod, len(pl.Items))
		for i := range pl.Items {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pl.Items[i].Object, &out.pods[i]); err != nil {
				return read{err: fmt.Errorf("reading pod %s: %w", pl.Items[i].GetName(), err)}
			}
		}
		return out
	}).(read)
	return r.nodes, r.pods, r.unread, r.err
}

// replacedPods are the pods of the workloads the rollouts update (their
// selector's, in their namespace): gone at the end of the rollout.
func replacedPods(rollouts []Rollout, pods []corev1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, r := range rollouts {
		if r.Old == nil || r.Scale || r.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(r.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		for _, p := range pods {
			if p.Namespace == r.Namespace && sel.Matches(labels.Set(p.Labels)) {
				out[p.UID] = true
			}
		}
	}
	return out
}

// placeDaemonSet judges a DaemonSet's pod on each node it would run on
// (its selector, affinity and tolerations let it): a finding when it fits
// none of them.
func placeDaemonSet(ctx context.Context, plugins []placement.Filter, r Rollout, nodes []*framework.NodeInfo) *Unschedulable {
	var eligible []*framework.NodeInfo
	for _, ni := range nodes {
		pod := r.Pod()
		pod.UID = types.UID(r.Object + "@" + ni.Node().Name)
		if _, err := placement.Schedule(ctx, plugins[1:3], pod, []*framework.NodeInfo{ni}); err == nil {
			eligible = append(eligible, ni)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	var placed int64
	var lastErr error
	for _, ni := range eligible {
		pod := r.Pod()
		pod.UID = types.UID(r.Object + "@" + ni.Node().Name)
		if _, err := placement.Schedule(ctx, plugins[3:], pod, []*framework.NodeInfo{ni}); err != nil {
			lastErr = err
			continue
		}
		placed++
	}
	if placed > 0 || lastErr == nil {
		return nil
	}
	return &Unschedulable{Object: r.Object, Placed: placed, Pods: int64(len(eligible)), Message: lastErr.Error(), DaemonSet: true}
}
