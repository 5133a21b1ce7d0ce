package host_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

// The tests run this test binary again as another user (or with fewer
// capabilities) to meet the permissions a Plan's containers have.
const (
	childEnv = "HOST_TEST_CHILD" // check, prepare or cli
	argsEnv  = "HOST_TEST_ARGS"  // cli: the arguments, one a line
	stateEnv = "HOST_TEST_STATE"
	lockEnv  = "HOST_TEST_LOCK"
	ownerEnv = "HOST_TEST_OWNER"
)

// The user the upgrade container runs as in these tests.
var owner = host.Owner{UID: 17017, GID: 17017}

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "check":
		exitWith(host.CheckWritable(os.Getenv(stateEnv), os.Getenv(lockEnv)))
	case "prepare":
		o, err := host.ParseOwner(os.Getenv(ownerEnv))
		if err == nil {
			_, err = host.Prepare(os.Getenv(stateEnv), os.Getenv(lockEnv), o)
		}
		exitWith(err)
	case "cli":
		os.Exit(cli.Run(context.Background(), append([]string{"chart-upgrader"}, strings.Split(os.Getenv(argsEnv), "\n")...), os.Stdout, os.Stderr))
	}
}

func exitWith(err error) {
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is one run of the test binary as a child.
type child struct {
	code int
	out  string
}

// runChild runs the test binary's child mode with the paths. wrap, when
// given, is a command line the binary is appended to (setpriv …); as, when
// not nil, the user and group it runs as.
func runChild(t *testing.T, mode, stateDir, lockFile string, as *host.Owner, wrap ...string) child {
	t.Helper()
	bin := sharedBinary(t)
	args := append(append([]string{}, wrap...), bin)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode, stateEnv+"="+stateDir, lockEnv+"="+lockFile, ownerEnv+"="+owner.String())
	if as != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(as.UID), Gid: uint32(as.GID)}}
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return child{code: code, out: strings.TrimSuffix(string(out), "\n")}
}

var binCopy string

// sharedBinary is a copy of the test binary that every user may run (the
// go tool builds it in a directory only its user may enter).
func sharedBinary(t *testing.T) string {
	t.Helper()
	if binCopy != "" {
		return binCopy
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "host-test-bin-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	in, err := os.Open(self)
	require.NoError(t, err)
	defer in.Close()
	path := filepath.Join(dir, "host.test")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	binCopy = path
	return path
}

// sharedTempDir is t.TempDir() with it and the directories above it up to
// the system's temporary directory open to every user (root-owned, 0755),
// as /host/var/lib is on a node.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return dir
}

// node makes a fake host root with var/lib and run as on a node (owned by
// this process's user, 0755) and returns the state directory and the lock
// file chart-upgrader uses under it.
func node(t *testing.T) (root, stateDir, lockFile string) {
	t.Helper()
	root = sharedTempDir(t)
	for _, d := range []string{"var/lib", "run"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	return root, filepath.Join(root, "var", "lib", "chart-upgrader"), filepath.Join(root, "run", "chart-upgrader", "upgrade.lock")
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs children as another user and changes owners (make test runs as root in CI)")
	}
}

// stat returns the owner and permission bits of path (not following a
// link).
func stat(t *testing.T, path string) (host.Owner, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return host.Owner{UID: int(st.Uid), GID: int(st.Gid)}, fi.Mode()
}

func me() host.Owner { return host.Owner{UID: os.Geteuid(), GID: os.Getegid()} }
