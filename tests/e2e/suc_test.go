package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
)

// TestAsSUCJob runs the binary exactly as system-upgrade-controller's Job
// does: only `upgrade` as arguments, everything else from the SYSTEM_UPGRADE_*
// variables, the node's / mounted (here: a temporary directory standing in
// for /host) and the Plan's secret mounted with the upgrade spec. SUC
// retries failed Jobs: the second run must be a no-op.
func TestAsSUCJob(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())

	dir := t.TempDir()
	host := filepath.Join(dir, "host")
	require.NoError(t, os.MkdirAll(host, 0o755))
	secrets := filepath.Join(dir, "run-system-upgrade-secrets")
	specDir := filepath.Join(secrets, "chart-upgrader-spec")
	require.NoError(t, os.MkdirAll(specDir, 0o755))
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(t, err)
	spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n" +
		"- target: {kind: ManagedChart, namespace: " + f.ns + ", name: " + name + "}\n" +
		"  chart: {name: demo-app, source: " + f.charts + "}\n" +
		"  wait: {timeout: 2m}\n" + indent(string(policy), "  ")
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "spec.yaml"), []byte(spec), 0o600))
	termLog := filepath.Join(dir, "termination-log")

	env := []string{
		"SYSTEM_UPGRADE_NODE_NAME=node-a",
		"SYSTEM_UPGRADE_POD_NAME=apply-chart-upgrader-on-node-a-with-0123abcd-x1y2z",
		"SYSTEM_UPGRADE_POD_UID=5f0c6a2e-1111-2222-3333-444455556666",
		"SYSTEM_UPGRADE_PLAN_NAME=chart-upgrader",
		"SYSTEM_UPGRADE_PLAN_LATEST_HASH=0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd",
		"SYSTEM_UPGRADE_PLAN_LATEST_VERSION=2.0.0",
		"KUBECONFIG=" + f.env.KubeconfigPath(),
		"CHART_UPGRADER_HOST_ROOT=" + host,
		"CHART_UPGRADER_SECRETS_DIR=" + secrets,
		"CHART_UPGRADER_TERMINATION_LOG=" + termLog,
	}
	job := func() (int, string) {
		cmd := exec.Command(binary(t), "upgrade")
		cmd.Env = append(cleanEnv(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		}
		require.NoError(t, err)
		return 0, out.String()
	}

	code, out := job()
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"plan":"chart-upgrader"`, "logs name the plan")
	assert.Contains(t, out, `"pod":"apply-chart-upgrader-on-node-a-with-0123abcd-x1y2z"`)
	assert.Contains(t, out, "upgrade spec from the Plan's secret")
	mc := f.get(name)
	assert.Equal(t, "2.0.0", mc.Version)
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash])

	// local records under the host root, private
	for _, p := range []string{
		filepath.Join(host, "run", "chart-upgrader", "upgrade.lock"),
		filepath.Join(host, "var", "lib", "chart-upgrader", "identity"),
	} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	journals, err := filepath.Glob(filepath.Join(host, "var", "lib", "chart-upgrader", "managedchart_*@2.0.0.json"))
	require.NoError(t, err)
	require.Len(t, journals, 1)
	fi, err := os.Stat(journals[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	term, err := os.ReadFile(termLog)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(term), "ok: upgraded"), string(term))

	// Events carry the Job
	events, err := f.env.Kube().CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items)
	assert.Contains(t, events.Items[0].Message, "plan chart-upgrader")
	assert.Equal(t, "node-a", events.Items[0].Source.Host)

	// the Lease says which Job applied
	lease, err := f.env.Kube().CoordinationV1().Leases(f.ns).Get(t.Context(), "chart-upgrader-"+name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "chart-upgrader", lease.Annotations["chart-upgrader.io/plan"])
	assert.Equal(t, "apply-chart-upgrader-on-node-a-with-0123abcd-x1y2z", lease.Annotations["chart-upgrader.io/pod"])
	assert.Equal(t, "5f0c6a2e-1111-2222-3333-444455556666", lease.Annotations["chart-upgrader.io/pod-uid"])
	assert.Equal(t, "node-a", lease.Annotations["chart-upgrader.io/node"])
	assert.Empty(t, *lease.Spec.HolderIdentity, "released after verify")

	// SUC retries the Job: nothing to do, nothing written
	before := f.get(name)
	code, out = job()
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "nothing to do")
	assertUnchanged(t, before, f.get(name))
	again, err := f.env.Kube().CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	assert.Len(t, again.Items, len(events.Items), "a no-op run records no Events")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// cleanEnv is this process's environment without chart-upgrader's or
// SUC's variables, so only what a test sets reaches the child.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CHART_UPGRADER_") || strings.HasPrefix(kv, "SYSTEM_UPGRADE_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
