package upgrade

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

var allSteps = []string{StepResolve, StepPreflight, StepMerge, StepApply, StepWait, StepVerify}

// hookCalls is pre-X, post-X for each step.
func hookCalls(steps ...string) []string {
	var out []string
	for _, s := range steps {
		out = append(out, "pre-"+s, "post-"+s)
	}
	return out
}

func TestRunFreshUpgrade(t *testing.T) {
	e := newEnv(t)
	res := e.mustRun(GoalUpgrade)

	// the output line's fields
	merged := vals(t, mergedValues)
	sha := hashOf(t, merged)
	require.NotNil(t, res.Merge)
	assert.Equal(t, sha, res.Merge.SHA256)
	assert.Equal(t, &Result{From: "1.0.0", To: "2.0.0", Situation: SituationDone, Leader: true, Merge: res.Merge}, res)

	// one write: version, merged values, the record
	require.Len(t, e.target.writes, 1)
	w := e.target.writes[0]
	assert.Equal(t, "2.0.0", w.Version)
	assert.Equal(t, merged, w.Values, "the follow rule dropped the old default image tag")
	assert.Nil(t, w.Restore)
	assert.Equal(t, "2.0.0", w.Record.Version)
	assert.Equal(t, sha, w.Record.ValuesHash)
	assert.Equal(t, "1.0.0", w.Record.PreviousVersion)
	_, err := time.Parse(time.RFC3339, w.Record.AppliedAt)
	assert.NoError(t, err, "applied-at is RFC 3339")
	assert.Equal(t, 1, e.target.applyCalls)
	obj := e.target.current()
	assert.Equal(t, "2.0.0", obj.Version)
	assert.Equal(t, merged, obj.Values)
	assert.True(t, e.target.readyNow())

	// one backup, of the target as it was
	assert.Equal(t, 1, e.target.backupCalls)
	assert.Equal(t, 1, e.target.backupsMade)
	b := e.target.backups["1.0.0"]
	require.NotNil(t, b)
	assert.Equal(t, vals(t, startValues), b.Data.(fakeObj).Values)
	assert.Equal(t, hashOf(t, vals(t, startValues)), b.ValuesHash)

	// the wait judged what was written
	assert.Equal(t, Want{Version: "2.0.0", ValuesHash: sha}, e.target.asked[0])

	// the Lease: taken, then given up; the Events only after it was taken
	assert.Equal(t, "", e.leases.holder(e.leaseKey()), "released")
	history := e.leases.historyCopy()
	require.NotEmpty(t, history)
	assert.Equal(t, "take ns/chart-upgrader-fake-app node-a", history[0], "nothing before the Lease was taken: %v", history)
	events := e.cluster.eventList()
	var reasons []string
	for _, ev := range events {
		reasons = append(reasons, ev.Reason)
		assert.False(t, ev.Warning)
		assert.Equal(t, e.target.ref, ev.Target)
		assert.Equal(t, "uid-app", ev.UID)
		assert.Equal(t, "node-a", ev.Node)
		assert.Equal(t, "node-a", ev.Reporting)
		assert.Equal(t, ev.Action+" 1.0.0 → 2.0.0: done [plan/apply-node-a]", ev.Message)
	}
	assert.Equal(t, []string{"PhaseResolve", "PhasePreflight", "PhaseMerge", "PhaseApply", "PhaseWait", "PhaseVerify"}, reasons)

	// the journal: every step, completed, the hash applied
	entry, ok := e.journal.entry("fake/ns/app", "2.0.0")
	require.True(t, ok)
	assert.True(t, entry.Completed)
	assert.Equal(t, "fake/ns/app", entry.Target)
	assert.Equal(t, "1.0.0", entry.FromVersion)
	assert.Equal(t, "2.0.0", entry.ToVersion)
	assert.Equal(t, sha, entry.ValuesHash)
	var phases []string
	for p, s := range entry.Phases {
		phases = append(phases, p)
		assert.False(t, s.FinishedAt.IsZero(), p)
		assert.NotEmpty(t, s.Duration, p)
	}
	assert.ElementsMatch(t, allSteps, phases)

	// hooks around every step, with what is going on
	assert.Equal(t, hookCalls(allSteps...), e.hooks.callList())
	for i, c := range e.hooks.contexts {
		assert.Equal(t, e.target.ref, c.Target, e.hooks.calls[i])
		assert.Equal(t, "node-a", c.Node)
		assert.NoError(t, e.hooks.stepErrs[i])
		if i > 0 {
			assert.Equal(t, "1.0.0", c.From, e.hooks.calls[i])
			assert.Equal(t, "2.0.0", c.To, e.hooks.calls[i])
		}
	}
	last := e.hooks.contexts[len(e.hooks.contexts)-1]
	assert.Equal(t, SituationDone, last.Situation)
	assert.Equal(t, sha, last.ValuesHash)

	// the decision table, and one log line per step start and end
	assert.Contains(t, e.out.String(), "merge 1.0.0 → 2.0.0")
	assert.Contains(t, e.out.String(), "image.tag")
	for _, s := range allSteps {
		assert.Len(t, e.log.lines(`msg="phase start"`, "phase="+s), 1, s)
		assert.Len(t, e.log.lines(`msg="phase done"`, "phase="+s), 1, s)
	}
}

