package plans

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// plans/node/: the k3s upgrade Plan whose prepare step is node preflight
// is what `plan --kind node` prints for the command in its header, and
// every object of it is accepted by the API server.
func TestNodePlanFile(t *testing.T) {
	const file = "node/30-plan.yaml"
	text := planFile(t, file)
	args := planCommand(t, file, text)
	code, stdout, stderr := noderun.CLI(t, append([]string{"plan"}, args...)...).Outputs()
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, stdout, body(text), "regenerate %s with the command in its header", file)
	assert.Contains(t, stdout, "  prepare:\n    image: ghcr.io/chart-upgrader/chart-upgrader:v1.0.0\n    args:\n    - node\n    - preflight\n")

	env := testenv.ForTest(t)
	m := mapper(t, env)
	ns := env.Namespace(t)
	moved := strings.NewReplacer("namespace: system-upgrade", "namespace: "+ns)
	kinds := acceptAll(t, env, m, file, moved.Replace(text))
	assert.Equal(t, map[string]int{"Plan": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 2}, kinds)
}

// `plan --kind node` refuses bad flags with exit 2, naming them.
func TestNodePlanRefusesBadFlags(t *testing.T) {
	base := []string{"plan", "--kind", "node", "--image", "rancher/k3s-upgrade", "--version", "v1.34.2+k3s1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no preflight image", base, "--preflight-image: required"},
		{"a preflight image without a tag", append(base, "--preflight-image", "ghcr.io/chart-upgrader/chart-upgrader"), `--preflight-image "ghcr.io/chart-upgrader/chart-upgrader": has no tag`},
		{"a chart Plan's flag", append(base, "--preflight-image", "r/x:1", "--spec-secret", "s"), "--kind node: --spec-secret are for chart upgrade Plans"},
		{"an upgrade image with a tag", []string{"plan", "--kind", "node", "--image", "rancher/k3s-upgrade:v1", "--version", "v1", "--preflight-image", "r/x:1"}, `--image "rancher/k3s-upgrade:v1": has a tag`},
		{"a preflight image on a chart Plan", []string{"plan", "--image", "r/x", "--version", "1", "--preflight-image", "r/x:1"}, "--preflight-image is for --kind node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := noderun.CLI(t, tc.args...).Outputs()
			assert.Equal(t, outcome.ExitBadInput, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
		})
	}
}
