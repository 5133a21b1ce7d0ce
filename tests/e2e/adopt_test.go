package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/hotfix"
)

// An operator's hotfixes (the real kubectl) under a ManagedChart: Fleet
// reports the objects Modified; drift names each field in values terms
// and lists Fleet's patches beside them; without adopt rules the upgrade
// is refused as before (the drift, and the conflicts Fleet's agent would
// meet); with adopt rules on the Deployment's fields only the ConfigMap
// is refused; with one on its key too Fleet's agent upgrades server-side
// with no force, and the hotfixes stay, shared with the agent.
func TestAdoptAnOperatorsHotfixesUnderAManagedChart(t *testing.T) {
	f := newFixture(t)
	hotfix.Charts(t, f.charts)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	hotfix.Make(t, f.env, f.ns, name, true)
	f.awaitObserved(name, "Modified by the hotfixes", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return b != nil && b.Status.Summary.Modified == 1 && len(b.Status.Summary.NonReadyResources) == 1 &&
			len(b.Status.Summary.NonReadyResources[0].Modified) == 2
	})

	r := f.cli(f.node, "drift", "--target", "managedchart/"+f.ns+"/"+name, "--chart-source", f.charts, "-o", "json")
	r.RequireCode(t, 0)
	out := hotfix.CheckDrift(t, r.Stdout, f.ns, name, true)
	var reported []string
	for _, d := range out.Reported {
		reported = append(reported, d.Object+" "+d.Patch)
	}
	assert.Contains(t, strings.Join(reported, "\n"), "Deployment "+f.ns+"/"+name+"-web")
	assert.Contains(t, strings.Join(reported, "\n"), `{"data":{"retention":"7d"}}`, "Fleet's patch, which would restore the chart's value")
	hotfix.UndoHardCoded(t, f.env, f.ns, name)
	before := f.get(name)

	policy := func(rules string) string { return hotfix.WithRules(t, f.policy(name), rules) }
	r = f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		"Deployment " + f.ns + "/" + name + "-web was changed in the cluster",
		hotfix.ImageField + ` is owned by "kubectl-set"`,
		"{path: web.image.tag, policy: adopt}",
		hotfix.RetentionField + ` is owned by "kubectl-patch"`,
	} {
		assert.Contains(t, r.Stderr, want)
	}

	r = f.cli(f.node, "preflight", f.upgradeArgs(name, "2.0.0", policy(hotfix.AdoptDeployment))...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "ConfigMap "+f.ns+"/"+name+"-web-config was changed in the cluster")
	assert.Contains(t, r.Stderr, hotfix.RetentionField+` is owned by "kubectl-patch"`)
	assert.NotContains(t, r.Stderr, "Deployment "+f.ns+"/"+name+"-web was changed")
	assert.NotContains(t, r.Stderr, hotfix.ImageField)
	// the simulated Fleet writes status meanwhile; the spec is untouched
	after := f.get(name)
	assert.Equal(t, before.Version, after.Version)
	assert.Equal(t, before.Generation, after.Generation, "the ManagedChart's spec is untouched")

	r = f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", policy(hotfix.AdoptDeployment+hotfix.AdoptConfigMap))...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "adopt rules take its live values")
	mc := f.waitReady(name, upgrade.Want{Version: "2.0.0"})
	assert.Equal(t, "2.0.0", mc.Version)
	hotfix.CheckKept(t, f.env, f.ns, name, managedchart.AgentFieldManager)
}
