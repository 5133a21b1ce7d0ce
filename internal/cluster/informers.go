package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
