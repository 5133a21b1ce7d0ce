package managedchart

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Observer keeps a live view of a ManagedChart and its Bundle: one list,
// then one watch each (a broken watch lists again by itself, so an API
// server restart is survived).
//
// Readiness is judged from the Bundle's summary (JudgeBySummary), so no
// BundleDeployment is read: the cost of a wait does not grow with the
// number of clusters, only with how often Fleet rewrites the Bundle's
// status. The ManagedChart and the Bundle are watched by informers,
// without what the wait never reads (managedChartCuts, bundleCuts: never
// decoded), parsed once per resourceVersion, their values hashed once per
// spec.
type Observer struct {
	mc, bundle      cache.SharedIndexInformer
	changed         cluster.Signal
	namespace, name string

	mu sync.Mutex
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
	o := &Observer{changed: cluster.NewSignal(), namespace: namespace, name: name}
	var synced []cache.InformerSynced
	signal := cluster.OnEvent(o.changed.Notify)
	newInformer := func(gvr schema.GroupVersionResource, object string, cuts [][]string) cache.SharedIndexInformer {
		inf := cluster.Informer(ctx, c.Log, gvr.Resource, c.namedObject(gvr, namespace, object, cuts), &unstructured.Unstructured{})
		reg, _ := inf.AddEventHandler(signal)
		// the handlers, too, must have seen the first list
		synced = append(synced, inf.HasSynced, reg.HasSynced)
		go inf.Run(ctx.Done())
		return inf
	}
	o.mc = newInformer(ManagedChartGVR, name, managedChartCuts)
	o.bundle = newInformer(BundleGVR, BundleName(name), bundleCuts)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("watching managedchart %s/%s: %w", namespace, name, ctx.Err())
	}
	return o, nil
}

// Changed receives a value after any of the watched objects changed.
func (o *Observer) Changed() <-chan struct{} { return o.changed }

// Readiness judges the current view for want (JudgeBySummary).
func (o *Observer) Readiness(want upgrade.Want) upgrade.Readiness {
	mc, b := o.parsed()
	return JudgeBySummary(want, mc, b)
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

// Snapshot returns the ManagedChart and the Bundle as last seen, copies
// of their own.
func (o *Observer) Snapshot() (*ManagedChart, *Bundle) {
	var b *Bundle
	if obj, ok, _ := o.bundle.GetStore().GetByKey(o.namespace + "/" + BundleName(o.name)); ok {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			b = parseBundleHashed(u)
		}
	}
	return o.Current(), b
}
