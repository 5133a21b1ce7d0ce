package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultDrainTimeout bounds a drain whose DrainOptions.Timeout is zero.
const DefaultDrainTimeout = 10 * time.Minute

// maxEvictRetryDelay is the pause before asking again to evict a pod a
// PodDisruptionBudget protects (kubectl drain's).
const maxEvictRetryDelay = 5 * time.Second

// DrainOptions configure Drain. Their names follow kubectl drain's flags.
type DrainOptions struct {
	// Timeout bounds the whole drain, cordon included; zero means
	// DefaultDrainTimeout.
	Timeout time.Duration
	// IgnoreDaemonSets leaves DaemonSet-managed pods in place; without it,
	// such a pod refuses the drain.
	IgnoreDaemonSets bool
	// DeleteEmptyDirData evicts pods with emptyDir volumes, whose data is
	// lost; without it, such a pod refuses the drain.
	DeleteEmptyDirData bool
	// PodSelector, a label selector, limits the pods evicted.
	PodSelector string
	// GracePeriodSeconds overrides each pod's terminationGracePeriodSeconds;
	// nil keeps the pod's own, 0 deletes at once.
	GracePeriodSeconds *int64
	// Force evicts pods that no controller manages (a bare pod is not
	// recreated anywhere) and pods of DaemonSets that no longer exist;
	// without it, such a pod refuses the drain.
	Force bool
	// Out receives progress lines. Nil discards them.
	Out io.Writer
	// SkipPreflight does not predict the drain before the cordon.
	SkipPreflight bool
	// Dynamic reads the operators' kinds (KubeVirt, Longhorn) for the
	// prediction; nil leaves them unread (the prediction says so).
	Dynamic dynamic.Interface
}

// Drain predicts the drain (package drainpredict) and refuses
// (outcome.ErrRefused) before the cordon when it would not finish, the
// node left schedulable, unless opts.SkipPreflight. It then cordons the
// node (as Cordon does, so Uncordon undoes it later), evicts its pods
// through the eviction API, which respects PodDisruptionBudgets, and
// waits until they are gone. It refuses before evicting anything when a
// pod needs a flag it was not given; the node stays cordoned. When the
// timeout passes first, the error (outcome.ErrTimeout) names the pods
// still there.
func Drain(ctx context.Context, kube kubernetes.Interface, node string, opts DrainOptions) error {
	if _, err := labels.Parse(opts.PodSelector); err != nil {
		return outcome.BadInput(wrap("draining", node, fmt.Errorf("pod selector %q: %w", opts.PodSelector, err)))
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	out := &syncWriter{w: orDiscard(opts.Out)}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if opts.SkipPreflight {
		fmt.Fprintf(out, "node/%s: drain preflight skipped (--skip-preflight): the drain is not predicted\n", node)
	} else if err := preflight(dctx, kube, node, opts, out); err != nil {
		return timedOut(dctx, err)
	}

	if _, err := Cordon(dctx, kube, node, Options{Out: out}); err != nil {
		return timedOut(dctx, err)
	}
	h := helper(dctx, kube, opts, timeout, out)
	list, errs := h.GetPodsForDeletion(node)
	if errs != nil {
		err := wrap("draining", node, utilerrors.NewAggregate(errs))
		if list != nil { // pods the flags do not allow to evict
			return outcome.Refused(err)
		}
		return timedOut(dctx, err)
	}
	if w := list.Warnings(); w != "" {
		fmt.Fprintf(out, "node/%s: %s\n", node, w)
	}
	pods := list.Pods()
	if err := h.DeleteOrEvictPods(pods); err != nil {
		if deadlineHit(dctx, err) {
			return outcome.Timeout(fmt.Errorf("draining node %q: timed out after %s with %s",
				node, timeout, remaining(ctx, kube, node, pods)))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("draining node %q: %w (%v)", node, ctx.Err(), err)
		}
		return wrap("draining", node, err)
	}
	fmt.Fprintf(out, "node/%s drained\n", node)
	return nil
}

// helper is the kubectl drain library configured from opts.
func helper(ctx context.Context, kube kubernetes.Interface, opts DrainOptions, timeout time.Duration, out io.Writer) *drain.Helper {
	grace := -1 // the pod's own
	if opts.GracePeriodSeconds != nil {
		grace = int(*opts.GracePeriodSeconds)
	}
	return &drain.Helper{
		Ctx: ctx, Client: kube,
		Force: opts.Force, IgnoreAllDaemonSets: opts.IgnoreDaemonSets, DeleteEmptyDirData: opts.DeleteEmptyDirData,
		PodSelector: opts.PodSelector, GracePeriodSeconds: grace, Timeout: timeout,
		// a short timeout is honoured closely: the library sleeps between tries
		EvictErrorRetryDelay: min(maxEvictRetryDelay, timeout/10),
		Out:                  out, ErrOut: out,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, _ bool, err error) {
			if err != nil {
				fmt.Fprintf(out, "pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
				return
			}
			fmt.Fprintf(out, "pod %s/%s evicted\n", pod.Namespace, pod.Name)
		},
	}
}

// deadlineHit reports whether err ended the drain because ctx ran out of
// time: ctx expired, or client-go's rate limiter refused to wait past its
// deadline ("rate: Wait(n=1) would exceed context deadline", an untyped
// error from golang.org/x/time/rate, returned just before ctx expires).
func deadlineHit(ctx context.Context, err error) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline")
}

// timedOut marks err as a timeout when ctx ran out of time.
func timedOut(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcome.Timeout(err)
	}
	return err
}

// syncWriter serializes the writes of the library's goroutines and ours.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// preflight predicts the drain opts describes: an error (a refusal naming
// every blocker) when it would not finish.
func preflight(ctx context.Context, kube kubernetes.Interface, node string, opts DrainOptions, out io.Writer) error {
	p, err := drainpredict.Predict(ctx, drainpredict.Clients{Kube: kube, Dynamic: opts.Dynamic}, drainpredict.Options{Node: node,
		Drain: drainpredict.Drain{IgnoreDaemonSets: opts.IgnoreDaemonSets, DeleteEmptyDirData: opts.DeleteEmptyDirData,
			Force: opts.Force, PodSelector: opts.PodSelector, Timeout: opts.Timeout}})
	if errors.Is(err, drainpredict.ErrNodeNotFound) {
		return nil // the cordon refuses it, as node cordon does
	}
	if err != nil {
		return wrap("predicting the drain of", node, err)
	}
	if !p.Finishes() {
		if werr := p.WriteText(out); werr != nil {
			return werr
		}
		return p.Err()
	}
	fmt.Fprintf(out, "node/%s: drain preflight: the drain would finish (%d pods to evict, %d warnings)\n", node, p.Evicted, len(p.Warnings))
	for _, w := range p.Warnings {
		fmt.Fprintf(out, "node/%s: warning: %s\n", node, w)
	}
	return nil
}
