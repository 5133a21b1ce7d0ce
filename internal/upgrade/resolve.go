package upgrade

import (
	"context"
	"fmt"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Resolved is the output of resolve (or, for a rollback, restore): the
// target as read, the versions, the charts and the situation.
type Resolved struct {
	Obs      *Observed
	From, To string
	New, Old *Chart // Old is nil when the source lacks the deployed version
	// OldMissing says why Old is nil, for the report: follow then acts as
	// user, and keep cannot pin.
	OldMissing string
	Situation  Situation
	// Restore and Want: for a rollback, the backup to put back and what
	// readiness is judged against.
	Restore *Backup
	Want    Want
}

// resolve reads the target, picks the version to upgrade to, loads the new
// chart and the deployed one (for the old defaults) from the chart source,
// and works out the situation. It makes no writes.
func (j *jobRun) resolve(ctx context.Context) (*Resolved, error) {
	o, err := j.read(ctx)
	if err != nil {
		return nil, err
	}
	r := &Resolved{Obs: o, From: o.Version, To: j.Version}
	if r.To == "" {
		return nil, outcome.BadInput(fmt.Errorf("no version to upgrade to: give %s (or run under system-upgrade-controller, which sets $%s)", j.Names.Version, LatestVersionEnv))
	}
	name := j.job.ChartName
	if name == "" {
		name = o.Chart
	}
	if r.New, err = loadVersion(ctx, j.job.Source, name, r.To); err != nil {
		return nil, fmt.Errorf("loading chart %s %s from %s: %w", name, r.To, j.job.Source, err)
	}
	r.To = r.New.Version
	j.defaults = r.New.Defaults
	switch {
	case r.From == r.To:
		r.Old = r.New
	case r.From != "":
		if r.Old, err = loadVersion(ctx, j.job.Source, name, r.From); err != nil {
			r.Old = nil
			r.OldMissing = fmt.Sprintf("none: version %s is not in %s (follow acts as user, keep cannot pin): %v", r.From, j.job.Source, err)
		}
	}
	ready := false
	if want, ok := o.Applied.Want(); ok && want.Version == r.To {
		rd, err := j.look(ctx, o, want)
		if err != nil {
			return nil, err
		}
		ready = rd.Ready
	}
	r.Situation = Assess(o, r.To, ready)
	return r, nil
}

// read reads the target, which must exist (else the run is refused).
func (j *jobRun) read(ctx context.Context) (*Observed, error) {
	o, err := j.job.Target.Read(ctx)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, outcome.Refused(fmt.Errorf("%s %s/%s not found: check the target namespace and name", j.ref.Kind, j.ref.Namespace, j.ref.Name))
	}
	return o, nil
}

// LatestVersionEnv is the version system-upgrade-controller resolved for
// the Plan: the default of --version.
const LatestVersionEnv = "SYSTEM_UPGRADE_PLAN_LATEST_VERSION"

// loadVersion loads the chart at version. The source also finds "1.2.3"
// for "v1.2.3"; and since system-upgrade-controller turns a "+" of a
// version into "-", a version that is not found is matched against the
// source's versions with "+" read as "-" (chart 1.2.3+rke2r1 for
// 1.2.3-rke2r1).
func loadVersion(ctx context.Context, src ChartSource, name, version string) (*Chart, error) {
	c, err := src.Load(ctx, name, version)
	if err == nil {
		return c, nil
	}
	versions, verr := src.Versions(ctx, name)
	if verr != nil {
		return nil, err
	}
	want := strings.TrimPrefix(version, "v")
	for _, v := range versions {
		if strings.Contains(v, "+") && strings.ReplaceAll(strings.TrimPrefix(v, "v"), "+", "-") == want {
			if c, lerr := src.Load(ctx, name, v); lerr == nil {
				return c, nil
			}
		}
	}
	return nil, err
}
