//go:build testseams

package applycheck_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// bigChartKinds are the ten kinds of the 300-object chart, 30 each: the
// shape of Harvester's chart (a few hundred objects of a dozen kinds).
var bigChartKinds = []func(i int) string{
	func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\ndata: {a: \"%d\", b: x}\n", i, i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: s-%d}\ndata: {k: dg==}\ntype: Opaque\n", i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d}\nspec:\n  selector: {app: a%d}\n  ports:\n  - {port: 80, protocol: TCP, targetPort: 8080, name: http}\n", i, i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa-%d}\n", i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: role-%d}\nrules:\n- {apiGroups: [\"\"], resources: [configmaps], verbs: [get]}\n", i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb-%d}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: role-%d}\nsubjects:\n- {kind: ServiceAccount, name: sa-%d}\n", i, i, i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cj-%d}\nspec:\n  schedule: \"0 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - {name: c, image: registry.example/job:1}\n", i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: ing-%d}\nspec:\n  rules:\n  - host: h%d.example\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend: {service: {name: svc-%d, port: {number: 80}}}\n", i, i, i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d-%d}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: a%d}}\n  template:\n    metadata: {labels: {app: a%d}}\n    spec:\n      containers:\n      - {name: web, image: registry.example/web:1, env: [{name: A, value: \"1\"}], ports: [{containerPort: 8080, protocol: TCP}]}\n", i, i, i)
	},
	func(i int) string {
		return fmt.Sprintf("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb-%d}\nspec:\n  minAvailable: 1\n  selector: {matchLabels: {app: a%d}}\n", i, i)
	},
}

// bigManifest is the 300-object chart's manifest.
func bigManifest() string {
	var b strings.Builder
	for _, k := range bigChartKinds {
		for i := range 30 {
			b.WriteString("---\n" + k(i))
		}
	}
	return b.String()
}

// BenchmarkPreflightReads300 measures what preflight reads of a release of
// 300 objects of 10 kinds, applied server-side as Helm applies them: the
// conflict check (live objects, schemas, the in-process apply of each) and
// the health check (kstatus of each), with the requests of each per op.
// Not a test: figures for docs/performance.md (scripts/bench-conflicts).
func BenchmarkPreflightReads300(b *testing.B) {
	env := testenv.ForTest(b)
	ns := env.Namespace(b)
	rendered := bigManifest()
	objs, err := manifest.Objects(rendered)
	require.NoError(b, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	for _, o := range objs {
		o.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "big", "meta.helm.sh/release-namespace": ns})
		o.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "Helm"})
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(b, err)
		_, err = env.Dynamic().Resource(m.Resource).Namespace(ns).Apply(b.Context(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "helm", Force: true})
		require.NoError(b, err)
	}
	rel := &release.Release{Name: "big", Namespace: ns, Version: 1, Manifest: rendered, Info: &release.Info{Status: helmstatus.StatusDeployed}}

	// every request of an op counted at the transport, discovery included:
	// each op starts as a run of the tool does, with nothing cached
	var requests atomic.Int64
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) { requests.Add(1); return rt.RoundTrip(r) })
	}
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(b, err)
	perOp := func(b *testing.B) {
		b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
	}

	b.Run("conflict-check", func(b *testing.B) {
		requests.Store(0)
		for b.Loop() {
			m := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
			res, err := applycheck.New(kube, dyn, m, nil).Check(b.Context(), applycheck.Request{Manifest: rendered, Namespace: ns, Release: "big", Manager: "helm", Old: rendered})
			require.NoError(b, err)
			require.Equal(b, 300, res.Checked)
			require.Empty(b, res.Conflicts)
			require.Empty(b, res.NotChecked)
		}
		perOp(b)
	})
	b.Run("health-check", func(b *testing.B) {
		requests.Store(0)
		for b.Loop() {
			res, err := (&helmrelease.Client{Kube: kube, Dynamic: dyn}).Look(b.Context(), rel)
			require.NoError(b, err)
			require.Equal(b, 300, res.Total)
		}
		perOp(b)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
