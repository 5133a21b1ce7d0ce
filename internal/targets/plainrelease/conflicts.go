package plainrelease

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Conflicts renders the new chart with the merged values and computes the
// apply of each object that exists from reads alone (applycheck), as
// Helm's field manager; an object the chart adds without the release's
// ownership metadata is refused (the tool's Helm does not take ownership).
// When Helm will apply server-side, a field another manager owns is
// refused, unless apply.forceConflicts (then it is a warning: the upgrade
// takes the field). A client-side apply meets no conflict: each such field
// whose value the chart changes is a warning, the upgrade overwrites it.
func (t *Target) Conflicts(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (upgrade.Conflicts, error) {
	if c.Restore != nil {
		return upgrade.Conflicts{}, nil
	}
	chk, rel, a := t.applyCheck(o, c)
	chk.Reader.Seen = t.c.releases.TakeSeen() // read by the readiness check just before
	return chk.Conflicts(ctx, rel, a)
}

// applyCheck is the check of c's apply over the release o read, as Helm
// applies it.
func (t *Target) applyCheck(o *upgrade.Observed, c upgrade.Change) (applycheck.Checker, applycheck.Release, applycheck.Applier) {
	rel := revisionsOf(o).base
	recorded := rel.ApplyMethod
	if recorded == "" {
		recorded = "none"
	}
	return applycheck.New(t.c.releases.Kube, t.c.releases.Dynamic, t.c.releases.Mapper(), t.c.releases.Access()),
		applycheck.Release{Target: fmt.Sprintf("helm release %s/%s", t.namespace, t.name), Chart: c.Chart, Values: c.Values,
			Name: t.name, Namespace: t.namespace, Deployed: rel.Manifest, CRDs: c.CRDs},
		applycheck.Applier{Name: "Helm applies this release", Manager: cluster.HelmFieldManager,
			ServerSide: kind.ServerSide(t.apply.ServerSide, rel.ApplyMethod), Force: t.apply.ForceConflicts, WarnUnchecked: t.apply.WarnUnchecked,
			Recreate: t.apply.Recreate, MapsRemovedAPIs: t.opts.MapRemovedAPIs,
			Why: fmt.Sprintf("apply.serverSide %s, the release records %s", t.apply.ServerSide, recorded)}
}

// Drift compares the objects of the release's last deployed revision, as
// its manifest holds them, with the cluster, Helm's field manager the
// applier, and reads each drifted field back against deployed rendered
// with the release's values.
func (t *Target) Drift(ctx context.Context, o *upgrade.Observed, deployed *upgrade.Chart) (upgrade.DriftReport, error) {
	rel := revisionsOf(o).base
	if rel == nil {
		why := fmt.Sprintf("helm release %s/%s has no deployed revision to compare with", t.namespace, t.name)
		return upgrade.DriftReport{Unread: why}, nil
	}
	trace, err := deployed.Traced(o.Values, t.name, t.namespace)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	return applycheck.New(t.c.releases.Kube, t.c.releases.Dynamic, t.c.releases.Mapper(), t.c.releases.Access()).ValuesDrift(ctx,
		applycheck.DriftRequest{Manifest: rel.Manifest, Namespace: t.namespace, Manager: cluster.HelmFieldManager}, trace)
}

// RenderedRelease is the release c renders, as Helm upgrades it (the image
// check's: package imagecheck).
func (t *Target) RenderedRelease(_ context.Context, o *upgrade.Observed, c upgrade.Change) (*applycheck.Release, string, error) {
	_, rel, _ := t.applyCheck(o, c)
	return &rel, "", nil
}
