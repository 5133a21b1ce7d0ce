package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// completeWith runs the bash completion script in a real bash for the
// words typed (the last one being completed) and returns the candidates.
func completeWith(t *testing.T, script string, words ...string) []string {
	t.Helper()
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = strconv.Quote(w)
	}
	prog := script + "\nCOMP_WORDS=(chart-upgrader " + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)) +
		"\n_chart_upgrader\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

func TestBashCompletionCompletesCommandsFlagsAndValues(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed to run the completion script: %v", err)
	}
	code, script, stderr := noderun.CLI(t, "completion", "bash").Outputs()
	require.Equal(t, 0, code, stderr)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "charts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), nil, 0o600))

	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"me"}, []string{"merge"}},
		{[]string{"channel", "s"}, []string{"serve"}},
		{[]string{"node", "dr"}, []string{"drain"}},
		{[]string{"merge", "--val"}, []string{"--values"}},
		{[]string{"merge", "--set-"}, []string{"--set-json", "--set-string", "--set-file", "--set-literal"}},
		{[]string{"merge", "-o", ""}, []string{"yaml", "json", "table"}},
		{[]string{"status", "--output", ""}, []string{"text", "json", "yaml"}},
		{[]string{"plan", "-o", ""}, []string{"yaml", "json"}},
		{[]string{"merge", "--values", filepath.Join(dir, "va")}, []string{filepath.Join(dir, "values.yaml")}},
		{[]string{"upgrade", "--chart-source", filepath.Join(dir, "c")}, []string{filepath.Join(dir, "charts")}}, // a directory
		{[]string{"upgrade", "--kubeconfig", filepath.Join(dir, "c")}, []string{filepath.Join(dir, "charts"), filepath.Join(dir, "config.yaml")}},
		{[]string{"upgrade", "--target", "x"}, nil}, // a value with no completion
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish", "--help", "-h"}},
		{[]string{"merge", "--values", "v.yaml", "--pol"}, []string{"--policy"}},
	} {
		assert.ElementsMatch(t, tc.want, completeWith(t, script, tc.words...), "%v", tc.words)
	}
}

func TestCompletionScriptsForZshAndFish(t *testing.T) {
	code, bash, _ := noderun.CLI(t, "completion", "bash").Outputs()
	require.Equal(t, 0, code)
	code, zsh, _ := noderun.CLI(t, "completion", "zsh").Outputs()
	require.Equal(t, 0, code)
	assert.Contains(t, zsh, "bashcompinit")
	assert.True(t, strings.HasSuffix(zsh, bash), "zsh completes through the bash script")

	code, fish, _ := noderun.CLI(t, "completion", "fish").Outputs()
	require.Equal(t, 0, code)
	// a flag that takes a file lets fish complete file names (no -f)
	assert.Contains(t, fish, "complete -c chart-upgrader -n '__fish_seen_subcommand_from merge' -l values -r")
	assert.Contains(t, fish, "complete -c chart-upgrader -n '__fish_seen_subcommand_from merge' -f -l target -r")
}

func TestCompletionNamesTheShellItWants(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"completion"}, "completion: name the shell: completion bash, completion zsh or completion fish"},
		{[]string{"completion", "ksh"}, `completion: unknown shell "ksh": want bash, zsh or fish`},
		{[]string{"completion", "bash", "zsh"}, `completion: one shell, not "bash zsh"`},
	} {
		code, stdout, stderr := noderun.CLI(t, tc.args...).Outputs()
		assert.Equal(t, 2, code, tc.args)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, tc.want)
	}
}
