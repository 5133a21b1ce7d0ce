package nodes

import (
	"testing"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// run runs chart-upgrader in-process and returns its exit code, stdout and
// stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	r := noderun.CLI(t, args...)
	return r.Code, r.Stdout, r.Stderr
}

// TestCLI runs cordon, drain and uncordon as SUC would: the node from
// $SYSTEM_UPGRADE_NODE_NAME, progress on stderr, nothing on stdout.
func TestCLI(t *testing.T) {
	f := newFixture(t)
	kc := "--kubeconfig=" + f.env.KubeconfigPath()
	t.Setenv("SYSTEM_UPGRADE_NODE_NAME", f.node)
	web := f.pod(podSpec{name: "web-0", owner: "rs", labels: map[string]string{"app": "web"}})
	agent := f.pod(podSpec{name: "agent", owner: "ds"})
	f.pdb("web", map[string]string{"app": "web"})

	code, stdout, stderr := run(t, "node", "cordon", kc)
	require.Equal(t, outcome.ExitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "node/"+f.node+" cordoned\n", stderr)
	f.requireCordonedByUs(f.node)

	// the drain's preflight names both blockers, and evicts nothing
	code, _, stderr = run(t, "node", "drain", kc, "--timeout=1s", "--grace-period=0")
	assert.Equal(t, outcome.ExitRefused, code, stderr)
	assert.Contains(t, stderr, "chart-upgrader: the drain of node \""+f.node+"\" would not finish: 2 blocker(s): ")
	assert.Contains(t, stderr, "kubectl: pod "+f.ns+"/agent: kubectl drain cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)")
	assert.Contains(t, stderr, "budget: pod "+f.ns+"/web-0 (ReplicaSet/app): PodDisruptionBudget "+f.ns+"/web allows no disruption")
	assert.NotContains(t, stderr, "evicting")

	code, _, stderr = run(t, "node", "drain", kc, "--timeout=1s", "--grace-period=0", "--ignore-daemonsets")
	assert.Equal(t, outcome.ExitRefused, code, stderr)
	assert.Contains(t, stderr, "would not finish: 1 blocker(s): budget: pod "+f.ns+"/web-0")
	assert.NotContains(t, stderr, "evicting")

	// without the preflight the drain evicts, and waits out its timeout
	code, _, stderr = run(t, "node", "drain", kc, "--timeout=1s", "--grace-period=0", "--ignore-daemonsets", "--skip-preflight")
	assert.Equal(t, outcome.ExitTimeout, code, stderr)
	assert.Contains(t, stderr, "node/"+f.node+": drain preflight skipped (--skip-preflight)")
	assert.Contains(t, stderr, "node/"+f.node+" already cordoned by chart-upgrader")
	assert.Contains(t, stderr, "evicting pod "+f.ns+"/web-0\n")
	assert.Contains(t, stderr, "chart-upgrader: draining node \""+f.node+"\": timed out after 1s with 1 pod still there: "+
		f.ns+"/web-0 (PodDisruptionBudget "+f.ns+"/web allows no disruption)\n")
	f.requireThere(web, agent)

	require.NoError(t, f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}))
	code, stdout, stderr = run(t, "node", "drain", kc, "--timeout=30s", "--grace-period=0", "--ignore-daemonsets")
	require.Equal(t, outcome.ExitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "node/"+f.node+": drain preflight: the drain would finish (1 pods to evict, 1 warnings)\n")
	assert.Contains(t, stderr, "pod "+f.ns+"/web-0 evicted\n")
	assert.Contains(t, stderr, "node/"+f.node+" drained\n")
	f.requireGone(web)
	f.requireThere(agent)

	code, _, stderr = run(t, "node", "uncordon", kc)
	require.Equal(t, outcome.ExitOK, code, stderr)
	assert.Equal(t, "node/"+f.node+" uncordoned\n", stderr)
	f.requireSchedulable(f.node)

	// --node wins over the environment; someone else's cordon stays
	other := f.newNode(true)
	code, _, stderr = run(t, "node", "uncordon", kc, "--node", other)
	require.Equal(t, outcome.ExitOK, code, stderr)
	assert.Equal(t, "node/"+other+" cordoned by someone else, not by chart-upgrader: left cordoned\n", stderr)
	assert.True(t, f.getNode(other).Spec.Unschedulable)
}

// TestCLIErrors: exit codes of the node commands' failures.
func TestCLIErrors(t *testing.T) {
	f := newFixture(t)
	kc := "--kubeconfig=" + f.env.KubeconfigPath()
	t.Setenv("SYSTEM_UPGRADE_NODE_NAME", "")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no node", []string{"node", "cordon", kc}, outcome.ExitBadInput,
			"chart-upgrader: node cordon: no --node given and $SYSTEM_UPGRADE_NODE_NAME is not set\n"},
		{"node not found", []string{"node", "uncordon", kc, "--node=no-such-node"}, outcome.ExitRefused,
			"chart-upgrader: uncordoning node \"no-such-node\": nodes \"no-such-node\" not found\n"},
		{"bad selector", []string{"node", "drain", kc, "--node", f.node, "--pod-selector=a in (b"}, outcome.ExitBadInput,
			"chart-upgrader: draining node \"" + f.node + "\": pod selector \"a in (b\": "},
		{"preflight: node not found", []string{"node", "preflight", kc, "--node=no-such-node"}, outcome.ExitBadInput,
			"chart-upgrader: node \"no-such-node\": node not found\n"},
		{"preflight: bad selector", []string{"node", "preflight", kc, "--node", f.node, "--pod-selector=a in (b"}, outcome.ExitBadInput,
			"chart-upgrader: --pod-selector \"a in (b\": "},
		{"preflight: no such Plan", []string{"node", "preflight", kc, "--node", f.node, "--plan=nope", "--plan-namespace=default"}, outcome.ExitBadInput,
			"chart-upgrader: --plan: Plan default/nope not found"},
		{"preflight: a Plan and drain flags", []string{"node", "preflight", kc, "--node", f.node, "--plan=nope", "--force"}, outcome.ExitBadInput,
			"chart-upgrader: --plan nope reads the drain from the Plan's spec.drain: drop --force\n"},
		{"preflight: bad output", []string{"node", "preflight", kc, "--node", f.node, "-o", "yaml"}, outcome.ExitBadInput,
			"chart-upgrader: "},
		{"bad timeout", []string{"node", "drain", kc, "--node", f.node, "--timeout=soon"}, outcome.ExitBadInput,
			"chart-upgrader: "},
		{"unknown flag", []string{"node", "drain", kc, "--node", f.node, "--disable-eviction"}, outcome.ExitBadInput,
			"chart-upgrader: drain: flag provided but not defined: -disable-eviction (see --help)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
	f.requireSchedulable(f.node)
}