// A re-run after success writes nothing (target, Lease, Events), runs no
// hook after pre-resolve, and says it did not write.
func TestRunRerunAfterSuccess(t *testing.T) {
	e := newEnv(t)
	e.mustRun(GoalUpgrade)
	writes, history := e.target.writeCount(), e.leases.historyCopy()

	for _, r := range []*env{e.again(), e.peer("node-b")} {
		res := r.mustRun(GoalUpgrade)
		assert.Equal(t, &Result{From: "2.0.0", To: "2.0.0", Situation: SituationDone}, res)
		assert.Equal(t, writes, r.target.writeCount())
		assert.Equal(t, history, r.leases.historyCopy(), "no Lease taken, no Event")
		assert.Empty(t, r.cluster.eventList())
		assert.Equal(t, []string{"pre-resolve"}, r.hooks.callList())
		assert.Empty(t, r.out.String(), "no merge")
		assert.Equal(t, 1, r.target.backupsMade)
		entry, ok := r.journal.entry("fake/ns/app", "2.0.0")
		require.True(t, ok)
		assert.True(t, entry.Completed)
		assert.Contains(t, entry.Phases, StepVerify)
	}
	// the same node's journal entry is kept: the target is still what it finished
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.Equal(t, "1.0.0", entry.FromVersion)
	assert.Contains(t, entry.Phases, StepApply)
}

// At the wanted version with values the merge leaves as they are: nothing
// is written, no Lease is taken, and the wait asks only for the version.
func TestRunSameVersionUnchanged(t *testing.T) {
	e := newEnv(t)
	e.target.obj = fakeObj{Chart: "app", Version: "2.0.0", Values: vals(t, mergedValues), UID: "uid-app"}
	res := e.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.False(t, res.Leader)
	assert.Equal(t, "2.0.0", res.From)
	assert.Zero(t, e.target.applyCalls)
	assert.Zero(t, e.target.backupCalls)
	assert.Equal(t, []Want{{Version: "2.0.0"}}, e.target.asked)
	assert.Empty(t, e.leases.historyCopy(), "no Lease taken, no Event")
	assert.Len(t, e.log.lines("phase=merge", "no_change=true"), 1)
	assert.Equal(t, hookCalls(StepResolve, StepPreflight, StepMerge, StepWait, StepVerify), e.hooks.callList(),
		"not a re-run after success: the hooks run; nothing to write: no apply")
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.True(t, entry.Completed)
	assert.Equal(t, hashOf(t, vals(t, mergedValues)), entry.ValuesHash, "the hash merged, though nothing was written")
}

// At the wanted version, values a --set changes, or paused: written.
func TestRunSameVersionWrites(t *testing.T) {
	tests := []struct {
		name   string
		paused bool
		set    map[string]any
		want   string
	}{
		{"an override changes the values", false, map[string]any{"replicas": int64(5)}, `{replicas: 5}`},
		{"paused: unpaused by the write", true, nil, mergedValues},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.target.obj = fakeObj{Chart: "app", Version: "2.0.0", Values: vals(t, mergedValues), Paused: tt.paused, PausedByUs: tt.paused}
			if tt.set != nil {
				e.job.Overrides = []values.Override{{Origin: "--set replicas=5", Values: tt.set}}
			}
			res := e.mustRun(GoalUpgrade)
			assert.True(t, res.Leader)
			require.Len(t, e.target.writes, 1)
			obj := e.target.current()
			assert.Equal(t, vals(t, tt.want), obj.Values)
			assert.False(t, obj.Paused)
			assert.Equal(t, Record{Version: "2.0.0", ValuesHash: hashOf(t, vals(t, tt.want)), AppliedAt: obj.Record.AppliedAt,
				PreviousVersion: "2.0.0"}, obj.Record)
		})
	}
}

func TestRunDowngrade(t *testing.T) {
	setup := func(t *testing.T) *env {
		e := newEnv(t)
		e.target.obj = fakeObj{Chart: "app", Version: "2.0.0", Values: vals(t, `{replicas: 3}`)}
		e.runner.Version = "1.0.0"
		return e
	}
	t.Run("refused", func(t *testing.T) {
		e := setup(t)
		res, err := e.run(GoalUpgrade)
		require.ErrorIs(t, err, outcome.ErrRefused)
		assert.Equal(t, outcome.ExitRefused, outcome.Code(err))
		assert.ErrorContains(t, err, "2.0.0 → 1.0.0 is a downgrade: give --allow-downgrade if you mean it")
		assert.ErrorContains(t, err, "fake/ns/app: preflight: preflight refused fake/ns/app 2.0.0 → 1.0.0")
		assert.Equal(t, SituationDowngrade, res.Situation)
		assert.Zero(t, e.target.applyCalls)
		assert.Empty(t, e.leases.historyCopy(), "a refusal writes nothing: no Lease, no Event")
		entry, _ := e.journal.entry("fake/ns/app", "1.0.0")
		assert.Equal(t, []string{StepResolve}, keys(entry.Phases), "the refused step is not journaled")
	})
	t.Run("allowed", func(t *testing.T) {
		e := setup(t)
		e.runner.AllowDowngrade = true
		res := e.mustRun(GoalUpgrade)
		assert.Equal(t, "2.0.0", res.From)
		assert.Equal(t, "1.0.0", res.To)
		assert.True(t, res.Leader)
		require.Len(t, e.target.writes, 1)
		assert.Equal(t, "1.0.0", e.target.current().Version)
		assert.Equal(t, "2.0.0", e.target.current().Record.PreviousVersion)
	})
}

func TestRunPaused(t *testing.T) {
	tests := []struct {
		name               string
		paused, byUs, flag bool
		refused            bool
	}{
		{"paused by someone else", true, false, false, true},
		{"paused by someone else, --unpause", true, false, true, false},
		{"paused by us", true, true, false, false},
		{"not paused", false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.target.obj.Paused, e.target.obj.PausedByUs = tt.paused, tt.byUs
			e.runner.Unpause = tt.flag
			res, err := e.run(GoalUpgrade)
			if tt.refused {
				require.ErrorIs(t, err, outcome.ErrRefused)
				assert.ErrorContains(t, err, "the fake is paused by someone else")
				assert.ErrorContains(t, err, "give --unpause")
				assert.Zero(t, e.target.applyCalls)
				assert.True(t, e.target.current().Paused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, SituationDone, res.Situation)
			require.Len(t, e.target.writes, 1)
			assert.False(t, e.target.current().Paused, "the write unpauses")
		})
	}
}

