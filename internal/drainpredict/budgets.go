package drainpredict

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/chart-upgrader/chart-upgrader/internal/placement"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// budgetsRule is the eviction subresource's budget check
// (pkg/registry/core/pod/storage/eviction.go), summed over the node: a
// pod that is terminal, Pending or deleting skips its budget; more than
// one budget is a 500 kubectl does not retry; a budget not yet observed,
// or one allowing no disruption, answers 429 and kubectl retries every
// 5 s; an unready pod goes under AlwaysAllow, or under IfHealthyBudget
// while the budget is healthy. A budget allowing k disruptions with m > k
// of its pods on the node (and on the nodes the Plan drains with it)
// finishes only when the replacements of the evicted ones become ready
// elsewhere: each of the m-k replacements is placed by the scheduler's
// own filters with this node and every other cordoned or draining node
// unschedulable.
type budgetsRule struct{}

func (budgetsRule) Name() string { return "budget" }

func (budgetsRule) Reads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}, // the pods bound to nodes
	}
}

// maxDisruptedPods is the eviction subresource's MaxDisruptedPodSize.
const maxDisruptedPods = 2000

func (budgetsRule) Judge(ctx context.Context, w *World, p *Prediction) error {
	if w.opts.Drain.DisableEviction || len(w.Evict) == 0 {
		return nil
	}
	budgets, err := w.Budgets(ctx)
	if err != nil {
		return err
	}
	groups := map[types.UID][]*corev1.Pod{}
	byUID := map[types.UID]*policyv1.PodDisruptionBudget{}
	for i := range w.Evict {
		pod := &w.Evict[i]
		if w.claimedBy(pod) != "" || skipsBudget(pod) {
			continue
		}
		matching := matchingBudgets(budgets, pod)
		switch len(matching) {
		case 0:
			continue
		case 1:
		default:
			names := make([]string, len(matching))
			for j, b := range matching {
				names[j] = b.Namespace + "/" + b.Name
			}
			p.block(Finding{Rule: "budget", Pod: podName(pod), Owner: ownerOf(pod),
				Why: fmt.Sprintf("%d PodDisruptionBudgets select it (%s): the eviction API answers 500 (\"more than one PodDisruptionBudget\") and kubectl gives the pod up without retrying",
					len(matching), strings.Join(names, ", ")),
				Unblock: "make exactly one budget select the pod (change a selector or delete a budget)"})
			continue
		}
		b := matching[0]
		if !podutils.IsPodReady(pod) {
			if b.Spec.UnhealthyPodEvictionPolicy != nil && *b.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow {
				continue
			}
			if b.Status.CurrentHealthy >= b.Status.DesiredHealthy && b.Status.DesiredHealthy > 0 {
				continue
			}
		}
		byUID[b.UID] = b
		groups[b.UID] = append(groups[b.UID], pod)
	}
	uids := make([]types.UID, 0, len(groups))
	for uid := range groups {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return budgetName(byUID[uids[i]]) < budgetName(byUID[uids[j]]) })
	for _, uid := range uids {
		if err := judgeBudget(ctx, w, p, byUID[uid], groups[uid]); err != nil {
			return err
		}
	}
	return nil
}

// skipsBudget is eviction.go's canIgnorePDB.
func skipsBudget(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return true
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return false
}

// matchingBudgets are the budgets of pod's namespace whose selector
// matches it, as eviction.go's getPodDisruptionBudgets picks them.
func matchingBudgets(budgets []policyv1.PodDisruptionBudget, pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for i := range budgets {
		b := &budgets[i]
		if b.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b)
	}
	return out
}

func budgetName(b *policyv1.PodDisruptionBudget) string { return b.Namespace + "/" + b.Name }

// judgeBudget judges the pods of one budget that the drain must evict
// through it.
func judgeBudget(ctx context.Context, w *World, p *Prediction, b *policyv1.PodDisruptionBudget, pods []*corev1.Pod) error {
	name := budgetName(b)
	blockAll := func(why, unblock string) {
		for _, pod := range pods {
			p.block(Finding{Rule: "budget", Pod: podName(pod), Owner: ownerOf(pod), Why: why, Unblock: unblock})
		}
	}
	switch {
	case b.Status.ObservedGeneration < b.Generation:
		blockAll(fmt.Sprintf("PodDisruptionBudget %s is not yet observed by the disruption controller (generation %d, observed %d): every eviction answers 429",
			name, b.Generation, b.Status.ObservedGeneration), "let kube-controller-manager's disruption controller observe it (is it running?)")
		return nil
	case b.Status.DisruptionsAllowed < 0:
		blockAll(fmt.Sprintf("PodDisruptionBudget %s allows a negative number of disruptions: the eviction API answers 403", name), "fix the budget's status (the disruption controller writes it)")
		return nil
	case len(b.Status.DisruptedPods) > maxDisruptedPods:
		blockAll(fmt.Sprintf("PodDisruptionBudget %s has %d evictions not yet confirmed by the disruption controller: the eviction API answers 403", name, len(b.Status.DisruptedPods)), "let the disruption controller catch up")
		return nil
	case b.Status.DisruptionsAllowed == 0:
		blockAll(budgetRefusal(b), "relax the budget (its minAvailable or maxUnavailable), or add replicas so that more pods are healthy than it needs")
		return nil
	}
	k := int(b.Status.DisruptionsAllowed)
	_, planned, err := w.Draining(ctx)
	if err != nil {
		return err
	}
	alongside := 0 // pods of the budget on the nodes the Plan drains at the same time
	if planned.Len() > 0 {
		bound, err := w.Bound(ctx)
		if err != nil {
			return err
		}
		sel, _ := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		for i := range bound {
			q := &bound[i]
			if planned.Has(q.Spec.NodeName) && q.Namespace == b.Namespace && sel.Matches(labels.Set(q.Labels)) && podutils.IsPodReady(q) {
				alongside++
			}
		}
	}
	m := len(pods) + alongside
	if m <= k {
		return nil
	}
	// k go at once; the other m-k wait until replacements are ready
	// elsewhere and the budget allows again.
	waiting := m - k
	placed, why, err := placeReplacements(ctx, w, pods, waiting)
	if err != nil {
		return err
	}
	if why == "" {
		p.warn(Finding{Rule: "budget", Why: fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s) for %d of its pods drained now: %d wait until replacements are ready elsewhere (%d placed by the scheduler's filters)",
			name, k, m, waiting, placed)})
		return nil
	}
	along := ""
	if alongside > 0 {
		along = fmt.Sprintf(" (%d more on the nodes the Plan upgrades at the same time)", alongside)
	}
	blockAll(fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s) for the %d of its pods drained%s; the rest wait for replacements, and %s",
		name, k, m, along, why),
		"add room elsewhere for the replacements (or relax the budget), so that evicted pods are replaced before the next eviction")
	return nil
}

