package helmchart

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"helm.sh/helm/v3/pkg/release"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Observer keeps a live view of a HelmChart and everything its readiness
// follows: one list, then one watch each, of the HelmChart, its values
// Secret, its Job and the Job's pods, the storage of its release (Secrets
// or ConfigMaps labelled owner=helm,name=NAME) and each object of the
// release's newest revision (started again when a new revision appears).
// Nothing is polled; a broken watch lists again by itself.
type Observer struct {
	c               *Client
	ctx             context.Context
	namespace, name string
	changed         chan struct{}

	hc, secret, job, pods, storage cache.SharedIndexInformer

	mu        sync.Mutex
	newest    *release.Release // decoded once per storage object
	newestRV  string
	resRev    int
	resStop   context.CancelFunc
	resources []watchedObject
}

// watchedObject is one object of the release's manifest and its informer.
type watchedObject struct {
	m   manifestObject
	inf cache.SharedIndexInformer
}

// Observe starts the informers and waits until they have synced.
func (c *Client) Observe(ctx context.Context, namespace, name string) (*Observer, error) {
	h, err := c.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	targetNS, driver := namespace, "secret"
	if h != nil {
		targetNS, driver = h.TargetNamespace, h.Driver
	}
	o := &Observer{c: c, ctx: ctx, namespace: namespace, name: name, changed: make(chan struct{}, 1)}
	signal := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { o.signal() },
		UpdateFunc: func(any, any) { o.signal() },
		DeleteFunc: func(any) { o.signal() },
	}
	var synced []cache.InformerSynced
	start := func(resource string, lw *cache.ListWatch, obj runtime.Object, h cache.ResourceEventHandler) cache.SharedIndexInformer {
		inf := newInformer(ctx, c, resource, lw, obj)
		reg, _ := inf.AddEventHandler(h)
		synced = append(synced, inf.HasSynced, reg.HasSynced)
		go inf.Run(ctx.Done())
		return inf
	}
	named := func(n string) string { return fields.OneTermEqualSelector("metadata.name", n).String() }
	dyn := c.Dynamic.Resource(HelmChartGVR).Namespace(namespace)
	o.hc = start("helmcharts", &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = named(name)
			return dyn.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = named(name)
			return dyn.Watch(ctx, opts)
		}}, &unstructured.Unstructured{}, signal)
	core := c.Kube.CoreV1()
	o.secret = start("secrets", cache.NewFilteredListWatchFromClient(core.RESTClient(), "secrets", namespace,
		func(opts *metav1.ListOptions) { opts.FieldSelector = named(ValuesSecretName(name)) }), &corev1.Secret{}, signal)
	o.job = start("jobs", cache.NewFilteredListWatchFromClient(c.Kube.BatchV1().RESTClient(), "jobs", namespace,
		func(opts *metav1.ListOptions) { opts.FieldSelector = named(JobName(name)) }), &batchv1.Job{}, signal)
	o.pods = start("pods", cache.NewFilteredListWatchFromClient(core.RESTClient(), "pods", namespace,
		func(opts *metav1.ListOptions) {
			opts.LabelSelector = labels.Set{"job-name": JobName(name)}.String()
		}), &corev1.Pod{}, signal)
	storageSel := func(opts *metav1.ListOptions) {
		opts.LabelSelector = labels.Set{"owner": "helm", "name": name}.String()
	}
	onStorage := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { o.storageChanged() },
		UpdateFunc: func(any, any) { o.storageChanged() },
		DeleteFunc: func(any) { o.storageChanged() },
	}
	if driver == "configmap" || driver == "configmaps" {
		o.storage = start("configmaps", cache.NewFilteredListWatchFromClient(core.RESTClient(), "configmaps", targetNS, storageSel),
			&corev1.ConfigMap{}, onStorage)
	} else {
		o.storage = start("secrets", cache.NewFilteredListWatchFromClient(core.RESTClient(), "secrets", targetNS, storageSel),
			&corev1.Secret{}, onStorage)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("watching helmchart %s/%s: %w", namespace, name, ctx.Err())
	}
	return o, nil
}

// newInformer is an informer that makes one list, then one watch, and
// reports broken watches to the run's log.
func newInformer(ctx context.Context, c *Client, resource string, lw *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, cluster.NoWatchList{}),
		obj, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(cluster.WatchErrors(ctx, c.Log, resource))
	return inf
}

func (o *Observer) signal() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value after any of the watched objects changed.
func (o *Observer) Changed() <-chan struct{} { return o.changed }

