package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Lock is a held host lock; Release frees it. The kernel frees it too when
// the process dies, so a killed run never leaves it held.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes an exclusive flock on path without waiting, creating the
// file (mode 0600) and its directory. Busy → an error wrapping
// outcome.ErrLockHeld that names the file and, when known, the holder.
func Acquire(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the lock directory of %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			msg := fmt.Sprintf("lock file %s is held by another chart-upgrader", path)
			if len(holder) > 0 {
				msg += fmt.Sprintf(" (%s)", trimLine(string(holder)))
			}
			return nil, fmt.Errorf("%s: %w", msg, outcome.ErrLockHeld)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// say who holds it, for the next one to read
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	return &Lock{f: f, path: path}, nil
}

// Release frees the lock. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	cerr := l.f.Close()
	l.f = nil
	return errors.Join(err, cerr)
}

func trimLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
