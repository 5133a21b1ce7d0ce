package e2erollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/gatecase"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The health gates on a ManagedChart (tests/gatecase), the Fleet
// simulator's agent deploying it with Helm 4 on this (the local) cluster,
// on a control plane whose workloads run, as the ManagedChart Plan's
// ServiceAccount with the RBAC plan --check-chart --check-spec derives:
// the upgrade waits for the operator's writes, a failed gate exits 1, a
// timeout exits 4 naming the gate, a re-run resumes or does nothing, and
// bad gates are exit 2 with nothing written. A ManagedChart whose Bundle
// targets other clusters only has no release here for its gates: bad
// input, nothing written.
func TestHealthGatesOfAManagedChart(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	mcNS, sucNS := env.Namespace(t), env.Namespace(t)
	name := name("gated")
	charts := t.TempDir()
	require.NoError(t, gatecase.WriteCharts(charts))
	for _, v := range gatecase.Versions { // the simulator loads charts from the shared directory, by name
		require.NoError(t, os.Rename(filepath.Join(charts, gatecase.Chart+"-"+v), filepath.Join(world.charts, name+"-"+v)))
		data, err := os.ReadFile(filepath.Join(world.charts, name+"-"+v, "Chart.yaml"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(world.charts, name+"-"+v, "Chart.yaml"),
			[]byte(strings.Replace(string(data), "name: "+gatecase.Chart, "name: "+name, 1)), 0o644))
	}
	op := gatecase.Start(t, env, mcNS)
	h := gatecase.Harness{T: t, Env: env, Operator: op, Namespace: mcNS, Widget: name + "-w", Target: "managedchart/" + mcNS + "/" + name}
	mcs := env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(mcNS)
	h.Applies = func() int {
		u, err := mcs.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return int(u.GetGeneration())
	}
	specFor := func(target, extra string) string {
		path := filepath.Join(t.TempDir(), "spec.yaml")
		require.NoError(t, os.WriteFile(path, []byte("apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
			"- target: {kind: ManagedChart, namespace: "+mcNS+", name: "+target+"}\n"+
			"  chart: {name: "+name+", source: "+world.charts+"}\n"+extra), 0o600))
		return path
	}
	h.Spec = func(extra string) string { return specFor(name, extra) }
	_, err := example.InstallAndWait(t.Context(), env, example.Install{Namespace: mcNS, Name: name, Chart: name, Version: "1.0.0",
		Values: map[string]any{}}, 90*time.Second)
	require.NoError(t, err)
	h.WaitDeployed("1.0.0")
	kubeconfig := planServiceAccountFor(t, env, sucNS, name, mcNS, "--check-spec", h.Spec(gatecase.Gates(mcNS)))
	n := noderun.New(t, "node-1")
	h.Run = func(command string, args ...string) noderun.Result {
		return n.Run(t.Context(), env, command, append(args, "--kubeconfig", kubeconfig)...)
	}
	gatecase.Run(h)

	elsewhere := name + "-elsewhere"
	world.sim.SetFault(mcNS, elsewhere, fleetsim.Fault{NoClusters: true})
	_, err = mcs.Create(t.Context(), example.ManagedChart(example.Install{Namespace: mcNS, Name: elsewhere, Chart: name, Version: "1.0.0",
		Values: map[string]any{}}), metav1.CreateOptions{})
	require.NoError(t, err)
	before, err := mcs.Get(t.Context(), elsewhere, metav1.GetOptions{})
	require.NoError(t, err)
	r := n.Run(t.Context(), env, "upgrade", "--spec", specFor(elsewhere, gatecase.Gates(mcNS)), "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, "wait.health[1]: a health gate reads this cluster: managedchart/"+mcNS+"/"+elsewhere+" deploys no helm release "+mcNS+"/"+elsewhere+
		" on this cluster: its Bundle targets other clusters only")
	after, err := mcs.Get(t.Context(), elsewhere, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.GetGeneration(), after.GetGeneration(), "nothing written")
}

// planServiceAccountFor is the ManagedChart Plan's ServiceAccount for
// ManagedChart name of namespace mcNS (its release there too), with the
// RBAC plan --check-chart derives from its chart 2.0.0, and planArgs.
func planServiceAccountFor(t *testing.T, env *testenv.Env, sucNS, name, mcNS string, planArgs ...string) string {
	t.Helper()
	return planServiceAccount(t, env, "10-rbac.yaml", "managedchart", "chart-upgrader-"+name, sucNS, name, mcNS, name,
		[]string{"chart-upgrader-sources", "chart-upgrader-gates"}, planArgs,
		"namespace: fleet-local", "namespace: "+mcNS, "namespace: harvester-system", "namespace: "+mcNS, "namespace: system-upgrade", "namespace: "+sucNS,
		"resourceNames: [harvester-crd, harvester]", "resourceNames: ["+name+"]",
		"resourceNames: [mcc-harvester-crd, mcc-harvester]", "resourceNames: ["+managedchart.BundleName(name)+"]",
		"resourceNames: [harvester-system]", "resourceNames: ["+mcNS+"]", "name: chart-upgrader\n", "name: chart-upgrader-"+name+"\n")
}
