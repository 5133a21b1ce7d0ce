package security

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The journal, the identity and the lock file are 0600 and their
// directories 0700, whatever the umask: they are created with those modes,
// not narrowed by the umask of the process.
func TestJournalAndLockModes(t *testing.T) {
	w := newWorld(t)
	name := w.install(example.UserValues())
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	t.Run("explicit paths", func(t *testing.T) {
		n := node{dir: t.TempDir()}
		n.stateDir = filepath.Join(n.dir, "deep", "state")
		n.lockFile = filepath.Join(n.dir, "locks", "run", "upgrade.lock")
		n.termLog = filepath.Join(n.dir, "termination-log")
		w.node = n
		r := w.cli(true, "upgrade", "--target", "managedchart/"+w.ns+"/"+name, "--chart-source", w.charts,
			"--version", "2.0.0", "--timeout", "60s")
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)

		assertMode(t, n.stateDir, fs.ModeDir|0o700)
		files := assertFilesPrivate(t, n.stateDir)
		assert.Contains(t, strings.Join(files, " "), "@2.0.0.json", "a journal entry was written")
		assertMode(t, n.lockFile, 0o600)
		assertMode(t, filepath.Dir(n.lockFile), fs.ModeDir|0o700)
	})

	t.Run("under the host root", func(t *testing.T) {
		dir := t.TempDir()
		host := filepath.Join(dir, "host")
		require.NoError(t, os.Mkdir(host, 0o755))
		r := w.cli(false, "upgrade", "--target", "managedchart/"+w.ns+"/"+name, "--chart-source", w.charts,
			"--version", "2.0.0", "--timeout", "60s", "--kubeconfig", w.env.KubeconfigPath(), "--host-root", host,
			"--termination-log", filepath.Join(dir, "termination-log"), "--log-format", "json")
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)

		state := filepath.Join(host, "var", "lib", "chart-upgrader")
		assertMode(t, state, fs.ModeDir|0o700)
		files := assertFilesPrivate(t, state)
		assert.NotEmpty(t, files)
		lock := filepath.Join(host, "run", "chart-upgrader", "upgrade.lock")
		assertMode(t, lock, 0o600)
		assertMode(t, filepath.Dir(lock), fs.ModeDir|0o700)
	})
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want.String(), fi.Mode().String(), "mode of %s", path)
}

// assertFilesPrivate checks every file under dir is 0600 and every
// directory 0700; it returns the files' names.
func assertFilesPrivate(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			assertMode(t, p, fs.ModeDir|0o700)
			return nil
		}
		names = append(names, d.Name())
		assertMode(t, p, 0o600)
		return nil
	}))
	return names
}
