package upgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The progress fixtures of the next() tables: each is one step's output.
var (
	obsAt1   = &Observed{Version: "1.0.0", ValuesHash: "h1"}
	obsOurs  = &Observed{Version: "2.0.0", ValuesHash: "h2", Applied: Record{Version: "2.0.0", ValuesHash: "h2"}}
	wantNew  = Want{Version: "2.0.0", ValuesHash: "h2"}
	planNew  = &Intent{Want: wantNew, Remerge: true, key: mergeKey(obsAt1)}
	planNone = &Intent{Want: Want{Version: "2.0.0"}, NoChange: true, Remerge: true, key: mergeKey(obsAt1)}
	backup1  = &Backup{Name: "b", Version: "1.0.0", ValuesHash: "h1"}
)

func resolvedAs(s Situation) *Resolved {
	return &Resolved{Obs: obsAt1, From: "1.0.0", To: "2.0.0", Situation: s}
}

var restoreIntent = restoring(*restoredAs(SituationUpgrade))

func restoredAs(s Situation) *Resolved {
	return &Resolved{Obs: obsOurs, From: "2.0.0", To: "1.0.0", Situation: s, Restore: backup1,
		Want: Want{Version: "1.0.0", ValuesHash: "h1"}}
}

var (
	checkedOK      = &Checked{Intent: planNew}
	checkedApplied = &Checked{Obs: obsOurs, Situation: SituationApplied}
	appliedOurs    = &Applied{Obs: obsOurs, Want: wantNew, Wrote: true, Situation: SituationApplied}
	// another process applied it before this one could
	appliedByOther = &Applied{Obs: obsOurs, Stale: true, Situation: SituationApplied}
	// the target changed under the Lease: values h9 now
	obsChanged     = &Observed{Version: "1.0.0", ValuesHash: "h9"}
	appliedChanged = &Applied{Obs: obsChanged, Stale: true, Situation: SituationUpgrade}
	readyNow       = &Readiness{Ready: true}
)

func TestNext(t *testing.T) {
	tests := []struct {
		name string
		goal Goal
		p    progress
		want string
	}{
		// resolve (restore for a rollback) comes first, whatever the goal
		{"upgrade starts with resolve", GoalUpgrade, progress{}, StepResolve},
		{"check starts with resolve", GoalCheck, progress{}, StepResolve},
		{"rollback starts with restore", GoalRollback, progress{}, StepRestore},
		{"nothing else counts before resolve", GoalUpgrade, progress{checked: checkedOK, intent: planNew}, StepResolve},

		// upgrade: preflight, merge, apply, wait, verify
		{"upgrade → preflight", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade)}, StepPreflight},
		{"same version → preflight", GoalUpgrade, progress{resolved: resolvedAs(SituationSameVersion)}, StepPreflight},
		{"downgrade → preflight (which refuses or allows it)", GoalUpgrade, progress{resolved: resolvedAs(SituationDowngrade)}, StepPreflight},
		{"checked → merge", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK}, StepMerge},
		{"merged → apply", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, intent: planNew}, StepApply},
		{"applied → wait", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, intent: planNew,
			applied: appliedOurs}, StepWait},
		{"nothing to change → no apply: wait", GoalUpgrade, progress{resolved: resolvedAs(SituationSameVersion),
			checked: checkedOK, intent: planNone}, StepWait},
		{"applied by another meanwhile → wait", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: planNew, applied: appliedByOther}, StepWait},
		{"changed under the Lease → merge again", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: planNew, applied: appliedChanged}, StepMerge},
		{"merged again on the new read → apply again", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: &Intent{Want: wantNew, Remerge: true, key: mergeKey(obsChanged)}, applied: appliedChanged}, StepApply},
		{"merged again, nothing to change → wait", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: &Intent{Want: Want{Version: "2.0.0"}, NoChange: true, Remerge: true, key: mergeKey(obsChanged)}, applied: appliedChanged}, StepWait},
		{"ready → verify", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, intent: planNew,
			applied: appliedOurs, ready: readyNow}, StepVerify},
		{"verified → done", GoalUpgrade, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, intent: planNew,
			applied: appliedOurs, ready: readyNow, verified: true}, ""},

		// a target already ours skips preflight, merge and apply
		{"applied by us → wait", GoalUpgrade, progress{resolved: resolvedAs(SituationApplied)}, StepWait},
		{"applied by us, ready → verify", GoalUpgrade, progress{resolved: resolvedAs(SituationApplied), ready: readyNow}, StepVerify},
		{"done → verify only", GoalUpgrade, progress{resolved: resolvedAs(SituationDone)}, StepVerify},
		{"done, verified → nothing", GoalUpgrade, progress{resolved: resolvedAs(SituationDone), verified: true}, ""},
		{"preflight found it applied meanwhile → wait, no merge or apply", GoalUpgrade,
			progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied}, StepWait},
		{"preflight found it applied meanwhile, ready → verify", GoalUpgrade,
			progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied, ready: readyNow}, StepVerify},

		// check: preflight and stop; nothing to check on a target of ours
		{"check: upgrade → preflight", GoalCheck, progress{resolved: resolvedAs(SituationUpgrade)}, StepPreflight},
		{"check: same version → preflight", GoalCheck, progress{resolved: resolvedAs(SituationSameVersion)}, StepPreflight},
		{"check: downgrade → preflight", GoalCheck, progress{resolved: resolvedAs(SituationDowngrade)}, StepPreflight},
		{"check: checked → stop", GoalCheck, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK}, ""},
		{"check: checked applied → stop", GoalCheck, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied}, ""},
		{"check: applied by us → no preflight", GoalCheck, progress{resolved: resolvedAs(SituationApplied)}, ""},
		{"check: done → no preflight", GoalCheck, progress{resolved: resolvedAs(SituationDone)}, ""},

		// rollback: restore → apply → wait → verify; no preflight, no merge
		{"rollback: restore → apply", GoalRollback, progress{resolved: restoredAs(SituationUpgrade), intent: restoreIntent}, StepApply},
		{"rollback: a downgrade is restored too", GoalRollback, progress{resolved: restoredAs(SituationDowngrade), intent: restoreIntent}, StepApply},
		{"rollback: changed under the Lease → apply again, no merge", GoalRollback, progress{resolved: restoredAs(SituationUpgrade),
			intent: restoreIntent, applied: appliedChanged}, StepApply},
		{"rollback: applied → wait", GoalRollback, progress{resolved: restoredAs(SituationUpgrade), applied: appliedOurs}, StepWait},
		{"rollback: ready → verify", GoalRollback, progress{resolved: restoredAs(SituationUpgrade), applied: appliedOurs,
			ready: readyNow}, StepVerify},
		{"rollback: verified → done", GoalRollback, progress{resolved: restoredAs(SituationUpgrade), applied: appliedOurs,
			ready: readyNow, verified: true}, ""},
		{"rollback: restored by us → wait", GoalRollback, progress{resolved: restoredAs(SituationApplied)}, StepWait},
		{"rollback: restored and ready → verify only", GoalRollback, progress{resolved: restoredAs(SituationDone)}, StepVerify},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, next(tt.goal, tt.p))
		})
	}
}

