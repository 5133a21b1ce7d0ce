package host_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

// After Prepare (as root), the upgrade user passes the check and its files
// are its own; a second Prepare changes nothing.
func TestPrepareThenTheUpgradeUserPasses(t *testing.T) {
	needRoot(t)
	_, state, lock := node(t)
	require.Equal(t, 1, runChild(t, "check", state, lock, &owner).code, "denied before")

	done, err := host.Prepare(state, lock, owner)
	require.NoError(t, err)
	require.Len(t, done, 2)
	for i, dir := range []string{state, filepath.Dir(lock)} {
		assert.Equal(t, host.Prepared{Dir: dir, Created: true}, done[i])
		o, mode := stat(t, dir)
		assert.Equal(t, owner, o, dir)
		assert.Equal(t, fs.ModeDir|0o700, mode, dir)
	}

	c := runChild(t, "check", state, lock, &owner)
	require.Equal(t, 0, c.code, c.out)
	o, _ := stat(t, lock)
	assert.Equal(t, owner, o, "the lock file is the user's")

	again, err := host.Prepare(state, lock, owner)
	require.NoError(t, err)
	assert.Equal(t, []host.Prepared{{Dir: state, Unchanged: true}, {Dir: filepath.Dir(lock), Unchanged: true}}, again)
}

// A state directory left by a run as root: its regular files become the
// user's; a symbolic link, a hard link to a file elsewhere and a FIFO are
// left alone, and so are the files they lead to.
func TestPrepareTakesOverOnlyItsOwnFiles(t *testing.T) {
	needRoot(t)
	root, state, lock := node(t)
	require.NoError(t, os.Mkdir(state, 0o755))
	entry := filepath.Join(state, "managedchart_fleet-local_demo-app@2.0.0.json")
	require.NoError(t, os.WriteFile(entry, []byte("{}"), 0o600))
	elsewhere := filepath.Join(root, "etc-shadow")
	require.NoError(t, os.WriteFile(elsewhere, []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(state, "link.json")))
	require.NoError(t, os.Link(elsewhere, filepath.Join(state, "hardlink.json")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(state, "fifo"), 0o600))

	done, err := host.Prepare(state, lock, owner)
	require.NoError(t, err)
	assert.Equal(t, host.Prepared{Dir: state, Files: 1, Skipped: 3}, done[0])
	o, mode := stat(t, state)
	assert.Equal(t, owner, o)
	assert.Equal(t, fs.ModeDir|0o700, mode, "narrowed to what the journal makes")
	o, _ = stat(t, entry)
	assert.Equal(t, owner, o)
	o, _ = stat(t, elsewhere)
	assert.Equal(t, me(), o, "a file elsewhere is never given away")
	o, _ = stat(t, filepath.Join(state, "link.json"))
	assert.Equal(t, me(), o)
	o, _ = stat(t, filepath.Join(state, "fifo"))
	assert.Equal(t, me(), o)
}

// A state directory that is a symbolic link is refused, and its target is
// left as it was.
func TestPrepareRefusesALinkedDirectory(t *testing.T) {
	needRoot(t)
	root, state, lock := node(t)
	target := filepath.Join(root, "etc")
	require.NoError(t, os.Mkdir(target, 0o755))
	require.NoError(t, os.Symlink(target, state))
	_, err := host.Prepare(state, lock, owner)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "opening "+state+" (it must be a directory, not a symbolic link)")
	o, mode := stat(t, target)
	assert.Equal(t, me(), o)
	assert.Equal(t, fs.ModeDir|0o755, mode)
}

// Prepare needs CAP_CHOWN and nothing else, as the Plan's prepare container
// has it: a bounding set of CAP_CHOWN alone is enough, even for a state
// directory another user left (mode 0700: root cannot even list it without
// CAP_DAC_READ_SEARCH), and without CAP_CHOWN it fails.
func TestPrepareNeedsOnlyCAPCHOWN(t *testing.T) {
	needRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to drop capabilities")
	}
	_, state, lock := node(t)
	require.NoError(t, os.Mkdir(state, 0o700))
	entry := filepath.Join(state, "identity")
	require.NoError(t, os.WriteFile(entry, []byte("node-1-abc"), 0o600))
	previous := host.Owner{UID: 18018, GID: 18018} // the user of an earlier --run-as
	require.NoError(t, os.Chown(entry, previous.UID, previous.GID))
	require.NoError(t, os.Chown(state, previous.UID, previous.GID))

	c := runChild(t, "prepare", state, lock, nil, setpriv, "--bounding-set", "-all", "--")
	assert.Equal(t, 1, c.code)
	assert.Contains(t, c.out, "operation not permitted", "without CAP_CHOWN")

	c = runChild(t, "prepare", state, lock, nil, setpriv, "--bounding-set", "-all,+chown", "--")
	require.Equal(t, 0, c.code, c.out)
	for _, p := range []string{state, entry, filepath.Dir(lock)} {
		o, _ := stat(t, p)
		assert.Equal(t, owner, o, p)
	}
	require.Equal(t, 0, runChild(t, "check", state, lock, &owner).code)
}

func TestParseOwner(t *testing.T) {
	for in, want := range map[string]host.Owner{"17017:17017": {17017, 17017}, "0:0": {}, "1000:0": {1000, 0}, "2147483647:1": {2147483647, 1}} {
		got, err := host.ParseOwner(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
	for _, in := range []string{"", "17017", ":1", "1:", "-1:0", "a:b", "2147483648:0", "1:2:3", " 1:2"} {
		_, err := host.ParseOwner(in)
		assert.Error(t, err, in)
	}
}
