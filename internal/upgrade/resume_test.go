package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process killed right after any step (its journal has the step, the
// next never started) is run again with the same journal and identity: it
// ends done with one write in all and the target ready; another node
// afterwards writes nothing.
//
// The wait's record is saved with verify's (the exit follows readiness at
// once), so a process killed between them left the journal of a kill
// after apply: TestTheWaitIsJournaledWithVerify.
func TestResumeAfterCrash(t *testing.T) {
	for _, step := range []string{StepResolve, StepPreflight, StepMerge, StepApply} {
		t.Run("killed after "+step, func(t *testing.T) {
			e := newEnv(t)
			e.journal.crashAfter = step
			_, err := e.run(GoalUpgrade)
			require.ErrorIs(t, err, errCrash)
			assert.ErrorContains(t, err, "fake/ns/app: journal after "+step+": killed")
			entry, ok := e.journal.entry("fake/ns/app", "2.0.0")
			require.True(t, ok)
			assert.Contains(t, entry.Phases, step)
			assert.False(t, entry.Completed)

			r := e.again()
			res := r.mustRun(GoalUpgrade)
			assert.Equal(t, SituationDone, res.Situation)
			assert.Equal(t, "2.0.0", res.To)
			require.Len(t, e.target.writes, 1, "one write in all")
			assert.True(t, e.target.readyNow())
			assert.Equal(t, vals(t, mergedValues), e.target.current().Values)
			assert.Equal(t, "", e.leases.holder(e.leaseKey()), "no Lease left behind")
			assert.Equal(t, 1, e.target.backupsMade)
			entry, _ = e.journal.entry("fake/ns/app", "2.0.0")
			assert.True(t, entry.Completed)
			assert.Equal(t, "1.0.0", entry.FromVersion)
			assert.Contains(t, entry.Phases, step, "the entry went on")
			assert.Contains(t, entry.Phases, StepVerify)

			other := e.peer("node-b")
			res = other.mustRun(GoalUpgrade)
			assert.Equal(t, SituationDone, res.Situation)
			assert.False(t, res.Leader)
			assert.Len(t, e.target.writes, 1)
			assert.Empty(t, other.cluster.eventList())
		})
	}
}

// The wait's record is not saved on its own: one save holds it with
// verify's, the completed entry; a run is one save per step but the wait.
func TestTheWaitIsJournaledWithVerify(t *testing.T) {
	e := newEnv(t)
	e.mustRun(GoalUpgrade)
	entry, ok := e.journal.entry("fake/ns/app", "2.0.0")
	require.True(t, ok)
	assert.True(t, entry.Completed)
	steps := []string{StepResolve, StepPreflight, StepMerge, StepApply, StepWait, StepVerify}
	for _, step := range steps {
		assert.Contains(t, entry.Phases, step)
	}
	assert.Equal(t, len(steps)-1, e.journal.saves, "no save of its own for the wait")

	// killed when verify's record is saved: both are there, and the
	// next run finds the upgrade done
	e = newEnv(t)
	e.journal.crashAfter = StepWait
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, errCrash)
	assert.ErrorContains(t, err, "journal after verify: killed")
	entry, _ = e.journal.entry("fake/ns/app", "2.0.0")
	assert.Contains(t, entry.Phases, StepVerify)
	res := e.again().mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Len(t, e.target.writes, 1)
}

// A process killed after its write but before it gave the Lease up (the
// renewals stopped with it, and its journal never recorded the apply):
// its next run, finding the target done, gives the Lease up; a run of
// another node would not touch it.
func TestResumeReleasesALeftLease(t *testing.T) {
	e := newEnv(t)
	e.mustRun(GoalUpgrade)
	e.leases.seed(e.leaseKey(), "node-a", time.Now(), time.Hour)
	killedInApply(t, e.journal, "fake/ns/app", "2.0.0")

	other := e.peer("node-b")
	other.mustRun(GoalUpgrade)
	assert.Equal(t, "node-a", e.leases.holder(e.leaseKey()), "another node's Lease is left alone")

	r := e.again()
	res := r.mustRun(GoalUpgrade)
	assert.False(t, res.Leader)
	assert.Equal(t, "", e.leases.holder(e.leaseKey()), "given up")
	assert.Len(t, e.target.writes, 1)

	// that run completed the entry: the runs after it ask for no Lease
	// (one that did would fail here)
	en, _, err := r.journal.Load("fake/ns/app", "2.0.0")
	require.NoError(t, err)
	assert.False(t, en.ApplyInterrupted())
	third := e.again()
	third.cluster.setErr("Release", errBoom)
	third.mustRun(GoalUpgrade)
}

// Five processes upgrade one target at once: exactly one writes, all end
// done.
func TestRacingRunners(t *testing.T) {
	const n = 5
	e := newEnv(t)
	nodes := []*env{e}
	for i := 1; i < n; i++ {
		nodes = append(nodes, e.peer(fmt.Sprintf("node-%d", i)))
	}
	results := make([]*Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = node.run(GoalUpgrade)
		}()
	}
	close(start)
	wg.Wait()

	leaders := 0
	for i := range nodes {
		require.NoError(t, errs[i], "node %d", i)
		assert.Equal(t, SituationDone, results[i].Situation, "node %d", i)
		if results[i].Leader {
			leaders++
		}
	}
	assert.Equal(t, 1, e.target.writeCount(), "exactly one write")
	assert.GreaterOrEqual(t, leaders, 1)
	assert.Equal(t, 1, e.target.backupsMade)
	assert.True(t, e.target.readyNow())
	assert.Equal(t, vals(t, mergedValues), e.target.current().Values)
	assert.Equal(t, "", e.leases.holder(e.leaseKey()), "the Lease is free again")
	// Events only from a process that took the Lease, after it did
	history := e.leases.historyCopy()
	senders := 0
	for _, node := range nodes {
		id := node.cluster.identity
		for _, ev := range node.cluster.eventList() {
			assert.Equal(t, id, ev.Reporting)
		}
		first := slices.IndexFunc(history, func(h string) bool { return strings.HasPrefix(h, "event "+id+" ") })
		if first < 0 {
			continue
		}
		senders++
		took := slices.Index(history, "take "+e.leaseKey()+" "+id)
		assert.True(t, took >= 0 && took < first, "%s sent an Event before it took the Lease: %v", id, history)
	}
	assert.GreaterOrEqual(t, senders, 1)
}

// killedInApply makes the journal entry of an upgrade what a run killed in
// apply leaves: merged, not applied.
func killedInApply(t *testing.T, j *fakeJournal, target, version string) {
	t.Helper()
	en, ok, err := j.Load(target, version)
	require.NoError(t, err)
	require.True(t, ok)
	for _, s := range []string{StepApply, StepWait, StepVerify} {
		delete(en.Phases, s)
	}
	en.Completed = false
	require.NoError(t, j.Save(en))
	require.True(t, en.ApplyInterrupted())
}

// A run that finished its apply left no Lease: the next run on the node
// that finds the target done asks for none.
func TestResumeAfterSuccessTouchesNoLease(t *testing.T) {
	e := newEnv(t)
	e.mustRun(GoalUpgrade)
	e.leases.seed(e.leaseKey(), "node-a", time.Now(), time.Hour) // not left by us: the journal says the apply finished
	r := e.again()
	r.mustRun(GoalUpgrade)
	assert.Equal(t, "node-a", e.leases.holder(e.leaseKey()), "no Lease read or written")
}
