package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeHook writes a hook script; mode 0644 is how a Plan secret mounts
// it (run through its #! line), 0755 an executable.
func writeHook(t *testing.T, dir, name, body string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), mode))
}

func TestHooksRunAroundPhasesWithContext(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	hooks := t.TempDir()
	out := filepath.Join(t.TempDir(), "hook.env")
	writeHook(t, hooks, "pre-apply", `env | grep '^CHART_UPGRADER_HOOK' | sort > `+out+"\n", 0o755)
	// as a Plan secret mounts it: not executable, run through its #! line
	writeHook(t, hooks, "post-verify", `echo "post-verify saw $CHART_UPGRADER_HOOK_RESULT"`+"\n", 0o644)

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--hooks-dir", hooks)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	env, err := os.ReadFile(out)
	require.NoError(t, err)
	for _, want := range []string{
		"CHART_UPGRADER_HOOK=pre-apply",
		"CHART_UPGRADER_HOOK_TARGET=managedchart/" + f.ns + "/" + name,
		"CHART_UPGRADER_HOOK_FROM_VERSION=1.0.0",
		"CHART_UPGRADER_HOOK_TO_VERSION=2.0.0",
		"CHART_UPGRADER_HOOK_NODE=node-1",
		"CHART_UPGRADER_HOOK_VALUES_SHA256=",
	} {
		assert.Contains(t, string(env), want)
	}
	assert.Contains(t, r.Stderr, "post-verify saw ok")

	// a re-run after success runs no hooks after pre-resolve
	require.NoError(t, os.Remove(out))
	r = f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--hooks-dir", hooks)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.NoFileExists(t, out)
}

func TestFailingPreHookStopsBeforeItsPhase(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	before := f.get(name)
	hooks := t.TempDir()
	writeHook(t, hooks, "pre-apply", "echo 'maintenance window closed' >&2\nexit 7\n", 0o755)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--hooks-dir", hooks)...)
	assert.Equal(t, 3, r.Code, r.Stderr)
	assert.Contains(t, r.Stderr, "stopped before apply")
	assert.Contains(t, r.Stderr, "pre-apply failed (exit status 7): maintenance window closed")
	assertUnchanged(t, before, f.get(name))
	assert.Empty(t, f.backups(name))
}

func TestFailingPostHookIsReported(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	hooks := t.TempDir()
	writeHook(t, hooks, "post-wait", "echo 'could not notify' >&2\nexit 1\n", 0o755)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--hooks-dir", hooks)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "warning: hook ")
	assert.Contains(t, r.Stdout, "post-wait failed (exit status 1): could not notify")
	assert.Equal(t, "2.0.0", f.get(name).Version)
}

func TestHookTimeout(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	hooks := t.TempDir()
	writeHook(t, hooks, "pre-merge", "sleep 30\n", 0o755)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--hooks-dir", hooks, "--hook-timeout", "1s")...)
	assert.Equal(t, 3, r.Code, r.Stderr)
	assert.True(t, strings.Contains(r.Stderr, "pre-merge failed (timed out after 1s)"), r.Stderr)
}
