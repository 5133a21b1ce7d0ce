package e2e

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
)

// The health gates on a ManagedChart (tests/gatecase), the Fleet
// simulator's agent deploying it with Helm 4 on this (the local) cluster,
// as the ManagedChart Plan's ServiceAccount with the RBAC plan
// --check-chart --check-spec derives: the upgrade waits for the
// operator's writes, a failed gate exits 1, a timeout exits 4 naming the
// gate, a re-run resumes or does nothing, and bad gates are exit 2 with
// nothing written.
func TestHealthGatesOfAManagedChart(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, gatecase.WriteCharts(f.charts))
	name := "gated"
	op := gatecase.Start(t, f.env, f.ns)
	h := gatecase.Harness{T: t, Env: f.env, Operator: op, Namespace: f.ns, Widget: name + "-w", Target: "managedchart/" + f.ns + "/" + name,
		Applies: func() int { return int(f.get(name).Generation) }}
	h.Spec = func(extra string) string {
		return f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
			"- target: {kind: ManagedChart, namespace: "+f.ns+", name: "+name+"}\n"+
			"  chart: {name: "+gatecase.Chart+", source: "+f.charts+"}\n"+extra)
	}
	_, err := example.InstallAndWait(t.Context(), f.env, example.Install{Namespace: f.ns, Name: name, Chart: gatecase.Chart, Version: "1.0.0",
		Values: map[string]any{}}, 90*time.Second)
	require.NoError(t, err)
	h.WaitDeployed("1.0.0")
	kubeconfig := f.planServiceAccountOf(name, filepath.Join(f.charts, gatecase.Chart+"-2.0.0"), "--check-spec", h.Spec(gatecase.Gates(f.ns)))
	n := noderun.New(t, "node-1")
	h.Run = func(command string, args ...string) noderun.Result {
		return f.cli(n, command, append(args, "--kubeconfig", kubeconfig)...)
	}
	gatecase.Run(h)

	// a ManagedChart whose Bundle targets other clusters only has no
	// release here for its gates to read: bad input, nothing written
	elsewhere := "elsewhere"
	f.sim.SetFault(f.ns, elsewhere, fleetsim.Fault{NoClusters: true})
	_, err = f.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(f.ns).Create(t.Context(),
		example.ManagedChart(example.Install{Namespace: f.ns, Name: elsewhere, Chart: gatecase.Chart, Version: "1.0.0", Values: map[string]any{}}), metav1.CreateOptions{})
	require.NoError(t, err)
	data, err := os.ReadFile(h.Spec(gatecase.Gates(f.ns)))
	require.NoError(t, err)
	spec := f.writeFile("elsewhere.yaml", strings.Replace(string(data), "name: "+name+"}", "name: "+elsewhere+"}", 1))
	before := f.get(elsewhere).Generation
	r := f.cli(n, "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, "wait.health[1]: a health gate reads this cluster: managedchart/"+f.ns+"/"+elsewhere+" deploys no helm release "+f.ns+"/"+elsewhere+
		" on this cluster: its Bundle targets other clusters only")
	assert.Equal(t, before, f.get(elsewhere).Generation, "nothing written")
}