// storageChanged decodes the release's newest revision when its storage
// object changed, and watches the objects of a new revision.
func (o *Observer) storageChanged() {
	defer o.signal()
	var newestObj metav1.Object
	var data string
	best := -1
	for _, it := range o.storage.GetStore().List() {
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
	o.mu.Lock()
	defer o.mu.Unlock()
	if newestObj == nil {
		o.newest, o.newestRV = nil, ""
		return
	}
	if newestObj.GetResourceVersion() == o.newestRV {
		return
	}
	rel, err := decodeRelease(data)
	if err != nil {
		if o.c.Log != nil {
			o.c.Log.Warn("cannot decode a helm release record", "object", newestObj.GetName(), "err", err.Error())
		}
		return
	}
	rel.Labels = newestObj.GetLabels()
	o.newest, o.newestRV = rel, newestObj.GetResourceVersion()
	if rel.Version != o.resRev {
		o.watchResources(rel)
	}
}

// decodeRelease decodes a release record as Helm's storage drivers write
// it: base64 of (gzipped) JSON.
func decodeRelease(data string) (*release.Release, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, err
	}
	if len(b) > 3 && bytes.Equal(b[0:3], []byte{0x1f, 0x8b, 0x08}) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		if b, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	var rel release.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, err
	}
	return &rel, nil
}

// watchResources starts one informer per object of rel's manifest (and
// stops those of the revision before). Called with o.mu held.
func (o *Observer) watchResources(rel *release.Release) {
	if o.resStop != nil {
		o.resStop()
	}
	o.resRev, o.resources = rel.Version, nil
	objs, err := manifestObjects(rel)
	if err != nil {
		if o.c.Log != nil {
			o.c.Log.Warn("cannot read the release manifest", "err", err.Error())
		}
		return
	}
	ctx, stop := context.WithCancel(o.ctx)
	o.resStop = stop
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { o.signal() },
		UpdateFunc: func(any, any) { o.signal() },
		DeleteFunc: func(any) { o.signal() },
	}
	for _, m := range objs {
		gvk := m.u.GroupVersionKind()
		mapping, err := o.c.mapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			o.resources = append(o.resources, watchedObject{m: m})
			continue
		}
		ns := m.u.GetNamespace()
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace && ns == "" {
			ns = rel.Namespace
		} else if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			ns = ""
		}
		ri := o.c.Dynamic.Resource(mapping.Resource).Namespace(ns)
		sel := fields.OneTermEqualSelector("metadata.name", m.u.GetName()).String()
		inf := newInformer(ctx, o.c, mapping.Resource.Resource, &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = sel
				return ri.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = sel
				return ri.Watch(ctx, opts)
			}}, &unstructured.Unstructured{})
		_, _ = inf.AddEventHandler(handler)
		go inf.Run(ctx.Done())
		o.resources = append(o.resources, watchedObject{m: m, inf: inf})
	}
}

// Current is the HelmChart as last seen; nil when it does not exist. Its
// values are not worked out (readiness reads their hash).
func (o *Observer) Current() *upgrade.Observed {
	h := o.current()
	if h == nil {
		return nil
	}
	return h.observed(nil)
}

func (o *Observer) current() *HelmChart {
	for _, it := range o.hc.GetStore().List() {
		if u, ok := it.(*unstructured.Unstructured); ok && u.GetName() == o.name {
			if h, err := ParseHelmChart(u); err == nil {
				return h
			}
		}
	}
	return nil
}

// Readiness judges the objects as last seen for want.
func (o *Observer) Readiness(want upgrade.Want) upgrade.Readiness {
	return Judge(want, o.View())
}

// View is everything readiness follows, as last seen.
func (o *Observer) View() View {
	v := View{Chart: o.current()}
	for _, it := range o.secret.GetStore().List() {
		if s, ok := it.(*corev1.Secret); ok {
			v.Secret = secretData(s)
		}
	}
	for _, it := range o.job.GetStore().List() {
		if j, ok := it.(*batchv1.Job); ok {
			v.Job = j
		}
	}
	if v.Job != nil {
		var pods []corev1.Pod
		for _, it := range o.pods.GetStore().List() {
			if p, ok := it.(*corev1.Pod); ok {
				pods = append(pods, *p)
			}
		}
		v.PodFailures, v.PodMessage = podFailures(v.Job, pods)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	v.Release = ReleaseOf(o.newest)
	if o.newest != nil && o.resRev == o.newest.Version {
		v.Resources = o.judgeResources()
	}
	return v
}

// judgeResources judges the watched objects; nil until every informer has
// listed. Called with o.mu held.
func (o *Observer) judgeResources() *Resources {
	res := &Resources{Revision: o.resRev, Total: len(o.resources)}
	for _, w := range o.resources {
		if w.inf == nil {
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: kind unknown to the API server", w.m))
			continue
		}
		if !w.inf.HasSynced() {
			return nil
		}
		items := w.inf.GetStore().List()
		if len(items) == 0 {
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: not found", w.m))
			continue
		}
		judgeObject(res, items[0].(*unstructured.Unstructured))
	}
	return res
}
