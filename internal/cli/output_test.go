package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// failureObject is what a failed run prints on stdout with -o json or yaml.
type failureObject struct {
	Error struct {
		ExitCode int      `json:"exitCode"`
		Meaning  string   `json:"meaning"`
		Reasons  []string `json:"reasons"`
	} `json:"error"`
	Report map[string]any `json:"report"`
}

// Every command that takes -o prints, when it fails with -o json or -o
// yaml, one object on stdout holding the refusal, so a script reading
// stdout always has something to parse; stderr still has the error line.
func TestEveryOutputCommandPrintsOneObjectWhenItFails(t *testing.T) {
	ex := bundledExample(t)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		reason string
	}{
		{"merge without --values", []string{"merge", "--chart", ex.chart}, 2, "--values is required"},
		{"merge of a readonly value", ex.args("--set", "promote.clusterDNS=10.0.0.1"), 3, "promote.clusterDNS"},
		{"status without a target", []string{"status"}, 2, "--target: "},
		{"drift without a target", []string{"drift"}, 2, "--target: "},
		{"drift of a bad target", []string{"drift", "--target", "deployment/a/b"}, 2, "--target: "},
		{"plan without --image", []string{"plan", "--version", "1.0.0"}, 2, "--image: required"},
		{"resolve with no source", []string{"resolve", "--timeout", "1s"}, 2, ""},
		{"version with a stray word", []string{"version", "now"}, 2, `unexpected argument "now"`},
		{"merge with a zero duration flag", []string{"resolve", "--repo", "x", "--chart", "y", "--timeout", "0s"}, 2, "--timeout 0s: must be a positive duration"},
	} {
		for _, format := range []string{"json", "yaml"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				// -o first: nothing after a stray word is read
				args := append([]string{tc.args[0], "-o", format}, tc.args[1:]...)
				code, stdout, stderr := noderun.CLI(t, args...).Outputs()
				require.Equal(t, tc.code, code, "stderr: %s", stderr)
				var obj failureObject
				if format == "json" {
					dec := json.NewDecoder(strings.NewReader(stdout))
					dec.DisallowUnknownFields()
					require.NoError(t, dec.Decode(&obj), stdout)
					assert.False(t, dec.More(), "one object: %s", stdout)
				} else {
					require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &obj), stdout)
				}
				assert.Equal(t, tc.code, obj.Error.ExitCode)
				assert.Equal(t, map[int]string{2: "bad input", 3: "refused"}[tc.code], obj.Error.Meaning)
				require.Len(t, obj.Error.Reasons, 1)
				assert.Contains(t, obj.Error.Reasons[0], tc.reason)
				assert.Contains(t, stderr, obj.Error.Reasons[0], "stderr has the same error")
			})
		}
	}
	// the human forms print no object; a command whose human form is YAML
	// prints one only when -o yaml is asked for
	code, stdout, _ := noderun.CLI(t, "merge", "--chart", ex.chart, "-o", "table").Outputs()
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	code, stdout, _ = noderun.CLI(t, "merge", "--chart", ex.chart).Outputs()
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout, "merge's default -o yaml is the values: nothing to print")
	code, stdout, _ = noderun.CLI(t, "status").Outputs()
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
}

// The refusal of a merge that ran carries its decisions, secrets redacted.
func TestARefusedMergeCarriesItsReport(t *testing.T) {
	ex := bundledExample(t)
	code, stdout, _ := noderun.CLI(t, ex.args("--set", "promote.clusterDNS=10.0.0.1", "-o", "json")...).Outputs()
	require.Equal(t, 3, code)
	var obj failureObject
	require.NoError(t, json.Unmarshal([]byte(stdout), &obj))
	require.NotNil(t, obj.Report)
	assert.NotEmpty(t, obj.Report["decisions"])
	assert.NotContains(t, stdout, "BEGIN RSA PRIVATE KEY", "redacted")
}

