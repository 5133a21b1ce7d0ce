package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMergeThatLeavesNoValuesStillDropsThePins: Fleet runs helm upgrade
// without reuse/reset flags, and Helm copies the previous release's values
// when given none. A merge that drops every user value must not write {}:
// the pinned tag would come back.
func TestMergeThatLeavesNoValuesStillDropsThePins(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", map[string]any{"webhook": map[string]any{"image": map[string]any{"tag": "v0.4.1"}}})
	policy := f.writeFile("policy.yaml", "rules:\n- {path: \"**.image.tag\", policy: follow}\n")
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", policy)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "writing global: {} instead")
	mc := f.get(name)
	assert.Equal(t, map[string]any{"global": map[string]any{}}, mc.Values)
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", f.configMap(name + "-config")["webhookImage"],
		"the pin equal to the old default was dropped, and Helm did not bring it back")
}
