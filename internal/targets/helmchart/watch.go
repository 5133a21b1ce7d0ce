package helmchart

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Observer keeps a live view of a HelmChart and everything its readiness
// follows: one list, then one watch each, of the HelmChart, its values
// Secret, its Job and the Job's pods, and its release (a
// helmrelease.Watcher: the storage objects and every object of the newest
// revision). Nothing is polled; a broken watch lists again by itself.
type Observer struct {
	namespace, name string
	changed         cluster.Signal

	hc, secret, job, pods cache.SharedIndexInformer
	release               *helmrelease.Watcher
}

// Observe starts the informers and waits until they have synced.
func (c *Client) Observe(ctx context.Context, namespace, name string) (*Observer, error) {
	h, err := c.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	targetNS, driver := namespace, cluster.SecretDriver
	if h != nil {
		targetNS, driver = h.TargetNamespace, h.Driver
	}
	o := &Observer{namespace: namespace, name: name, changed: cluster.NewSignal()}
	signal := cluster.OnEvent(o.changed.Notify)
	rc := c.Releases()
	var synced []cache.InformerSynced
	start := func(resource string, lw *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer {
		inf := cluster.Informer(ctx, c.Log, resource, lw, obj)
		reg, _ := inf.AddEventHandler(signal)
		synced = append(synced, inf.HasSynced, reg.HasSynced)
		go inf.Run(ctx.Done())
		return inf
	}
	dyn := c.Dynamic.Resource(HelmChartGVR).Namespace(namespace)
	o.hc = start("helmcharts", cluster.NamedListWatch(
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return dyn.List(ctx, opts) }, dyn.Watch, name),
		&unstructured.Unstructured{})
	core := c.Kube.CoreV1()
	named := func(n string) func(*metav1.ListOptions) {
		return func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", n).String()
		}
	}
	o.secret = start("secrets", cache.NewFilteredListWatchFromClient(core.RESTClient(), "secrets", namespace, named(ValuesSecretName(name))),
		&corev1.Secret{})
	o.job = start("jobs", cache.NewFilteredListWatchFromClient(c.Kube.BatchV1().RESTClient(), "jobs", namespace, named(JobName(name))),
		&batchv1.Job{})
	o.pods = start("pods", cache.NewFilteredListWatchFromClient(core.RESTClient(), "pods", namespace,
		func(opts *metav1.ListOptions) { opts.LabelSelector = labels.Set{"job-name": JobName(name)}.String() }), &corev1.Pod{})
	if o.release, err = rc.Watch(ctx, targetNS, name, driver, o.changed.Notify); err != nil {
		return nil, err
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("watching helmchart %s/%s: %w", namespace, name, ctx.Err())
	}
	return o, nil
}

// Changed receives a value after any of the watched objects changed.
func (o *Observer) Changed() <-chan struct{} { return o.changed }

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
	v.Release = ReleaseOf(o.release.Newest())
	v.Resources = o.release.Resources()
	return v
}
