package e2ehelmchart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/gatecase"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// The health gates on a HelmChart (tests/gatecase), through the real
// helm-controller, as the k3s Plan's ServiceAccount with the RBAC plan
// --check-chart --check-spec derives: the upgrade waits for the
// operator's writes, a failed gate exits 1, a timeout exits 4 naming the
// gate, a re-run resumes or does nothing, and bad gates are exit 2 with
// nothing written.
func TestHealthGatesOfAHelmChart(t *testing.T) {
	f := newFixture(t)
	charts := t.TempDir()
	require.NoError(t, gatecase.WriteCharts(charts))
	name := release()
	relNS := f.env.Namespace(t)
	op := gatecase.Start(t, f.env, relNS)
	h := gatecase.Harness{T: t, Env: f.env, Operator: op, Namespace: relNS, Widget: name + "-w", Target: f.target(name),
		Applies: func() int {
			revs, err := f.hc.Releases().History(relNS, name, "secret")
			require.NoError(t, err)
			return len(revs)
		}}
	h.Spec = func(extra string) string {
		return f.writeFile("spec.yaml", "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
			"- target: {kind: HelmChart, namespace: "+f.ns+", name: "+name+"}\n"+
			"  chart: {name: "+gatecase.Chart+", source: "+charts+"}\n"+extra)
	}
	w := f.k3sPlanRBAC(name, relNS, filepath.Join(charts, gatecase.Chart+"-2.0.0"), "--check-spec", h.Spec(gatecase.Gates(relNS)))
	f.create(f.helmChart(name, map[string]any{"chart": gatecase.Chart, "version": "1.0.0", "failurePolicy": "abort",
		"chartContent": f.chartContent(filepath.Join(charts, gatecase.Chart+"-1.0.0")), "targetNamespace": relNS}))
	f.waitDeployed(name, "1.0.0")
	h.WaitDeployed("1.0.0")
	n := newNode(t, "node-1")
	h.Run = func(command string, args ...string) noderun.Result { return f.cliAs(w.kubeconfig, n, command, args...) }
	gatecase.Run(h)
	_, denied := rbaccheck.Requests(t, f.env, w.sa)
	require.Empty(t, denied, "requests of %s the RBAC refused", w.sa)
}
