package e2ehelmchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	common "helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// The real helm-controller turns a HelmChart into a Job; the executor runs
// it as klipper-helm would: the release is deployed with the HelmChart's
// values and set flags, labelled with the Job's config hash, and a change
// of the HelmChart makes a new Job and a new revision.
func TestHelmControllerDeploysThroughTheExecutor(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	dir, err := testchart.Write(t.TempDir(), testchart.ConfigMapChart("cm", "1.0.0", map[string]any{"a": "default", "b": "default"}))
	require.NoError(t, err)
	f.create(f.helmChart("cm", map[string]any{"chartContent": f.chartContent(dir), "version": "1.0.0",
		"valuesContent": "data:\n  a: from-content\n", "set": map[string]any{"data.b": "from-set"}}))
	rel := f.waitDeployed("cm", "1.0.0")
	job := f.job("cm")
	assert.Equal(t, 1, rel.Revision)
	var hash string
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "CONFIG_HASH" {
			hash = e.Value
		}
	}
	require.NotEmpty(t, hash)
	assert.Equal(t, hash, rel.ConfigHash, "klipper-helm labels the release with the Job's config hash")
	cm := f.configMap("cm-config")
	require.NotNil(t, cm)
	assert.Equal(t, "from-content", cm.Data["a"])
	assert.Equal(t, "from-set", cm.Data["b"])
	assert.Equal(t, 1, f.exec.Runs(f.ns, "cm"))

	// a HelmChartConfig is laid over the HelmChart's values (set still wins)
	cfg := f.helmChart("cm", map[string]any{"valuesContent": "data:\n  a: from-config\n  b: from-config\n"})
	cfg.SetKind("HelmChartConfig")
	_, err = f.env.Dynamic().Resource(helmchart.HelmChartConfigGVR).Namespace(f.ns).Create(ctx, cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	rel = f.waitRevision("cm", 2)
	assert.Equal(t, common.StatusDeployed, rel.Status)
	cm = f.configMap("cm-config")
	assert.Equal(t, "from-config", cm.Data["a"])
	assert.Equal(t, "from-set", cm.Data["b"])
}

// A chart that does not render: the container fails with klipper-helm's
// termination message and is restarted; with spec.backOffLimit 0 the real
// Job controller fails the Job, and helm-controller sets the HelmChart's
// Failed condition.
func TestAFailingJob(t *testing.T) {
	f := newFixture(t)
	bad := testchart.Chart{Name: "bad", Version: "1.0.0", Templates: map[string]string{"cm.yaml": "{{ .Values.nope.nope }}"}}
	dir, err := testchart.Write(t.TempDir(), bad)
	require.NoError(t, err)
	f.create(f.helmChart("bad", map[string]any{"chartContent": f.chartContent(dir), "version": "1.0.0", "backOffLimit": int64(0)}))
	h := f.waitCondition("bad", helmchart.ConditionFailed, "True")
	c, _ := h.Condition(helmchart.ConditionFailed)
	assert.Equal(t, "Job failed", c.Reason)
	job := f.job("bad")
	assert.Equal(t, "BackoffLimitExceeded", jobFailedReason(job))
}
