package cli_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// Every command takes its inputs as flags: a word that is no flag is bad
// input (exit 2) naming it, before anything is read or written, and the
// flags after it are not silently dropped but named.
func TestEveryCommandRefusesAStrayArgument(t *testing.T) {
	leaves := []string{"merge", "upgrade", "preflight", "status", "drift", "rollback", "resolve", "channel serve", "plan",
		"node cordon", "node drain", "node uncordon", "host prepare", "version"}
	// the list is every command --help names
	_, help, _ := noderun.CLI(t, "--help").Outputs()
	for _, line := range strings.Split(help[strings.Index(help, "COMMANDS:"):], "\n")[1:] {
		if strings.TrimSpace(line) == "" {
			break
		}
		name := strings.Fields(line)[0]
		found := name == "completion" // its argument is the shell (completion_test.go)
		for _, l := range leaves {
			found = found || strings.Fields(l)[0] == name
		}
		assert.True(t, found, "command %s is not in the test's list", name)
	}
	for _, cmd := range leaves {
		t.Run(cmd, func(t *testing.T) {
			args := append(strings.Fields(cmd), "stray-word", "-o", "json")
			code, stdout, stderr := noderun.CLI(t, args...).Outputs()
			assert.Equal(t, outcome.ExitBadInput, code, "stdout: %s\nstderr: %s", stdout, stderr)
			assert.Contains(t, stderr, cmd+`: unexpected argument "stray-word" (every input is a flag)`)
			assert.Contains(t, stderr, "nothing after it was read: -o json")
		})
	}
}

// The flag a stray word probably belongs to is named: the forgotten
// --policy of issue 31's report, before -o table.
func TestAStrayFileNamesItsFlag(t *testing.T) {
	ex := bundledExample(t)
	code, _, stderr := noderun.CLI(t, "merge", "--values", ex.values, "--old-chart", ex.oldChart, "--chart", ex.chart, ex.policy, "-o", "table").Outputs()
	assert.Equal(t, outcome.ExitBadInput, code)
	assert.Contains(t, stderr, `merge: unexpected argument "`+ex.policy+`" (every input is a flag; did you mean --policy `+ex.policy+`?); nothing after it was read: -o table`)
}

// version prints the build's version, commit, Go and Helm SDK versions, as
// text, JSON or YAML; another format is bad input naming the flag.
func TestVersion(t *testing.T) {
	stdout, _ := runOK(t, "version", "-o", "json")
	v := parseYAML(t, stdout)
	for _, k := range []string{"version", "commit", "goVersion", "helmSDKVersion"} {
		assert.NotEmpty(t, v[k], k)
	}
	assert.Contains(t, v["goVersion"], "go1.")
	stdout, _ = runOK(t, "version")
	assert.Contains(t, stdout, "chart-upgrader ")
	code, _, stderr := noderun.CLI(t, "version", "-o", "xml").Outputs()
	assert.Equal(t, outcome.ExitBadInput, code)
	assert.Contains(t, stderr, `version: -o "xml": want text, json or yaml`)
}

// A bad value that came from a flag's environment variable names the
// variable: the person typed no such flag.
func TestABadValueFromTheEnvironmentNamesTheVariable(t *testing.T) {
	ex := bundledExample(t)
	t.Setenv("CHART_UPGRADER_OUTPUT", "xml")
	code, _, stderr := noderun.CLI(t, "merge", "--values", ex.values, "--chart", ex.chart).Outputs()
	assert.Equal(t, outcome.ExitBadInput, code)
	assert.Contains(t, stderr, `-o "xml" (from $CHART_UPGRADER_OUTPUT): want yaml, json or table`)
}

// preflight with no cluster to talk to is bad input and writes nothing:
// no identity, no lock file, no journal.
func TestPreflightWithoutAClusterWritesNothing(t *testing.T) {
	root := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	code, _, stderr := noderun.CLI(t, "preflight", "--target", "managedchart/a/b", "--chart-source", ".", "--host-root", root).Outputs()
	assert.Equal(t, outcome.ExitBadInput, code, stderr)
	assert.Contains(t, stderr, "no cluster access")
	var written []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if path != root {
			written = append(written, path)
		}
		return nil
	})
	assert.Empty(t, written, "nothing written under the host root")
}

// Every command refuses a flag it does not define: exit 2, the command and
// the flag named once, nothing on stdout.
func TestEveryCommandRefusesAnUnknownFlag(t *testing.T) {
	for _, cmd := range []string{"merge", "upgrade", "preflight", "status", "drift", "rollback", "resolve", "channel serve", "plan",
		"node cordon", "node drain", "node uncordon", "host prepare", "version", "completion"} {
		code, stdout, stderr := noderun.CLI(t, append(strings.Fields(cmd), "--bogus", "x")...).Outputs()
		assert.Equal(t, outcome.ExitBadInput, code, cmd)
		assert.Empty(t, stdout, cmd)
		assert.Equal(t, "chart-upgrader: "+cmd[strings.LastIndex(cmd, " ")+1:]+": flag provided but not defined: -bogus (see --help)\n", stderr, cmd)
	}
}

// "-" is standard input for the spec and the values of --check-chart too:
// what it holds is read (its errors name standard input).
func TestStandardInputForTheSpecAndTheCheckValues(t *testing.T) {
	setStdin(t, "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts: 7\n")
	code, _, stderr := noderun.CLI(t, "preflight", "--spec", "-", "--kubeconfig", "/nonexistent").Outputs()
	assert.Equal(t, outcome.ExitBadInput, code, stderr)
	assert.Contains(t, stderr, "--spec: standard input:3: charts: ")

	ex := bundledExample(t)
	setStdin(t, "a: [1\n")
	code, _, stderr = noderun.CLI(t, "plan", "--image", "r/x", "--version", "1.0.0", "--check-chart", ex.chart,
		"--check-values", "-", "--check-release", "apps/demo").Outputs()
	assert.Equal(t, outcome.ExitBadInput, code, stderr)
	assert.Contains(t, stderr, "standard input")
}
