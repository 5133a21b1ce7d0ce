package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Checked is the output of preflight: the merge it checked (for the merge
// step to reuse), or, when another process applied the target meanwhile,
// the target as re-read and the situation that says so.
type Checked struct {
	Intent    *Intent
	Obs       *Observed // set when re-read
	Situation Situation // set when re-read: applied
	// DriftOwned counts the drifted objects a live rule reads (each one a
	// warning of the merge).
	DriftOwned int
	// Notes are the target's (Health.Notes) and its conflict check's.
	Notes []string
	// Changes are the conflict check's (Conflicts.Changes); nil without
	// one.
	Changes func() []ObjectChange
	// Images is the image check's verdict; nil when none ran.
	Images *ImageCheck
}

// liveRuleReading returns the live rule whose source is obj.
func liveRuleReading(rules []values.Rule, obj values.ObjectRef) (values.Rule, bool) {
	for _, r := range rules {
		if r.Policy == values.PolicyLive && r.Source != nil && *r.Source == obj {
			return r, true
		}
	}
	return values.Rule{}, false
}

// preflight checks that the upgrade may start, and makes no writes. Each
// failed check is one line a person can act on; any → outcome.ErrRefused.
func (j *jobRun) preflight(ctx context.Context, r Resolved) (*Checked, error) {
	var problems []string
	refuse := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	o, kind := r.Obs, j.ref.Kind

	if r.Situation == SituationDowngrade && !j.AllowDowngrade {
		refuse("%s → %s is a downgrade: give %s if you mean it", r.From, r.To, j.Names.AllowDowngrade)
	}
	if o.Paused && !o.PausedByUs && !j.Unpause {
		refuse("the %s is paused by someone else (spec.paused=true without the chart-upgrader.io/paused annotation): unpause it, or give %s", kind, j.Names.Unpause)
	}
	health, err := j.job.Target.Health(ctx, o)
	if err != nil {
		return nil, err
	}
	problems = append(problems, health.Problems...)
	if j.RequireNodesReady {
		notReady, err := j.Cluster.NotReadyNodes(ctx)
		if err != nil {
			return nil, err
		}
		if len(notReady) > 0 {
			refuse("nodes not Ready: %s", strings.Join(notReady, ", "))
		}
	}
	// the merge must not be refused and the chart must render with it
	intent, err := j.merged(ctx, r, o)
	if err != nil {
		if !errors.Is(err, outcome.ErrRefused) {
			return nil, err
		}
		refuse("%v", err)
	}
	// drift must be read by a live rule or adopted whole
	owned := map[int]values.Rule{} // by index in health.Drift
	adopted := map[int]bool{}
	for i, d := range health.Drift {
		if r, ok := liveRuleReading(j.job.Rules, d.Object); ok {
			owned[i] = r
			continue
		}
		if err == nil && intent.adoptedAll(d.Object) {
			adopted[i] = true
			continue
		}
		refuse("%s was changed in the cluster (drift; the change: %s) and no live rule reads it nor adopt rule adopts it: undo the change, "+
			"adopt its fields with adopt rules (chart-upgrader drift names them), or make the field the operator's with the chart's diff.comparePatches", d.Object, d.Patch)
	}
	// the chart's CRDs, under the spec's apply.crds, before the objects
	// that may need them
	var crdNotes []string
	var crdWarnings []values.Warning
	if j.job.CRDs != nil && err == nil && !intent.NoChange {
		check, cerr := j.job.CRDs.Check(ctx, r.New, intent.Change.Values)
		if cerr != nil {
			return nil, cerr
		}
		problems = append(problems, check.Refused...)
		crdWarnings = check.Warnings
		intent.CRDs, intent.Change.CRDs = check, check.Objects
		for _, a := range check.Actions {
			crdNotes = append(crdNotes, "CRD "+a.String())
		}
	}
	// the health gates must be usable here: kinds served, objects rendered
	if j.job.Gates != nil && len(j.job.Health) > 0 && err == nil {
		if gerr := j.job.Gates.Check(ctx, o, intent.Change); gerr != nil {
			return nil, gerr
		}
	}
	// the objects the change writes must not meet another field manager
	var conflicts Conflicts
	if cc, ok := j.job.Target.(ConflictChecker); ok && err == nil && !intent.NoChange {
		var cerr error
		switch conflicts, cerr = cc.Conflicts(ctx, o, intent.Change); {
		case errors.Is(cerr, outcome.ErrRefused): // the chart does not render as the release
			refuse("%v", cerr)
		case cerr != nil:
			return nil, cerr
		}
		problems = append(problems, conflicts.Refused...)
	}
	// the nodes must be able to pull every image the change runs
	images, err := j.images(ctx, o, intent, err)
	if err != nil {
		return nil, err
	}
	if images != nil {
		problems = append(problems, images.Refused...)
	}
	if len(problems) == 0 {
		for i, d := range health.Drift {
			if adopted[i] {
				intent.Merge.Warnings = append(intent.Merge.Warnings, values.Warning{Kind: values.WarnAdopt, Path: d.Object.String(),
					Message: fmt.Sprintf("%s was changed in the cluster (the change: %s); adopt rules take its live values, so this upgrade renders them and the drift ends", d.Object, d.Patch)})
				continue
			}
			r := owned[i]
			msg := fmt.Sprintf("%s was changed in the cluster (the change: %s); the live rule reads it, so this upgrade writes its live value and the drift ends",
				d.Object, d.Patch)
			intent.Merge.Warnings = append(intent.Merge.Warnings, values.Warning{Kind: values.WarnDriftOwned, Path: r.Pattern.String(), Message: msg})
		}
		intent.Merge.Warnings = append(intent.Merge.Warnings, health.Warnings...)
		intent.Merge.Warnings = append(intent.Merge.Warnings, conflicts.Warnings...)
		intent.Merge.Warnings = append(intent.Merge.Warnings, crdWarnings...)
		notes := append(health.Notes, crdNotes...)
		if conflicts.Note != "" {
			notes = append(notes, conflicts.Note)
		}
		if images != nil {
			intent.Merge.Warnings = append(intent.Merge.Warnings, images.Warnings...)
			notes = append(notes, images.Note)
		}
		return &Checked{Intent: intent, DriftOwned: len(owned), Notes: notes, Changes: conflicts.Changes, Images: images}, nil
	}
	// another process may have applied the target since resolve read it:
	// what looks unhealthy (not ready, a release pending) is then its
	// rollout, which this process waits for, not a reason to refuse
	now, err := j.job.Target.Read(ctx)
	if err != nil {
		return nil, err
	}
	if now != nil && Assess(now, r.To, false) == SituationApplied {
		return &Checked{Obs: now, Situation: SituationApplied}, nil
	}
	if conflicts.Note != "" {
		j.note(conflicts.Note) // what the check covered, with the refusal
	}
	if images != nil && len(images.Refused) > 0 {
		j.note(images.Note)
	}
	return nil, outcome.Refused(fmt.Errorf("preflight refused %s %s → %s:\n- %s", j.ref, r.From, r.To, strings.Join(problems, "\n- ")))
}

// images is the image check of the change intent makes (merged: the
// merge's error, when it failed: nothing to check), or a check that says
// why none ran; nil when the change writes nothing.
func (j *jobRun) images(ctx context.Context, o *Observed, intent *Intent, merged error) (*ImageCheck, error) {
	if merged != nil || intent == nil || intent.NoChange || intent.Change.Restore != nil {
		return nil, nil
	}
	if j.job.Images == nil {
		if j.job.NoImages == "" {
			return nil, nil
		}
		return &ImageCheck{Note: "images not checked: " + j.job.NoImages}, nil
	}
	check, err := j.job.Images.Check(ctx, o, intent.Change)
	if err != nil {
		return nil, err
	}
	return &check, nil
}
