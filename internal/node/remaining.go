package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// lookupTimeout bounds the reads that describe a timed-out drain.
const lookupTimeout = 10 * time.Second

// remaining describes which of the pods the drain evicted are still on the
// node, and why when it can tell: "2 pods still there: ns/a (terminating),
// ns/b (PodDisruptionBudget ns/pdb allows no disruption)".
func remaining(ctx context.Context, kube kubernetes.Interface, node string, evicted []corev1.Pod) string {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return fmt.Sprintf("pods still there (listing them: %v)", err)
	}
	wanted := map[types.UID]bool{}
	for _, p := range evicted {
		wanted[p.UID] = true
	}
	budgets := map[string][]policyv1.PodDisruptionBudget{}
	var names []string
	for _, p := range list.Items {
		if !wanted[p.UID] {
			continue
		}
		if _, ok := budgets[p.Namespace]; !ok {
			pdbs, err := kube.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				budgets[p.Namespace] = pdbs.Items
			} else {
				budgets[p.Namespace] = nil
			}
		}
		names = append(names, describe(p, budgets[p.Namespace]))
	}
	sort.Strings(names)
	switch len(names) {
	case 0:
		return "no pod left (it went at the deadline)"
	case 1:
		return "1 pod still there: " + names[0]
	default:
		return fmt.Sprintf("%d pods still there: %s", len(names), strings.Join(names, ", "))
	}
}

// describe names the pod, with why it is still there when that shows.
func describe(p corev1.Pod, budgets []policyv1.PodDisruptionBudget) string {
	name := p.Namespace + "/" + p.Name
	if p.DeletionTimestamp != nil {
		return name + " (terminating)"
	}
	for _, b := range budgets {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if b.Status.DisruptionsAllowed == 0 {
			return fmt.Sprintf("%s (PodDisruptionBudget %s/%s allows no disruption)", name, b.Namespace, b.Name)
		}
	}
	return name
}
