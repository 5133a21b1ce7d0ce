package phase

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/journal"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// A rollback merges nothing: its journal entry records the hash of the
// values it restores (found by the soak, make soak).
func TestJournalRecordsTheHashOfARestore(t *testing.T) {
	store, err := journal.Open(t.TempDir())
	require.NoError(t, err)
	tgt, err := spec.ParseTarget("managedchart/fleet-local/demo-app")
	require.NoError(t, err)
	s := &State{Journal: store, Chart: spec.Chart{Target: tgt}, From: "2.0.0", To: "1.0.0",
		Restore: &target.Backup{Version: "1.0.0"}, Want: target.Want{Version: "1.0.0", ValuesHash: "restored"}}
	require.NoError(t, s.saveJournal("restore", journal.Record{}))
	e, ok, err := store.Load(s.Ref(), "1.0.0")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "restored", e.ValuesHash)

	// an upgrade records its merge's hash; what it then applies or waits
	// for wins
	s = &State{Journal: store, Chart: spec.Chart{Target: tgt}, From: "1.0.0", To: "2.0.0",
		Merge: &values.Result{SHA256: "merged"}}
	require.NoError(t, s.saveJournal("merge", journal.Record{}))
	e, _, err = store.Load(s.Ref(), "2.0.0")
	require.NoError(t, err)
	assert.Equal(t, "merged", e.ValuesHash)
	s.Want = target.Want{Version: "2.0.0", ValuesHash: "applied by another node"}
	require.NoError(t, s.saveJournal("apply", journal.Record{}))
	e, _, err = store.Load(s.Ref(), "2.0.0")
	require.NoError(t, err)
	assert.Equal(t, "applied by another node", e.ValuesHash)
}