// Every reason to refuse is one line of one error.
func TestRunPreflightRefusesWithEveryLine(t *testing.T) {
	e := newEnv(t)
	e.target.obj.Paused = true
	e.target.health = Health{Problems: []string{"bundle mcc-app is not ready: cluster c1 ErrApplied", "helm release app/app is pending-upgrade"}}
	e.runner.RequireNodesReady = true
	e.cluster.notReady = []string{"node-1", "node-2"}
	e.job.Rules = append(e.job.Rules, rule(t, "readonly", "replicas"))
	e.job.Overrides = []values.Override{{Origin: "--set replicas=5", Values: map[string]any{"replicas": int64(5)}}}
	res, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	msg := err.Error()
	for _, line := range []string{
		"- the fake is paused by someone else",
		"- bundle mcc-app is not ready: cluster c1 ErrApplied",
		"- helm release app/app is pending-upgrade",
		"- nodes not Ready: node-1, node-2",
		"- readonly values would change: replicas (rule 2) would change from 3 to 5 by --set replicas=5",
	} {
		assert.Contains(t, msg, line)
	}
	assert.Equal(t, 5, strings.Count(msg, "\n- "), msg)
	assert.Equal(t, SituationUpgrade, res.Situation)
	assert.Zero(t, e.target.applyCalls)
	assert.Empty(t, e.leases.historyCopy())
	assert.Equal(t, hookCalls(StepResolve, StepPreflight), e.hooks.callList())
	assert.ErrorIs(t, e.hooks.stepErrs[3], outcome.ErrRefused, "post-preflight is told the step failed")
}

func TestRunNodesReady(t *testing.T) {
	for _, require_ := range []bool{false, true} {
		e := newEnv(t)
		e.runner.RequireNodesReady = require_
		e.cluster.notReady = []string{"node-3"}
		_, err := e.run(GoalUpgrade)
		if !require_ {
			require.NoError(t, err, "nodes are not looked at unless asked")
			continue
		}
		require.ErrorIs(t, err, outcome.ErrRefused)
		assert.ErrorContains(t, err, "nodes not Ready: node-3")
		assert.Zero(t, e.target.applyCalls)
	}
}

// A refused merge refuses the upgrade, prints its decision table, and
// writes nothing.
func TestRunMergeRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *env)
		msg   string
	}{
		{"a readonly value an override would change", func(t *testing.T, e *env) {
			e.job.Rules = append(e.job.Rules, rule(t, "readonly", "replicas"))
			e.job.Overrides = []values.Override{{Origin: "--set replicas=5", Values: map[string]any{"replicas": int64(5)}}}
		}, "readonly values would change: replicas (rule 2) would change from 3 to 5 by --set replicas=5"},
		{"the chart does not render with the merged values", func(t *testing.T, e *env) {
			e.source.charts["app@2.0.0"].Check = func(map[string]any) error {
				return outcome.Refused(errors.New("rendering: template deployment.yaml: replicas must be odd"))
			}
		}, "chart app 2.0.0 with the merged values: rendering: template deployment.yaml: replicas must be odd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.setup(t, e)
			_, err := e.run(GoalUpgrade)
			require.ErrorIs(t, err, outcome.ErrRefused)
			assert.ErrorContains(t, err, tt.msg)
			assert.Contains(t, e.out.String(), "PATH", "the decision table is printed")
			assert.Contains(t, e.out.String(), "replicas")
			assert.Zero(t, e.target.applyCalls)
			assert.Zero(t, e.target.backupCalls)

			// the check goal refuses it the same way
			e = newEnv(t)
			tt.setup(t, e)
			_, err = e.run(GoalCheck)
			require.ErrorIs(t, err, outcome.ErrRefused)
			assert.ErrorContains(t, err, tt.msg)
		})
	}
}

func TestRunBadTarget(t *testing.T) {
	t.Run("not found", func(t *testing.T) {
		e := newEnv(t)
		e.target.exists = false
		res, err := e.run(GoalUpgrade)
		require.ErrorIs(t, err, outcome.ErrRefused)
		assert.ErrorContains(t, err, "fake/ns/app: resolve: fake ns/app not found: check the target namespace and name")
		assert.Equal(t, &Result{}, res)
		assert.Equal(t, hookCalls(StepResolve), e.hooks.callList())
		assert.Empty(t, e.leases.historyCopy(), "no Event on a target that is not there")
		assert.Zero(t, e.journal.saves)
	})
	t.Run("no version", func(t *testing.T) {
		e := newEnv(t)
		e.runner.Version = ""
		_, err := e.run(GoalUpgrade)
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "no version to upgrade to: give --version (or run under system-upgrade-controller, which sets $SYSTEM_UPGRADE_PLAN_LATEST_VERSION)")
	})
	t.Run("a version the source does not have", func(t *testing.T) {
		e := newEnv(t)
		e.runner.Version = "9.0.0"
		_, err := e.run(GoalUpgrade)
		require.Error(t, err)
		assert.ErrorContains(t, err, "loading chart app 9.0.0 from fake-repo")
	})
	t.Run("a deployed version the source lacks: no old defaults, a warning", func(t *testing.T) {
		e := newEnv(t)
		e.target.obj.Version = "0.5.0"
		res := e.mustRun(GoalUpgrade)
		assert.Equal(t, "0.5.0", res.From)
		assert.Len(t, e.log.lines("phase=resolve", "old_defaults=", "version 0.5.0 is not in fake-repo"), 1)
		// with no old chart, the follow rule keeps the user's image tag
		assert.Equal(t, vals(t, startValues), e.target.current().Values)
	})
	t.Run("the chart named by the job, not the one deployed", func(t *testing.T) {
		e := newEnv(t)
		e.target.obj.Chart = "something-else"
		e.job.ChartName = "app"
		e.mustRun(GoalUpgrade)
		assert.Contains(t, e.source.loads, "app@2.0.0")
	})
}

