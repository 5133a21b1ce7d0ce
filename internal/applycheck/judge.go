package applycheck

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the wording: how a conflict reads, and which are refusals
// and which warnings for a given applier.

// String is the conflict in one line: object, field, owner, values (cut
// to MaxShown each).
func (c Conflict) String() string {
	return fmt.Sprintf("%s %s is owned by %s (live: %s; the upgrade sets: %s)", c.Object, c.Field, c.Owner, Clip(c.Live), Clip(c.New))
}

// MaxShown is the longest value a line for people shows in full (Clip);
// a value in -o json or -o yaml is never cut.
const MaxShown = 120

// show is a value, whole: a string as it is, anything else as JSON;
// "(unset)" when absent.
func show(v any, ok bool) string {
	if !ok {
		return "(unset)"
	}
	if str, isStr := v.(string); isStr {
		return str
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Clip is a value of show for a line: cut to MaxShown bytes (on a rune
// boundary), with "…" where it was cut.
func Clip(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// WaysOut says what an operator can do about conflicts, as one line.
const WaysOut = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec (adopt, where a value renders it); " +
	"or set apply.forceConflicts: true in the spec, and the upgrade takes the fields (the other manager's change is lost)"

// WaysOutNoForce is WaysOut for an applier that cannot force (Fleet).
const WaysOutNoForce = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec (adopt, where a value renders it) " +
	"(Fleet cannot force conflicts, so apply.forceConflicts is not one)"

// UncheckedWayOut says what to do about an object the check could not
// see: an upgrade it passes unseen could overwrite an operator's change.
const UncheckedWayOut = "preflight cannot tell what the upgrade would do to it: grant the rule it names (plan --check-chart prints every rule the chart needs), " +
	"or set apply.unchecked: warn in the spec to let the upgrade pass it unseen"

// Note is what the check did, for the log: objects, managers, requests,
// time, and the objects it could not check, each with the reason.
func (r Result) Note(took time.Duration) string {
	s := fmt.Sprintf("conflict check: %d objects checked against their managedFields as %s in %s, %d requests",
		r.Checked, strings.Join(r.Managers, ", "), took.Round(time.Millisecond), r.Requests)
	if len(r.NotChecked) > 0 {
		s += fmt.Sprintf("; %d not checked: %s", len(r.NotChecked), strings.Join(r.NotChecked, "; "))
	}
	return s
}

// Applier is how a target's controller applies a chart, as the conflict
// check needs to know it: each kind configures the one check
// (Checker.Conflicts) with it, and Judge words what it found by it.
type Applier struct {
	// Name says who applies, for people: `Helm applies this release`.
	Name string
	// Manager is the field manager it applies as: its own entries (of an
	// earlier client-side apply) are no conflict.
	Manager string
	// PerObject: it applies each object as the manager that holds the
	// object's Apply entry (ApplyManager), Manager where none does (the
	// Helm of Fleet's agent and of klipper-helm keeps an earlier apply's
	// manager); else every object as Manager.
	PerObject bool
	// ServerSide: the apply is server-side; else client-side (a three-way
	// merge, which meets no conflict and overwrites what the chart
	// changes).
	ServerSide bool
	// Force: a server-side apply takes the conflicting fields.
	Force bool
	// CannotForce: the applier has no force at all (Fleet's agent), so the
	// ways out do not offer apply.forceConflicts.
	CannotForce bool
	// TakesOwnership: the applier adopts an existing object without the
	// release's ownership metadata (Helm's --take-ownership; Fleet's
	// agent); else it refuses to.
	TakesOwnership bool
	// Why says, for the log, why it applies server-side or not: `the
	// release records "ssa"`.
	Why string
	// WarnUnchecked: an object the check could not see is a warning (the
	// spec's apply.unchecked: warn); else a refusal naming what to grant.
	WarnUnchecked bool
	// Recreate lists the objects the spec's apply.recreate names.
	Recreate []string
	// MapsRemovedAPIs: before the upgrade, the deployed revision's stored
	// manifest is mapped from the versions the cluster no longer serves
	// to those that replace them (release.mapRemovedAPIs, as
	// helm-mapkubeapis does); else such a version fails the upgrade.
	MapsRemovedAPIs bool
}

// method is how a applies, in words, and why.
func (a Applier) method() string {
	m := "client-side"
	if a.ServerSide {
		m = "server-side"
	}
	if a.Why != "" {
		m += " (" + a.Why + ")"
	}
	return m
}

// Judge sorts what Check found for an apply made as a says: a conflict
// of a server-side apply that does not force is refused (one line each,
// then the ways out); one it forces, and a field a client-side apply
// overwrites, is a warning. Each other finding says its own verdict
// (Finding); an object not checked is a refusal naming what to grant,
// unless a warns of it.
func Judge(res Result, a Applier) (refused []string, warnings []values.Warning) {
	for _, k := range res.Conflicts {
		if k.OwnerName == a.Manager || k.OwnerName == k.AppliedAs {
			continue // the applier's own entries
		}
		inValues := ""
		if k.Values != "" {
			inValues = "; " + k.Values
		}
		switch {
		case a.ServerSide && !a.Force:
			refused = append(refused, fmt.Sprintf("field-manager conflict: %s; %s server-side as %q and would fail%s", k, a.Name, k.AppliedAs, inValues))
		case a.ServerSide:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; apply.forceConflicts is true: the upgrade takes the field%s", k, inValues)})
		case !k.Unchanged:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; %s client-side and overwrites it%s", k, a.Name, inValues)})
		}
	}
	if len(refused) > 0 {
		if a.CannotForce {
			refused = append(refused, WaysOutNoForce)
		} else {
			refused = append(refused, WaysOut)
		}
	}
	for _, f := range res.Findings {
		switch refusal, warning := f.Verdict(a); {
		case refusal != "":
			refused = append(refused, refusal)
		case warning != nil:
			warnings = append(warnings, *warning)
		}
	}
	for _, n := range res.NotChecked {
		object, why, _ := strings.Cut(n, ": ")
		switch refusal, warning := (Unchecked{Object: object, Why: why}).Verdict(a); {
		case refusal != "":
			refused = append(refused, refusal)
		default:
			warnings = append(warnings, *warning)
		}
	}
	return refused, warnings
}

// Unchecked is an object a check could not see, and why.
type Unchecked struct {
	Object string // Kind namespace/name
	Why    string
}

// Verdict is a refusal naming why and the way out, or a warning where
// the spec says apply.unchecked: warn: an upgrade it passes unseen could
// overwrite an operator's change.
func (u Unchecked) Verdict(a Applier) (string, *values.Warning) {
	n := u.Object + ": " + u.Why
	if !a.WarnUnchecked {
		return "not checked: " + n + "; " + UncheckedWayOut, nil
	}
	return "", &values.Warning{Kind: values.WarnNotChecked, Path: u.Object, Message: n}
}
