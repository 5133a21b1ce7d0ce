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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Observer keeps a live view of a ManagedChart, its Bundle and its
// BundleDeployments through informers (one list, then a watch each; a
// broken watch re-lists by itself, so an API server restart is survived).
//
// Its requests do not grow with the number of BundleDeployments beyond
// that list and watch. Each BundleDeployment is parsed once per event and
// kept only as the few fields readiness needs, and the values hashes are
// worked out once per resourceVersion, so a judgement on every event stays
// cheap with 1,000 clusters.
type Observer struct {
	mc, bundle, bds cache.SharedIndexInformer
	changed         chan struct{}
	namespace, name string

	mu  sync.Mutex
	bdv map[string]BundleDeployment // by namespace/name: the BundleDeployments as last seen, parsed
	// the values hashes of the ManagedChart and the Bundle, by resourceVersion
	mcHash, bundleHash versionedHash
}

// versionedHash is a values hash and the resourceVersion it was worked out for.
type versionedHash struct{ resourceVersion, hash string }

// hashFor returns the values hash of the object at resourceVersion rv,
// computing it with f only when rv is new.
func (o *Observer) hashFor(h *versionedHash, rv string, f func() string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if rv == "" || h.resourceVersion != rv {
		*h = versionedHash{resourceVersion: rv, hash: f()}
	}
	return h.hash
}

// Observe starts the informers and waits until they have synced.
func (c *Client) Observe(ctx context.Context, namespace, name string) (*Observer, error) {
	o := &Observer{changed: make(chan struct{}, 1), namespace: namespace, name: name, bdv: map[string]BundleDeployment{}}
	byName := func(n string) func(*metav1.ListOptions) {
		return func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", n).String()
		}
	}
	var synced []cache.InformerSynced
	newInformer := func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions),
		transform cache.TransformFunc, h cache.ResourceEventHandlerFuncs) cache.SharedIndexInformer {
		inf := cache.NewSharedIndexInformerWithOptions(c.listThenWatch(gvr, ns, tweak), &unstructured.Unstructured{},
			cache.SharedIndexInformerOptions{})
		if transform != nil {
			_ = inf.SetTransform(transform) // fails only once started
		}
		_ = inf.SetWatchErrorHandlerWithContext(watchErrors(ctx, c.Log, gvr.Resource)) // fails only once started
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
	o.mc = newInformer(ManagedChartGVR, namespace, byName(name), nil, signal)
	o.bundle = newInformer(BundleGVR, namespace, byName(BundleName(name)), slimBundle, signal)
	o.bds = newInformer(BundleDeploymentGVR, "", func(opts *metav1.ListOptions) {
		opts.LabelSelector = BundleSelector(namespace, name)
	}, slimBundleDeployment, cache.ResourceEventHandlerFuncs{
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

// listThenWatch lists and watches gvr in ns (all namespaces when empty)
// with tweak applied to the options: one list, then one watch. client-go
// would first try a streaming watch-list, which the API servers of today's
// Rancher clusters (Kubernetes 1.33 and older, as the tests' 1.33) answer
// without the initial events, so that every informer made a request for
// nothing before it fell back to list and watch.
func (c *Client) listThenWatch(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	res := c.Dynamic.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return res.Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
}

// noWatchList tells client-go's reflector not to try a watch-list.
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

// putBD records the parsed BundleDeployment of an informer event.
func (o *Observer) putBD(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	bd := ParseBundleDeployment(u)
	o.mu.Lock()
	o.bdv[bd.Namespace+"/"+bd.Name] = bd
	o.mu.Unlock()
}

// dropBD forgets a deleted BundleDeployment (also one whose deletion the
// watch missed: the informer then hands over a tombstone).
func (o *Observer) dropBD(obj any) {
	var k string
	switch x := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		k = x.Key
	case *unstructured.Unstructured:
		k = x.GetNamespace() + "/" + x.GetName()
	default:
		return
	}
	o.mu.Lock()
	delete(o.bdv, k)
	o.mu.Unlock()
}

// slimBundleDeployment keeps of a BundleDeployment only what
// ParseBundleDeployment reads (and the metadata the informer needs):
// Fleet's copy of the Helm values and options, the resource lists and the
// managedFields would otherwise be held once per cluster.
func slimBundleDeployment(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	meta := map[string]any{}
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "generation", "labels", "deletionTimestamp"} {
			if v, ok := m[k]; ok {
				meta[k] = v
			}
		}
	}
	slim := map[string]any{"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": meta}
	keep := func(field string, keys ...string) {
		from, ok := u.Object[field].(map[string]any)
		if !ok {
			return
		}
		to := map[string]any{}
		for _, k := range keys {
			if v, ok := from[k]; ok {
				to[k] = v
			}
		}
		slim[field] = to
	}
	keep("spec", "deploymentID", "stagedDeploymentID")
	keep("status", "appliedDeploymentID", "ready", "nonReadyStatus")
	return &unstructured.Unstructured{Object: slim}, nil
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

// Snapshot returns the objects as last seen.
func (o *Observer) Snapshot() (*ManagedChart, *Bundle, []BundleDeployment) {
	var mc *ManagedChart
	for _, obj := range o.mc.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == o.name {
			if mc, _ = ParseManagedChart(u); mc != nil {
				mc.valuesHash = o.hashFor(&o.mcHash, u.GetResourceVersion(), mc.ValuesHash)
			}
		}
	}
	var b *Bundle
	for _, obj := range o.bundle.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == BundleName(o.name) {
			b = ParseBundle(u)
			b.valuesHash = o.hashFor(&o.bundleHash, u.GetResourceVersion(), b.ValuesHash)
		}
	}
	o.mu.Lock()
	bds := make([]BundleDeployment, 0, len(o.bdv))
	for _, bd := range o.bdv {
		bds = append(bds, bd)
	}
	o.mu.Unlock()
	return mc, b, bds
}
