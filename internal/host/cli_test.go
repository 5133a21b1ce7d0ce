package host_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// upgradeArgs are a complete `upgrade` command line but for the paths: it
// stops at the state directory, before any cluster access (its kubeconfig
// names an API server that is not there: read, never reached).
func upgradeArgs(t *testing.T, hostRoot string) []string {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`), 0o644))
	return []string{"upgrade", "--target", "managedchart/fleet-local/demo-app", "--chart-source", t.TempDir(),
		"--kubeconfig", kubeconfig, "--host-root", hostRoot, "--log-format", "json"}
}

// `upgrade` with a state directory it cannot create fails at once: exit 1,
// one line naming the directory, and the same line in the termination log.
func TestUpgradeStopsAtAnUnwritableStateDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	state := filepath.Join(file, "state")
	termLog := filepath.Join(dir, "termination-log")
	want := fmt.Sprintf("state directory %s is not writable by uid %d: not a directory (mkdir %s)", state, os.Geteuid(), file)

	for name, extra := range map[string][]string{
		"lock in the state directory": {"--state-dir", state},
		"lock elsewhere":              {"--state-dir", state, "--lock-file", filepath.Join(dir, "run", "upgrade.lock")},
	} {
		t.Run(name, func(t *testing.T) {
			args := append(upgradeArgs(t, filepath.Join(dir, "no-host")), append(extra, "--termination-log", termLog)...)
			code, stdout, stderr := noderun.CLI(t, args...).Outputs()
			assert.Equal(t, outcome.ExitFailure, code)
			assert.Empty(t, stdout)
			assert.Equal(t, "chart-upgrader: "+want+"\n", stderr, "one line, nothing before it")
			got, err := os.ReadFile(termLog)
			require.NoError(t, err)
			assert.Equal(t, "exit 1: "+want+"\n", string(got))
		})
	}
}

// The same as the upgrade container meets it: the default paths under a
// host root whose var/lib and run are root's, run as uid 17017.
func TestUpgradeAsTheUpgradeUserOnAnUnpreparedNode(t *testing.T) {
	needRoot(t)
	root, state, _ := node(t)
	termLog := filepath.Join(sharedTempDir(t), "termination-log")
	require.NoError(t, os.WriteFile(termLog, nil, 0o666))
	require.NoError(t, os.Chmod(termLog, 0o666))
	args := append(upgradeArgs(t, root), "--termination-log", termLog)

	cmd := exec.Command(sharedBinary(t))
	cmd.Env = append(os.Environ(), childEnv+"=cli", argsEnv+"="+strings.Join(args, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner.UID), Gid: uint32(owner.GID)}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	want := fmt.Sprintf("state directory %s is not writable by uid 17017: permission denied (mkdir %s); "+
		"as root, `chart-upgrader host prepare --owner 17017:17017` makes it this user's", state, state)
	assert.Equal(t, "chart-upgrader: "+want+"\n", stderr.String())
	got, err := os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Equal(t, "exit 1: "+want+"\n", string(got))
}

// `host prepare` makes the default paths under the host root the owner's
// and says what it did; bad input is exit 2 naming --owner.
func TestHostPrepareCommand(t *testing.T) {
	t.Run("bad input", func(t *testing.T) {
		for args, says := range map[string]string{
			"host prepare":                                             "--owner: required",
			"host prepare --owner 17017":                               `--owner "17017": want UID:GID`,
			"host prepare --owner -1:0":                                `--owner "-1:0": want UID:GID`,
			"host prepare --owner 1:1 extra":                           `unexpected argument "extra"`,
			"host prepare --owner 1:1 --what":                          "flag provided but not defined",
			"host prepare --owner 1000:1000 --host-root /typo":         "--host-root /typo: stat /typo: no such file or directory; host prepare gives away only directories under the node's / mounted there",
			"host prepare --owner 1:1 --host-root /etc/hostname":       "--host-root /etc/hostname: not a directory",
			"host prepare --owner 1:1 --host-root /etc --state-dir /x": "--state-dir /x: outside --host-root /etc; host prepare gives away nothing outside the host root",
		} {
			code, stdout, stderr := noderun.CLI(t, strings.Fields(args)...).Outputs()
			assert.Equal(t, outcome.ExitBadInput, code, args)
			assert.Empty(t, stdout, args)
			assert.Contains(t, stderr, says, args)
		}
	})
	t.Run("prepare", func(t *testing.T) {
		needRoot(t)
		root, state, lock := node(t)
		code, stdout, stderr := noderun.CLI(t, "host", "prepare", "--owner", "17017:17017", "--host-root", root).Outputs()
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, fmt.Sprintf("%s: created, mode 0700, owner 17017:17017\n%s: created, mode 0700, owner 17017:17017\n",
			state, filepath.Dir(lock)), stdout)
		o, _ := stat(t, state)
		assert.Equal(t, owner, o)

		code, stdout, _ = noderun.CLI(t, "host", "prepare", "--owner", "17017:17017", "--host-root", root).Outputs()
		require.Equal(t, 0, code)
		assert.Equal(t, fmt.Sprintf("%s: already 17017:17017's, left alone\n%s: already 17017:17017's, left alone\n",
			state, filepath.Dir(lock)), stdout)
	})
}
