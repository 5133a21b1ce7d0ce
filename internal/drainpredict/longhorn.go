package drainpredict

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// longhornRule is Longhorn's say on its instance-manager pod (longhorn-
// manager v1.7: the instance manager controller's budget and
// canDeleteInstanceManagerPDB), where its CRDs are served. The pod's
// budget (minAvailable 1 over that one pod) answers 429 until Longhorn
// deletes it, which it does on a cordoned node only when no volume's
// engine runs there and, under the node-drain-policy setting, every
// replica on the node has a healthy replica of its volume on another
// schedulable node whose instance manager still has its budget (or
// never started). The rule claims the pod and names each volume that
// keeps the budget.
type longhornRule struct{}

func (longhornRule) Name() string { return "longhorn" }

func (longhornRule) Reads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"longhorn.io"}, Verbs: []string{"list"}, Resources: []string{
		lhInstanceManagers.Resource, lhReplicas.Resource, lhSettings.Resource, lhVolumes.Resource}}}
}

var (
	lhInstanceManagers = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "instancemanagers"}
	lhReplicas         = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "replicas"}
	lhSettings         = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "settings"}
	lhVolumes          = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "volumes"}
)

// Longhorn's node-drain-policy values.
const (
	drainPolicySetting          = "node-drain-policy"
	policyBlockForEviction      = "block-for-eviction"
	policyBlockForEvictionLast  = "block-for-eviction-if-contains-last-replica"
	policyBlockIfLast           = "block-if-contains-last-replica"
	policyAllowIfReplicaStopped = "allow-if-replica-is-stopped"
	policyAlwaysAllow           = "always-allow"
)

func (longhornRule) Judge(ctx context.Context, w *World, p *Prediction) error {
	var imPods []*corev1.Pod
	for i := range w.Evict {
		if w.Evict[i].Labels["longhorn.io/component"] == "instance-manager" {
			imPods = append(imPods, &w.Evict[i])
		}
	}
	if len(imPods) == 0 || w.opts.Drain.DisableEviction {
		return nil
	}
	ims, served, err := w.Custom(ctx, lhInstanceManagers)
	if err != nil || !served {
		return err
	}
	replicas, _, err := w.Custom(ctx, lhReplicas)
	if err != nil {
		return err
	}
	settings, _, err := w.Custom(ctx, lhSettings)
	if err != nil {
		return err
	}
	volumes, _, err := w.Custom(ctx, lhVolumes)
	if err != nil {
		return err
	}
	policies := map[string]string{} // by Longhorn's namespace
	for _, s := range settings {
		if s.GetName() == drainPolicySetting {
			if v, ok, _ := unstructured.NestedString(s.Object, "value"); ok && v != "" {
				policies[s.GetNamespace()] = v
			}
		}
	}
	imByName := map[string]*unstructured.Unstructured{}
	for i := range ims {
		imByName[ims[i].GetNamespace()+"/"+ims[i].GetName()] = &ims[i]
	}
	cordoned, _, err := w.Draining(ctx)
	if err != nil {
		return err
	}
	node := w.Node.Name
	// the replicas by volume (namespace/name) and those on this node,
	// the same for every instance manager pod of the node
	var onNode []*unstructured.Unstructured
	byVolume := map[string][]*unstructured.Unstructured{}
	for i := range replicas {
		r := &replicas[i]
		vol, _, _ := unstructured.NestedString(r.Object, "spec", "volumeName")
		byVolume[r.GetNamespace()+"/"+vol] = append(byVolume[r.GetNamespace()+"/"+vol], r)
		if n, _, _ := unstructured.NestedString(r.Object, "spec", "nodeID"); n == node {
			onNode = append(onNode, r)
		}
	}
	for _, pod := range imPods {
		im := imByName[pod.Namespace+"/"+pod.Name]
		if im == nil {
			continue
		}
		budget, err := w.Budget(ctx, im.GetNamespace(), im.GetName())
		if err != nil {
			return err
		}
		w.claim(pod, "longhorn")
		policy := policies[im.GetNamespace()]
		if policy == "" {
			policy = policyBlockIfLast // Longhorn's default
		}
		if budget == nil {
			continue // no budget: nothing of Longhorn's holds the pod
		}
		f := Finding{Rule: "longhorn", Pod: podName(pod), Owner: "InstanceManager/" + im.GetName()}
		// 1. every volume attached here must detach first
		var attached []string
		for _, v := range volumes {
			if cur, _, _ := unstructured.NestedString(v.Object, "status", "currentNodeID"); cur != node {
				continue
			}
			if users := notEvicted(w, &v); len(users) > 0 {
				attached = append(attached, fmt.Sprintf("%s (used by %s, which the drain does not evict)", v.GetName(), strings.Join(users, ", ")))
			}
		}
		if len(attached) > 0 {
			f.Why = fmt.Sprintf("Longhorn keeps instance manager %s's budget while a volume is attached to this node: %s", im.GetName(), strings.Join(attached, "; "))
			f.Unblock = "detach those volumes (stop or move the workloads that use them)"
			p.block(f)
			continue
		}
		if policy == policyAlwaysAllow {
			continue
		}
		if len(onNode) == 0 {
			continue
		}
		if policy == policyBlockForEviction {
			p.warn(Finding{Rule: "longhorn", Pod: podName(pod), Owner: f.Owner, Why: fmt.Sprintf(
				"node-drain-policy %s: the drain waits until Longhorn has evicted the %d replica(s) on this node to other nodes", policy, len(onNode))})
			continue
		}
		last := map[string]string{} // volume: replica
		for _, r := range onNode {
			if policy == policyAllowIfReplicaStopped && stopped(r) {
				continue
			}
			vol, _, _ := unstructured.NestedString(r.Object, "spec", "volumeName")
			protected, err := protectedElsewhere(ctx, w, byVolume[r.GetNamespace()+"/"+vol], imByName, cordoned, node)
			if err != nil {
				return err
			}
			if !protected {
				last[vol] = r.GetName()
			}
		}
		if len(last) == 0 {
			continue
		}
		vols := make([]string, 0, len(last))
		for v, r := range last {
			vols = append(vols, fmt.Sprintf("%s (replica %s)", v, r))
		}
		sort.Strings(vols)
		if policy == policyBlockForEvictionLast {
			p.warn(Finding{Rule: "longhorn", Pod: podName(pod), Owner: f.Owner, Why: fmt.Sprintf(
				"node-drain-policy %s: the drain waits until Longhorn has rebuilt elsewhere the last healthy replica of %s", policy, strings.Join(vols, ", "))})
			continue
		}
		f.Why = fmt.Sprintf("node-drain-policy %s: Longhorn keeps instance manager %s's budget (every eviction answers 429) while this node holds the last healthy replica of %s",
			policy, im.GetName(), strings.Join(vols, ", "))
		f.Unblock = "rebuild a replica of each volume on another node (raise its numberOfReplicas, or request the eviction of this node's replicas), or set node-drain-policy to block-for-eviction-if-contains-last-replica (Longhorn then moves them during the drain)"
		p.block(f)
	}
	return nil
}

