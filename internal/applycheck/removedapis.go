package applycheck

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/apimap"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the check of the deployed revision's stored manifest: an
// object of it at a version the cluster no longer serves (a release made
// before the cluster's upgrade: policy/v1beta1) fails Helm 4's upgrade,
// and its rollback, before anything is written ("unable to build
// kubernetes objects from current release manifest").

func init() {
	manifestChecks = append(manifestChecks, func(_ context.Context, s Scope, res *Result) error {
		for _, m := range apimap.Unserved(s.Olds, s.Checker.Reader.Mapper) {
			res.Findings = append(res.Findings, RemovedAPI{m})
		}
		return nil
	})
}

// RemovedAPI is an object of the deployed revision's stored manifest at
// a version the cluster does not serve, and the version that replaces it.
type RemovedAPI struct{ apimap.Mapping }

// Verdict is a warning where the applier maps it first (and something
// replaces it), else a refusal naming it and the way out.
func (r RemovedAPI) Verdict(a Applier) (string, *values.Warning) {
	if a.MapsRemovedAPIs && r.To != "" {
		return "", &values.Warning{Kind: values.WarnMapAPI, Path: r.Object,
			Message: fmt.Sprintf("the deployed revision's manifest holds %s at %s, which this cluster no longer serves: it is mapped to %s before the upgrade (a Release's release.mapRemovedAPIs; klipper-helm runs helm-mapkubeapis before every install)", r.Object, r.From, r.To)}
	}
	way := "map it to " + r.To + " first: for a Release target, release.mapRemovedAPIs: true in the spec does it (one conditional write of the revision's record, the old record kept in a Secret); for another, the helm-mapkubeapis plugin on its release"
	if r.To == "" {
		way = "no version the cluster serves replaces it: install the kind's API first, or uninstall the release"
	}
	if a.MapsRemovedAPIs {
		return fmt.Sprintf("removed API: the deployed revision's manifest holds %s at %s, which this cluster no longer serves: %s", r.Object, r.From, way), nil
	}
	return fmt.Sprintf("removed API: the deployed revision's manifest holds %s at %s, which this cluster no longer serves: the upgrade would fail before writing anything (%s: \"unable to build kubernetes objects from current release manifest\"); %s",
		r.Object, r.From, a.Name, way), nil
}
