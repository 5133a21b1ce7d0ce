package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

func TestLockIsExclusiveAndPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "upgrade.lock")
	l, err := Acquire(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	_, err = Acquire(path) // another open file description: flock refuses
	require.Error(t, err)
	assert.True(t, errors.Is(err, outcome.ErrLockHeld))
	assert.Equal(t, outcome.ExitLockHeld, outcome.Code(err))
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "pid ")

	require.NoError(t, l.Release())
	require.NoError(t, l.Release(), "releasing twice is fine")
	l2, err := Acquire(path)
	require.NoError(t, err, "free again after release")
	require.NoError(t, l2.Release())
}

func TestJournalRoundTripAtomicPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	require.NoError(t, err)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	_, ok, err := s.Load("managedchart/fleet-local/harvester", "1.4.3")
	require.NoError(t, err)
	assert.False(t, ok)

	e := upgrade.Entry{Target: "managedchart/fleet-local/harvester", FromVersion: "1.3.2", ToVersion: "1.4.3", ValuesHash: "abc",
		Phases: map[string]upgrade.Step{"resolve": {FinishedAt: time.Unix(1, 0).UTC(), Duration: "5ms"}}}
	require.NoError(t, s.Save(e))
	got, ok, err := s.Load(e.Target, e.ToVersion)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, e.Phases, got.Phases)
	assert.Equal(t, "abc", got.ValuesHash)

	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "no temporary file left behind: %v", files)
	fi, err = os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	e.ToVersion = "1.5.0"
	require.NoError(t, s.Save(e))
	list, err := s.List(e.Target)
	require.NoError(t, err)
	assert.Len(t, list, 2)

	require.NoError(t, os.WriteFile(files[0], []byte("{not json"), 0o600))
	_, _, err = s.Load(e.Target, "1.4.3")
	assert.ErrorContains(t, err, "is corrupt")
}

func TestIdentityIsStablePerStateDir(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	a, err := s.Identity("node-a")
	require.NoError(t, err)
	b, err := s.Identity("node-b")
	require.NoError(t, err)
	assert.Equal(t, a, b, "read back, not made again")
	assert.Regexp(t, `^node-a-[0-9a-f]{12}$`, a)
	other, err := Open(t.TempDir())
	require.NoError(t, err)
	c, err := other.Identity("node-a")
	require.NoError(t, err)
	assert.NotEqual(t, a, c, "another state dir is another process")
}

// A completed entry is written without fsync, so a power loss may leave
// it empty: that reads as no entry (the next run looks at the target),
// not as a corrupt journal that would stop every run on the node.
func TestAnEmptiedCompletedEntryReadsAsNone(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	e := upgrade.Entry{Target: "managedchart/ns/app", FromVersion: "1.0.0", ToVersion: "2.0.0", Completed: true,
		Phases: map[string]upgrade.Step{upgrade.StepVerify: {Duration: "1ms"}}}
	require.NoError(t, s.Save(e))
	require.NoError(t, s.Flush(), "written while the run ends")
	got, ok, err := s.Load(e.Target, e.ToVersion)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, got.Completed, "written, though not synced")

	require.NoError(t, os.WriteFile(s.path(e.Target, e.ToVersion), nil, 0o600))
	_, ok, err = s.Load(e.Target, e.ToVersion)
	require.NoError(t, err)
	assert.False(t, ok)
	all, err := s.List(e.Target)
	require.NoError(t, err)
	assert.Empty(t, all)

	require.NoError(t, os.WriteFile(s.path(e.Target, e.ToVersion), []byte(`{"target":`), 0o600))
	_, _, err = s.Load(e.Target, e.ToVersion)
	assert.ErrorContains(t, err, "is corrupt", "anything else cut short is still a corrupt journal")

	// a completed entry that cannot be written is reported by Flush
	gone, err := Open(filepath.Join(t.TempDir(), "state"))
	require.NoError(t, err)
	require.NoError(t, os.Remove(gone.Dir()))
	require.NoError(t, os.WriteFile(gone.Dir(), nil, 0o600)) // a file where the directory was: even root cannot write there
	require.NoError(t, gone.Save(e))
	assert.ErrorContains(t, gone.Flush(), "writing")
}