// Walking next() from an empty progress, feeding each step a typical
// output, visits the steps of each goal in order, each once.
func TestNextWalk(t *testing.T) {
	outputs := map[string]func(*progress){
		StepResolve:   func(p *progress) { p.resolved = resolvedAs(SituationUpgrade) },
		StepRestore:   func(p *progress) { p.resolved, p.intent = restoredAs(SituationUpgrade), restoreIntent },
		StepPreflight: func(p *progress) { p.checked = checkedOK },
		StepMerge:     func(p *progress) { p.intent = planNew },
		StepApply:     func(p *progress) { p.applied = appliedOurs },
		StepWait:      func(p *progress) { p.ready = readyNow },
		StepVerify:    func(p *progress) { p.verified = true },
	}
	tests := []struct {
		goal Goal
		want []string
	}{
		{GoalCheck, []string{StepResolve, StepPreflight}},
		{GoalUpgrade, []string{StepResolve, StepPreflight, StepMerge, StepApply, StepWait, StepVerify}},
		{GoalRollback, []string{StepRestore, StepApply, StepWait, StepVerify}},
	}
	for _, tt := range tests {
		var p progress
		var got []string
		for step := next(tt.goal, p); step != "" && len(got) < 10; step = next(tt.goal, p) {
			got = append(got, step)
			outputs[step](&p)
		}
		assert.Equal(t, tt.want, got, "goal %d", tt.goal)
	}
}

func TestProgressSituation(t *testing.T) {
	tests := []struct {
		name string
		p    progress
		want Situation
	}{
		{"nothing resolved", progress{}, ""},
		{"resolved", progress{resolved: resolvedAs(SituationUpgrade)}, SituationUpgrade},
		{"checked without a re-read keeps resolve's", progress{resolved: resolvedAs(SituationSameVersion), checked: checkedOK}, SituationSameVersion},
		{"checked with a re-read says applied", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied}, SituationApplied},
		{"an apply that wrote says applied", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, intent: planNew,
			applied: appliedOurs}, SituationApplied},
		{"nothing to write keeps the earlier", progress{resolved: resolvedAs(SituationSameVersion), checked: checkedOK,
			intent: planNone}, SituationSameVersion},
		{"an apply that found another's says applied", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: planNew, applied: appliedByOther}, SituationApplied},
		{"ready is done", progress{resolved: resolvedAs(SituationUpgrade), applied: appliedOurs, ready: readyNow}, SituationDone},
		{"ready is done even with nothing written", progress{resolved: resolvedAs(SituationSameVersion), intent: planNone,
			ready: readyNow}, SituationDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.situation())
		})
	}
}

