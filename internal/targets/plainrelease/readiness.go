package plainrelease

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/release"

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
	switch st := status(rel); st {
	case "deployed":
	case "failed":
		r.Failed, r.Terminal = fmt.Sprintf("helm release %s/%s %s is failed", rel.Namespace, rel.Name, revisionName(rel)), true
		return r
	default:
		r.Wait("helm release %s/%s %s is %s", rel.Namespace, rel.Name, revisionName(rel), st)
		return r
	}
	if res == nil || res.Revision != rel.Version {
		r.Wait("the objects of helm release %s/%s %s are not judged yet", rel.Namespace, rel.Name, revisionName(rel))
		return r
	}
	r.ReadyCount, r.DesiredCount = int64(res.Ready), int64(res.Total)
	r.NonReady = res.NotReady
	if len(res.Failed) > 0 {
		r.Failed = "objects failed: " + strings.Join(res.Failed, "; ")
	}
	if len(res.NotReady) > 0 {
		r.Wait("%d of %d objects of helm release %s/%s are not ready", len(res.NotReady), res.Total, rel.Namespace, rel.Name)
		return r
	}
	r.Ready = r.Failed == "" && len(r.Waiting) == 0
	return r
}

// watcher is a helmrelease.Watcher seen through the upgrade.Watch port.
type watcher struct {
	rel     *helmrelease.Watcher
	changed chan struct{}
}

func (w *watcher) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watcher) Changed() <-chan struct{} { return w.changed }

func (w *watcher) Current() *upgrade.Observed {
	rel := w.rel.Newest()
	if rel == nil {
		return nil
	}
	o, _ := observe(rel)
	return o
}

func (w *watcher) Readiness(want upgrade.Want) upgrade.Readiness {
	return Judge(want, w.rel.Newest(), w.rel.Resources())
}
