package e2e

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Preflight and the real upgrade of a ManagedChart agree: for chart
// version pairs that each break the upgrade, and a control beside each,
// preflight as the Plan's ServiceAccount (plans/10-rbac.yaml and the
// rules `plan --check-chart` prints) refuses exactly where Fleet's agent
// (the simulator's, Helm 4 server-side), given the new version as admin
// right after, fails, naming the cause the agent's Helm names; it passes
// where the agent deploys.
func TestPreflightAgreesWithFleetsAgent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change string // the template 2.0.0 adds (or changes), "name.yaml: body"; or "kubeVersion: CONSTRAINT"
		says   string // preflight's refusal; "" for a control
		agent  string // the words of the agent's Helm
		both   string // a template of 1.0.0 and 2.0.0, "name.yaml: body"
	}{
		{"a Kubernetes the cluster is not", "kubeVersion: >=1.99.0-0",
			"requires kubeVersion: >=1.99.0-0 which is incompatible with Kubernetes v1.33", "requires kubeVersion", ""},
		{"the cluster's Kubernetes", "kubeVersion: >=1.20.0-0", "", "", ""},
		{"a label the server cannot take", "labelled.yaml: " + testchart.LabelledConfigMap("not valid"),
			`metadata.labels: Invalid value: "not valid"`, `metadata.labels: Invalid value: "not valid"`, ""},
		{"a label", "labelled.yaml: " + testchart.LabelledConfigMap("valid"), "", "", ""},
		{"an immutable ConfigMap's data", "frozen.yaml: " + testchart.FrozenConfigMap("b", ""),
			"rejected by the API server: ConfigMap {ns}/{release}-frozen", "field is immutable when `immutable` is set", "frozen.yaml: " + testchart.FrozenConfigMap("a", "")},
		{"an immutable ConfigMap's labels", "frozen.yaml: " + testchart.FrozenConfigMap("a", "tier: web"), "", "", "frozen.yaml: " + testchart.FrozenConfigMap("a", "")},
		{"a PodDisruptionBudget with both bounds", "pdb.yaml: " + testchart.PDBTemplate("minAvailable: 1, maxUnavailable: 1"),
			"minAvailable and maxUnavailable cannot be both set", "minAvailable and maxUnavailable cannot be both set", ""},
		{"a PodDisruptionBudget", "pdb.yaml: " + testchart.PDBTemplate("minAvailable: 1"), "", "", ""},
		{"a removed API version", "hpa.yaml: " + testchart.HPATemplate("autoscaling/v2beta2"),
			"is at autoscaling/v2beta2, which this cluster does not serve", `no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta2"`, ""},
		{"the served API version", "hpa.yaml: " + testchart.HPATemplate("autoscaling/v2"), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.both != "" {
				f.addTemplate("1.0.0", tc.both)
				f.addTemplate("2.0.0", tc.both)
			}
			f.addTemplate("2.0.0", tc.change)
			name := release()
			f.install(name, "1.0.0", example.UserValues())
			kubeconfig := f.planServiceAccount(name)
			named := strings.NewReplacer("{ns}", f.ns, "{release}", name)

			r := f.cli(f.node, "preflight", append(f.upgradeArgs(name, "2.0.0", f.policy(name)), "--kubeconfig", kubeconfig)...)
			if tc.says != "" {
				r.RequireCode(t, outcome.ExitRefused)
				assert.Contains(t, r.Stderr, named.Replace(tc.says))
			} else {
				r.RequireCode(t, 0)
			}

			// the oracle: the ManagedChart given the new version as admin, the agent's Helm
			f.patchManagedChart(t.Context(), name, `{"spec":{"version":"2.0.0"}}`)
			if tc.says == "" {
				f.waitReady(name, upgrade.Want{Version: "2.0.0"})
				return
			}
			assert.Contains(t, f.agentError(name), named.Replace(tc.agent))
		})
	}
}

// addTemplate writes a template ("name.yaml: body") into the example
// chart at version, or sets its kubeVersion ("kubeVersion: CONSTRAINT").
func (f *fixture) addTemplate(version, template string) {
	f.t.Helper()
	name, body, ok := strings.Cut(template, ": ")
	require.True(f.t, ok, template)
	if name == "kubeVersion" {
		require.NoError(f.t, testchart.SetKubeVersion(filepath.Join(f.charts, "demo-app-"+version), body))
		return
	}
	require.NoError(f.t, os.WriteFile(filepath.Join(f.charts, "demo-app-"+version, "templates", name), []byte(body), 0o644))
}

// agentError waits until the agent reports the local BundleDeployment of
// ManagedChart name failed, and returns its error.
func (f *fixture) agentError(name string) string {
	f.t.Helper()
	var said string
	err := wait.PollUntilContextTimeout(f.t.Context(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		bd, err := f.env.Dynamic().Resource(fleetsim.BundleDeploymentsGVR).Namespace(fleetsim.ClusterNamespace(f.ns)).
			Get(ctx, fleetsim.BundleDeploymentName(fleetsim.BundleName(name), fleetsim.LocalCluster), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		said, _, _ = unstructured.NestedString(bd.Object, "status", "display", "deployed")
		return strings.HasPrefix(said, "Error: "), nil
	})
	require.NoError(f.t, err, "the agent's failure to deploy %s/%s", f.ns, name)
	return said
}
