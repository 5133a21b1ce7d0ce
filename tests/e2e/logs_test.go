package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// TestJSONLogsStayJSONAcrossASpec runs the binary on a spec of two charts
// with JSON logs, as a log collector reads it: every line on stderr must
// be one JSON object. Between the charts the first chart's watches are
// stopped; client-go's default handler would print each stopped watch as
// a klog text line ("Failed to watch … context canceled").
func TestJSONLogsStayJSONAcrossASpec(t *testing.T) {
	f := newFixture(t)
	names := []string{release(), release()}
	spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"
	for _, name := range names {
		// each release in a namespace of its own: the chart's certificate
		// Secret has a fixed name
		releaseNS := f.env.Namespace(t)
		_, err := example.InstallAndWait(t.Context(), f.env, example.Install{Namespace: f.ns, Name: name, Version: "1.0.0",
			ReleaseNamespace: releaseNS, Values: example.UserValues()}, time.Minute)
		require.NoError(t, err)
		policy, err := os.ReadFile(f.policy(name))
		require.NoError(t, err)
		policy = bytes.ReplaceAll(policy, []byte("namespace: "+f.ns), []byte("namespace: "+releaseNS))
		spec += "- target: {kind: ManagedChart, namespace: " + f.ns + ", name: " + name + "}\n" +
			"  chart: {name: demo-app, source: " + f.charts + "}\n" +
			"  wait: {timeout: 2m}\n" + indent(string(policy), "  ")
	}
	specFile := f.writeFile("spec.yaml", spec)

	cmd := f.node.Command(t, f.env, "upgrade", "--spec", specFile, "--version", "2.0.0")
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())

	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.NotEmpty(t, lines)
	phases := 0
	for i, l := range lines {
		var rec map[string]any
		if !assert.NoError(t, json.Unmarshal([]byte(l), &rec), "stderr line %d is not JSON: %s", i+1, l) {
			continue
		}
		assert.NotEqual(t, "ERROR", rec["level"], "an error logged by a successful run: %s", l)
		if rec["msg"] == "phase done" {
			phases++
		}
	}
	assert.Equal(t, 2*6, phases, "six phases per chart")
	for _, name := range names {
		assert.Equal(t, "2.0.0", f.get(name).Version, name)
	}
}
