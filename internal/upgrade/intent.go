package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Intent is what a run means to write: the output of merge (an upgrade)
// or restore (a rollback), the input of apply. It says everything apply
// needs, so that apply decides nothing: the change, whether a backup comes
// first, and, for next, whether there is anything to write at all.
type Intent struct {
	// Merge is the merge result (nil for a restore).
	Merge *values.Result
	// Want is what the apply writes and readiness is judged against; its
	// ValuesHash is empty when nothing will be written and the target
	// carries no record of ours for it (nothing to wait for but the
	// version).
	Want Want
	// Change is the one write; its Record is completed when written.
	Change Change
	// NoChange: the target already has this version and these values,
	// unpaused: next skips apply.
	NoChange bool
	// BackupFirst: apply backs the target up (once) before writing; an
	// upgrade does, a restore (which writes a backup) does not.
	BackupFirst bool
	// Remerge: when the target changed since it was read, the intent is
	// made again from what it holds now (an upgrade); a restore writes the
	// same backup on the new read.
	Remerge bool
	// Drift is what the adopt rules read (nil without adopt rules).
	Drift *DriftReport
	// CRDs is preflight's verdict on the chart's CRDs (nil: none was
	// made; the apply makes it).
	CRDs *CRDCheck
	// key is what the intent was made from (mergeKey of the target).
	key string
}

// merged is the Intent of a merge on the target as o shows it: U from the
// target, the old and new defaults from the resolved charts, live objects
// from the cluster, the job's overrides after the rules. A refused merge
// returns its Intent (for the report; never applied) with the error, and
// its decision table is printed.
func (j *jobRun) merged(ctx context.Context, r Resolved, o *Observed) (*Intent, error) {
	if r.New == nil {
		return nil, fmt.Errorf("%s: no chart to merge with", j.ref)
	}
	live, err := j.Cluster.Live(ctx, liveRefs(j.job.Rules))
	var forbidden *ForbiddenSource
	if errors.As(err, &forbidden) {
		return nil, outcome.Refused(fmt.Errorf("%s, which %s reads: this process may not read it: %s (chart-upgrader plan --check-spec prints every read of the spec)",
			forbidden.Ref, rulesReading(j.job.Rules, forbidden.Ref), forbidden.Grant))
	}
	if err != nil {
		return nil, err
	}
	drift, unread, err := j.drift(ctx, r, o)
	if err != nil {
		return nil, err
	}
	var adopt []values.Adoption
	if drift != nil {
		adopt = drift.Adoptions()
	}
	res, err := Merge(MergeInputs{User: o.Values, New: r.New, Old: r.Old, Rules: j.job.Rules, Migrations: j.job.Migrations,
		Live: live, Overrides: j.job.Overrides, FromVersion: r.From, ToVersion: r.To, Overlay: o.Overlay, OverlayFrom: o.OverlayFrom,
		Adopt: adopt})
	if res != nil && unread != "" {
		res.Warnings = append(res.Warnings, values.Warning{Kind: values.WarnAdopt, Message: unread})
	}
	if err != nil {
		if res != nil {
			_ = res.WriteTable(j.Out) // the report of a refusal; never applied
			return &Intent{Merge: res}, err
		}
		return nil, err
	}
	in := &Intent{Merge: res, Drift: drift, Want: Want{Version: r.To, ValuesHash: res.SHA256}, key: mergeKey(o), BackupFirst: true, Remerge: true,
		Change: Change{Version: r.To, Values: res.Values, Chart: r.New,
			Record: Record{Version: r.To, ValuesHash: res.SHA256, PreviousVersion: r.From}}}
	in.NoChange = o.Version == r.To && o.ValuesHash == res.SHA256 && !o.Paused
	if in.NoChange {
		if w, ok := o.Applied.Want(); !ok || w != in.Want {
			in.Want.ValuesHash = "" // nothing to write, so no record to wait for
		}
	}
	return in, nil
}