// budgetRefusal is eviction.go's cause for a budget allowing no
// disruption.
func budgetRefusal(b *policyv1.PodDisruptionBudget) string {
	c := meta.FindStatusCondition(b.Status.Conditions, policyv1.DisruptionAllowedCondition)
	head := fmt.Sprintf("PodDisruptionBudget %s allows no disruption (every eviction answers 429, kubectl retries every 5 s): ", budgetName(b))
	switch {
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "" && c.Reason == policyv1.SyncFailedReason:
		return head + "its sync failed: " + c.Message
	case b.Status.CurrentHealthy <= b.Status.DesiredHealthy:
		return head + fmt.Sprintf("it needs %d healthy pods and has %d", b.Status.DesiredHealthy, b.Status.CurrentHealthy)
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "":
		return head + c.Reason + ": " + c.Message
	}
	return head + "it does not allow evicting pods currently"
}

// placeReplacements places n replacements of pods (the controller's new
// pods, as the evicted ones) with the scheduler's filters, the drained
// node and every cordoned or draining node unschedulable, the evicted
// pods' requests freed. why says why not, "" when all n were placed.
func placeReplacements(ctx context.Context, w *World, pods []*corev1.Pod, n int) (placed int, why string, err error) {
	for _, pod := range pods[:min(n, len(pods))] {
		if ownerOf(pod) == "" {
			return placed, fmt.Sprintf("pod %s has no controller to recreate it, so the budget never allows the next eviction", podName(pod)), nil
		}
	}
	infos, err := w.nodeInfos(ctx)
	if err != nil {
		return 0, "", err
	}
	filters, err := placement.Filters(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("building the scheduler's filters: %w", err)
	}
	for i := range n {
		pod := replacementOf(pods[i%len(pods)], i)
		ni, err := placement.Schedule(ctx, filters, pod, infos)
		if err != nil {
			return placed, fmt.Sprintf("the replacement of %s fits no other node: %v", podName(pods[i%len(pods)]), err), nil
		}
		ni.AddPod(pod)
		placed++
	}
	return placed, "", nil
}

// replacementOf is the pod a controller makes in place of pod: its spec,
// unbound, and its scheduling gates' and status' leftovers gone.
func replacementOf(pod *corev1.Pod, i int) *corev1.Pod {
	r := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-replacement",
		UID: types.UID(fmt.Sprintf("%s-replacement-%d", pod.UID, i)), Labels: pod.Labels}, Spec: *pod.Spec.DeepCopy()}
	r.Spec.NodeName = ""
	return r
}

// nodeInfos are the scheduler's view of the nodes once the drain has
// begun: the drained node and the other cordoned or draining nodes
// unschedulable, the pods the drain evicts gone. Built once per
// prediction, shared by every rule that places a pod (and the pods
// placed by one rule counted by the next).
func (w *World) nodeInfos(ctx context.Context) ([]*framework.NodeInfo, error) {
	v, err := w.remember("nodeinfos", func() (any, error) {
		nodes, err := w.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		bound, err := w.Bound(ctx)
		if err != nil {
			return nil, err
		}
		cordoned, _, err := w.Draining(ctx)
		if err != nil {
			return nil, err
		}
		evicted := sets.New[types.UID]()
		for i := range w.Evict {
			evicted.Insert(w.Evict[i].UID)
		}
		byNode := map[string][]*corev1.Pod{}
		for i := range bound {
			q := &bound[i]
			if !evicted.Has(q.UID) {
				byNode[q.Spec.NodeName] = append(byNode[q.Spec.NodeName], q)
			}
		}
		infos := make([]*framework.NodeInfo, 0, len(nodes))
		for i := range nodes {
			n := nodes[i].DeepCopy()
			if n.Name == w.Node.Name || cordoned.Has(n.Name) {
				n.Spec.Unschedulable = true
			}
			ni := framework.NewNodeInfo()
			ni.SetNode(n)
			for _, q := range byNode[n.Name] {
				ni.AddPod(q)
			}
			infos = append(infos, ni)
		}
		return infos, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]*framework.NodeInfo), nil
}
