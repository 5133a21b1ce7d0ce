package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func prepareDir(dir string, owner Owner) (Prepared, error) {
	p := Prepared{Dir: dir}
	if err := mkdirParents(filepath.Dir(dir)); err != nil {
		return p, err
	}
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		p.Created = true
	case !errors.Is(err, os.ErrExist):
		return p, fmt.Errorf("creating %s: %w", dir, err)
	}
	// O_PATH: no read permission needed, which root without
	// CAP_DAC_READ_SEARCH lacks on another user's 0700 directory
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, fmt.Errorf("opening %s (it must be a directory, not a symbolic link): %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return p, fmt.Errorf("stat %s: %w", dir, err)
	}
	if int(st.Uid) == owner.UID && int(st.Gid) == owner.GID {
		p.Unchanged = !p.Created
		return p, nil
	}
	if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
		if err := unix.Fchownat(dfd, "", os.Geteuid(), os.Getegid(), unix.AT_EMPTY_PATH); err != nil {
			return p, fmt.Errorf("chown %d:%d %s: %w", os.Geteuid(), os.Getegid(), dir, err)
		}
	}
	rfd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, fmt.Errorf("opening %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(rfd), dir)
	defer d.Close()
	if err := unix.Fchmod(rfd, 0o700); err != nil {
		return p, fmt.Errorf("chmod 0700 %s: %w", dir, err)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return p, fmt.Errorf("reading %s: %w", dir, err)
	}
	for _, name := range names {
		given, err := chownEntry(rfd, dir, name, owner)
		if err != nil {
			return p, err
		}
		if given {
			p.Files++
		} else {
			p.Skipped++
		}
	}
	if err := unix.Fchownat(dfd, "", owner.UID, owner.GID, unix.AT_EMPTY_PATH); err != nil {
		return p, fmt.Errorf("chown %s %s: %w", owner, dir, err)
	}
	return p, nil
}

// chownEntry gives the entry name of the directory dfd to owner when it is
// a regular file with one link (or already is owner's); given is false when
// it was left alone.
func chownEntry(dfd int, dir, name string, owner Owner) (given bool, err error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil // gone since the listing
	}
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return false, nil
	}
	if int(st.Uid) == owner.UID && int(st.Gid) == owner.GID {
		return true, nil
	}
	if err := unix.Fchownat(fd, "", owner.UID, owner.GID, unix.AT_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("chown %s %s: %w", owner, path, err)
	}
	return true, nil
}