// Preflight would refuse (the target looks unhealthy), but another process
// applied the target meanwhile: that is its rollout, which this process
// waits for, without writing.
func TestRunPreflightFindsItAppliedMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.target.health = Health{Problems: []string{"bundle mcc-app: 0/1 clusters ready"}}
	merged := vals(t, mergedValues)
	e.target.onHealth = func() { e.target.applyAs(t, "2.0.0", merged) }
	res := e.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.False(t, res.Leader)
	assert.Nil(t, res.Merge, "no merge of ours")
	assert.Zero(t, e.target.applyCalls)
	assert.Equal(t, []Want{{Version: "2.0.0", ValuesHash: hashOf(t, merged)}}, e.target.asked, "the wait asks for the record re-read")
	assert.Len(t, e.log.lines("another process applied the target since it was read"), 1)
	assert.Equal(t, hookCalls(StepResolve, StepPreflight, StepWait, StepVerify), e.hooks.callList())
	assert.Empty(t, e.leases.historyCopy())

	// the check goal passes it too
	e = newEnv(t)
	e.target.health = Health{Problems: []string{"bundle mcc-app: 0/1 clusters ready"}}
	e.target.onHealth = func() { e.target.applyAs(t, "2.0.0", merged) }
	res = e.mustRun(GoalCheck)
	assert.Equal(t, SituationApplied, res.Situation)
}

// A write that loses to a concurrent change re-reads, merges again on what
// the target holds now, and retries: the concurrent change is kept.
func TestRunConflictRemerges(t *testing.T) {
	e := newEnv(t)
	e.target.onApply = func(attempt int) {
		if attempt == 1 {
			e.target.update(func(o *fakeObj) { o.Values["extra"] = "added meanwhile" })
		}
	}
	res := e.mustRun(GoalUpgrade)
	assert.True(t, res.Leader)
	assert.Equal(t, 2, e.target.applyCalls)
	require.Len(t, e.target.writes, 1)
	want := vals(t, `{replicas: 3, extra: added meanwhile}`)
	assert.Equal(t, want, e.target.writes[0].Values, "the merge saw the concurrent change")
	assert.Equal(t, want, e.target.current().Values)
	assert.Equal(t, hashOf(t, want), e.target.current().Record.ValuesHash)
	assert.Equal(t, []Want{{Version: "2.0.0", ValuesHash: hashOf(t, want)}}, e.target.asked)
	assert.Len(t, e.log.lines("the fake changed since it was read"), 1)
	assert.Len(t, e.log.lines("phase=apply", "wrote=false", "attempt=1"), 1)
	assert.Len(t, e.log.lines("phase done", "phase=merge"), 2, "merged again on what the target holds now")
	assert.Len(t, e.log.lines("phase=apply", "wrote=true", "attempt=2"), 1)
	var takes, releases int
	for _, h := range e.leases.historyCopy() {
		switch {
		case strings.HasPrefix(h, "take "):
			takes++
		case strings.HasPrefix(h, "release "):
			releases++
		}
	}
	assert.Equal(t, 1, takes, "the Lease is kept through the new merge: %v", e.leases.historyCopy())
	assert.Equal(t, 1, releases, "and given up once, after the write")
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.Equal(t, hashOf(t, want), entry.ValuesHash, "the journal has the hash written")
}

// A conflict with a change that leaves the merge's inputs as they were
// retries with the same merge.
func TestRunConflictSameMerge(t *testing.T) {
	e := newEnv(t)
	e.target.onApply = func(attempt int) {
		if attempt == 1 {
			e.target.update(func(o *fakeObj) {}) // a status write: a new revision only
		}
	}
	e.mustRun(GoalUpgrade)
	assert.Equal(t, 2, e.target.applyCalls)
	require.Len(t, e.target.writes, 1)
	assert.Equal(t, vals(t, mergedValues), e.target.writes[0].Values)
	assert.Len(t, e.log.lines("decisions="), 1, "merged once")
}

func TestRunConflictTenTimes(t *testing.T) {
	e := newEnv(t)
	e.target.onApply = func(int) { e.target.update(func(o *fakeObj) {}) }
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, ErrConflict)
	assert.ErrorContains(t, err, "fake/ns/app: apply:")
	assert.Equal(t, maxConflicts, e.target.applyCalls)
	assert.Empty(t, e.target.writes)
}

// A conflict after which the target needs no change, or carries our apply
// (another process's): done, without a write.
func TestRunConflictThenNothingToWrite(t *testing.T) {
	merged := vals(t, mergedValues)
	tests := []struct {
		name   string
		change func(t *testing.T, e *env)
	}{
		{"another process applied it", func(t *testing.T, e *env) { e.target.applyAs(t, "2.0.0", merged) }},
		{"someone set it as the merge would", func(t *testing.T, e *env) {
			e.target.update(func(o *fakeObj) { o.Version, o.Values = "2.0.0", deepCopy(merged) })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.target.onApply = func(attempt int) {
				if attempt == 1 {
					tt.change(t, e)
				}
			}
			res := e.mustRun(GoalUpgrade)
			assert.Equal(t, SituationDone, res.Situation)
			assert.Equal(t, 1, e.target.applyCalls)
			assert.Empty(t, e.target.writes)
			assert.Equal(t, "2.0.0", e.target.current().Version)
		})
	}
}

