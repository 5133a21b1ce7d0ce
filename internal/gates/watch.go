package gates

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Watch starts watching the gates' objects: an informer per kind,
// namespace and selector (one list, then one watch), and, for gates on
// the release's objects, the release's revisions, whose newest says which
// objects those are. An informer of a kind not served yet, or of a
// namespace a new revision brings, starts when first needed. It returns
// once the informers it could start have listed; everything ends with
// ctx.
func (p *Port) Watch(ctx context.Context, o *upgrade.Observed) (upgrade.GateWatch, error) {
	v := &view{p: p, ctx: ctx, signal: cluster.NewSignal(), informers: map[informerKey]cache.SharedIndexInformer{}}
	v.rel, v.relErr = p.release(ctx, o)
	if v.relErr != nil {
		return v, nil
	}
	for _, g := range p.Gates {
		if !g.Rendered() || v.revs != nil {
			continue
		}
		revs, err := p.Releases.WatchRevisions(ctx, v.rel.Namespace, v.rel.Name, v.rel.Driver, v.signal.Notify)
		if err != nil {
			return nil, err
		}
		v.revs = revs
	}
	var started []cache.InformerSynced
	for _, g := range p.Gates {
		if g.Each != nil {
			if esc, ns, err := p.each(g, v.rel); err == nil {
				inf, err := v.informer(esc.gvr, ns, g.Each.Selector)
				if err != nil {
					return nil, err
				}
				started = append(started, inf.HasSynced)
			}
		}
		sc, err := p.resolve(g)
		if err != nil || g.Rendered() {
			continue
		}
		inf, err := v.informer(sc.gvr, namespaceOf(g, sc, v.rel), g.Selector)
		if err != nil {
			return nil, err
		}
		started = append(started, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), started...) {
		return nil, fmt.Errorf("listing the objects of the health gates: %w", ctx.Err())
	}
	return v, nil
}

// view is the gates' live view.
type view struct {
	p      *Port
	ctx    context.Context
	rel    Release
	relErr error
	signal cluster.Signal
	revs   *helmrelease.Watcher // nil without a gate on the release's objects

	mu        sync.Mutex
	informers map[informerKey]cache.SharedIndexInformer
}

type informerKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	selector  string
}

func (v *view) Changed() <-chan struct{} { return v.signal }

// Seen is each gate's objects as the informers hold them now.
func (v *view) Seen(_ *upgrade.Observed, want upgrade.Want) []health.Seen {
	out := make([]health.Seen, len(v.p.Gates))
	for i, g := range v.p.Gates {
		out[i] = v.seen(g, want)
	}
	return out
}

func (v *view) seen(g health.Gate, want upgrade.Want) health.Seen {
	if v.relErr != nil {
		return health.Seen{Waiting: v.relErr.Error()}
	}
	s := v.seenObjects(g, want)
	if g.Each == nil || s.Waiting != "" {
		return s
	}
	esc, ns, err := v.p.each(g, v.rel)
	switch {
	case meta.IsNoMatchError(err):
		return health.Seen{Waiting: fmt.Sprintf("the cluster does not serve %s %s yet", g.Each.Kind, g.Each.APIVersion)}
	case err != nil:
		return health.Seen{Waiting: err.Error()}
	}
	groups, waiting := v.objects(esc.gvr, ns, g.Each.Selector)
	if waiting != "" {
		return health.Seen{Waiting: waiting}
	}
	s.Groups = groups
	return s
}

// seenObjects is what the informers hold of g's own objects.
func (v *view) seenObjects(g health.Gate, want upgrade.Want) health.Seen {
	sc, err := v.p.resolve(g)
	switch {
	case meta.IsNoMatchError(err):
		return health.Seen{Waiting: notServed(g)}
	case err != nil:
		return health.Seen{Waiting: err.Error()}
	}
	if !g.Rendered() {
		objs, waiting := v.objects(sc.gvr, namespaceOf(g, sc, v.rel), g.Selector)
		return health.Seen{Objects: objs, Waiting: waiting}
	}
	wanted, waiting, err := revisionObjects(g, v.revs.Newest(), v.rel, want.Version, sc.namespaced)
	if err != nil {
		return health.Seen{Waiting: err.Error()}
	}
	if waiting != "" {
		return health.Seen{Waiting: waiting}
	}
	var live []map[string]any
	for _, ns := range namespaces(wanted) {
		objs, waiting := v.objects(sc.gvr, ns, nil)
		if waiting != "" {
			return health.Seen{Waiting: waiting}
		}
		live = append(live, objs...)
	}
	return match(g.Kind, wanted, live)
}

// objects are the objects the informer of gvr, ns and sel holds, or why
// it holds none yet.
func (v *view) objects(gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]map[string]any, string) {
	inf, err := v.informer(gvr, ns, sel)
	if err != nil {
		return nil, err.Error()
	}
	if !inf.HasSynced() {
		return nil, fmt.Sprintf("listing %s in %s", gvr.Resource, where(ns))
	}
	items := inf.GetStore().List()
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if u, ok := it.(*unstructured.Unstructured); ok {
			out = append(out, u.Object)
		}
	}
	return out, ""
}

// informer is the running informer of gvr in ns with sel, started on
// first use after a check that this process may list and watch there.
func (v *view) informer(gvr schema.GroupVersionResource, ns string, sel labels.Selector) (cache.SharedIndexInformer, error) {
	key := informerKey{gvr: gvr, namespace: ns}
	if sel != nil {
		key.selector = sel.String()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if inf, ok := v.informers[key]; ok {
		return inf, nil
	}
	ok, err := v.p.Access.May(v.ctx, gvr, ns, "list", "watch")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("this process may not list and watch %s in %s: %s", gvr.Resource, where(ns), listRule(gvr, ns))
	}
	ri := v.p.Dynamic.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = key.selector
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = key.selector
			return ri.Watch(ctx, opts)
		}}
	inf := cluster.Informer(v.ctx, v.p.Log, gvr.Resource, lw, &unstructured.Unstructured{})
	if _, err := inf.AddEventHandler(cluster.OnEvent(v.signal.Notify)); err != nil {
		return nil, err
	}
	go inf.Run(v.ctx.Done())
	v.informers[key] = inf
	return inf, nil
}

func where(ns string) string {
	if ns == "" {
		return "the cluster"
	}
	return "namespace " + ns
}
