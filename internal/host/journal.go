package host

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"
)

// Store is a directory of journal entries.
type Store struct {
	dir string
	mu  sync.Mutex // one write at a time, in the order of the saves
	// the completed entries being written (Save), and the first error
	writing sync.WaitGroup
	failed  error
}

// Open returns the journal in dir, creating it with mode 0700.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the directory of the store.
func (s *Store) Dir() string { return s.dir }

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (s *Store) path(target, version string) string {
	name := unsafeChars.ReplaceAllString(target, "_") + "@" + unsafeChars.ReplaceAllString(version, "_") + ".json"
	return filepath.Join(s.dir, name)
}

// Load returns the entry of target at version; ok is false when there is none.
func (s *Store) Load(target, version string) (upgrade.Entry, bool, error) {
	data, err := os.ReadFile(s.path(target, version))
	if errors.Is(err, fs.ErrNotExist) {
		return upgrade.Entry{}, false, nil
	}
	if err != nil {
		return upgrade.Entry{}, false, fmt.Errorf("reading journal: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return upgrade.Entry{}, false, nil // a completed entry a power loss emptied (Save)
	}
	var e upgrade.Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return upgrade.Entry{}, false, fmt.Errorf("journal %s is corrupt: %w", s.path(target, version), err)
	}
	return e, true, nil
}

// List returns every entry of target, oldest update first.
func (s *Store) List(target string) ([]upgrade.Entry, error) {
	pattern := filepath.Join(s.dir, unsafeChars.ReplaceAllString(target, "_")+"@*.json")
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out []upgrade.Entry
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading journal: %w", err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue // a completed entry a power loss emptied (Save)
		}
		var e upgrade.Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("journal %s is corrupt: %w", f, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.Before(out[j].UpdatedAt) })
	return out, nil
}

// Save writes the entry atomically: a temporary file in the same
// directory, fsync, rename, fsync of the directory. Mode 0600.
//
// A completed entry is written the same way without the fsyncs: the exit
// of a run follows readiness at once, and nothing depends on that record
// surviving a power loss (the target's own record says the upgrade is
// done; the next run looks and finds it so). A process crash keeps it, as
// the kernel has it; a power loss may leave the entry before it, or an
// empty file, which Load reads as no entry.
//
// The completed entry is the last save of a run, and it is written while
// the run ends (its Events in flight, the report): Flush waits for it.
func (s *Store) Save(e upgrade.Entry) error {
	e.UpdatedAt = time.Now().UTC()
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	path, data := s.path(e.Target, e.ToVersion), append(data, '\n')
	s.mu.Lock()
	if !e.Completed {
		defer s.mu.Unlock()
		return writeFile(path, data, 0o600, true)
	}
	s.writing.Go(func() {
		defer s.mu.Unlock()
		if err := writeFile(path, data, 0o600, false); err != nil && s.failed == nil {
			s.failed = err
		}
	})
	return nil
}

// Flush waits until the completed entries saved so far are written, and
// returns the first error writing one.
func (s *Store) Flush() error {
	s.writing.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// WriteFileAtomic replaces path with data so that a reader (or a crash) sees
// the old content or the new, never a mix.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) error {
	return writeFile(path, data, mode, true)
}

// writeFile is WriteFileAtomic; without sync, what it wrote survives a
// process crash but not necessarily a power loss.
func writeFile(path string, data []byte, mode fs.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := syncFile(tmp, sync); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if !sync {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func syncFile(f *os.File, sync bool) error {
	if !sync {
		return nil
	}
	return f.Sync()
}

// Identity returns this host's stable identity for Leases: read from the
// state directory, or made once and stored there. A process re-run with the
// same state directory (a retried Job on the same node) has the same
// identity, so it can take its own Lease back at once.
func (s *Store) Identity(node string) (string, error) {
	path := filepath.Join(s.dir, "identity")
	if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
		return string(data), nil
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if node == "" {
		node, _ = os.Hostname()
	}
	id := node + "-" + hex.EncodeToString(b)
	if err := WriteFileAtomic(path, []byte(id), 0o600); err != nil {
		return "", err
	}
	return id, nil
}
