package plainrelease

import (
	"context"
	"fmt"
	"strings"

	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Health judges the release an upgrade would start from: a failed newest
// revision is upgraded over (a warning names it), a pending one is
// recovered when that is provably safe (recover.go) and refused otherwise,
// a release never deployed is no upgrade; and the objects of the revision
// the upgrade starts from must be ready now.
func (t *Target) Health(ctx context.Context, o *upgrade.Observed) (upgrade.Health, error) {
	rv := revisionsOf(o)
	var h upgrade.Health
	var problems []string
	newest, base := rv.newest, rv.base
	switch st := status(newest); {
	case base == newest && st != common.StatusDeployed && st != common.StatusSuperseded:
		problems = append(problems, fmt.Sprintf("helm release %s/%s revision %d is %s and no earlier revision is deployed: this is no upgrade; "+
			"finish or remove the install first (helm uninstall, or helm install --replace), then run chart-upgrader again", t.namespace, t.name, newest.Version, st))
	case st == common.StatusFailed:
		h.Warnings = append(h.Warnings, values.Warning{Kind: WarnFailedRevision, Message: fmt.Sprintf(
			"helm release %s/%s revision %d (chart %s) is failed: the upgrade starts from revision %d (chart %s), the last deployed one, as helm upgrade does; revision %d stays in the history",
			t.namespace, t.name, newest.Version, helmrelease.ChartVersion(newest), base.Version, helmrelease.ChartVersion(base), newest.Version)})
	case rv.pending != nil:
		w, problem, err := t.judgePending(ctx, rv)
		if err != nil {
			return h, err
		}
		if problem != "" {
			problems = append(problems, problem)
		} else {
			h.Warnings = append(h.Warnings, w)
		}
	}
	res, err := t.c.releases.Look(ctx, base)
	if err != nil {
		return upgrade.Health{}, err
	}
	for _, l := range res.NotReady {
		if newest != base {
			// the rollout the failed or stuck operation began: the
			// upgrade over it is what ends it
			h.Warnings = append(h.Warnings, values.Warning{Kind: values.WarnTarget, Message: fmt.Sprintf(
				"not ready, left by revision %d's operation: %s", newest.Version, l)})
			continue
		}
		problems = append(problems, "not ready: "+l)
	}
	if len(problems) > 0 {
		h.Problems = []string{"the release is not healthy; fix it before upgrading:\n  " + strings.Join(problems, "\n  ")}
	}
	return h, nil
}

func status(rel *release.Release) common.Status {
	if rel == nil || rel.Info == nil {
		return ""
	}
	return rel.Info.Status
}

// Look judges readiness from one read of the release and its objects.
func (t *Target) Look(ctx context.Context, o *upgrade.Observed, want upgrade.Want) (upgrade.Readiness, error) {
	rel := revisionsOf(o).newest
	res, err := t.c.releases.Look(ctx, rel)
	if err != nil {
		return upgrade.Readiness{}, err
	}
	return Judge(want, rel, res), nil
}

// Watch watches the release's storage and the objects of its newest
// revision.
func (t *Target) Watch(ctx context.Context) (upgrade.Watch, error) {
	w := &watcher{changed: cluster.NewSignal()}
	var err error
	if w.rel, err = t.c.releases.Watch(ctx, t.namespace, t.name, cluster.SecretDriver, w.changed.Notify); err != nil {
		return nil, err
	}
	return w, nil
}
