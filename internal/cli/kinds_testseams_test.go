//go:build testseams

package cli_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// widgetOptions are the options of the test kind.
type widgetOptions struct{ Speed string }

// A fourth kind is one descriptor and one registry entry: registered in a
// test build, it is accepted by the spec parser (with its own options), by
// --target, by `plan --kind`, and named in the help texts, with nothing
// else changed.
func TestAFourthKindIsOneRegistration(t *testing.T) {
	widget := kind.Descriptor{Name: "widget", Spelling: "Widget", APIVersion: "example.com/v1", Summary: "a test Widget",
		Example: "widget/demo/w1",
		Options: &kind.Options{Field: "widget", Summary: "speed",
			Default: func() any { return widgetOptions{Speed: "slow"} },
			Parse: func(f yamlfile.File, n *yaml.Node, field string) (any, error) {
				m, err := f.Fields(n, field, "speed")
				if err != nil {
					return nil, err
				}
				s, err := f.OptString(m, "speed")
				return widgetOptions{Speed: s}, err
			}},
		Plan: kind.PlanDefaults{Dir: "plans/widget/", Name: "chart-upgrader-widget", NodeSelector: "example.com/widgets=true",
			SpecSecret: "widget-spec", ServiceAccount: "widget-sa"}}
	defer targets.Register(widget, func(*cluster.Clients, string, string, any, kind.Apply) upgrade.Target { return nil })()

	sp, err := spec.ParseSpec("spec.yaml", []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: Widget, namespace: demo, name: w1}
  chart: {name: w, source: /charts}
  widget: {speed: fast}
- target: {kind: widget, namespace: demo, name: w2}
  chart: {name: w, source: /charts}
`), targets.Kinds())
	require.NoError(t, err)
	assert.Equal(t, spec.Target{Kind: "widget", Namespace: "demo", Name: "w1"}, sp.Charts[0].Target)
	assert.Equal(t, widgetOptions{Speed: "fast"}, sp.Charts[0].Options)
	assert.Equal(t, widgetOptions{Speed: "slow"}, sp.Charts[1].Options, "the kind's defaults")
	_, err = spec.ParseSpec("spec.yaml", []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: ManagedChart, namespace: demo, name: m}
  chart: {name: w, source: /charts}
  widget: {speed: fast}
`), targets.Kinds())
	assert.EqualError(t, err, "spec.yaml:6: charts[1].widget: only a target of kind Widget takes widget options (this one is a ManagedChart)")
	tg, err := spec.ParseTarget("WIDGET/demo/w1", targets.Kinds())
	require.NoError(t, err)
	assert.Equal(t, "widget/demo/w1", tg.String())

	out, _ := runOK(t, "plan", "--kind", "widget", "--image", "example.com/chart-upgrader", "--version", "1.0.0")
	for _, want := range []string{"name: chart-upgrader-widget", "example.com/widgets", "serviceAccountName: widget-sa", "name: widget-spec"} {
		assert.Contains(t, out, want)
	}
	help, _ := runOK(t, "plan", "--help")
	assert.Contains(t, help, "widget (plans/widget/)")
	help, _ = runOK(t, "upgrade", "--help")
	assert.Contains(t, help, "managedchart, helmchart, release or widget")
	help, _ = runOK(t, "merge", "--help")
	assert.Contains(t, help, "a test Widget")
}
