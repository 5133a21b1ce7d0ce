package e2ehelmchart

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// chartSet is a directory holding the example chart 1.0.0 and a 2.0.0
// with extra templates (a broken one, a Deployment).
func (f *fixture) chartSet(templates map[string]string, values map[string]any) string {
	f.t.Helper()
	dir := f.t.TempDir()
	require.NoError(f.t, example.CopyDir(f.charts, dir))
	for name, body := range templates {
		require.NoError(f.t, os.WriteFile(filepath.Join(dir, "demo-app-2.0.0", "templates", name), []byte(body), 0o644))
	}
	if len(values) > 0 {
		path := filepath.Join(dir, "demo-app-2.0.0", "values.yaml")
		data, err := os.ReadFile(path)
		require.NoError(f.t, err)
		extra, err := yaml.Marshal(values)
		require.NoError(f.t, err)
		require.NoError(f.t, os.WriteFile(path, append(append(data, '\n'), extra...), 0o644))
	}
	return dir
}

// A HelmChartConfig the user owns shadows a value: the upgrade reports
// it (overridden-by-config), renders the chart with it, never writes it,
// and the release gets the HelmChartConfig's value.
func TestHelmChartConfigOverlay(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	// abort: the CRD would default a HelmChartConfig's failure policy to
	// reinstall, which preflight refuses
	cfg := f.helmChart(name, map[string]any{"valuesContent": "resources:\n  requests:\n    memory: 1Gi\n", "failurePolicy": "abort"})
	cfg.SetKind("HelmChartConfig")
	created, err := f.env.Dynamic().Resource(helmchart.HelmChartConfigGVR).Namespace(f.ns).Create(t.Context(), cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitRevision(name, 2) // helm-controller deploys the overlay at once

	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	var shadowed []string
	for _, line := range strings.Split(r.Stdout, "\n") {
		if fields := strings.Fields(line); len(fields) > 2 && fields[0] == string(values.WarnOverriddenByConfig) {
			shadowed = append(shadowed, fields[1])
			assert.Contains(t, line, "HelmChartConfig "+f.ns+"/"+name)
		}
	}
	assert.Equal(t, []string{"resources.requests.memory"}, shadowed, r.Stdout)

	u, err := f.env.Dynamic().Resource(helmchart.HelmChartConfigGVR).Namespace(f.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.GetResourceVersion(), u.GetResourceVersion(), "the HelmChartConfig is never written")
	f.waitDeployed(name, "2.0.0")
	assert.Equal(t, `{"cpu":"250m","memory":"1Gi"}`, f.configMap(name + "-config").Data["requests"], "the overlay's value is deployed")
	h := f.get(name)
	assert.Contains(t, h.ValuesContent, "memory: 512Mi", "the merge still decides the HelmChart's own value")
}

// A new chart that fails to render in Helm (not in chart-upgrader's own
// render, where `lookup` finds nothing: the template fails when it finds
// the release namespace, which only Helm in the Job does):
// the Job's pod fails, the upgrade exits 1 naming the Job and its
// termination message, and a retried run waits again and fails again
// without a second apply.
func TestFailingJobExitsOneWithoutASecondApply(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, map[string]any{"backOffLimit": int64(0)})
	f.charts = f.chartSet(map[string]string{"fail.yaml": `{{ if lookup "v1" "Namespace" "" .Release.Namespace }}{{ fail "this chart refuses the namespace" }}{{ end }}`}, nil)
	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--timeout", "60s")...)
	r.RequireCode(t, outcome.ExitFailure)
	assert.Contains(t, r.Stderr, "job "+f.ns+"/helm-install-"+name)
	assert.Contains(t, r.Stderr, "Upgrading helm chart", "klipper-helm's termination message")
	assert.Contains(t, r.Stderr, "logs job/helm-install-"+name)
	updates := countUpdates(f.writesBy(), "helmcharts/"+name)
	assert.Equal(t, 1, updates, "one apply: %v", f.writesBy())

	again := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--timeout", "60s")...)
	assert.Equal(t, outcome.ExitFailure, again.Code, again.Stderr)
	assert.Equal(t, updates, countUpdates(f.writesBy(), "helmcharts/"+name), "a retried run does not apply again")
}

func countUpdates(writes []string, object string) int {
	n := 0
	for _, w := range writes {
		if w == "update "+object {
			n++
		}
	}
	return n
}

// A new chart whose Deployment never becomes ready (KWOK holds its pods
// not ready): the Job completes, the release is deployed, and the wait
// times out naming the Deployment: exit 4. Then a rollback from the
// backup puts 1.0.0 and the old values back through helm-controller.
func TestTimeoutThenRollback(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	f.charts = f.chartSet(map[string]string{"deployment.yaml": testchart.DeploymentTemplate}, map[string]any{"hold": "not-ready"})
	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--timeout", "15s")...)
	r.RequireCode(t, outcome.ExitTimeout)
	assert.Contains(t, r.Stderr, "Deployment "+f.ns+"/"+name+"-web")
	rel := f.waitDeployed(name, "2.0.0")
	assert.Equal(t, 2, rel.Revision)

	before := f.get(name)
	rb := f.cli(n, "rollback", "--target", f.target(name), "--timeout", "90s")
	rb.RequireCode(t, 0)
	h := f.get(name)
	assert.Equal(t, "1.0.0", h.Version)
	assert.Equal(t, installerValues(t), h.ValuesContent, "the values from before, byte for byte")
	assert.NotEqual(t, before.ChartContent, h.ChartContent)
	rel = f.waitDeployed(name, "1.0.0")
	assert.Equal(t, 3, rel.Revision)
	assert.Equal(t, "1.0.0", h.Annotations[specobject.AnnotationVersion])
	_, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(t.Context(), name+"-web", metav1.GetOptions{})
	assert.True(t, err != nil, "1.0.0 has no Deployment: Helm removed it")
}

// merge --target shows what an upgrade would write, and writes nothing.
func TestMergeTargetOnAHelmChart(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	before := len(f.writesBy())
	r := f.cli(newNode(t, "node-1"), "merge", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0",
		"--policy", f.policy(name))
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "clusterPodCIDR: 10.52.0.0/16")
	assert.NotContains(t, r.Stdout, "v0.4.1", "the pinned tag is dropped")
	assert.Equal(t, before, len(f.writesBy()), "merge --target writes nothing")
	assert.Equal(t, "1.0.0", f.get(name).Version)
}

// Five nodes race: one applies, the others wait for it; helm-controller
// runs one upgrade.
func TestRacingNodesApplyOnce(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	policy := f.policy(name)
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.cli(newNode(t, "node-"+string(rune('a'+i))), "upgrade", f.upgradeArgs(name, "2.0.0", policy)...)
			codes[i] = r.Code
		}()
	}
	wg.Wait()
	assert.Equal(t, []int{0, 0, 0, 0, 0}, codes)
	assert.Equal(t, 1, countUpdates(f.writesBy(), "helmcharts/"+name), "one apply")
	f.waitDeployed(name, "2.0.0")
	assert.Equal(t, 2, f.exec.Runs(f.ns, name), "the install and one upgrade")
}
