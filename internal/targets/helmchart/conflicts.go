package helmchart

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Conflicts checks, before anything is written, what helm-controller's
// Job would meet applying the new chart: the apply: settings must be
// fields the cluster's HelmChart CRD has (else bad input, saying why);
// then the chart is rendered with the merged values and the
// HelmChartConfig's over them, as the release, and the apply of each
// object that exists is computed from reads alone (applycheck) as the
// field manager that holds its Apply entry (klipper-helm runs the Helm
// CLI: "helm" when there is none); klipper-helm does not take ownership.
// Helm applies server-side when spec.serverSide (the HelmChartConfig's,
// else the HelmChart's, else apply.serverSide) says so, or with auto when
// the release recorded it.
func (t *Target) Conflicts(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (upgrade.Conflicts, error) {
	r := o.Source.(*read)
	h := r.chart
	if c.Restore != nil || c.Chart == nil {
		return upgrade.Conflicts{}, nil
	}
	if err := t.checkApplyFields(ctx, h); err != nil {
		return upgrade.Conflicts{}, err
	}
	chk, rel, a := t.applyCheck(o, c)
	chk.Reader.Seen = t.c.Releases().TakeSeen() // read by the readiness check just before
	return chk.Conflicts(ctx, rel, a)
}

// applyCheck is the check of c's apply over what o read, as
// helm-controller's Job applies it.
func (t *Target) applyCheck(o *upgrade.Observed, c upgrade.Change) (applycheck.Checker, applycheck.Release, applycheck.Applier) {
	r := o.Source.(*read)
	h := r.chart
	vals := c.Values
	if len(o.Overlay) > 0 {
		vals = values.Overlay(c.Values, o.Overlay)
	}
	setting := h.ServerSide
	if t.apply.ServerSide != kind.ServerSideAuto {
		setting = t.apply.ServerSide
	}
	if r.config != nil && r.config.ServerSide != "" {
		setting = r.config.ServerSide
	}
	recorded, old := "", ""
	if r.release != nil {
		recorded, old = r.release.ApplyMethod, r.release.Manifest
	}
	return applycheck.New(t.c.Kube, t.c.Dynamic, t.c.Releases().Mapper(), t.c.Releases().Access()),
		applycheck.Release{Target: t.Ref().String(), Chart: c.Chart, Values: vals, Name: h.ReleaseName(), Namespace: h.TargetNamespace, Deployed: old, CRDs: c.CRDs},
		applycheck.Applier{Name: "helm-controller's Job applies this chart", Manager: cluster.HelmFieldManager, PerObject: true,
			ServerSide: kind.ServerSide(setting, recorded), Force: t.apply.ForceConflicts, WarnUnchecked: t.apply.WarnUnchecked,
			Recreate: t.apply.Recreate, Why: fmt.Sprintf("spec.serverSide %s, the release records %q", setting, recorded),
			MapsRemovedAPIs: true} // klipper-helm runs helm-mapkubeapis before every install
}

// checkApplyFields makes sure the cluster's HelmChart CRD has the fields
// apply: writes (spec.serverSide, spec.forceConflicts: helm-controller
// v0.17.9 and later): a dry-run patch with strict field validation, which
// stores nothing. Without them the write would be dropped without a word,
// so it is refused as bad input.
func (t *Target) checkApplyFields(ctx context.Context, h *HelmChart) error {
	spec := map[string]any{}
	if t.apply.ForceConflicts {
		spec["forceConflicts"] = true
	}
	if t.apply.ServerSide != kind.ServerSideAuto {
		spec["serverSide"] = t.apply.ServerSide
	}
	if len(spec) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = t.c.Dynamic.Resource(HelmChartGVR).Namespace(h.Namespace).Patch(ctx, h.Name, types.MergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict", FieldManager: "chart-upgrader"})
	switch {
	case err == nil:
		return nil
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
		return outcome.BadInput(fmt.Errorf("%s: the spec's apply: settings need spec.serverSide and spec.forceConflicts on the HelmChart, "+
			"and this cluster's HelmChart CRD does not have them (helm-controller v0.17.9 and later do): %w", t.Ref(), err))
	default:
		return fmt.Errorf("%s: checking that the HelmChart CRD takes the apply: settings: %w", t.Ref(), err)
	}
}

// Drift compares the objects of the release klipper-helm deployed, as its
// manifest holds them, with the cluster, the manager that holds each
// object's Apply entry (else Helm's) the applier, and reads each drifted
// field back against deployed rendered with the HelmChart's values and
// the HelmChartConfig's over them.
func (t *Target) Drift(ctx context.Context, o *upgrade.Observed, deployed *upgrade.Chart) (upgrade.DriftReport, error) {
	r := o.Source.(*read)
	h := r.chart
	if r.release == nil {
		why := fmt.Sprintf("helm-controller has deployed no release %s/%s to compare with", h.TargetNamespace, h.ReleaseName())
		return upgrade.DriftReport{Unread: why}, nil
	}
	vals := o.Values
	if len(o.Overlay) > 0 {
		vals = values.Overlay(o.Values, o.Overlay)
	}
	trace, err := deployed.Traced(vals, h.ReleaseName(), h.TargetNamespace)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	return applycheck.New(t.c.Kube, t.c.Dynamic, t.c.Releases().Mapper(), t.c.Releases().Access()).ValuesDrift(ctx,
		applycheck.DriftRequest{Manifest: r.release.Manifest, Namespace: h.TargetNamespace, Fallback: cluster.HelmFieldManager}, trace)
}

// RenderedRelease is the release c renders, as helm-controller's Job
// upgrades it, the HelmChartConfig's values over the merged ones (the
// image check's: package imagecheck).
func (t *Target) RenderedRelease(_ context.Context, o *upgrade.Observed, c upgrade.Change) (*applycheck.Release, string, error) {
	_, rel, _ := t.applyCheck(o, c)
	return &rel, "", nil
}
