// Package node cordons, drains and uncordons the node a system upgrade runs
// on, with the kubectl drain library. It records its own cordon in an
// annotation on the node, written in the same request as
// spec.unschedulable, and uncordons only a node it cordoned: a node someone
// else cordoned stays cordoned.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// AnnotationCordoned records that chart-upgrader cordoned the node, and
// when (RFC 3339, UTC).
const AnnotationCordoned = "chart-upgrader.io/cordoned"

// Options configure Cordon and Uncordon.
type Options struct {
	// Out receives one line saying what was done, or why nothing was.
	// Nil discards it.
	Out io.Writer
}

// state is where a node stands as far as cordoning goes.
type state int

const (
	// schedulable: not cordoned, no record.
	schedulable state = iota
	// cordonedByUs: unschedulable, with our record.
	cordonedByUs
	// cordonedByOther: unschedulable without our record.
	cordonedByOther
	// recordOnly: our record on a schedulable node (someone uncordoned it).
	recordOnly
)

func stateOf(n *corev1.Node) state {
	_, recorded := n.Annotations[AnnotationCordoned]
	switch {
	case n.Spec.Unschedulable && recorded:
		return cordonedByUs
	case n.Spec.Unschedulable:
		return cordonedByOther
	case recorded:
		return recordOnly
	default:
		return schedulable
	}
}

// cordonPatch marks the node unschedulable and records the cordon. The
// resourceVersion makes it fail with a conflict if the node changed since
// it was read.
func cordonPatch(resourceVersion string, at time.Time) []byte {
	return mustJSON(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]any{AnnotationCordoned: at.UTC().Format(time.RFC3339)},
		},
		"spec": map[string]any{"unschedulable": true},
	})
}

// uncordonPatch marks the node schedulable and removes the record, under
// the same precondition.
func uncordonPatch(resourceVersion string) []byte {
	return mustJSON(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]any{AnnotationCordoned: nil},
		},
		"spec": map[string]any{"unschedulable": false},
	})
}

func mustJSON(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and bools always marshal
	}
	return b
}

// Cordon marks the node unschedulable and records that chart-upgrader did.
// It makes no write when the node is already unschedulable: cordoned by
// chart-upgrader before, or by someone else, in which case no record is
// added and Uncordon will leave the node cordoned. changed reports whether
// the node was written. A node changed by someone else between the read
// and the write is read again, never overwritten. A missing node is a
// refusal (outcome.ErrRefused).
func Cordon(ctx context.Context, kube kubernetes.Interface, node string, opts Options) (changed bool, err error) {
	var before state
	var since string
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := get(ctx, kube, node)
		if err != nil {
			return err
		}
		before, since = stateOf(n), n.Annotations[AnnotationCordoned]
		if before == cordonedByUs || before == cordonedByOther {
			return nil
		}
		return patch(ctx, kube, node, cordonPatch(n.ResourceVersion, time.Now()))
	})
	if err != nil {
		return false, wrap("cordoning", node, err)
	}
	out := orDiscard(opts.Out)
	switch before {
	case cordonedByUs:
		fmt.Fprintf(out, "node/%s already cordoned by chart-upgrader (since %s)\n", node, since)
		return false, nil
	case cordonedByOther:
		fmt.Fprintf(out, "node/%s already cordoned, not by chart-upgrader: left as is, and uncordon will not touch it\n", node)
		return false, nil
	}
	fmt.Fprintf(out, "node/%s cordoned\n", node)
	return true, nil
}

// Uncordon marks the node schedulable again and removes the record, only
// if the record says chart-upgrader cordoned it. It makes no write on a
// node without the record: one cordoned by someone else stays cordoned.
// A record left on a node someone else uncordoned is removed. changed
// reports whether the node was written. A missing node is a refusal.
func Uncordon(ctx context.Context, kube kubernetes.Interface, node string, opts Options) (changed bool, err error) {
	var before state
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := get(ctx, kube, node)
		if err != nil {
			return err
		}
		before = stateOf(n)
		if before == schedulable || before == cordonedByOther {
			return nil
		}
		return patch(ctx, kube, node, uncordonPatch(n.ResourceVersion))
	})
	if err != nil {
		return false, wrap("uncordoning", node, err)
	}
	out := orDiscard(opts.Out)
	switch before {
	case schedulable:
		fmt.Fprintf(out, "node/%s not cordoned: nothing to do\n", node)
		return false, nil
	case cordonedByOther:
		fmt.Fprintf(out, "node/%s cordoned by someone else, not by chart-upgrader: left cordoned\n", node)
		return false, nil
	case recordOnly:
		fmt.Fprintf(out, "node/%s already uncordoned by someone else: removed chart-upgrader's cordon record\n", node)
		return true, nil
	}
	fmt.Fprintf(out, "node/%s uncordoned\n", node)
	return true, nil
}

func get(ctx context.Context, kube kubernetes.Interface, node string) (*corev1.Node, error) {
	if node == "" {
		return nil, outcome.BadInput(errors.New("no node name given"))
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, outcome.Refused(err)
	}
	return n, err
}

func patch(ctx context.Context, kube kubernetes.Interface, node string, data []byte) error {
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{FieldManager: "chart-upgrader"})
	return err
}

// wrap names what was being done to which node.
func wrap(doing, node string, err error) error {
	if node == "" {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return fmt.Errorf("%s node %q: %w", doing, node, err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
