package plainrelease

import (
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Judge says whether what want describes is deployed: the newest revision
// carries our apply (version, record, values unchanged), is deployed, and
// every object of its manifest is ready by kstatus. A failed newest
// revision is a terminal failure (Helm does not retry); objects kstatus
// reports Failed are a failure.
func Judge(want upgrade.Want, rel *release.Release, res *helmrelease.Resources) upgrade.Readiness {
	r := upgrade.Readiness{DesiredCount: 1, Unit: "resources"}
	var o *upgrade.Observed
	if rel != nil {
		o, _ = observe(rel)
	}
	if !upgrade.JudgeTarget(&r, Kind, o, want) {
		return r
	}
	rev := helmrelease.RevisionOf(rel)
	if !helmrelease.JudgeStatus(&r, rev) {
		r.Terminal = r.Failed != "" // Helm does not retry a failed upgrade
		return r
	}
	helmrelease.JudgeObjects(&r, rev, res)
	return r
}

// watcher is a helmrelease.Watcher seen through the upgrade.Watch port.
type watcher struct {
	rel     *helmrelease.Watcher
	changed cluster.Signal
}

func (w *watcher) Changed() <-chan struct{} { return w.changed }

func (w *watcher) Current() *upgrade.Observed {
	rel := w.rel.Newest()
	if rel == nil {
		return nil
	}
	o, _ := observeFinished(rel)
	return o
}

func (w *watcher) Readiness(want upgrade.Want) upgrade.Readiness {
	return Judge(want, w.rel.Newest(), w.rel.Resources())
}
