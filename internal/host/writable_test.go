package host_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

// The check creates what the journal and the lock will (same modes) and
// leaves nothing else behind.
func TestCheckWritableCreatesWhatTheJournalWill(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	state := filepath.Join(dir, "var", "lib", "chart-upgrader")
	lock := filepath.Join(dir, "run", "chart-upgrader", "upgrade.lock")
	require.NoError(t, host.CheckWritable(state, lock))

	_, mode := stat(t, state)
	assert.Equal(t, fs.ModeDir|0o700, mode)
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe file is removed")
	_, mode = stat(t, filepath.Dir(lock))
	assert.Equal(t, fs.ModeDir|0o700, mode)
	_, mode = stat(t, lock)
	assert.Equal(t, fs.FileMode(0o600), mode)

	require.NoError(t, os.WriteFile(filepath.Join(state, "identity"), []byte("node-1-abc"), 0o600))
	require.NoError(t, host.CheckWritable(state, lock), "again, with a journal file")
	require.NoError(t, host.CheckWritable(state, filepath.Join(state, "upgrade.lock")), "the lock in the state directory")
}

// A path that cannot be a directory: one line naming it, the user and the
// system's reason, the operation and path that failed. This holds for root
// too, whom file permissions do not stop.
func TestCheckWritableNamesThePathAndTheReason(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	good := filepath.Join(dir, "run", "upgrade.lock")
	uid := os.Geteuid()

	err := host.CheckWritable(filepath.Join(file, "state"), good)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("state directory %s/state is not writable by uid %d: not a directory (mkdir %s)", file, uid, file), err.Error())
	assert.ErrorIs(t, err, syscall.ENOTDIR)
	assert.NoDirExists(t, filepath.Dir(good), "it stops at the first problem")

	err = host.CheckWritable(filepath.Join(dir, "state"), filepath.Join(file, "upgrade.lock"))
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("lock directory %s is not writable by uid %d: not a directory (mkdir %s)", file, uid, file), err.Error())

	require.NoError(t, os.Mkdir(filepath.Join(dir, "lockdir"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "lockdir", "upgrade.lock"), 0o700))
	err = host.CheckWritable(filepath.Join(dir, "state"), filepath.Join(dir, "lockdir", "upgrade.lock"))
	require.Error(t, err)
	lock := filepath.Join(dir, "lockdir", "upgrade.lock")
	assert.Equal(t, fmt.Sprintf("lock file %s is not writable by uid %d: is a directory (open %s)", lock, uid, lock), err.Error())
}

// Permission denied, met as the upgrade container meets it: a non-root
// user below root-owned 0755 directories (as /host/var/lib and /host/run).
// The line says which permission is missing and how to get it.
func TestCheckWritableDeniedToTheUpgradeUser(t *testing.T) {
	_, state, lock := node(t)
	var got string
	var user host.Owner
	if os.Geteuid() == 0 {
		user = owner
		c := runChild(t, "check", state, lock, &user)
		assert.Equal(t, 1, c.code)
		got = c.out
	} else {
		// not root: the directories are this user's; take the write bit away
		user = me()
		require.NoError(t, os.Chmod(filepath.Dir(state), 0o555))
		t.Cleanup(func() { os.Chmod(filepath.Dir(state), 0o755) })
		err := host.CheckWritable(state, lock)
		require.Error(t, err)
		assert.True(t, errors.Is(err, fs.ErrPermission), "%v", err)
		got = err.Error()
	}
	want := fmt.Sprintf("state directory %s is not writable by uid %d: permission denied (mkdir %s); "+
		"as root, `chart-upgrader host prepare --owner %s` makes it this user's", state, user.UID, state, user)
	assert.Equal(t, want, got)
	assert.NoDirExists(t, state)
}

// A journal file the upgrade user cannot read (left by a run as root) is
// named before anything starts.
func TestCheckWritableUnreadableJournal(t *testing.T) {
	needRoot(t)
	_, state, lock := node(t)
	require.NoError(t, os.Mkdir(state, 0o700))
	entry := filepath.Join(state, "managedchart_fleet-local_demo-app@2.0.0.json")
	require.NoError(t, os.WriteFile(entry, []byte("{}"), 0o600)) // root's
	require.NoError(t, os.Chown(state, owner.UID, owner.GID))

	c := runChild(t, "check", state, lock, &owner)
	assert.Equal(t, 1, c.code)
	assert.Equal(t, fmt.Sprintf("state file %s is not readable by uid %d: permission denied (open %s); "+
		"as root, `chart-upgrader host prepare --owner %s` makes it this user's", entry, owner.UID, entry, owner), c.out)
}
