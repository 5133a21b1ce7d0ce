// Package e2ehelmchart runs chart-upgrader on k3s HelmCharts against the
// real helm-controller, on a control plane whose workloads really run
// (tests/testenv's helm-controller mode: kube-controller-manager,
// kube-scheduler, KWOK nodes), with package tests/klipperhelm running the
// Jobs helm-controller makes.
package e2ehelmchart

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/klipperhelm"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{HelmController: true, AuditLog: true})
}

// The executor of the package, started with the control plane.
var executor struct {
	sync.Mutex
	e   *klipperhelm.Executor
	log bytes.Buffer
}

// fixture is one test's world: a namespace holding its HelmCharts (and
// their releases), the example charts on disk, the executor.
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	charts string
	exec   *klipperhelm.Executor
	hc     *helmchart.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	executor.Lock()
	if executor.e == nil {
		e, err := klipperhelm.Start(context.Background(), env.Config(), klipperhelm.Options{
			Log: slog.New(slog.NewTextHandler(&syncWriter{w: &executor.log}, nil)), RestartBackoff: 500 * time.Millisecond})
		require.NoError(t, err)
		executor.e = e
	}
	executor.Unlock()
	f := &fixture{t: t, env: env, ns: env.Namespace(t), charts: t.TempDir(), exec: executor.e,
		hc: &helmchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	require.NoError(t, example.CopyDir(filepath.Join(root, "package", "examples", "charts"), f.charts))
	t.Cleanup(func() {
		if t.Failed() {
			executor.Lock()
			t.Logf("executor log:\n%s", executor.log.String())
			executor.Unlock()
		}
	})
	return f
}

// syncWriter serialises the writes of concurrent runs.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	executor.Lock()
	defer executor.Unlock()
	return s.w.Write(p)
}

// chartContent is the base64 .tgz of the example chart at version (or of
// the chart directory dir).
func (f *fixture) chartContent(dir string) string {
	f.t.Helper()
	c, err := loader.Load(dir)
	require.NoError(f.t, err)
	data, err := chartpkg.Archive(c)
	require.NoError(f.t, err)
	return base64.StdEncoding.EncodeToString(data)
}

// exampleChart is the directory of the example chart at version.
func (f *fixture) exampleChart(version string) string {
	return filepath.Join(f.charts, "demo-app-"+version)
}

// helmChart is a HelmChart of the fixture's namespace releasing into it.
func (f *fixture) helmChart(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
		"metadata": map[string]any{"name": name, "namespace": f.ns},
		"spec":     spec,
	}}
	return u
}

// create creates a HelmChart.
func (f *fixture) create(u *unstructured.Unstructured) {
	f.t.Helper()
	_, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(f.ns).Create(f.t.Context(), u, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

// get reads a HelmChart.
func (f *fixture) get(name string) *helmchart.HelmChart {
	f.t.Helper()
	h, err := f.hc.Get(f.t.Context(), f.ns, name)
	require.NoError(f.t, err)
	require.NotNil(f.t, h, "helmchart %s/%s", f.ns, name)
	return h
}

// waitDeployed waits until the release of HelmChart name has a deployed
// revision at chart version, made by a completed Job, and returns it.
func (f *fixture) waitDeployed(name, version string) *helmchart.Release {
	f.t.Helper()
	var rel *helmchart.Release
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		h, err := f.hc.Get(ctx, f.ns, name)
		if err != nil || h == nil {
			return false, err
		}
		r, err := f.hc.NewestRelease(ctx, h)
		if err != nil || r == nil {
			return false, err
		}
		rel = helmchart.ReleaseOf(r)
		job, err := f.hc.Job(ctx, h)
		if err != nil || job == nil {
			return false, err
		}
		return rel.Status == "deployed" && rel.ChartVersion == version && jobDone(job) == batchv1.JobComplete, nil
	})
	require.NoError(f.t, err, "helmchart %s/%s deployed at %s (last seen: %+v)", f.ns, name, version, rel)
	return rel
}

func jobDone(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// job reads the HelmChart's Job.
func (f *fixture) job(name string) *batchv1.Job {
	f.t.Helper()
	j, err := f.env.Kube().BatchV1().Jobs(f.ns).Get(f.t.Context(), helmchart.JobName(name), metav1.GetOptions{})
	require.NoError(f.t, err)
	return j
}

// configMap reads a ConfigMap of the namespace; nil when missing.
func (f *fixture) configMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return cm
}

// node is one chart-upgrader process's local side.
type node = noderun.Node

func newNode(t *testing.T, name string) node { return noderun.New(t, name) }

// result is what one run printed and returned.
type result = noderun.Result

// cli runs chart-upgrader in-process as node n.
func (f *fixture) cli(n node, command string, args ...string) result {
	f.t.Helper()
	r := n.Run(f.t.Context(), f.env, command, args...)
	return r
}

// writeFile writes a file in a temporary directory and returns its path.
func (f *fixture) writeFile(name, content string) string {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), name)
	require.NoError(f.t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// policy is the bundled example policy with its namespaced sources moved
// to the fixture's namespace and its StorageClass to the release's.
func (f *fixture) policy(release string) string { return f.policyIn(f.ns, release) }

func (f *fixture) target(name string) string { return fmt.Sprintf("helmchart/%s/%s", f.ns, name) }

// waitRevision waits until the release of HelmChart name has revision rev
// or a newer one, and returns the newest.
func (f *fixture) waitRevision(name string, rev int) *helmchart.Release {
	f.t.Helper()
	var rel *helmchart.Release
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		h, err := f.hc.Get(ctx, f.ns, name)
		if err != nil || h == nil {
			return false, err
		}
		r, err := f.hc.NewestRelease(ctx, h)
		if err != nil || r == nil {
			return false, err
		}
		rel = helmchart.ReleaseOf(r)
		return rel.Revision >= rev && !rel.Status.IsPending(), nil
	})
	require.NoError(f.t, err, "helmchart %s/%s: revision %d (last seen: %+v)", f.ns, name, rev, rel)
	return rel
}

// waitCondition waits until HelmChart name has condition typ with status.
func (f *fixture) waitCondition(name, typ, status string) *helmchart.HelmChart {
	f.t.Helper()
	var h *helmchart.HelmChart
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if h, err = f.hc.Get(ctx, f.ns, name); err != nil || h == nil {
			return false, err
		}
		c, ok := h.Condition(typ)
		return ok && c.Status == status, nil
	})
	require.NoError(f.t, err, "helmchart %s/%s condition %s=%s (last seen: %+v)", f.ns, name, typ, status, h)
	return h
}

func jobFailedReason(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// decodeChart loads a base64 .tgz.
func decodeChart(content string) (*chart.Chart, error) {
	data, err := base64.StdEncoding.DecodeString(content)
	if err != nil {
		return nil, err
	}
	return loader.LoadArchive(bytes.NewReader(data))
}