// Another process holds the Lease and applies: this one waits for it and
// ends without writing, then verifies.
func TestRunAnotherProcessApplies(t *testing.T) {
	e := newEnv(t)
	e.leases.seed(e.leaseKey(), "node-z", time.Now(), time.Hour)
	watching := make(chan struct{})
	e.target.onWatch = func() { close(watching) }
	merged := vals(t, mergedValues)
	type ended struct {
		res *Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := e.run(GoalUpgrade)
		done <- ended{res, err}
	}()
	ctx := e.ctx()
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the runner never watched the target")
	}
	e.target.applyAs(t, "2.0.0", merged)
	var got ended
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("the runner did not end after the other process applied")
	}
	require.NoError(t, got.err)
	assert.False(t, got.res.Leader)
	assert.Equal(t, SituationDone, got.res.Situation)
	assert.Zero(t, e.target.applyCalls)
	assert.Zero(t, e.target.backupCalls)
	assert.Equal(t, "node-z", e.leases.holder(e.leaseKey()), "another's Lease is left alone")
	assert.Empty(t, e.cluster.eventList(), "a follower sends no Event")
	assert.NotEmpty(t, e.log.lines("another process is applying this target; waiting for it", "holder=node-z"))
	assert.Len(t, e.log.lines("another process applied the target", "version=2.0.0"), 1)
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.True(t, entry.Completed)
	assert.Contains(t, entry.Phases, StepVerify)
}

// The holder stops renewing and its Lease expires: this process takes it
// on its next try and applies.
func TestRunHolderStopsRenewing(t *testing.T) {
	e := newEnv(t)
	e.leases.seed(e.leaseKey(), "node-z", time.Now(), e.cluster.duration)
	res := e.mustRun(GoalUpgrade)
	assert.True(t, res.Leader)
	require.Len(t, e.target.writes, 1)
	assert.NotEmpty(t, e.log.lines("another process is applying this target; waiting for it", "holder=node-z"))
	assert.Contains(t, e.leases.historyCopy(), "take ns/chart-upgrader-fake-app node-a")
}

func TestRunLeaseExpiredHolder(t *testing.T) {
	e := newEnv(t)
	e.leases.seed(e.leaseKey(), "node-dead", time.Now().Add(-time.Hour), time.Second)
	res := e.mustRun(GoalUpgrade)
	assert.True(t, res.Leader)
	require.Len(t, e.target.writes, 1)
	assert.Empty(t, e.log.lines("another process is applying"), "an expired holder is not waited for")
	assert.Equal(t, "", e.leases.holder(e.leaseKey()))
	st := e.leases.leases[e.leaseKey()]
	assert.Equal(t, 1, st.transitions)
	assert.Equal(t, map[string]string{"chart-upgrader.io/version": "2.0.0"}, st.annotations)
}

func TestRunLeaseAnnotations(t *testing.T) {
	e := newEnv(t)
	e.runner.LeaseAnnotations = map[string]string{"chart-upgrader.io/node": "node-a"}
	e.mustRun(GoalUpgrade)
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "node-a", "chart-upgrader.io/version": "2.0.0"},
		e.leases.leases[e.leaseKey()].annotations)
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "node-a"}, e.runner.LeaseAnnotations, "the settings are not changed")
}

// The Lease is taken from this process before it writes: it stops, naming
// the Lease, and writes nothing.
func TestRunLeaseLostBeforeWriting(t *testing.T) {
	e := newEnv(t)
	e.target.onBackup = func() { e.leases.steal(e.leaseKey(), "node-thief") }
	res, err := e.run(GoalUpgrade)
	require.Error(t, err)
	assert.ErrorContains(t, err, "fake/ns/app: apply: lost the lease chart-upgrader-fake-app to another process before writing")
	assert.Zero(t, e.target.applyCalls)
	assert.Equal(t, "node-thief", e.leases.holder(e.leaseKey()), "the thief's Lease is left alone")
	assert.False(t, res.Leader, "it held the Lease but wrote nothing")
	events := e.cluster.eventList()
	require.NotEmpty(t, events)
	lastEv := events[len(events)-1]
	assert.True(t, lastEv.Warning)
	assert.Equal(t, "PhaseApplyFailed", lastEv.Reason)
	assert.Contains(t, lastEv.Message, "apply 1.0.0 → 2.0.0 failed: lost the lease")
}

func TestRunWaitTimeout(t *testing.T) {
	e := newEnv(t)
	e.target.notReady = true
	e.job.Timeout = 20 * time.Millisecond
	res, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrTimeout)
	assert.Equal(t, outcome.ExitTimeout, outcome.Code(err))
	assert.ErrorContains(t, err, "fake/ns/app: wait: fake/ns/app not ready after 20ms waiting for version 2.0.0:\n  the rollout is not done")
	assert.Equal(t, SituationApplied, res.Situation)
	assert.True(t, res.Leader)
	require.Len(t, e.target.writes, 1, "it applied before waiting")
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.False(t, entry.Completed)
	assert.NotContains(t, entry.Phases, StepWait)

	// the next run finds it applied by us, not ready yet, and waits only
	e.target.setReady(true)
	e.target.rollout = []string{"settling"}
	r := e.again()
	res = r.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Len(t, e.target.writes, 1)
	assert.Equal(t, hookCalls(StepResolve, StepWait, StepVerify), r.hooks.callList())
	entry, _ = e.journal.entry("fake/ns/app", "2.0.0")
	assert.True(t, entry.Completed)
	assert.Contains(t, entry.Phases, StepApply, "the entry of the first run goes on")
}

