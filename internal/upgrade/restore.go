package upgrade

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// restore reads the target and the backup to restore (the one taken when
// upgrading from Settings.Version, else the newest), works out the
// situation, and returns the intent of writing the backup back. It makes
// no writes. A rollback applies whatever the situation unless the target
// carries the restore already (next decides).
func (j *jobRun) restore(ctx context.Context) (*Resolved, *Intent, error) {
	o, err := j.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	b, err := j.job.Target.ReadBackup(ctx, j.Version)
	if err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("nothing to roll back to: %w", err))
	}
	r := &Resolved{Obs: o, From: o.Version, To: b.Version, Restore: b,
		Want: Want{Version: b.Version, ValuesHash: b.ValuesHash}}
	ready := false
	if w, ok := o.Applied.Want(); ok && w == r.Want {
		rd, err := j.job.Target.Look(ctx, o, r.Want)
		if err != nil {
			return nil, nil, err
		}
		ready = rd.Ready
	}
	r.Situation = Assess(o, r.To, ready)
	return r, restoring(*r), nil
}
