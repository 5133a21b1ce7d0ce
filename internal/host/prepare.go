package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// Open and Acquire do; missing parents 0755) and gives them
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