// drift reads what the adopt rules need: the target's objects compared
// live with what its deployed revision rendered (Drifter), against the
// deployed chart. Without adopt rules it reads nothing (nil); when it
// cannot read (no deployed chart, a kind that cannot compare), unread
// says why, for a warning, and nothing is adopted.
func (j *jobRun) drift(ctx context.Context, r Resolved, o *Observed) (*DriftReport, string, error) {
	adopts := false
	for _, rule := range j.job.Rules {
		adopts = adopts || rule.Policy == values.PolicyAdopt
	}
	if !adopts {
		return nil, "", nil
	}
	d, ok := j.job.Target.(Drifter)
	switch {
	case !ok:
		return nil, fmt.Sprintf("%s cannot compare its objects with what it deployed: the adopt rules adopt nothing", j.ref), nil
	case r.Old == nil:
		return nil, fmt.Sprintf("the chart of the deployed version %s is not in the chart source (%s): the adopt rules adopt nothing", r.From, r.OldMissing), nil
	}
	rep, err := d.Drift(ctx, o, r.Old)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("reading the drift the adopt rules adopt: %w", err)
	case rep.Unread != "":
		return nil, rep.Unread + ": the adopt rules adopt nothing", nil
	}
	return &rep, "", nil
}

// adoptedAll reports whether the merge adopted every field of obj that
// differs live from what the deployed revision rendered (and there is
// one): the upgrade then renders the live values, and the drift ends.
func (in *Intent) adoptedAll(obj values.ObjectRef) bool {
	if in == nil || in.Drift == nil || in.Merge == nil {
		return false
	}
	adopted := map[string]bool{}
	for _, d := range in.Merge.Decisions {
		if d.Action == values.ActionAdopt {
			adopted[d.Path] = true
		}
	}
	name := obj.Kind + " " + obj.Name
	if obj.Namespace != "" {
		name = obj.Kind + " " + obj.Namespace + "/" + obj.Name
	}
	n := 0
	for _, f := range in.Drift.Fields {
		if f.Object != name || !f.Differs {
			continue
		}
		if !f.Reading.Adoptable() || len(f.Reading.Adopt) == 0 {
			return false
		}
		for _, a := range f.Reading.Adopt {
			if !adopted[values.FormatPath(a.Keys)] {
				return false
			}
		}
		n++
	}
	return n > 0
}

// restoring is the Intent of a rollback: write the backup back as it is.
func restoring(r Resolved) *Intent {
	return &Intent{Want: r.Want, key: mergeKey(r.Obs),
		Change: Change{Version: r.To, Restore: r.Restore,
			Record: Record{Version: r.To, ValuesHash: r.Want.ValuesHash, PreviousVersion: r.From}}}
}

// stamped is the change with the time of the write in its record.
func (in *Intent) stamped() Change {
	c := in.Change
	c.Record.AppliedAt = time.Now().UTC().Format(time.RFC3339)
	return c
}

// mergeKey is all that a merge reads of a target: its version, the hash
// of its values, whether it is paused, and the apply recorded on it. A
// status write changes none of it, so it needs no new merge.
func mergeKey(o *Observed) string {
	return fmt.Sprintf("%s@%s paused=%t applied=%s@%s", o.Version, o.ValuesHash, o.Paused, o.Applied.Version, o.Applied.ValuesHash)
}

// liveRefs are the source objects of the live and once rules, each once.
// rulesReading names the rules whose source is ref: "rule 9
// (longhorn.defaultSettings.nodeDrainPolicy, live)".
func rulesReading(rules []values.Rule, ref values.ObjectRef) string {
	var out []string
	for i, r := range rules {
		if r.Source != nil && *r.Source == ref {
			out = append(out, fmt.Sprintf("rule %d (%s, %s)", i+1, r.Pattern, r.Policy))
		}
	}
	return strings.Join(out, " and ")
}

func liveRefs(rules []values.Rule) []values.ObjectRef {
	var out []values.ObjectRef
	seen := map[values.ObjectRef]bool{}
	for _, r := range rules {
		if r.Source != nil && !seen[*r.Source] {
			seen[*r.Source] = true
			out = append(out, *r.Source)
		}
	}
	return out
}

// mergeStep decides the new values for the target as last read: it takes
// the merge preflight checked when the target is still as preflight read
// it, and prints the decision table.
func (j *jobRun) mergeStep(ctx context.Context, r Resolved, c *Checked, o *Observed) (*Intent, error) {
	in := (*Intent)(nil)
	if c != nil && c.Intent != nil && c.Intent.key == mergeKey(o) {
		in = c.Intent
	} else {
		var err error
		if in, err = j.merged(ctx, r, o); err != nil {
			return nil, err
		}
	}
	if err := in.Merge.WriteTable(j.Out); err != nil {
		return nil, err
	}
	return in, nil
}