func TestProgressWant(t *testing.T) {
	ours := &Resolved{Obs: obsOurs, From: "2.0.0", To: "2.0.0", Situation: SituationApplied}
	tests := []struct {
		name string
		p    progress
		want Want
	}{
		{"nothing resolved", progress{}, Want{}},
		{"resolved, not ours: nothing to wait for yet", progress{resolved: resolvedAs(SituationUpgrade)}, Want{}},
		{"resolved ours: the record", progress{resolved: ours}, wantNew},
		{"resolved done: the record", progress{resolved: &Resolved{Obs: obsOurs, To: "2.0.0", Situation: SituationDone}}, wantNew},
		{"a rollback: what the backup holds", progress{resolved: restoredAs(SituationUpgrade)}, Want{Version: "1.0.0", ValuesHash: "h1"}},
		{"checked: its plan", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK}, wantNew},
		{"checked applied meanwhile: the record re-read", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied}, wantNew},
		{"merged: the plan", progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK,
			intent: &Intent{Want: Want{Version: "2.0.0", ValuesHash: "other"}}}, Want{Version: "2.0.0", ValuesHash: "other"}},
		{"nothing to change: the version only", progress{resolved: resolvedAs(SituationSameVersion), intent: planNone}, Want{Version: "2.0.0"}},
		{"applied: what was written", progress{resolved: resolvedAs(SituationUpgrade), intent: planNone, applied: appliedOurs}, wantNew},
		{"a rollback applied: what was written", progress{resolved: restoredAs(SituationUpgrade),
			applied: &Applied{Want: Want{Version: "1.0.0", ValuesHash: "h1"}, Wrote: true, Situation: SituationApplied}}, Want{Version: "1.0.0", ValuesHash: "h1"}},
		{"another process applied it: its record, not this run's intent", progress{resolved: resolvedAs(SituationUpgrade),
			checked: &Checked{Intent: &Intent{Want: Want{Version: "2.0.0", ValuesHash: "checked"}}},
			intent:  &Intent{Want: Want{Version: "2.0.0", ValuesHash: "other"}}, applied: appliedByOther}, wantNew},
		{"another process applied it before this run merged: its record, not what preflight checked", progress{resolved: resolvedAs(SituationUpgrade),
			checked: &Checked{Intent: &Intent{Want: Want{Version: "2.0.0", ValuesHash: "checked"}}}, applied: appliedByOther}, wantNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.want())
		})
	}
}

func TestProgressObserved(t *testing.T) {
	assert.Nil(t, progress{}.observed())
	assert.Same(t, obsAt1, progress{resolved: resolvedAs(SituationUpgrade)}.observed())
	assert.Same(t, obsAt1, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK}.observed(), "a check without a re-read")
	assert.Same(t, obsOurs, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedApplied}.observed())
	assert.Same(t, obsOurs, progress{resolved: resolvedAs(SituationUpgrade), checked: checkedOK, applied: appliedOurs}.observed())
	assert.Same(t, obsAt1, progress{resolved: resolvedAs(SituationUpgrade), applied: &Applied{}}.observed(), "an apply without a read")
}

// fresh hands the read of a Stale apply to the next apply only when the
// intent was made on it.
func TestProgressFresh(t *testing.T) {
	assert.Nil(t, progress{resolved: resolvedAs(SituationUpgrade), intent: planNew}.fresh(), "no apply yet")
	assert.Nil(t, progress{resolved: resolvedAs(SituationUpgrade), intent: planNew, applied: appliedOurs}.fresh(), "it wrote")
	assert.Nil(t, progress{resolved: resolvedAs(SituationUpgrade), intent: planNew, applied: appliedChanged}.fresh(),
		"the intent is of the old read: merge first")
	remerged := &Intent{Want: wantNew, Remerge: true, key: mergeKey(obsChanged)}
	assert.Same(t, obsChanged, progress{resolved: resolvedAs(SituationUpgrade), intent: remerged, applied: appliedChanged}.fresh())
	assert.Same(t, obsChanged, progress{resolved: restoredAs(SituationUpgrade), intent: restoreIntent, applied: appliedChanged}.fresh(),
		"a restore writes the backup on the new read")
}
