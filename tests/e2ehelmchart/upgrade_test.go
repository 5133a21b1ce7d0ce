package e2ehelmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

var releaseSeq atomic.Int64

// release is a HelmChart (and release) name unique in the test binary:
// the example chart's StorageClass is cluster-scoped and named after it.
func release() string { return fmt.Sprintf("hc%d", releaseSeq.Add(1)) }

// installerValues is package/examples/values.yaml: what an installer and
// an operator wrote into the HelmChart's valuesContent.
func installerValues(t *testing.T) string {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "package", "examples", "values.yaml"))
	require.NoError(t, err)
	return string(data)
}

// installExample creates HelmChart name of the example chart 1.0.0,
// carried in spec.chartContent, with the installer's values, releasing
// into the fixture's namespace, and waits until it is deployed.
func (f *fixture) installExample(name string, extra map[string]any) {
	f.t.Helper()
	spec := map[string]any{"chart": "demo-app", "version": "1.0.0", "chartContent": f.chartContent(f.exampleChart("1.0.0")),
		"targetNamespace": f.ns, "valuesContent": installerValues(f.t)}
	for k, v := range extra {
		spec[k] = v
	}
	f.create(f.helmChart(name, spec))
	f.waitDeployed(name, "1.0.0")
}

func (f *fixture) demoteStorageClass(name string) {
	f.t.Helper()
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	_, err := f.env.Kube().StorageV1().StorageClasses().Patch(f.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

func (f *fixture) secretData(name, key string) []byte {
	f.t.Helper()
	s, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return s.Data[key]
}

func (f *fixture) upgradeArgs(name, version, policy string, extra ...string) []string {
	args := []string{"--target", f.target(name), "--chart-source", f.charts, "--version", version, "--timeout", "90s"}
	if policy != "" {
		args = append(args, "--policy", policy)
	}
	return append(args, extra...)
}

// writesBy lists what chart-upgrader wrote in the fixture's namespace.
func (f *fixture) writesBy() []string { return noderun.Writes(f.t, f.env, f.ns) }

// The demo upgrade on a HelmChart, end to end through the real
// helm-controller: every decision of the demo policy reaches the release
// helm-controller's Job deploys.
func TestUpgradeAHelmChartWithTheDemoPolicy(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	certBefore := f.secretData("demo-app-webhook-certs", "tls.crt")
	require.NotEmpty(t, certBefore)
	f.demoteStorageClass(name + "-longhorn")
	n := newNode(t, "node-1")

	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	for _, want := range []string{"webhook.image.tag", "follow #1", "storageClass.defaultStorageClass", "live #4",
		"promote.clusterPodCIDR", "readonly #3", "webhook.certs.cert", "once #5",
		"upgraded " + f.target(name) + " 1.0.0 → 2.0.0"} {
		assert.Contains(t, r.Stdout, want)
	}

	h := f.get(name)
	assert.Equal(t, "2.0.0", h.Version)
	assert.Equal(t, "2.0.0", h.Annotations[specobject.AnnotationVersion])
	assert.Equal(t, "1", h.Annotations["chart-upgrader.io/release-revision"])
	ch, err := chartOf(h.ChartContent)
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", ch, "spec.chartContent carries the new chart")
	var vc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(h.ValuesContent), &vc))
	u, err := values.Parse([]byte(h.ValuesContent))
	require.NoError(t, err)
	hash, err := values.Hash(u)
	require.NoError(t, err)
	assert.Equal(t, hash, h.Annotations[specobject.AnnotationValuesHash])

	rel := f.waitDeployed(name, "2.0.0")
	assert.Equal(t, 2, rel.Revision)
	cm := f.configMap(name + "-config").Data
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", cm["webhookImage"], "the pinned tag followed the chart")
	assert.Equal(t, "10.52.0.0/16", cm["clusterPodCIDR"], "readonly CIDR kept although 2.0.0's default is 10.42.0.0/16")
	assert.Equal(t, "2", cm["replicaCount"], "a user customisation kept")
	assert.Equal(t, `{"cpu":"250m","memory":"512Mi"}`, cm["requests"], "max kept 512Mi, took the new 250m")
	assert.NotContains(t, cm, "kubeVipAddress", "the migration removed kubeVip.config")
	assert.Equal(t, certBefore, f.secretData("demo-app-webhook-certs", "tls.crt"), "once kept the certificate byte for byte")
	sg, _ := u["storageClass"].(map[string]any)
	assert.Equal(t, false, sg["defaultStorageClass"], "live wrote false although the HelmChart said true")
	assert.Equal(t, 1, f.exec.Runs(f.ns, name)-1, "one Helm upgrade after the install")

	// the backup of the spec from before
	bk, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), helmchart.Descriptor.BackupName(name, "1.0.0"), metav1.GetOptions{})
	require.NoError(t, err)
	var spec map[string]any
	require.NoError(t, yaml.Unmarshal(bk.Data[specobject.BackupKeySpec], &spec))
	assert.Equal(t, "1.0.0", spec["version"])

	// status and a re-run: nothing to do, no write
	st := f.cli(n, "status", "--target", f.target(name))
	require.Equal(t, 0, st.Code, st.Stderr)
	assert.Contains(t, st.Stdout, f.target(name)+": version 2.0.0, ready (resources ")
	before := len(f.writesBy())
	again := f.cli(newNode(t, "node-2"), "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, again.Code, again.Stderr)
	assert.Contains(t, again.Stdout, "nothing to do")
	assert.Equal(t, before, len(f.writesBy()), "a re-run writes nothing: %v", f.writesBy()[before:])
	assert.Equal(t, 2, f.exec.Runs(f.ns, name), "no Helm run for the re-run")
}

// chartOf is the version of the chart a chartContent carries.
func chartOf(content string) (string, error) {
	var c struct{ Version string }
	ch, err := decodeChart(content)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(ch.Metadata)
	_ = json.Unmarshal(b, &c)
	return c.Version, nil
}
