package managedchart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Observer keeps a live view of a ManagedChart, its Bundle and its
// BundleDeployments through informers (one list, then a watch each; a
// broken watch re-lists by itself, so an API server restart is survived).
//
// Its requests do not grow with the number of BundleDeployments beyond
// that list and watch, and neither does the cost of an event: each
// BundleDeployment event updates its verdict and the running counts
// (tally), and readiness is judged from the counts. The ManagedChart and
// the Bundle are parsed once per resourceVersion, their values hashed once
// per spec. The informer of BundleDeployments keeps only what
// readiness reads of each (bdObject), decoded straight from the API
// server's JSON.
type Observer struct {
	mc, bundle, bds cache.SharedIndexInformer
	changed         chan struct{}
	namespace, name string

	mu    sync.Mutex
	tally *tally
	// the ManagedChart and the Bundle as last parsed, by resourceVersion
	mcSeen     seen[*ManagedChart]
	bundleSeen seen[*Bundle]
}

// seen is an object as parsed at a resourceVersion.
type seen[T any] struct {
	resourceVersion string
	spec            specKey
	parsed          T
}

// specKey names a spec: the API server moves an object's generation with
// every change of its spec (not with one of its status or metadata), so
// the values in the spec, and their hash, are the same while the object
// and its generation are.
type specKey struct {
	uid        types.UID
	generation int64
}

func specOf(u *unstructured.Unstructured) specKey {
	return specKey{uid: u.GetUID(), generation: u.GetGeneration()}
}

// sameSpec reports whether u has the spec s was parsed from.
func (s seen[T]) sameSpec(u *unstructured.Unstructured) bool {
	k := specOf(u)
	return k.uid != "" && k.generation != 0 && k == s.spec
}

// Observe starts the informers and waits until they have synced.
func (c *Client) Observe(ctx context.Context, namespace, name string) (*Observer, error) {
	o := &Observer{changed: make(chan struct{}, 1), namespace: namespace, name: name, tally: newTally()}
	byName := func(n string) func(*metav1.ListOptions) {
		return func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", n).String()
		}
	}
	var synced []cache.InformerSynced
	newInformer := func(resource string, lw *cache.ListWatch, example runtime.Object,
		transform cache.TransformFunc, h cache.ResourceEventHandlerFuncs) cache.SharedIndexInformer {
		inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}),
			example, cache.SharedIndexInformerOptions{})
		if transform != nil {
			_ = inf.SetTransform(transform) // fails only once started
		}
		_ = inf.SetWatchErrorHandlerWithContext(watchErrors(ctx, c.Log, resource)) // fails only once started
		reg, _ := inf.AddEventHandler(h)
		// the handlers, too, must have seen the first list
		synced = append(synced, inf.HasSynced, reg.HasSynced)
		return inf
	}
	signal := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { o.signal() },
		UpdateFunc: func(any, any) { o.signal() },
		DeleteFunc: func(any) { o.signal() },
	}
	o.mc = newInformer(ManagedChartGVR.Resource, c.listThenWatch(ManagedChartGVR, namespace, byName(name)),
		&unstructured.Unstructured{}, slimManagedChart, signal)
	o.bundle = newInformer(BundleGVR.Resource, c.listThenWatch(BundleGVR, namespace, byName(BundleName(name))),
		&unstructured.Unstructured{}, slimBundle, signal)
	o.bds = newInformer(BundleDeploymentGVR.Resource, c.bundleDeployments(BundleSelector(namespace, name)), &bdObject{}, nil,
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.putBD(obj); o.signal() },
			UpdateFunc: func(_, obj any) { o.putBD(obj); o.signal() },
			DeleteFunc: func(obj any) { o.dropBD(obj); o.signal() },
		})
	for _, inf := range []cache.SharedIndexInformer{o.mc, o.bundle, o.bds} {
		go inf.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("watching managedchart %s/%s: %w", namespace, name, ctx.Err())
	}
	return o, nil
}

// bundleDeployments lists and watches the BundleDeployments selector
// selects, in every namespace, decoded into bdObjects.
func (c *Client) bundleDeployments(selector string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return c.listBundleDeployments(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return c.watchBundleDeployments(ctx, opts)
		},
	}
}

// listThenWatch lists and watches gvr in ns (all namespaces when empty)
// with tweak applied to the options.
func (c *Client) listThenWatch(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) *cache.ListWatch {
	res := c.Dynamic.Resource(gvr).Namespace(ns)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return res.Watch(ctx, opts)
		},
	}
}

