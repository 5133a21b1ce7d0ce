package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NoWatchList tells client-go's reflector not to try a watch-list: every
// informer makes one list, then one watch. client-go would first try a
// streaming watch-list, which the API servers of today's Rancher clusters
// (Kubernetes 1.33 and older, as the tests' 1.33) answer without the
// initial events, so that every informer made a request for nothing before
// it fell back to list and watch.
type NoWatchList struct{}

func (NoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// WatchErrors is what the informers do with a watch that ended with an
// error, in place of client-go's default, which prints it through klog as
// text (in the middle of JSON logs). A watch ended because ctx ended — the
// Observer was stopped — is no error and says nothing; one that expired or
// was cut is re-listed quietly (debug); any other (the API server is down)
// is a warning in the run's log. The informer re-lists in every case.
func WatchErrors(ctx context.Context, log *slog.Logger, resource string) cache.WatchErrorHandlerWithContext {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(hctx context.Context, _ *cache.Reflector, err error) {
		switch {
		case ctx.Err() != nil, hctx.Err() != nil, errors.Is(err, io.EOF):
		case apierrors.IsResourceExpired(err), apierrors.IsGone(err), errors.Is(err, io.ErrUnexpectedEOF):
			log.Debug("watch closed; re-listing", "resource", resource, "err", err)
		default:
			log.Warn("watch broken; re-listing", "resource", resource, "err", err)
		}
	}
}

// Informer is the one way chart-upgrader builds an informer: of lw, for
// objects like obj, making one list, then one watch (NoWatchList), and
// telling log of a broken watch, naming resource (WatchErrors).
func Informer(ctx context.Context, log *slog.Logger, resource string, lw *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, NoWatchList{}),
		obj, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(WatchErrors(ctx, log, resource)) // fails only once started
	return inf
}

// Signal tells a waiter that something it watches changed. Notify never
// blocks and keeps at most one notification pending, so a waiter that
// judges again on each receive always judges after the last change,
// however many came while it was judging.
type Signal chan struct{}

// NewSignal is a Signal with nothing pending.
func NewSignal() Signal { return make(Signal, 1) }

// Notify records a change.
func (s Signal) Notify() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// OnEvent is an informer event handler that calls notify after every
// add, update and delete.
func OnEvent(notify func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
}

// NamedListWatch lists and watches the one object name, with list and
// watch (a typed or dynamic client's List and Watch).
func NamedListWatch(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return watchFn(ctx, opts)
		}}
}
