package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Owner is the user and group the upgrade container runs as.
type Owner struct{ UID, GID int }

func (o Owner) String() string { return fmt.Sprintf("%d:%d", o.UID, o.GID) }

// Prepared says what Prepare did to one directory.
type Prepared struct {
	Dir       string
	Created   bool // it did not exist
	Unchanged bool // it already belonged to the owner: left as it was
	Files     int  // files in it given to the owner
	Skipped   int  // entries left alone: links, hard-linked or non-regular files
}

// Prepare creates stateDir and the directory of lockFile (mode 0700, as
// journal.Open and journal.Acquire do; missing parents 0755) and gives them
// to owner, with the regular files directly in them, so that a process
// running as owner passes CheckWritable. It is meant to run as root with no
// capability but CAP_CHOWN (the Plan's prepare container): root owns /var/lib
// and /run, so creating directories there needs no other.
//
// A directory that already belongs to owner is left alone, so a re-run
// changes nothing. Otherwise Prepare first makes the directory root's (mode
// 0700: no one else can change it meanwhile), fixes its entries, and gives it
// to owner last. It never follows a symbolic link (a directory that is one
// is an error) and works on descriptors (open, fstat, then fchown of the
// same inode), and it skips links and hard-linked or non-regular entries: a
// file elsewhere on the host can never be given to owner through it.
func Prepare(stateDir, lockFile string, owner Owner) ([]Prepared, error) {
	if owner.UID < 0 || owner.GID < 0 {
		return nil, fmt.Errorf("owner %s: want a user and a group id ≥ 0", owner)
	}
	var out []Prepared
	for _, dir := range []string{filepath.Clean(stateDir), filepath.Dir(lockFile)} {
		if len(out) > 0 && out[0].Dir == dir {
			continue // the lock file is in the state directory
		}
		p, err := prepareDir(dir, owner)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

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

// mkdirParents creates dir and its missing parents with mode 0755 whatever
// the umask, so that the owner can reach the directories below.
func mkdirParents(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirParents(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", dir, err)
	} else if err == nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			return fmt.Errorf("chmod 0755 %s: %w", dir, err)
		}
	}
	return nil
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

// ParseOwner reads "UID:GID", two decimal ids from 0 to 2147483647 (what
// Kubernetes accepts as runAsUser and runAsGroup).
func ParseOwner(s string) (Owner, error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		return Owner{}, fmt.Errorf("%q: want UID:GID, e.g. 17017:17017", s)
	}
	uid, uerr := strconv.ParseInt(u, 10, 32)
	gid, gerr := strconv.ParseInt(g, 10, 32)
	if uerr != nil || gerr != nil || uid < 0 || gid < 0 {
		return Owner{}, fmt.Errorf("%q: want UID:GID, two numbers from 0 to 2147483647", s)
	}
	return Owner{UID: int(uid), GID: int(gid)}, nil
}