func TestRunWaitProgress(t *testing.T) {
	e := newEnv(t)
	e.target.rollout = []string{"bundle mcc-app not rolled out", "cluster c1 not ready", "cluster c2 not ready"}
	e.mustRun(GoalUpgrade)
	for _, stage := range []string{"bundle mcc-app not rolled out", "cluster c1 not ready", "cluster c2 not ready"} {
		assert.Len(t, e.log.lines("msg=waiting", `progress="ready 0/1; waiting: `+stage+`; not ready: deployment/app (+1 more)"`, "elapsed="), 1, stage)
	}
	assert.Len(t, e.log.lines("phase=wait", "ready=1/1"), 1)
}

// The wait follows the watch: the test flips readiness once the runner
// waits, and the run ends.
func TestRunWaitFollowsTheWatch(t *testing.T) {
	e := newEnv(t)
	e.target.notReady = true
	waiting := make(chan struct{})
	e.target.onWatch = func() { close(waiting) }
	done := make(chan error, 1)
	go func() { _, err := e.run(GoalUpgrade); done <- err }()
	ctx := e.ctx()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("no watch")
	}
	e.target.setReady(true)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the wait did not see the change")
	}
}

func TestRunHooks(t *testing.T) {
	t.Run("a failing pre hook refuses before its step runs", func(t *testing.T) {
		e := newEnv(t)
		e.hooks.fail["pre-preflight"] = errors.New("exit status 1")
		res, err := e.run(GoalUpgrade)
		require.ErrorIs(t, err, outcome.ErrRefused)
		assert.ErrorContains(t, err, "fake/ns/app: hook pre-preflight failed: exit status 1")
		assert.Equal(t, []string{"pre-resolve", "post-resolve", "pre-preflight"}, e.hooks.callList())
		assert.Zero(t, e.target.healthCalls, "preflight did not run")
		assert.Zero(t, e.target.applyCalls)
		assert.Equal(t, SituationUpgrade, res.Situation)
		assert.Len(t, e.log.lines("level=ERROR", "pre hook failed", "phase=preflight"), 1)
		entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
		assert.Equal(t, []string{StepResolve}, keys(entry.Phases))
	})
	t.Run("a failing post hook is reported and the run goes on", func(t *testing.T) {
		e := newEnv(t)
		e.hooks.fail["post-merge"] = errors.New("exit status 2")
		e.hooks.fail["post-verify"] = errors.New("exit status 3")
		res := e.mustRun(GoalUpgrade)
		assert.Equal(t, []string{"hook post-merge failed: exit status 2", "hook post-verify failed: exit status 3"}, res.HookFailures)
		assert.Equal(t, SituationDone, res.Situation)
		require.Len(t, e.target.writes, 1)
		assert.Equal(t, hookCalls(allSteps...), e.hooks.callList())
		assert.Len(t, e.log.lines("level=ERROR", "post hook failed"), 2)
	})
	t.Run("post hooks see the step's error", func(t *testing.T) {
		e := newEnv(t)
		e.target.setErr("Backup", errors.New("secrets forbidden"))
		_, err := e.run(GoalUpgrade)
		require.Error(t, err)
		calls := e.hooks.callList()
		assert.Equal(t, "post-apply", calls[len(calls)-1])
		assert.ErrorContains(t, e.hooks.stepErrs[len(calls)-1], "secrets forbidden")
	})
	t.Run("no hooks", func(t *testing.T) {
		e := newEnv(t)
		e.runner.Hooks = nil
		e.mustRun(GoalUpgrade)
		assert.Empty(t, e.hooks.callList())
	})
}

func TestRunCheck(t *testing.T) {
	e := newEnv(t)
	res := e.mustRun(GoalCheck)
	assert.Equal(t, &Result{From: "1.0.0", To: "2.0.0", Situation: SituationUpgrade, Merge: res.Merge}, res)
	require.NotNil(t, res.Merge, "the merge preflight checked")
	assert.Equal(t, hashOf(t, vals(t, mergedValues)), res.Merge.SHA256)
	assert.Zero(t, e.target.applyCalls)
	assert.Zero(t, e.target.backupCalls)
	assert.Zero(t, e.target.watchCalls)
	assert.Empty(t, e.leases.historyCopy())
	assert.Equal(t, hookCalls(StepResolve, StepPreflight), e.hooks.callList())

	// a target of ours is not checked
	e.mustRun(GoalUpgrade)
	health := e.target.healthCalls
	r := e.again()
	res = r.mustRun(GoalCheck)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Equal(t, health, r.target.healthCalls, "no preflight")
	assert.Equal(t, []string{"pre-resolve"}, r.hooks.callList())
}

// The journal: a completed entry of an earlier upgrade to the same
// version (before a rollback, say) is not this upgrade's.
func TestRunJournalStartsAfresh(t *testing.T) {
	e := newEnv(t)
	old := Entry{Target: "fake/ns/app", FromVersion: "0.9.0", ToVersion: "2.0.0", ValuesHash: "old", Completed: true,
		Phases: map[string]Step{}}
	for _, s := range allSteps {
		old.Phases[s] = Step{Duration: "1s"}
	}
	require.NoError(t, e.journal.Save(old))
	e.journal.crashAfter = StepPreflight
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, errCrash)
	assert.ErrorContains(t, err, "fake/ns/app: journal after preflight: killed")
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	assert.False(t, entry.Completed)
	assert.Equal(t, "1.0.0", entry.FromVersion)
	assert.ElementsMatch(t, []string{StepResolve, StepPreflight}, keys(entry.Phases))
	assert.Equal(t, hashOf(t, vals(t, mergedValues)), entry.ValuesHash)

	// an entry not completed goes on
	r := e.again()
	r.mustRun(GoalUpgrade)
	entry, _ = e.journal.entry("fake/ns/app", "2.0.0")
	assert.True(t, entry.Completed)
	assert.ElementsMatch(t, allSteps, keys(entry.Phases))
}

