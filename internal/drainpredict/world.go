package drainpredict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/placement"
)

// World is what the rules judge: the node, the pods the drain evicts, and
// the cluster's objects, each kind listed at most once.
type World struct {
	c    Clients
	opts Options
	// Node is the node drained.
	Node *corev1.Node
	// Evict are the pods the drain evicts (kubectl's filters passed),
	// set by the first rule.
	Evict []corev1.Pod
	// claimed are pods whose budget a rule judges itself (KubeVirt's,
	// Longhorn's), by UID, with the rule's name.
	claimed map[podKey]string
	// moved are pods an operator moves itself when the eviction asks (a
	// VM live-migrated): a webhook's 429 is then a step of the move.
	moved map[podKey]bool

	requests   atomic.Int64
	mu         sync.Mutex
	memo       map[string]*memoEntry
	notChecked []string
}

type memoEntry struct {
	once sync.Once
	v    any
	err  error
}

func newWorld(c Clients, opts Options) *World {
	return &World{c: c, opts: opts, claimed: map[podKey]string{}, moved: map[podKey]bool{}, memo: map[string]*memoEntry{}}
}

// ErrNodeNotFound: the node predicted does not exist (bad input).
var ErrNodeNotFound = errors.New("node not found")

// readNode reads the node; one that does not exist is bad input.
func (w *World) readNode(ctx context.Context) error {
	w.requests.Add(1)
	n, err := w.c.Kube.CoreV1().Nodes().Get(ctx, w.opts.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return outcome.BadInput(fmt.Errorf("node %q: %w", w.opts.Node, ErrNodeNotFound))
	}
	if err != nil {
		return fmt.Errorf("reading node %q: %w", w.opts.Node, err)
	}
	w.Node = n
	return nil
}

// claim marks pod's budget as judged by rule.
func (w *World) claim(pod *corev1.Pod, rule string) { w.claimed[pod.UID] = rule }

// claimedBy is the rule that judges pod's budget, "" when none does.
func (w *World) claimedBy(pod *corev1.Pod) string { return w.claimed[pod.UID] }

// move marks pod as moved by its operator when the eviction asks.
func (w *World) move(pod *corev1.Pod) { w.moved[pod.UID] = true }

// notCheck records what could not be judged.
func (w *World) notCheck(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notChecked = append(w.notChecked, fmt.Sprintf(format, args...))
}

// remember runs read once per key.
func (w *World) remember(key string, read func() (any, error)) (any, error) {
	w.mu.Lock()
	e, ok := w.memo[key]
	if !ok {
		e = &memoEntry{}
		w.memo[key] = e
	}
	w.mu.Unlock()
	e.once.Do(func() { e.v, e.err = read() })
	return e.v, e.err
}

// Nodes are the cluster's nodes.
func (w *World) Nodes(ctx context.Context) ([]corev1.Node, error) {
	v, err := w.remember("nodes", func() (any, error) {
		w.requests.Add(1)
		l, err := w.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the nodes: %w", err)
		}
		return l.Items, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]corev1.Node), nil
}

// Bound are the pods bound to a node that have not ended, all namespaces.
func (w *World) Bound(ctx context.Context) ([]corev1.Pod, error) {
	v, err := w.remember("bound", func() (any, error) {
		w.requests.Add(1)
		l, err := w.c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: placement.BoundPods})
		if err != nil {
			return nil, fmt.Errorf("listing the pods bound to nodes: %w", err)
		}
		return l.Items, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]corev1.Pod), nil
}

// Budgets are the cluster's PodDisruptionBudgets.
func (w *World) Budgets(ctx context.Context) ([]policyv1.PodDisruptionBudget, error) {
	v, err := w.remember("budgets", func() (any, error) {
		w.requests.Add(1)
		l, err := w.c.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the PodDisruptionBudgets: %w", err)
		}
		return l.Items, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]policyv1.PodDisruptionBudget), nil
}

// Budget is the budget namespace/name, nil when there is none.
func (w *World) Budget(ctx context.Context, namespace, name string) (*policyv1.PodDisruptionBudget, error) {
	bs, err := w.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	for i := range bs {
		if bs[i].Namespace == namespace && bs[i].Name == name {
			return &bs[i], nil
		}
	}
	return nil, nil
}

// Custom lists a custom kind in every namespace. served is false when the
// cluster does not serve it (its operator is not installed): the rule
// then has nothing to judge.
func (w *World) Custom(ctx context.Context, gvr schema.GroupVersionResource) (items []unstructured.Unstructured, served bool, err error) {
	type listed struct {
		items  []unstructured.Unstructured
		served bool
	}
	v, err := w.remember(gvr.String(), func() (any, error) {
		if w.c.Dynamic == nil {
			return listed{}, nil
		}
		w.requests.Add(1)
		l, err := w.c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return listed{}, nil
		}
		if apierrors.IsForbidden(err) {
			w.notCheck("%s not read: this process may not list %s (add list on %s to its RBAC)", gvr.Resource+"."+gvr.Group, gvr.Resource, gvr.GroupResource())
			return listed{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		return listed{items: l.Items, served: true}, nil
	})
	if err != nil {
		return nil, false, err
	}
	l := v.(listed)
	return l.items, l.served, nil
}

// Draining are the other nodes that are cordoned or that the Plan is
// upgrading now: nothing new is scheduled there, and their pods are
// being evicted too when the Plan drains them.
func (w *World) Draining(ctx context.Context) (cordoned, planned sets.Set[string], err error) {
	nodes, err := w.Nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	cordoned, planned = sets.New[string](), sets.New[string]()
	for _, n := range nodes {
		if n.Name != w.Node.Name && n.Spec.Unschedulable {
			cordoned.Insert(n.Name)
		}
	}
	if w.opts.Plan != nil {
		// status.applying names nodes by their hostname label (SUC's
		// SelectConcurrentNodes), which is most often the node's name
		applying := sets.New(w.opts.Plan.Applying...)
		for _, n := range nodes {
			if n.Name != w.Node.Name && (applying.Has(n.Name) || applying.Has(n.Labels[corev1.LabelHostname])) {
				planned.Insert(n.Name)
				cordoned.Insert(n.Name)
			}
		}
	}
	return cordoned, planned, nil
}
