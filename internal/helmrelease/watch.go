package helmrelease

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
)

// Watcher keeps a live view of one release: its storage objects (Secrets
// or ConfigMaps labelled owner=helm,name=NAME), its newest revision
// decoded once per change, and every object of that revision's manifest
// (watched again when a new revision appears). Nothing is polled; a
// broken watch lists again by itself.
type Watcher struct {
	c               *Client
	ctx             context.Context
	namespace, name string
	signal          func()
	storage         cache.SharedIndexInformer
	storageOnly     bool // the revisions only, not their objects

	mu        sync.Mutex
	newest    *release.Release
	newestRV  string
	resRev    int
	resStop   context.CancelFunc
	resources []watchedObject
}

// watchedObject is one object of the release's manifest and its informer
// (nil when the API server does not know its kind).
type watchedObject struct {
	m   manifestObject
	inf cache.SharedIndexInformer
}

// Watch starts watching release name of namespace, stored by driverName;
// signal is called after anything watched changed. It returns once the
// storage objects are listed; it ends with ctx.
func (c *Client) Watch(ctx context.Context, namespace, name, driverName string, signal func()) (*Watcher, error) {
	return c.watch(ctx, namespace, name, driverName, signal, false)
}

// WatchRevisions watches the release's storage only: Newest, never
// Resources.
func (c *Client) WatchRevisions(ctx context.Context, namespace, name, driverName string, signal func()) (*Watcher, error) {
	return c.watch(ctx, namespace, name, driverName, signal, true)
}

func (c *Client) watch(ctx context.Context, namespace, name, driverName string, signal func(), storageOnly bool) (*Watcher, error) {
	w := &Watcher{c: c, ctx: ctx, namespace: namespace, name: name, signal: signal, storageOnly: storageOnly}
	sel := func(opts *metav1.ListOptions) {
		opts.LabelSelector = labels.Set{"owner": "helm", "name": name}.String()
	}
	core := c.Kube.CoreV1().RESTClient()
	if IsConfigMapDriver(driverName) {
		w.storage = cluster.Informer(ctx, c.Log, "configmaps", cache.NewFilteredListWatchFromClient(core, "configmaps", namespace, sel), &corev1.ConfigMap{})
	} else {
		w.storage = cluster.Informer(ctx, c.Log, "secrets", cache.NewFilteredListWatchFromClient(core, "secrets", namespace, sel), &corev1.Secret{})
	}
	reg, err := w.storage.AddEventHandler(cluster.OnEvent(w.storageChanged))
	if err != nil {
		return nil, err
	}
	go w.storage.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.storage.HasSynced, reg.HasSynced) {
		return nil, fmt.Errorf("watching helm release %s/%s: %w", namespace, name, ctx.Err())
	}
	return w, nil
}

// storageChanged decodes the newest revision when its storage object
// changed, and watches the objects of a new revision.
func (w *Watcher) storageChanged() {
	defer w.signal()
	var newestObj metav1.Object
	var data string
	best := -1
	for _, it := range w.storage.GetStore().List() {
		m, err := meta.Accessor(it)
		if err != nil {
			continue
		}
		v, err := strconv.Atoi(m.GetLabels()["version"])
		if err != nil || v <= best {
			continue
		}
		best, newestObj = v, m
		switch x := it.(type) {
		case *corev1.Secret:
			data = string(x.Data["release"])
		case *corev1.ConfigMap:
			data = x.Data["release"]
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if newestObj == nil {
		w.newest, w.newestRV = nil, ""
		return
	}
	if newestObj.GetResourceVersion() == w.newestRV {
		return
	}
	rel, err := Decode(data)
	if err != nil {
		if w.c.Log != nil {
			w.c.Log.Warn("cannot decode a helm release record", "object", newestObj.GetName(), "err", err.Error())
		}
		return
	}
	rel.Labels = newestObj.GetLabels()
	w.newest, w.newestRV = rel, newestObj.GetResourceVersion()
	if rel.Version != w.resRev && !w.storageOnly {
		w.watchResources(rel)
	}
}

// watchResources starts one informer per object of rel's manifest and
// stops those of the revision before. Called with w.mu held.
func (w *Watcher) watchResources(rel *release.Release) {
	if w.resStop != nil {
		w.resStop()
	}
	w.resRev, w.resources = rel.Version, nil
	objs, err := manifestObjects(rel)
	if err != nil {
		if w.c.Log != nil {
			w.c.Log.Warn("cannot read the release manifest", "err", err.Error())
		}
		return
	}
	ctx, stop := context.WithCancel(w.ctx)
	w.resStop = stop
	handler := cluster.OnEvent(w.signal)
	var synced []cache.InformerSynced
	for _, m := range objs {
		gvk := m.u.GroupVersionKind()
		mapping, err := w.c.Mapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			w.resources = append(w.resources, watchedObject{m: m})
			continue
		}
		ns := m.u.GetNamespace()
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			ns = ""
		} else if ns == "" {
			ns = rel.Namespace
		}
		ri := w.c.Dynamic.Resource(mapping.Resource).Namespace(ns)
		inf := cluster.Informer(ctx, w.c.Log, mapping.Resource.Resource, cluster.NamedListWatch(
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) },
			ri.Watch, m.u.GetName()), &unstructured.Unstructured{})
		_, _ = inf.AddEventHandler(handler)
		go inf.Run(ctx.Done())
		w.resources = append(w.resources, watchedObject{m: m, inf: inf})
		synced = append(synced, inf.HasSynced)
	}
	// an object that does not exist lists empty and sends no event: the
	// end of the first lists is a change of the judgement too
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			w.signal()
		}
	}()
}

// Newest is the newest revision as last seen; nil when there is none.
func (w *Watcher) Newest() *release.Release {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newest
}

// Resources judges the objects of the newest revision as last seen; nil
// until every one of them has been listed.
func (w *Watcher) Resources() *Resources {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.newest == nil || w.resRev != w.newest.Version {
		return nil
	}
	res := &Resources{Revision: w.resRev, Total: len(w.resources)}
	for _, o := range w.resources {
		if o.inf == nil {
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: kind unknown to the API server", o.m))
			continue
		}
		if !o.inf.HasSynced() {
			return nil
		}
		items := o.inf.GetStore().List()
		if len(items) == 0 {
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: not found", o.m))
			continue
		}
		judgeObject(res, items[0].(*unstructured.Unstructured))
	}
	return res
}
