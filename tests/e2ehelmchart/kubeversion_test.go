package e2ehelmchart

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/kubecompat"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// A release the real helm-controller deployed (through the executor, as
// klipper-helm) is checked against the next Kubernetes version as its
// HelmChart: a chart bounded below the next version breaks at
// helm-controller's next run; the version the nodes run today passes.
func TestKubeVersionOfAHelmChartsRelease(t *testing.T) {
	f := newFixture(t)
	dir, err := testchart.Write(t.TempDir(), testchart.ConfigMapChart("bounded", "1.0.0", map[string]any{"a": "default"}))
	require.NoError(t, err)
	require.NoError(t, testchart.SetKubeVersion(dir, "<1.36.0-0"))
	f.create(f.helmChart("bounded", map[string]any{"chartContent": f.chartContent(dir), "version": "1.0.0"}))
	f.waitDeployed("bounded", "1.0.0")

	r := noderun.CLI(t, "preflight", "--kubeconfig", f.env.KubeconfigPath(), "--kube-version", "v1.36.1+k3s1", "-o", "json", "--termination-log", "")
	require.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
	var out struct {
		Report kubecompat.Report `json:"report"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	var mine *kubecompat.ReleaseReport
	for i, rr := range out.Report.Failing {
		if rr.Release == f.ns+"/bounded" {
			mine = &out.Report.Failing[i]
		}
	}
	require.NotNil(t, mine, "%+v", out.Report.Failing)
	assert.Equal(t, "HelmChart "+f.ns+"/bounded", mine.Kind)
	assert.Equal(t, "at helm-controller's next run of it (its Job's helm upgrade)", mine.When)
	assert.Equal(t, "chart requires kubeVersion: <1.36.0-0 which is incompatible with Kubernetes v1.36.1", mine.Findings[0].Why)

	r = noderun.CLI(t, "preflight", "--kubeconfig", f.env.KubeconfigPath(), "--kube-version", "v1.35.0+k3s1", "-o", "json", "--termination-log", "")
	var passed kubecompat.Report
	if r.Code != outcome.ExitOK { // another test's release may break at 1.35: not this one
		var failed struct {
			Report kubecompat.Report `json:"report"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &failed), r.Stdout)
		passed = failed.Report
	} else {
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &passed), r.Stdout)
	}
	for _, rr := range passed.Failing {
		assert.NotEqual(t, f.ns+"/bounded", rr.Release)
	}
	assert.Positive(t, passed.Checked)
}