// Every command with -o prints its human form, json and yaml.
func TestEveryOutputCommandPrintsEachFormat(t *testing.T) {
	ex := bundledExample(t)
	repo := filepath.Join(ex.dir, "charts")
	for _, tc := range []struct {
		args []string
		key  string // a key of the object printed
	}{
		{[]string{"version"}, "goVersion"},
		{[]string{"resolve", "--repo", repo, "--chart", "demo-app"}, "version"},
		{[]string{"plan", "--image", "r/chart-upgrader", "--version", "1.0.0"}, "kind"},
		{ex.args(), "decisions"},
	} {
		for _, format := range []string{"json", "yaml"} {
			stdout, _ := runOK(t, append(append([]string{}, tc.args...), "-o", format)...)
			var obj map[string]any
			if format == "json" {
				require.NoError(t, json.Unmarshal([]byte(stdout), &obj), "%v: %s", tc.args, stdout)
				assert.Contains(t, obj, tc.key, "%v -o json", tc.args)
			} else if tc.args[0] != "merge" { // merge -o yaml is the values
				require.NoError(t, yaml.Unmarshal([]byte(stdout), &obj), stdout)
				assert.Contains(t, obj, tc.key, "%v -o yaml", tc.args)
			}
		}
	}
	stdout, _ := runOK(t, "resolve", "--repo", repo, "--chart", "demo-app")
	assert.Equal(t, "2.0.0\n", stdout, "resolve's human form is the version alone")
	stdout, _ = runOK(t, "plan", "--image", "r/chart-upgrader", "--version", "1.0.0", "--drain", "-o", "yaml")
	assert.Contains(t, stdout, "timeout: 600000000000 # 10m0s", "a duration is said as a Go duration")

	// plan with its RBAC is a List
	stdout, _ = runOK(t, "plan", "--image", "r/chart-upgrader", "--version", "1.0.0", "-o", "json",
		"--check-chart", ex.chart, "--check-values", ex.values, "--check-release", "apps/demo")
	var list struct {
		Kind  string
		Items []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	assert.Equal(t, "List", list.Kind)
	assert.Greater(t, len(list.Items), 2, "the Plan, then its Role(s), ClusterRole and bindings")
	assert.Equal(t, "Plan", list.Items[0]["kind"])
	// named for the release, so two charts' sets stand side by side
	for _, item := range list.Items[1:] {
		assert.Equal(t, "chart-upgrader-demo-conflict-check", item["metadata"].(map[string]any)["name"], item["kind"])
	}
}

// "-" reads standard input wherever a file is read, as helm -f - does;
// only one input can read it.
func TestStandardInputForEveryFileFlag(t *testing.T) {
	ex := bundledExample(t)
	values, err := os.ReadFile(ex.values)
	require.NoError(t, err)
	policy, err := os.ReadFile(ex.policy)
	require.NoError(t, err)

	want, _ := runOK(t, ex.args("-o", "json")...)

	setStdin(t, string(values))
	got, _ := runOK(t, "merge", "--values", "-", "--old-chart", ex.oldChart, "--chart", ex.chart,
		"--policy", ex.policy, "--live", ex.live, "-o", "json")
	assert.JSONEq(t, want, got, "--values - is the same merge as --values FILE")

	setStdin(t, string(policy))
	got, _ = runOK(t, "merge", "--values", ex.values, "--old-chart", ex.oldChart, "--chart", ex.chart,
		"--policy", "-", "--live", ex.live, "-o", "json")
	assert.JSONEq(t, want, got, "--policy -")

	setStdin(t, "storageClass: {replicaCount: 2}\n")
	got, _ = runOK(t, ex.args("-f", "-", "-o", "json")...)
	assert.Contains(t, got, `"reason": "explicit -f standard input (the user policy gave: keep)"`)

	setStdin(t, "a-file-content\n")
	got, _ = runOK(t, ex.args("--set-file", "extra.note=-", "-o", "json")...)
	assert.Contains(t, got, `"result": "a-file-content\n"`)
	assert.Contains(t, got, `"reason": "explicit --set-file extra.note (the user policy gave: default)"`)

	// errors name standard input
	setStdin(t, "a: [1\n")
	code, _, stderr := noderun.CLI(t, "merge", "--values", "-", "--chart", ex.chart).Outputs()
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--values standard input: invalid YAML")
	setStdin(t, "rules: [{path: x, policy: maybe}]\n")
	code, _, stderr = noderun.CLI(t, "merge", "--values", ex.values, "--chart", ex.chart, "--policy", "-").Outputs()
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--policy: standard input:1: rules[1].policy: ")

	// two inputs cannot both read it
	for _, args := range [][]string{
		{"merge", "--values", "-", "-f", "-", "--chart", ex.chart},
		{"merge", "--values", "-", "--policy", "-", "--chart", ex.chart},
		{"merge", "--values", ex.values, "--set-file", "a=-", "-f", "-", "--chart", ex.chart},
	} {
		code, stdout, stderr := noderun.CLI(t, args...).Outputs()
		assert.Equal(t, 2, code, args)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "all read standard input; only one input can", args)
	}
}

// setStdin makes os.Stdin a file holding content for the rest of the test.
func setStdin(t *testing.T, content string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stdin")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	f, err := os.Open(p)
	require.NoError(t, err)
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = old; _ = f.Close() })
}
