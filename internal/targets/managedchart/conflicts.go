package managedchart

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// AgentFieldManager is the field manager Fleet's agent applies as when an
// object names no Apply entry: Fleet v0.16 sets none, so Helm 4 names it
// after the agent's binary.
const AgentFieldManager = "fleetagent"

// Conflicts checks, before anything is written, what Fleet's agent would
// meet applying the new chart on this cluster: the chart is rendered with
// the merged values as the release Fleet deploys, and the apply of each
// object that exists is computed from reads alone (applycheck) as the
// field manager that holds its Apply entry (AgentFieldManager when none
// does). Fleet v0.16 upgrades with Helm 4's auto (what the release
// recorded), cannot force and takes ownership, so every conflict of a
// server-side release is refused (Fleet would fail every try and report
// nothing of it), and an object it would adopt is a warning. Only the
// release on this (the local) cluster can be read; with none here,
// nothing is checked.
func (t *Target) Conflicts(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (upgrade.Conflicts, error) {
	if c.Restore != nil {
		return upgrade.Conflicts{}, nil
	}
	chk, check, a, err := t.applyCheck(o, c)
	if err != nil || chk == nil {
		mc := o.Source.(*ManagedChart)
		return upgrade.Conflicts{Note: fmt.Sprintf("conflict check: no helm release %s/%s on this cluster, nothing checked", check.Namespace, mc.Release())}, err
	}
	return chk.Conflicts(ctx, check, a)
}

// applyCheck is the check of c's apply over the release Fleet's agent
// deployed on this (the local) cluster, as the agent applies it; no
// Checker when there is no such release.
func (t *Target) applyCheck(o *upgrade.Observed, c upgrade.Change) (*applycheck.Checker, applycheck.Release, applycheck.Applier, error) {
	mc := o.Source.(*ManagedChart)
	ns := mc.ReleaseNamespace()
	rel, err := t.c.Releases().Newest(ns, mc.Release(), cluster.SecretDriver)
	if err != nil || rel == nil {
		return nil, applycheck.Release{Namespace: ns}, applycheck.Applier{}, err
	}
	chk := applycheck.New(t.c.Kube, t.c.Dynamic, t.c.Releases().Mapper(), t.c.Releases().Access())
	return &chk,
		applycheck.Release{Target: t.Ref().String(), Chart: c.Chart, Values: c.Values, Name: mc.Release(), Namespace: ns, Deployed: rel.Manifest, CRDs: c.CRDs},
		applycheck.Applier{Name: "Fleet's agent applies this chart", Manager: AgentFieldManager, PerObject: true,
			ServerSide:  kind.ServerSide(kind.ServerSideAuto, rel.ApplyMethod), // Fleet upgrades with auto
			CannotForce: true, TakesOwnership: true, WarnUnchecked: t.apply.WarnUnchecked, Recreate: t.apply.Recreate,
			Why: fmt.Sprintf("the release records %q", rel.ApplyMethod)}, nil
}

// Drift compares the objects of the release Fleet's agent deployed on
// this (the local) cluster, as its manifest holds them, with the cluster,
// the manager that holds each object's Apply entry (else the agent's) the
// applier, and reads each drifted field back against deployed rendered
// with the ManagedChart's values. The objects Fleet itself reports
// Modified, with its patches, are the second source (Reported).
func (t *Target) Drift(ctx context.Context, o *upgrade.Observed, deployed *upgrade.Chart) (upgrade.DriftReport, error) {
	mc := o.Source.(*ManagedChart)
	ns := mc.ReleaseNamespace()
	rel, err := t.c.Releases().Newest(ns, mc.Release(), cluster.SecretDriver)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	if rel == nil {
		why := fmt.Sprintf("no helm release %s/%s on this cluster to compare with", ns, mc.Release())
		return upgrade.DriftReport{Unread: why}, nil
	}
	trace, err := deployed.Traced(o.Values, mc.Release(), ns)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	out, err := applycheck.New(t.c.Kube, t.c.Dynamic, t.c.Releases().Mapper(), t.c.Releases().Access()).ValuesDrift(ctx,
		applycheck.DriftRequest{Manifest: rel.Manifest, Namespace: ns, Fallback: AgentFieldManager}, trace)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	b, err := t.c.Bundle(ctx, mc.Namespace, mc.Name)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	s := mc.Status
	if b != nil {
		s = b.Status
	}
	for _, nr := range s.Summary.NonReadyResources {
		out.Reported = append(out.Reported, nr.Modified...)
	}
	return out, nil
}

// RenderedRelease is the release c renders, as Fleet's agent deploys it on
// this (the local) cluster (the image check's: package imagecheck); none
// when the Bundle deploys it on other clusters only, whose nodes and
// registries this process cannot see.
func (t *Target) RenderedRelease(_ context.Context, o *upgrade.Observed, c upgrade.Change) (*applycheck.Release, string, error) {
	chk, rel, _, err := t.applyCheck(o, c)
	if err != nil {
		return nil, "", err
	}
	if chk == nil {
		mc := o.Source.(*ManagedChart)
		return nil, fmt.Sprintf("%s deploys no helm release %s/%s on this cluster: its Bundle targets other clusters, whose nodes pull the images", mc.Ref(), rel.Namespace, mc.Release()), nil
	}
	return &rel, "", nil
}
