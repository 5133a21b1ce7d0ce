package e2ehelmchart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Preflight and the real upgrade of a HelmChart agree: for chart version
// pairs that each break the upgrade, and a control beside each,
// preflight as the k3s Plan's ServiceAccount (with the rules `plan
// --check-chart` prints) refuses exactly where helm-controller's Job,
// given the new version as admin right after, fails, naming the cause the
// Job's Helm names; it passes where the Job deploys.
func TestPreflightAgreesWithTheHelmController(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, chartDir string) // to 2.0.0
		says   string                              // preflight's refusal; "" for a control
		helm   string                              // the words of the Job's Helm
		both   func(t *testing.T, chartDir string) // to 1.0.0 and 2.0.0
	}{
		{"a Kubernetes the cluster is not", kubeVersion(">=1.99.0-0"),
			"requires kubeVersion: >=1.99.0-0 which is incompatible with Kubernetes v1.33", "requires kubeVersion", nil},
		{"the cluster's Kubernetes", kubeVersion(">=1.20.0-0"), "", "", nil},
		{"a label the server cannot take", addTemplate("labelled.yaml", testchart.LabelledConfigMap("not valid")),
			`metadata.labels: Invalid value: "not valid"`, `metadata.labels: Invalid value: "not valid"`, nil},
		{"a label", addTemplate("labelled.yaml", testchart.LabelledConfigMap("valid")), "", "", nil},
		{"an immutable ConfigMap's data", addTemplate("frozen.yaml", testchart.FrozenConfigMap("b", "")),
			"rejected by the API server: ConfigMap {ns}/{release}-frozen", "field is immutable when `immutable` is set", addTemplate("frozen.yaml", testchart.FrozenConfigMap("a", ""))},
		{"an immutable ConfigMap's labels", addTemplate("frozen.yaml", testchart.FrozenConfigMap("a", "tier: web")), "", "", addTemplate("frozen.yaml", testchart.FrozenConfigMap("a", ""))},
		{"a PodDisruptionBudget with both bounds", addTemplate("pdb.yaml", testchart.PDBTemplate("minAvailable: 1, maxUnavailable: 1")),
			"minAvailable and maxUnavailable cannot be both set", "minAvailable and maxUnavailable cannot be both set", nil},
		{"a PodDisruptionBudget", addTemplate("pdb.yaml", testchart.PDBTemplate("minAvailable: 1")), "", "", nil},
		{"a removed API version", addTemplate("hpa.yaml", testchart.HPATemplate("autoscaling/v2beta2")),
			"is at autoscaling/v2beta2, which this cluster does not serve", `no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta2"`, nil},
		{"the served API version", addTemplate("hpa.yaml", testchart.HPATemplate("autoscaling/v2")), "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.both != nil {
				tc.both(t, f.exampleChart("1.0.0"))
				tc.both(t, f.exampleChart("2.0.0"))
			}
			tc.change(t, f.exampleChart("2.0.0"))
			name := release()
			w := f.k3sPlan(name, true)
			hcNS, named := f.ns, strings.NewReplacer("{ns}", w.relNS, "{release}", name)

			r := f.cliAs(w.kubeconfig, newNode(t, "node-1"), "preflight", "--target", f.target(name), "--chart-source", f.charts,
				"--version", "2.0.0", "--policy", w.policy)
			if tc.says != "" {
				r.RequireCode(t, outcome.ExitRefused)
				assert.Contains(t, r.Stderr, named.Replace(tc.says))
			} else {
				r.RequireCode(t, 0)
			}

			// the oracle: the HelmChart given the new version as admin, its Job's Helm
			patch := `{"spec":{"version":"2.0.0","chartContent":"` + f.chartContent(f.exampleChart("2.0.0")) + `","failurePolicy":"abort","backOffLimit":0}}`
			_, err := f.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(hcNS).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			require.NoError(t, err)
			if tc.says == "" {
				f.waitDeployed(name, "2.0.0")
				return
			}
			assert.Contains(t, f.jobError(name), named.Replace(tc.helm))
		})
	}
}

// jobError waits until a run of HelmChart name's Job fails, and returns
// what its Helm said: the executor's log of the failed runs of the Job's
// pods, unquoted.
func (f *fixture) jobError(name string) string {
	f.t.Helper()
	pod := "pod=" + f.ns + "/helm-install-" + name + "-"
	var said []string
	err := wait.PollUntilContextTimeout(f.t.Context(), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		executor.Lock()
		defer executor.Unlock()
		said = nil
		for _, line := range strings.Split(executor.log.String(), "\n") {
			if strings.Contains(line, `msg="helm job failed"`) && strings.Contains(line, pod) {
				said = append(said, strings.ReplaceAll(line, `\"`, `"`))
			}
		}
		return len(said) > 0, nil
	})
	require.NoError(f.t, err, "a failed run of job %s/helm-install-%s", f.ns, name)
	return strings.Join(said, "\n")
}

// kubeVersion sets the chart's kubeVersion.
func kubeVersion(constraint string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		require.NoError(t, testchart.SetKubeVersion(dir, constraint))
	}
}

// addTemplate adds a template to the chart.
func addTemplate(name, body string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", name), []byte(body), 0o644))
	}
}
