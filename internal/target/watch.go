package target

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Observer keeps a live view of a ManagedChart, its Bundle and its
// BundleDeployments through informers (one list, then a watch each; a
// broken watch re-lists by itself, so an API server restart is survived).
type Observer struct {
	mc, bundle, bds cache.SharedIndexInformer
	changed         chan struct{}
	namespace, name string
}

// Observe starts the informers and waits until they have synced.
func (c *Client) Observe(ctx context.Context, namespace, name string) (*Observer, error) {
	o := &Observer{changed: make(chan struct{}, 1), namespace: namespace, name: name}
	byName := func(n string) dynamicinformer.TweakListOptionsFunc {
		return func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", n).String()
		}
	}
	newInformer := func(gvr schema.GroupVersionResource, ns string, tweak dynamicinformer.TweakListOptionsFunc) cache.SharedIndexInformer {
		inf := dynamicinformer.NewFilteredDynamicInformer(c.Dynamic, gvr, ns, 0, cache.Indexers{}, tweak).Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { o.signal() },
			UpdateFunc: func(any, any) { o.signal() },
			DeleteFunc: func(any) { o.signal() },
		})
		return inf
	}
	o.mc = newInformer(ManagedChartGVR, namespace, byName(name))
	o.bundle = newInformer(BundleGVR, namespace, byName(BundleName(name)))
	o.bds = newInformer(BundleDeploymentGVR, "", func(opts *metav1.ListOptions) {
		opts.LabelSelector = BundleSelector(namespace, name)
	})
	for _, inf := range []cache.SharedIndexInformer{o.mc, o.bundle, o.bds} {
		go inf.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), o.mc.HasSynced, o.bundle.HasSynced, o.bds.HasSynced) {
		return nil, fmt.Errorf("watching managedchart %s/%s: %w", namespace, name, ctx.Err())
	}
	return o, nil
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
			mc, _ = ParseManagedChart(u)
		}
	}
	var b *Bundle
	for _, obj := range o.bundle.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == BundleName(o.name) {
			b = ParseBundle(u)
		}
	}
	var bds []BundleDeployment
	for _, obj := range o.bds.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			bds = append(bds, ParseBundleDeployment(u))
		}
	}
	return mc, b, bds
}

// WaitReady returns when Evaluate says the target is ready for want, or
// when ctx ends (then with the last judgement and ctx's error). progress is
// called with every judgement that reads differently from the one before,
// and at least every heartbeat.
func (o *Observer) WaitReady(ctx context.Context, want Want, heartbeat time.Duration, progress func(Readiness)) (Readiness, error) {
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	last := ""
	var r Readiness
	for {
		mc, b, bds := o.Snapshot()
		r = Evaluate(want, mc, b, bds)
		if r.Ready {
			return r, nil
		}
		if p := r.Progress(); p != last && progress != nil {
			progress(r)
			last = p
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-o.changed:
		case <-tick.C:
			if progress != nil {
				progress(r)
			}
		}
	}
}