func TestRunWithoutJournal(t *testing.T) {
	e := newEnv(t)
	e.runner.Journal = nil
	res := e.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Zero(t, e.journal.saves)
}

// Every port error stops the run at its step, named with the target.
func TestRunPortErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		setup  func(e *env)
		step   string
		result Situation
	}{
		{"read", func(e *env) { e.target.setErr("Read", boom) }, StepResolve, ""},
		{"look", func(e *env) {
			e.target.obj.Version = "2.0.0"
			e.target.obj.Values = vals(e.t, mergedValues)
			e.target.obj.Record = Record{Version: "2.0.0", ValuesHash: hashOf(e.t, vals(e.t, mergedValues))}
			e.target.setErr("Look", boom)
		}, StepResolve, ""},
		{"health", func(e *env) { e.target.setErr("Health", boom) }, StepPreflight, SituationUpgrade},
		{"nodes", func(e *env) { e.runner.RequireNodesReady = true; e.cluster.setErr("NotReadyNodes", boom) }, StepPreflight, SituationUpgrade},
		{"live objects", func(e *env) { e.cluster.setErr("Live", boom) }, StepPreflight, SituationUpgrade},
		{"a merge that fails, not refused", func(e *env) {
			e.source.charts["app@2.0.0"].Check = func(map[string]any) error { return boom }
		}, StepPreflight, SituationUpgrade},
		{"re-read after a refusal", func(e *env) {
			e.target.health = Health{Problems: []string{"unhealthy"}}
			e.target.onHealth = func() { e.target.setErr("Read", boom) }
		}, StepPreflight, SituationUpgrade},
		{"lease", func(e *env) { e.cluster.setErr("TryAcquire", boom) }, StepApply, SituationUpgrade},
		{"re-read before writing", func(e *env) {
			e.runner.Hooks = hookFunc(func(kind, step string) {
				if kind == "pre" && step == StepApply {
					e.target.setErr("Read", boom)
				}
			})
		}, StepApply, SituationUpgrade},
		{"backup", func(e *env) { e.target.setErr("Backup", boom) }, StepApply, SituationUpgrade},
		{"write", func(e *env) { e.target.setErr("Apply", boom) }, StepApply, SituationUpgrade},
		{"release", func(e *env) { e.cluster.setErr("Release", boom) }, StepApply, SituationUpgrade},
		{"watch", func(e *env) { e.target.setErr("Watch", boom) }, StepWait, SituationApplied},
		{"journal load", func(e *env) { e.journal.loadErr = boom }, "journal after resolve", SituationUpgrade},
		{"journal save", func(e *env) { e.journal.saveErr = boom }, "journal after resolve", SituationUpgrade},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.setup(e)
			res, err := e.run(GoalUpgrade)
			require.ErrorIs(t, err, boom)
			assert.ErrorContains(t, err, "fake/ns/app: "+tt.step+": ")
			assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
			require.NotNil(t, res)
			assert.Equal(t, tt.result, res.Situation)
		})
	}
}

// A target that disappears between resolve and the write.
func TestRunTargetDisappears(t *testing.T) {
	e := newEnv(t)
	e.runner.Hooks = hookFunc(func(kind, step string) {
		if kind == "pre" && step == StepApply {
			e.target.mu.Lock()
			e.target.exists = false
			e.target.mu.Unlock()
		}
	})
	_, err := e.run(GoalUpgrade)
	assert.ErrorContains(t, err, "fake/ns/app: apply: fake/ns/app disappeared")
	assert.Zero(t, e.target.applyCalls)
}

// A watch that cannot start within the wait's time is a timeout.
func TestRunWatchTimeout(t *testing.T) {
	e := newEnv(t)
	e.target.setErr("Watch", context.DeadlineExceeded)
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrTimeout)
	assert.ErrorContains(t, err, "fake/ns/app: wait: could not watch fake/ns/app within 10s")
}

// The unexported step switch rejects a step it does not know, and a merge
// without a chart.
func TestRunUnknownStepAndNoChart(t *testing.T) {
	e := newEnv(t)
	j := &jobRun{Runner: e.runner, job: e.job, ref: e.target.ref, events: &eventQueue{}}
	_, err := j.run(e.ctx(), "bogus", progress{})
	assert.EqualError(t, err, `no step "bogus"`)
	_, err = j.merged(e.ctx(), Resolved{}, &Observed{})
	assert.EqualError(t, err, "fake/ns/app: no chart to merge with")
}

// A long failure is cut in its Event.
func TestRunEventTruncated(t *testing.T) {
	e := newEnv(t)
	e.target.setErr("Apply", errors.New(strings.Repeat("x", 2000)))
	_, err := e.run(GoalUpgrade)
	require.Error(t, err)
	events := e.cluster.eventList()
	require.NotEmpty(t, events)
	msg := events[len(events)-1].Message
	assert.True(t, strings.HasSuffix(msg, "…"+" [plan/apply-node-a]"), msg)
	assert.Less(t, len(msg), 1000)
}

// hookFunc is Hooks from a function that only watches.
type hookFunc func(kind, step string)

