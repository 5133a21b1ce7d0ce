package fleetsim_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// bdOf is a BundleDeployment of bundle mcc-<chart> in bundleNS for
// cluster i, as heavy as Fleet's: Helm values in spec.options and
// spec.stagedOptions, ten resources, four conditions, applied and ready.
func bdOf(namespace, bundleNS, chart string, i int) *unstructured.Unstructured {
	values := map[string]any{}
	for k := range 40 {
		values[fmt.Sprintf("key%02d", k)] = strings.Repeat("v", 100)
	}
	var resources []any
	for k := range 10 {
		resources = append(resources, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "demo-system",
			"name": fmt.Sprintf("object-%d", k), "createdAt": "2026-11-27T10:00:00Z"})
	}
	id := "s-0123456789abcdef:" + strings.Repeat("a", 64)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "BundleDeployment",
		"metadata": map[string]any{"name": fmt.Sprintf("mcc-%s-%05d", chart, i), "namespace": namespace,
			"labels": map[string]any{managedchart.LabelBundleName: "mcc-" + chart, managedchart.LabelBundleNamespace: bundleNS}},
		"spec": map[string]any{"deploymentID": id, "stagedDeploymentID": id,
			"options":       map[string]any{"helm": map[string]any{"values": values}},
			"stagedOptions": map[string]any{"helm": map[string]any{"values": values}}},
		"status": map[string]any{"appliedDeploymentID": id, "ready": true, "nonModified": true, "resources": resources,
			"conditions": []any{
				map[string]any{"type": "Installed", "status": "True"}, map[string]any{"type": "Deployed", "status": "True"},
				map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "Monitored", "status": "True"}}},
	}}
}

// createBDs creates n BundleDeployments of chart in namespace, 16 at a time.
func createBDs(b *testing.B, dyn dynamic.Interface, namespace, bundleNS, chart string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			bd := bdOf(namespace, bundleNS, chart, i)
			res := dyn.Resource(fleetsim.BundleDeploymentsGVR).Namespace(namespace)
			got, err := res.Create(context.Background(), bd, metav1.CreateOptions{})
			if err == nil {
				bd.SetResourceVersion(got.GetResourceVersion())
				_, err = res.UpdateStatus(context.Background(), bd, metav1.UpdateOptions{})
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}

// BenchmarkReadyConfirmation is what confirming a ready Bundle summary
// costs (one page of its BundleDeployments, managedchart.ConfirmSample:
// one) in a cluster holding BENCH_BUNDLEDEPLOYMENTS (default 10,000): when
// they are all of another Bundle and this one has a single cluster
// (fleet-local), and when all of them are this Bundle's; and, for
// comparison, the page of 100 it read until 2026-11-27. Run with
// `go test -tags testseams -run '^$' -bench ReadyConfirmation ./tests/fleetsim`.
func BenchmarkReadyConfirmation(b *testing.B) {
	n := 10000
	if s := os.Getenv("BENCH_BUNDLEDEPLOYMENTS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	env := testenv.ForTest(b)
	ns := env.Namespace(b)
	clusters := fleetsim.ClusterNamespace(ns)
	_, err := env.Kube().CoreV1().Namespaces().Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusters}}, metav1.CreateOptions{})
	require.NoError(b, err)
	createBDs(b, env.Dynamic(), clusters, ns, "crowd", n)
	createBDs(b, env.Dynamic(), clusters, ns, "local", 1)
	c := &managedchart.Client{Dynamic: env.Dynamic(), Log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name, chart string
		page        int64
		want        int
	}{
		{fmt.Sprintf("one-cluster-bundle-among-%d", n), "local", managedchart.ConfirmSample, 1},
		{fmt.Sprintf("bundle-of-%d", n), "crowd", managedchart.ConfirmSample, managedchart.ConfirmSample},
		{fmt.Sprintf("bundle-of-%d-page-of-100", n), "crowd", 100, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				bds, _, err := c.BundleDeployments(b.Context(), ns, tc.chart, tc.page)
				require.NoError(b, err)
				require.Len(b, bds, tc.want)
			}
		})
	}
}
