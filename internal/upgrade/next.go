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
	plan     *Plan     // merge
	applied  *Applied  // apply
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
		// not applied by us yet: check (an upgrade only), merge, apply
		switch {
		case goal == GoalUpgrade && p.checked == nil:
			return StepPreflight
		case goal == GoalUpgrade && p.plan == nil:
			return StepMerge
		case p.applied == nil:
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

// want is what the wait judges readiness against: what this run applied
// or means to apply, what a rollback restores, else (for a target applied
// by us) what its record says was applied.
func (p progress) want() Want {
	switch {
	case p.resolved == nil:
		return Want{}
	case p.applied != nil:
		return p.applied.Want
	case p.resolved.Restore != nil:
		return p.resolved.Want
	case p.plan != nil:
		return p.plan.Want
	case p.checked != nil && p.checked.Plan != nil:
		return p.checked.Plan.Want
	}
	if !p.situation().ours() {
		return Want{}
	}
	w, _ := p.observed().Applied.Want()
	return w
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