// noWatchList tells client-go's reflector not to try a watch-list: every
// informer makes one list, then one watch. client-go would first try a
// streaming watch-list, which the API servers of today's Rancher clusters
// (Kubernetes 1.33 and older, as the tests' 1.33) answer without the
// initial events, so that every informer made a request for nothing before
// it fell back to list and watch.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// watchErrors is what the informers do with a watch that ended with an
// error, in place of client-go's default, which prints it through klog as
// text (in the middle of JSON logs). A watch ended because ctx ended — the
// Observer was stopped — is no error and says nothing; one that expired or
// was cut is re-listed quietly (debug); any other (the API server is down)
// is a warning in the run's log. The informer re-lists in every case.
func watchErrors(ctx context.Context, log *slog.Logger, resource string) cache.WatchErrorHandlerWithContext {
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

// putBD records the verdict of a BundleDeployment of an informer event.
func (o *Observer) putBD(obj any) {
	bd, ok := obj.(*bdObject)
	if !ok {
		return
	}
	o.mu.Lock()
	o.tally.put(bd.Namespace+"/"+bd.Name, verdictOf(bd.BD))
	o.mu.Unlock()
}

// dropBD forgets a deleted BundleDeployment (also one whose deletion the
// watch missed: the informer then hands over a tombstone).
func (o *Observer) dropBD(obj any) {
	var k string
	switch x := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		k = x.Key
	case *bdObject:
		k = x.Namespace + "/" + x.Name
	default:
		return
	}
	o.mu.Lock()
	o.tally.drop(k)
	o.mu.Unlock()
}

// slimManagedChart drops the managedFields of a ManagedChart.
func slimManagedChart(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// slimBundle drops what readiness never reads of a Bundle: the chart's
// files (spec.resources) and the managedFields.
func slimBundle(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		delete(spec, "resources")
	}
	u.SetManagedFields(nil)
	return u, nil
}

func (o *Observer) signal() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value after any of the watched objects changed.
func (o *Observer) Changed() <-chan struct{} { return o.changed }

// Readiness judges the current view for want, as Evaluate would judge
// the objects as last seen, from the running counts of the
// BundleDeployments: its cost does not grow with their number.
func (o *Observer) Readiness(want upgrade.Want) upgrade.Readiness {
	mc, b := o.parsed()
	o.mu.Lock()
	defer o.mu.Unlock()
	return judge(want, mc, b, o.tally.counts())
}

// parsed returns the ManagedChart and the Bundle as last seen, parsed once
// per resourceVersion and their values hashed once per spec; nil when
// absent. They are shared: read them, never change them.
func (o *Observer) parsed() (*ManagedChart, *Bundle) {
	mcObj, _, _ := o.mc.GetStore().GetByKey(o.namespace + "/" + o.name)
	bObj, _, _ := o.bundle.GetStore().GetByKey(o.namespace + "/" + BundleName(o.name))
	o.mu.Lock()
	defer o.mu.Unlock()
	var mc *ManagedChart
	if u, ok := mcObj.(*unstructured.Unstructured); ok {
		if rv := u.GetResourceVersion(); rv == "" || rv != o.mcSeen.resourceVersion {
			parsed, _ := ParseManagedChart(u)
			if parsed != nil {
				if prev := o.mcSeen.parsed; prev != nil && o.mcSeen.sameSpec(u) {
					parsed.valuesHash = prev.valuesHash // a status write: the values did not change
				} else {
					parsed.valuesHash = parsed.ValuesHash()
				}
			}
			o.mcSeen = seen[*ManagedChart]{resourceVersion: rv, spec: specOf(u), parsed: parsed}
		}
		mc = o.mcSeen.parsed
	}
	var b *Bundle
	if u, ok := bObj.(*unstructured.Unstructured); ok {
		if rv := u.GetResourceVersion(); rv == "" || rv != o.bundleSeen.resourceVersion {
			parsed := ParseBundle(u)
			if prev := o.bundleSeen.parsed; prev != nil && o.bundleSeen.sameSpec(u) {
				parsed.valuesHash = prev.valuesHash
			} else if parsed.HasValues {
				parsed.valuesHash = parsed.ValuesHash()
			}
			o.bundleSeen = seen[*Bundle]{resourceVersion: rv, spec: specOf(u), parsed: parsed}
		}
		b = o.bundleSeen.parsed
	}
	return mc, b
}

// parseManagedChartHashed is ParseManagedChart with the values hash worked
// out; nil when it cannot be read.
func parseManagedChartHashed(u *unstructured.Unstructured) *ManagedChart {
	mc, err := ParseManagedChart(u)
	if err != nil {
		return nil
	}
	mc.valuesHash = mc.ValuesHash()
	return mc
}

// parseBundleHashed is ParseBundle with the values hash worked out.
func parseBundleHashed(u *unstructured.Unstructured) *Bundle {
	b := ParseBundle(u)
	if b.HasValues {
		b.valuesHash = b.ValuesHash()
	}
	return b
}

// Current is the ManagedChart as last seen, a copy of its own; nil when
// absent.
func (o *Observer) Current() *ManagedChart {
	if obj, ok, _ := o.mc.GetStore().GetByKey(o.namespace + "/" + o.name); ok {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return parseManagedChartHashed(u)
		}
	}
	return nil
}

// Snapshot returns the objects as last seen, copies of their own. It goes
// over every BundleDeployment: it is for a look now and then (tests), not
// for a judgement on every event (Readiness).
func (o *Observer) Snapshot() (*ManagedChart, *Bundle, []BundleDeployment) {
	mc := o.Current()
	var b *Bundle
	if obj, ok, _ := o.bundle.GetStore().GetByKey(o.namespace + "/" + BundleName(o.name)); ok {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			b = parseBundleHashed(u)
		}
	}
	var bds []BundleDeployment
	for _, obj := range o.bds.GetStore().List() {
		if bd, ok := obj.(*bdObject); ok {
			bds = append(bds, bd.DeepCopyObject().(*bdObject).BD)
		}
	}
	return mc, b, bds
}
