package upgrade

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// restore reads the target and the backup to restore (the one taken when
// upgrading from Settings.Version, else the newest), and works out whether
// the restore is still to do. It makes no writes.
func (j *jobRun) restore(ctx context.Context) (*Resolved, error) {
	o, err := j.read(ctx)
	if err != nil {
		return nil, err
	}
	b, err := j.job.Target.ReadBackup(ctx, j.Version)
	if err != nil {
		return nil, outcome.Refused(fmt.Errorf("nothing to roll back to: %w", err))
	}
	r := &Resolved{Obs: o, From: o.Version, To: b.Version, Restore: b,
		Want: Want{Version: b.Version, ValuesHash: b.ValuesHash}}
	ready := false
	if w, ok := o.Applied.Want(); ok && w == r.Want {
		rd, err := j.job.Target.Look(ctx, o, r.Want)
		if err != nil {
			return nil, err
		}
		ready = rd.Ready
	}
	r.Situation = Assess(o, r.To, ready)
	if !r.Situation.ours() {
		r.Situation = SituationUpgrade // restore whatever the versions say
	}
	j.Log.Info("restore", "backup", b.Name, "from", r.From, "to", r.To, "situation", string(r.Situation))
	return r, nil
}
