package upgrade

// Goal is how far a run of one target goes.
type Goal int

// The goals.
const (
	// GoalCheck: resolve and preflight; no writes (`preflight`).
	GoalCheck Goal = iota
	// GoalUpgrade: resolve → preflight → merge → apply → wait → verify.
	GoalUpgrade
	// GoalRollback: restore → apply → wait → verify.
	GoalRollback
)

// The step names: in logs, Events, hooks (pre-<step>, post-<step>) and the
// journal.
const (
	StepResolve   = "resolve"
	StepRestore   = "restore"
	StepPreflight = "preflight"
	StepMerge     = "merge"
	StepApply     = "apply"
	StepWait      = "wait"
	StepVerify    = "verify"
)

// progress is what the steps of one run have returned so far: each field
// is one step's typed output, nil until that step finished.
type progress struct {
	resolved *Resolved // resolve or restore
	checked  *Checked  // preflight
	intent   *Intent   // merge, or restore
	applied  *Applied  // apply (the newest attempt)
	attempts int       // of apply
	ready    *Readiness
	verified bool
}

// situation is where the target stands now, from the newest output that
// says so.
func (p progress) situation() Situation {
	switch {
	case p.resolved == nil:
		return ""
	case p.ready != nil:
		return SituationDone
	case p.applied != nil && p.applied.Situation != "":
		return p.applied.Situation
	case p.checked != nil && p.checked.Situation != "":
		return p.checked.Situation
	}
	return p.resolved.Situation
}

// next picks the step that brings the run closer to goal, from what the
// steps returned so far; "" when the goal is reached. It is the only place
// that decides whether a step runs: no step asks itself.
//
// An upgrade checks, merges and applies a target that does not carry an
// apply of ours; a rollback applies what restore found. Nothing to change
// skips apply. An apply that wrote nothing because the target is no longer
// what the intent was made on is followed by a new merge on what it read
// (an upgrade) or a new attempt (a restore), unless the target now carries
// an apply of ours: then it is waited for like any other.
func next(goal Goal, p progress) string {
	if p.resolved == nil {
		if goal == GoalRollback {
			return StepRestore
		}
		return StepResolve
	}
	sit := p.situation()
	if goal == GoalCheck {
		if sit.ours() || p.checked != nil {
			return ""
		}
		return StepPreflight
	}
	if !sit.ours() {
		switch {
		case goal == GoalUpgrade && p.checked == nil:
			return StepPreflight
		case p.intent == nil, p.remerge():
			return StepMerge
		case (p.applied == nil || p.applied.Stale) && !p.intent.NoChange:
			return StepApply
		}
	}
	switch {
	case sit != SituationDone && p.ready == nil:
		return StepWait
	case !p.verified:
		return StepVerify
	}
	return ""
}

// fresh is the target as the last apply read it under the Lease, when
// that apply wrote nothing and the intent was made (again) on that read;
// nil otherwise.
func (p progress) fresh() *Observed {
	if p.applied == nil || !p.applied.Stale || p.intent == nil || p.remerge() {
		return nil
	}
	return p.applied.Obs
}

// remerge: the last apply wrote nothing, and the intent is an upgrade's
// made on an older read of the target than the one that apply made, so
// it is made again on that read.
func (p progress) remerge() bool {
	return p.applied != nil && p.applied.Stale && p.intent != nil && p.intent.Remerge && p.intent.key != mergeKey(p.applied.Obs)
}

// want is what the wait judges readiness against: what this run wrote or
// means to write, what a rollback restores, else (for a target another
// process applied, or an earlier run of ours) what its record says was
// applied.
func (p progress) want() Want {
	switch {
	case p.resolved == nil:
		return Want{}
	case p.applied != nil && p.applied.Wrote:
		return p.applied.Want
	case p.applied != nil && p.applied.Stale && p.applied.Situation.ours():
		// another process applied it: its record, whatever this run meant
		w, _ := p.applied.Obs.Applied.Want()
		return w
	case p.resolved.Restore != nil:
		return p.resolved.Want
	case p.intent != nil:
		return p.intent.Want
	case p.checked != nil && p.checked.Intent != nil:
		return p.checked.Intent.Want
	case p.situation().ours():
		w, _ := p.observed().Applied.Want()
		return w
	}
	return Want{}
}

// observed is the target as last read by a step.
func (p progress) observed() *Observed {
	switch {
	case p.applied != nil && p.applied.Obs != nil:
		return p.applied.Obs
	case p.checked != nil && p.checked.Obs != nil:
		return p.checked.Obs
	case p.resolved != nil:
		return p.resolved.Obs
	}
	return nil
}

// quiet: the run found the target done, so it runs no hooks and writes
// nothing (a re-run after success).
func (p progress) quiet() bool {
	return p.resolved != nil && p.resolved.Situation == SituationDone
}
