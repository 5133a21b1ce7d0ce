package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckWritable makes sure this process can do what the journal and the
// host lock will do: create stateDir (mode 0700, with its parents) and a
// file in it, read the files already there, create the directory of
// lockFile and open lockFile for writing (creating it, mode 0600). It
// creates what is missing, as Open and Acquire would, and
// leaves no other trace.
//
// The first failure is returned as one line naming the path, the user and
// what was denied, e.g.
//
//	state directory /host/var/lib/chart-upgrader is not writable by uid 17017: permission denied (mkdir /host/var/lib/chart-upgrader); …
//
// wrapping the system error (errors.Is(err, fs.ErrPermission) holds for a
// denied permission). It is a failure (exit 1), not bad input.
func CheckWritable(stateDir, lockFile string) error {
	if err := checkDir("state directory", stateDir); err != nil {
		return err
	}
	if err := checkReadable(stateDir); err != nil {
		return err
	}
	lockDir := filepath.Dir(lockFile)
	if err := checkDir("lock directory", lockDir); err != nil {
		return err
	}
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return denied("lock file", lockFile, "writable", err)
	}
	return f.Close()
}

// checkDir creates dir as Open does and proves a file can be
// created in it, as WriteFileAtomic does.
func checkDir(what, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return denied(what, dir, "writable", err)
	}
	f, err := os.CreateTemp(dir, ".chart-upgrader-probe-*")
	if err != nil {
		return denied(what, dir, "writable", err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return denied(what, dir, "writable", err)
	}
	return nil
}

// checkReadable opens every regular file of dir (the journal entries and
// the Lease identity) for reading: one left by a run as another user
// would otherwise fail the upgrade in the middle.
func checkReadable(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return denied("state directory", dir, "readable", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return denied("state file", path, "readable", err)
		}
		f.Close()
	}
	return nil
}

// denied is the one-line error: what, path, by whom, and the system error
// with the operation and path it failed on.
func denied(what, path, want string, err error) error {
	msg := fmt.Sprintf("%s %s is not %s by uid %d", what, path, want, os.Geteuid())
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", msg, err)
	}
	hint := ""
	switch {
	case errors.Is(pe.Err, syscall.EROFS):
		hint = "; mount a writable directory there"
	case errors.Is(pe.Err, fs.ErrPermission) && os.Geteuid() != 0:
		hint = fmt.Sprintf("; as root, `chart-upgrader host prepare --owner %d:%d` makes it this user's", os.Geteuid(), os.Getegid())
	}
	return fmt.Errorf("%s: %w (%s %s)%s", msg, pe.Err, pe.Op, pe.Path, hint)
}