// notEvicted are the pods using volume v (its kubernetesStatus) that
// are still there and that the drain does not evict.
func notEvicted(w *World, v *unstructured.Unstructured) []string {
	evicted := sets.New[string]()
	for i := range w.Evict {
		evicted.Insert(podName(&w.Evict[i]))
	}
	ns, _, _ := unstructured.NestedString(v.Object, "status", "kubernetesStatus", "namespace")
	ws, _, _ := unstructured.NestedSlice(v.Object, "status", "kubernetesStatus", "workloadsStatus")
	var out []string
	for _, x := range ws {
		m, _ := x.(map[string]any)
		name, _ := m["podName"].(string)
		status, _ := m["podStatus"].(string)
		if name == "" || status == string(corev1.PodSucceeded) || status == string(corev1.PodFailed) {
			continue
		}
		if !evicted.Has(ns + "/" + name) {
			out = append(out, ns+"/"+name)
		}
	}
	if len(ws) == 0 {
		out = append(out, "no pod (attached by other means)")
	}
	return out
}

// stopped: the replica is meant to be stopped and is.
func stopped(r *unstructured.Unstructured) bool {
	desire, _, _ := unstructured.NestedString(r.Object, "spec", "desireState")
	current, _, _ := unstructured.NestedString(r.Object, "status", "currentState")
	return desire == "stopped" && current == "stopped"
}

// protectedElsewhere is canDeleteInstanceManagerPDB's test of one
// replica on the node: its volume has a healthy replica on another
// node that is not cordoned, whose running instance manager has its
// budget; or a replica of the volume on this node never started.
func protectedElsewhere(ctx context.Context, w *World, siblings []*unstructured.Unstructured, ims map[string]*unstructured.Unstructured, cordoned sets.Set[string], node string) (bool, error) {
	for _, s := range siblings {
		n, _, _ := unstructured.NestedString(s.Object, "spec", "nodeID")
		healthyAt, _, _ := unstructured.NestedString(s.Object, "spec", "healthyAt")
		failedAt, _, _ := unstructured.NestedString(s.Object, "spec", "failedAt")
		if healthyAt != "" && failedAt == "" && n != node && !cordoned.Has(n) {
			imName, _, _ := unstructured.NestedString(s.Object, "status", "instanceManagerName")
			im := ims[s.GetNamespace()+"/"+imName]
			if im == nil {
				continue
			}
			if state, _, _ := unstructured.NestedString(im.Object, "status", "currentState"); state != "running" {
				continue
			}
			b, err := w.Budget(ctx, im.GetNamespace(), im.GetName())
			if err != nil {
				return false, err
			}
			if b != nil {
				return true, nil
			}
		}
		if healthyAt == "" && failedAt == "" && n == node {
			return true, nil
		}
	}
	return false, nil
}