func (h hookFunc) Run(_ context.Context, kind, step string, _ HookContext, _ error) error {
	h(kind, step)
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// After a conflict the merge runs again on what the target holds now; a
// refusal then stops the apply without a write.
func TestRunConflictThenRefused(t *testing.T) {
	e := newEnv(t)
	e.source.charts["app@2.0.0"].Check = func(v map[string]any) error {
		if _, ok := v["broken"]; ok {
			return outcome.Refused(errors.New("broken is not a value of this chart"))
		}
		return nil
	}
	e.target.onApply = func(attempt int) {
		if attempt == 1 {
			e.target.update(func(o *fakeObj) { o.Values["broken"] = true })
		}
	}
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.ErrorContains(t, err, "fake/ns/app: merge: chart app 2.0.0 with the merged values: broken is not a value")
	assert.Equal(t, 1, e.target.applyCalls)
	assert.Empty(t, e.target.writes)
	assert.Equal(t, "", e.leases.holder(e.leaseKey()), "the Lease kept for the next attempt is given up when the run fails")
}

// A migration that fails is bad input, at preflight.
func TestRunMigrationFails(t *testing.T) {
	e := newEnv(t)
	expr, err := values.ParseExpr(`.v = error("no")`)
	require.NoError(t, err)
	m, err := values.NewMigration("boom", "", "", expr)
	require.NoError(t, err)
	e.job.Migrations = []values.Migration{m}
	_, err = e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "fake/ns/app: preflight: ")
	assert.Empty(t, e.out.String(), "no result, no table")
}

// While another process holds the Lease, a watch that fails, or a run
// cancelled, ends the wait for it.
func TestRunWaitingForTheHolderEnds(t *testing.T) {
	t.Run("the watch fails", func(t *testing.T) {
		e := newEnv(t)
		e.leases.seed(e.leaseKey(), "node-z", time.Now(), time.Hour)
		e.target.setErr("Watch", errBoom)
		_, err := e.run(GoalUpgrade)
		require.ErrorIs(t, err, errBoom)
		assert.ErrorContains(t, err, "fake/ns/app: apply: boom")
		assert.Zero(t, e.target.applyCalls)
	})
	t.Run("cancelled", func(t *testing.T) {
		e := newEnv(t)
		e.leases.seed(e.leaseKey(), "node-z", time.Now(), time.Hour)
		ctx, cancel := context.WithCancel(e.ctx())
		e.target.onWatch = cancel
		_, err := e.runner.Run(ctx, e.job, GoalUpgrade)
		require.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, e.target.applyCalls)
		assert.Equal(t, "node-z", e.leases.holder(e.leaseKey()))
	})
}

// A run cancelled while waiting is not a timeout.
func TestRunWaitCancelled(t *testing.T) {
	e := newEnv(t)
	e.target.notReady = true
	ctx, cancel := context.WithCancel(e.ctx())
	e.target.onWatch = cancel
	_, err := e.runner.Run(ctx, e.job, GoalUpgrade)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, outcome.ErrTimeout)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
}

// A job without a timeout is refused when it comes to wait: the core
// has no default of its own (the spec's is the one).
func TestRunNoTimeout(t *testing.T) {
	e := newEnv(t)
	e.job.Timeout = 0
	_, err := e.run(GoalUpgrade)
	assert.ErrorContains(t, err, "no wait timeout given for the job")
}

// mergeStep merges again when given no checked merge, and fails when its
// table cannot be printed.
func TestMergeStep(t *testing.T) {
	e := newEnv(t)
	j := &jobRun{Runner: e.runner, job: e.job, ref: e.target.ref, events: &eventQueue{}}
	r, err := j.resolve(e.ctx())
	require.NoError(t, err)
	p, err := j.mergeStep(e.ctx(), *r, nil, r.Obs)
	require.NoError(t, err)
	assert.Equal(t, vals(t, mergedValues), p.Merge.Values)
	assert.Contains(t, e.out.String(), "image.tag")

	j.Out = failWriter{}
	_, err = j.mergeStep(e.ctx(), *r, &Checked{Intent: p}, r.Obs)
	assert.ErrorIs(t, err, errBoom)

	e.cluster.setErr("Live", errBoom)
	_, err = j.mergeStep(e.ctx(), *r, &Checked{}, r.Obs)
	assert.ErrorIs(t, err, errBoom)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errBoom }

// Another process applied the target and gave its Lease up between this
// process's merge and its apply: this one takes the free Lease, re-reads,
// finds the apply and writes nothing.
func TestRunAppliedBeforeTheLeaseWasTaken(t *testing.T) {
	e := newEnv(t)
	e.runner.Hooks = hookFunc(func(kind, step string) {
		if kind == "pre" && step == StepApply {
			e.target.applyAs(t, "2.0.0", vals(t, mergedValues))
		}
	})
	res := e.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Zero(t, e.target.applyCalls, "no write")
	assert.Zero(t, e.target.backupCalls, "no backup")
	assert.Equal(t, "", e.leases.holder(e.leaseKey()), "the Lease it took is given up")
}

// BUG: Result.Leader is documented as "this process wrote the target", but
// takeLease sets it as soon as the Lease is taken, before write re-reads
// the target: a process that takes a free Lease and then finds another
// process's apply reports Leader true without a write (the CLI then
// prints "upgraded …" instead of "… nothing to do"), and sends its Events
// as if it had applied.
func TestRunLeaderOnlyWhenWritten(t *testing.T) {
	e := newEnv(t)
	e.runner.Hooks = hookFunc(func(kind, step string) {
		if kind == "pre" && step == StepApply {
			e.target.applyAs(t, "2.0.0", vals(t, mergedValues))
		}
	})
	res := e.mustRun(GoalUpgrade)
	require.Zero(t, e.target.applyCalls)
	assert.False(t, res.Leader, "no write, so not the leader")
}
