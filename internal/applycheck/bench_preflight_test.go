//go:build testseams

package applycheck_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// bigChart writes the 300-object chart at version into dir/big-VERSION.
func bigChart(b *testing.B, dir, version string) string {
	b.Helper()
	path := filepath.Join(dir, "big-"+version)
	require.NoError(b, os.MkdirAll(filepath.Join(path, "templates"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(path, "Chart.yaml"), []byte("apiVersion: v2\nname: big\nversion: "+version+"\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(path, "values.yaml"), []byte("level: \""+version+"\"\n"), 0o644))
	// one value the upgrade changes, in every ConfigMap
	body := bytes.ReplaceAll([]byte(bigManifest()), []byte("b: x"), []byte("b: '{{ .Values.level }}'"))
	require.NoError(b, os.WriteFile(filepath.Join(path, "templates", "all.yaml"), body, 0o644))
	return path
}

// BenchmarkPreflight300 runs `chart-upgrader preflight` (in-process, as a
// run of the binary does: new clients, nothing cached) on a release of 300
// objects of 10 kinds that Helm 4 installed server-side, to the next
// version of its chart, its images asked for on a registry on loopback
// that a registries.yaml mirrors registry.example to; requests per op from
// the API server's audit log. Not a test: figures for docs/performance.md.
func BenchmarkPreflight300(b *testing.B) {
	env := testenv.ForTest(b)
	ns := env.Namespace(b)
	charts := b.TempDir()
	bigChart(b, charts, "1.0.0")
	bigChart(b, charts, "2.0.0")
	cfg, err := cluster.HelmConfiguration(cluster.NewHelmGetter(env.Config()), ns, "secret", nil)
	require.NoError(b, err)
	ch, err := loader.Load(filepath.Join(charts, "big-1.0.0"))
	require.NoError(b, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout, in.ServerSideApply = "big", ns, kube.HookOnlyStrategy, 120e9, true
	_, err = in.RunWithContext(b.Context(), ch, map[string]any{})
	require.NoError(b, err)
	// no controllers run here: the Deployments' status as the Deployment
	// controller would write it once they are available
	deployments := env.Kube().AppsV1().Deployments(ns)
	list, err := deployments.List(b.Context(), metav1.ListOptions{})
	require.NoError(b, err)
	for _, d := range list.Items {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}}
		_, err := deployments.UpdateStatus(b.Context(), &d, metav1.UpdateOptions{})
		require.NoError(b, err)
	}
	host := b.TempDir()
	regDir := b.TempDir() // not under the host root: its paths are this machine's
	reg, err := ociregistry.Start(b.Context(), regDir)
	require.NoError(b, err)
	defer reg.Close()
	for _, repo := range []string{"web", "job"} {
		_, err := reg.PushImage(repo, "1", "linux/amd64")
		require.NoError(b, err)
	}
	registries := filepath.Join(regDir, "registries.yaml")
	require.NoError(b, os.WriteFile(registries, []byte("mirrors:\n  registry.example:\n    endpoint: [\"https://"+reg.Host+"\"]\n"+
		"configs:\n  \""+reg.Host+"\":\n    tls:\n      ca_file: "+reg.CAFile+"\n"), 0o600))
	count := func() int {
		events, err := testenv.ReadAuditLog(env.AuditLogPath())
		require.NoError(b, err)
		return len(events)
	}
	start := count()
	defer func() { // the requests of the last run, by verb and resource, for docs/performance.md
		events, err := testenv.ReadAuditLog(env.AuditLogPath())
		require.NoError(b, err)
		by := map[string]int{}
		for _, e := range events[start:] {
			what := e.RequestURI
			if e.ObjectRef != nil {
				what = e.ObjectRef.Resource
			}
			if i := strings.Index(what, "?"); i >= 0 {
				what = what[:i]
			}
			by[e.Verb+" "+what]++
		}
		b.Logf("requests of %d runs by verb and resource: %v", b.N, by)
	}()
	for b.Loop() {
		var out, errb bytes.Buffer
		code := cli.Run(b.Context(), []string{"chart-upgrader", "preflight", "--target", "release/" + ns + "/big", "--chart-source", charts,
			"--version", "2.0.0", "--kubeconfig", env.KubeconfigPath(), "--host-root", host, "--log-format", "json",
			"--registries-config", registries}, &out, &errb)
		require.Equal(b, 0, code, "%s\n%s", errb.String(), out.String())
		require.Contains(b, errb.String(), "conflict check: 300 objects checked")
		require.Contains(b, out.String(), "image check: 2 images (60 uses)")
	}
	b.StopTimer()
	b.ReportMetric(float64(count()-start)/float64(b.N), "requests/op")
}
