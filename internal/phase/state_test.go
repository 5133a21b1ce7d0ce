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

func TestSaveJournalStartsAfreshAfterACompletedEntry(t *testing.T) {
	store, err := journal.Open(t.TempDir())
	require.NoError(t, err)
	tgt := spec.Target{Kind: "ManagedChart", Namespace: "ns", Name: "app"}
	done := journal.Entry{Target: tgt.String(), FromVersion: "1.0.0", ToVersion: "2.0.0", Completed: true,
		Phases: map[string]journal.Record{"verify": {Duration: "1ms"}}}
	require.NoError(t, store.Save(done))

	// a new upgrade to the same version (after a rollback): a fresh entry
	s := &State{Journal: store, Chart: spec.Chart{Target: tgt}, From: "1.0.0", To: "2.0.0", Situation: SituationUpgrade}
	require.NoError(t, s.saveJournal("resolve", journal.Record{Duration: "2ms"}))
	got, ok, err := store.Load(tgt.String(), "2.0.0")
	require.NoError(t, err)
	require.True(t, ok)
	assert.False(t, got.Completed)
	assert.Equal(t, []string{"resolve"}, keys(got.Phases))

	// a re-run that finds it done keeps the finished entry
	require.NoError(t, store.Save(done))
	s = &State{Journal: store, Chart: spec.Chart{Target: tgt}, From: "2.0.0", To: "2.0.0", Situation: SituationDone}
	require.NoError(t, s.saveJournal("resolve", journal.Record{Duration: "2ms"}))
	got, _, err = store.Load(tgt.String(), "2.0.0")
	require.NoError(t, err)
	assert.True(t, got.Completed)
}

func keys(m map[string]journal.Record) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A merge is reused while the target's version, values, pause and applied
// record are those it read; a status write alone does not call for a new
// one.
func TestMergeKeyChangesWithWhatTheMergeReads(t *testing.T) {
	base := func() *target.ManagedChart {
		return &target.ManagedChart{Name: "app", Version: "1.0.0", ResourceVersion: "10",
			Values: map[string]any{"image": map[string]any{"tag": "v1"}}, Annotations: map[string]string{}}
	}
	key := mergeKey(base())
	cases := []struct {
		name   string
		change func(*target.ManagedChart)
		same   bool
	}{
		{"a status write (new resourceVersion)", func(m *target.ManagedChart) { m.ResourceVersion = "11" }, true},
		{"another value", func(m *target.ManagedChart) { m.Values["replicas"] = int64(2) }, false},
		{"another version", func(m *target.ManagedChart) { m.Version = "1.0.1" }, false},
		{"paused", func(m *target.ManagedChart) { m.Paused = true }, false},
		{"an apply recorded", func(m *target.ManagedChart) {
			m.Annotations[target.AnnotationVersion], m.Annotations[target.AnnotationValuesHash] = "2.0.0", "abc"
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mc := base()
			tc.change(mc)
			assert.Equal(t, tc.same, mergeKey(mc) == key, "%s vs %s", mergeKey(mc), key)
		})
	}
}
