//go:build testseams

package helmrelease_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	helmstatus "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	"sigs.k8s.io/cli-utils/pkg/object"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// counted counts the requests a client makes and the bytes it reads.
type counted struct {
	next            http.RoundTripper
	requests, bytes atomic.Int64
}

func (c *counted) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// BenchmarkWatchReleaseObjects measures what watching the objects of a
// release revision costs until the first complete judgement, the two ways
// on offer (docs/performance.md#watching-a-releases-objects):
//
//   - per-object: helmrelease.Watcher, one informer per object of the
//     manifest, each listing and watching that one name;
//   - kstatus-watcher: cli-utils' DefaultStatusWatcher (what Helm 4's
//     --wait uses), one informer per kind and namespace, filtered to the
//     release's objects.
//
// The release has 4 objects (ConfigMap ×2, Secret, Service). Beside it
// the namespace holds `others` unrelated Secrets of 16 KiB each: a
// kube-system holds every HelmChart's Helm records, which are Secrets of
// that size and more. Reported: requests and bytes read per watch start.
func BenchmarkWatchReleaseObjects(b *testing.B) {
	for _, others := range []int{0, 200} {
		env := testenv.ForTest(b)
		ns := env.Namespace(b)
		manifest := releaseObjects(b, env, ns, others)
		store(b, driver.NewSecrets(env.Kube().CoreV1().Secrets(ns)), rel(ns, "web", 1, helmstatus.StatusDeployed, manifest))
		for _, way := range []string{"per-object", "kstatus-watcher"} {
			b.Run(fmt.Sprintf("%s/others=%d", way, others), func(b *testing.B) {
				cfg := env.Config()
				ct := &counted{}
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
				kube := kubernetes.NewForConfigOrDie(cfg)
				dyn := dynamic.NewForConfigOrDie(cfg)
				mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
				ids := objectIDs(b, ns, manifest)
				_, _ = mapper.RESTMapping(ids[0].GroupKind) // discovery once, outside the count
				ct.requests.Store(0)
				ct.bytes.Store(0)
				b.ResetTimer()
				for range b.N {
					ctx, cancel := context.WithCancel(b.Context())
					switch way {
					case "per-object":
						c := &helmrelease.Client{Kube: kube, Dynamic: dyn}
						sig := cluster.NewSignal()
						w, err := c.Watch(ctx, ns, "web", "secret", sig.Notify)
						if err != nil {
							b.Fatal(err)
						}
						for w.Resources() == nil {
							select {
							case <-sig:
							case <-ctx.Done():
								b.Fatal(ctx.Err())
							}
						}
					case "kstatus-watcher":
						ch := watcher.NewDefaultStatusWatcher(dyn, mapper).Watch(ctx, ids, watcher.Options{})
						for e := range ch {
							if e.Type == event.ErrorEvent {
								b.Fatal(e.Error)
							}
							if e.Type == event.SyncEvent {
								break
							}
						}
					}
					cancel()
				}
				b.StopTimer()
				b.ReportMetric(float64(ct.requests.Load())/float64(b.N), "requests/op")
				b.ReportMetric(float64(ct.bytes.Load())/float64(b.N), "bytes-read/op")
			})
		}
	}
}

// releaseObjects makes the release's objects and others unrelated
// Secrets in ns, and returns the release's manifest.
func releaseObjects(b *testing.B, env *testenv.Env, ns string, others int) string {
	ctx := b.Context()
	for i := range others {
		_, err := env.Kube().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)},
			Data: map[string][]byte{"blob": []byte(strings.Repeat("x", 16<<10))}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	core := env.Kube().CoreV1()
	for _, name := range []string{"web-a", "web-b"} {
		if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-s"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-a}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-b}\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: web-s}\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
}

// objectIDs are the manifest's objects as cli-utils names them.
func objectIDs(b *testing.B, ns, manifest string) object.ObjMetadataSet {
	var out object.ObjMetadataSet
	for _, doc := range strings.Split(manifest, "---\n") {
		if doc == "" {
			continue
		}
		kind := strings.TrimSpace(strings.TrimPrefix(strings.Split(doc, "\n")[1], "kind:"))
		name := strings.TrimSuffix(strings.TrimPrefix(strings.Split(doc, "\n")[2], "metadata: {name: "), "}")
		out = append(out, object.ObjMetadata{Namespace: ns, Name: name, GroupKind: schema.GroupKind{Kind: kind}})
	}
	return out
}
