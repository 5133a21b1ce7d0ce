package managedchart

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
)

// bdSignalEvery bounds how often BundleDeployment events wake the wait
// while some BundleDeployment is still pending: such an event cannot make
// the target ready, so its judgement (and the progress line it prints) may
// wait that long. The event that leaves none pending wakes it at once.
const bdSignalEvery = time.Second

// runBDs keeps the tally of the BundleDeployments selector selects until
// ctx ends: one list, then one watch, each event decoded and counted by
// this goroutine as it arrives. A watch the API server closes is resumed
// where it ended; after one it refuses as too old the list is made again
// at once, after any other failure after a pause (1s, doubling up to 30s).
// synced is called after every list.
func (o *Observer) runBDs(ctx context.Context, c *Client, selector string, synced func()) {
	report := cluster.WatchErrors(ctx, c.Log, BundleDeploymentGVR.Resource)
	newPause := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	}
	pause := newPause()
	rv := ""
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			if rv, err = o.listBDs(ctx, c, selector); err == nil {
				synced()
				pause = newPause()
			}
		}
		if err == nil {
			if rv, err = o.watchBDs(ctx, c, selector, rv); err == nil {
				continue // closed by the API server: resumed from rv
			}
		}
		report(ctx, nil, err)
		rv = ""
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause.Step()):
		}
	}
}

// listBDs lists the BundleDeployments and makes their verdicts the tally;
// it returns the list's resourceVersion.
func (o *Observer) listBDs(ctx context.Context, c *Client, selector string) (string, error) {
	fresh := newTally()
	rv, err := c.listBundleDeployments(ctx, metav1.ListOptions{LabelSelector: selector}, func(it bdItem) {
		fresh.put(it.key(), verdictOf(it.BD))
	})
	if err != nil {
		return "", err
	}
	o.mu.Lock()
	o.tally = fresh
	o.mu.Unlock()
	o.changed.Notify()
	return rv, nil
}

// watchBDs watches the BundleDeployments from resourceVersion rv, counting
// each event, until the watch ends; it returns the last resourceVersion
// seen, and nil when the API server closed the watch (at its timeout).
func (o *Observer) watchBDs(ctx context.Context, c *Client, selector, rv string) (string, error) {
	timeout := int64(300 + rand.IntN(300)) // as client-go's reflector: 5 to 10 minutes
	body, err := c.bdRequest(metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, Watch: true,
		AllowWatchBookmarks: true, TimeoutSeconds: &timeout}).Stream(ctx)
	if err != nil {
		return rv, err
	}
	defer body.Close()
	d := &bdWatchDecoder{s: newJSONStream(body)}
	for {
		ev, err := d.next()
		if err == io.EOF {
			return rv, nil
		}
		if err != nil {
			return rv, err
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			o.putBD(ev.Item)
		case watch.Deleted:
			o.dropBD(ev.Item.key())
		case watch.Error:
			return rv, apierrors.FromObject(ev.Err)
		}
		if ev.Item.ResourceVersion != "" {
			rv = ev.Item.ResourceVersion
		}
	}
}

// putBD counts the BundleDeployment as an event shows it.
func (o *Observer) putBD(it bdItem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tally.put(it.key(), verdictOf(it.BD))
	o.bdChanged()
}

// dropBD forgets a deleted BundleDeployment.
func (o *Observer) dropBD(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tally.drop(key)
	o.bdChanged()
}

// bdChanged wakes the wait after a BundleDeployment event: at once when
// none is pending any more, else at most once every bdSignalEvery. Call it
// with o.mu held.
func (o *Observer) bdChanged() {
	if o.tally.notApplied+o.tally.notReady == 0 {
		o.changed.Notify()
		return
	}
	if o.signalLater {
		return
	}
	o.signalLater = true
	every := o.signalEvery
	if every == 0 {
		every = bdSignalEvery
	}
	time.AfterFunc(every, func() {
		o.mu.Lock()
		o.signalLater = false
		o.mu.Unlock()
		o.changed.Notify()
	})
}
