package upgrade

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Plan is the output of a merge on a target: the new values, what the
// apply will write, and what it read to get there.
type Plan struct {
	Merge *values.Result
	// Want is what the apply writes and readiness is judged against; its
	// ValuesHash is empty when nothing will be written and the target
	// carries no record of ours for it (nothing to wait for but the
	// version).
	Want Want
	// NoChange: the target already has this version and these values,
	// unpaused: no write.
	NoChange bool
	// key is what the merge read of the target (mergeKey).
	key string
}

// plan merges for the target as o shows it: U from the target, the old
// and new defaults from the resolved charts, live objects from the
// cluster, the job's overrides after the rules. A refused merge returns
// its Plan (for the report; never applied) with the error, and its
// decision table is printed.
func (j *jobRun) plan(ctx context.Context, r Resolved, o *Observed) (*Plan, error) {
	if r.New == nil {
		return nil, fmt.Errorf("%s: no chart to merge with", j.ref)
	}
	live, err := j.Cluster.Live(ctx, liveRefs(j.job.Rules))
	if err != nil {
		return nil, err
	}
	res, err := Merge(MergeInputs{User: o.Values, New: r.New, Old: r.Old, Rules: j.job.Rules, Migrations: j.job.Migrations,
		Live: live, Overrides: j.job.Overrides, FromVersion: r.From, ToVersion: r.To, Overlay: o.Overlay, OverlayFrom: o.OverlayFrom})
	if err != nil {
		if res != nil {
			_ = res.WriteTable(j.Out) // the report of a refusal; never applied
			return &Plan{Merge: res}, err
		}
		return nil, err
	}
	p := &Plan{Merge: res, Want: Want{Version: r.To, ValuesHash: res.SHA256}, key: mergeKey(o)}
	p.NoChange = o.Version == r.To && o.ValuesHash == res.SHA256 && !o.Paused
	if p.NoChange {
		if w, ok := o.Applied.Want(); !ok || w != p.Want {
			p.Want.ValuesHash = "" // nothing to write, so no record to wait for
		}
	}
	return p, nil
}

// mergeKey is all that a merge reads of a target: its version, the hash
// of its values, whether it is paused, and the apply recorded on it. A
// status write changes none of it, so it needs no new merge.
func mergeKey(o *Observed) string {
	return fmt.Sprintf("%s@%s paused=%t applied=%s@%s", o.Version, o.ValuesHash, o.Paused, o.Applied.Version, o.Applied.ValuesHash)
}

// liveRefs are the source objects of the live and once rules, each once.
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

// mergeStep decides the new values: it takes the merge preflight checked
// when the target is still as preflight read it, prints the decision
// table, and logs the result.
func (j *jobRun) mergeStep(ctx context.Context, r Resolved, c *Checked) (*Plan, error) {
	p := (*Plan)(nil)
	if c != nil && c.Plan != nil && c.Plan.key == mergeKey(r.Obs) {
		p = c.Plan
	} else {
		var err error
		if p, err = j.plan(ctx, r, r.Obs); err != nil {
			return nil, err
		}
	}
	if err := p.Merge.WriteTable(j.Out); err != nil {
		return nil, err
	}
	j.Log.Info("merged", "decisions", len(p.Merge.Decisions), "warnings", len(p.Merge.Warnings),
		"values_sha256", p.Merge.SHA256, "no_change", p.NoChange)
	return p, nil
}
