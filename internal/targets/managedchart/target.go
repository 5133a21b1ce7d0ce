package managedchart

import (
	"context"
	"fmt"
	"strings"
	"sync"

	helmstatus "helm.sh/helm/v4/pkg/release/common"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Kind is the kind's name in --target and in the kind registry.
const Kind = "managedchart"

// Target is the upgrade.Target of one ManagedChart.
type Target struct {
	c               *Client
	namespace, name string
	specobject.BackupStore
	// apply is the spec's apply: block (unchecked, recreate).
	apply kind.Apply

	// confirmed is the Bundle generation whose ready summary its
	// BundleDeployments confirmed (confirmer): the race that can leave a
	// summary stale is the first status write of a new generation, so a
	// later ready judgement of the same generation needs no new read.
	mu        sync.Mutex
	confirmed bundleGeneration
}

// bundleGeneration is one generation of one Bundle.
type bundleGeneration struct {
	uid        string
	generation int64
}

// New returns the target port of ManagedChart namespace/name.
func New(c *Client, namespace, name string) *Target {
	return &Target{c: c, namespace: namespace, name: name,
		BackupStore: specobject.BackupStore{Kube: c.Kube, Kind: Descriptor, Namespace: namespace, Name: name, Values: backupValues}}
}

// backupValues are the user values of a backed-up spec: spec.values.
func backupValues(b *specobject.Backup) (map[string]any, error) {
	vals, _ := values.Normalize(b.Spec["values"]).(map[string]any)
	if vals == nil {
		vals = map[string]any{}
	}
	return vals, nil
}

var _ upgrade.Target = (*Target)(nil)

// Ref names it as managedchart/NAMESPACE/NAME.
func (t *Target) Ref() upgrade.Ref {
	return upgrade.Ref{Kind: Kind, Namespace: t.namespace, Name: t.name}
}

// Read reads the ManagedChart; nil when it does not exist.
func (t *Target) Read(ctx context.Context) (*upgrade.Observed, error) {
	mc, found, err := t.c.Get(ctx, t.namespace, t.name)
	if err != nil || !found {
		return nil, err
	}
	return mc.Observed(), nil
}

// Health is what preflight refuses on: the Bundle (or, before there is
// one, Rancher's copy of its status) not Ready, ErrApplied or Modified
// clusters, with the non-ready resources Fleet names; and the Helm release
// Fleet deploys pending.
func (t *Target) Health(ctx context.Context, o *upgrade.Observed) (upgrade.Health, error) {
	mc := o.Source.(*ManagedChart)
	b, err := t.c.Bundle(ctx, mc.Namespace, mc.Name)
	if err != nil {
		return upgrade.Health{}, err
	}
	health := Health(mc, b)
	var problems []string
	if len(health.Problems) > 0 {
		problems = append(problems, "the managedchart is not healthy; fix it before upgrading:\n  "+strings.Join(health.Problems, "\n  "))
	}
	ns := mc.ReleaseNamespace()
	pending, revision, err := t.c.Releases().NewestStatus(ctx, ns, mc.Release())
	if err != nil {
		return upgrade.Health{}, err
	}
	var warnings []values.Warning
	if pending.IsPending() {
		// Fleet's to heal: its agent, finding "another operation … in
		// progress", rolls back to the revision before and upgrades again;
		// chart-upgrader never writes a release Fleet deploys
		warnings = append(warnings, values.Warning{Kind: values.WarnTarget, Message: fmt.Sprintf(
			"helm release %s/%s revision %d is %s (left by Fleet's agent, killed or still running it): Fleet's agent heals it (it rolls back, then upgrades again); "+
				"the wait follows it, and ends with exit 1 if Fleet still reports \"another operation (install/upgrade/rollback) is in progress\" after wait.errAppliedGrace",
			ns, mc.Release(), revision, pending)})
	}
	if pending == helmstatus.StatusFailed && len(problems) > 0 {
		// why Fleet is stuck, where Fleet itself says nothing (a
		// field-manager conflict leaves the Bundle in WaitApplied)
		if rel, err := t.c.Releases().Newest(ns, mc.Release(), cluster.SecretDriver); err == nil && rel != nil && rel.Info != nil {
			problems = append(problems, fmt.Sprintf("helm release %s/%s revision %d (chart %s) failed in Fleet's agent: %s",
				ns, mc.Release(), rel.Version, helmrelease.ChartVersion(rel), rel.Info.Description))
		}
	}
	return upgrade.Health{Problems: problems, Drift: health.Drift, Warnings: warnings}, nil
}

// Apply writes spec.version, spec.values and spec.paused=false (or, for a
// restore, the whole backed-up spec with the change of redeploySpec) and
// the record annotations, with the
// resourceVersion o was read at: a concurrent change fails it with
// upgrade.ErrConflict.
func (t *Target) Apply(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (*upgrade.Observed, error) {
	up := Update{Version: c.Version, Values: c.Values, Unpause: true,
		Annotations: specobject.RecordAnnotations(c.Record)} // we unpause: our pause mark goes
	if c.Restore != nil {
		b, ok := c.Restore.Data.(*specobject.Backup)
		if !ok {
			return nil, fmt.Errorf("restoring %s: not a managedchart backup", t.Ref())
		}
		var changed string
		current, _ := o.Source.(*ManagedChart).Object.Object["spec"].(map[string]any)
		up.Spec, changed = redeploySpec(b.Spec, current)
		if t.c.Log != nil {
			t.c.Log.Info("restoring the backed-up spec with one change, so that Fleet runs Helm again", "target", t.Ref().String(), "change", changed)
		}
	}
	if c.Restore == nil && len(t.apply.Recreate) > 0 {
		// apply.recreate: what the API server would refuse to update is
		// deleted first (its dependents stay); Fleet's agent creates it
		chk, check, a, err := t.applyCheck(o, c)
		if err != nil {
			return nil, err
		}
		if chk != nil {
			if _, err := chk.Recreate(ctx, check, a); err != nil {
				return nil, err
			}
		}
	}
	mc, err := t.c.Apply(ctx, o.Source.(*ManagedChart), up)
	if err != nil {
		return nil, specobject.Conflict(err)
	}
	return mc.Observed(), nil
}

// Backup writes the whole spec into its backup Secret, once.
func (t *Target) Backup(ctx context.Context, o *upgrade.Observed) (string, bool, error) {
	return t.Save(ctx, backupObject(o.Source.(*ManagedChart)))
}

// Look judges readiness from one read of the Bundle (JudgeBySummary, as
// the wait judges), a ready one confirmed by one list of its
// BundleDeployments (Confirm): a run that finds the target done costs two
// requests here, however many clusters the Bundle has.
func (t *Target) Look(ctx context.Context, o *upgrade.Observed, want upgrade.Want) (upgrade.Readiness, error) {
	mc := o.Source.(*ManagedChart)
	b, err := t.c.Bundle(ctx, mc.Namespace, mc.Name)
	if err != nil {
		return upgrade.Readiness{}, err
	}
	return t.confirmer(ctx)(JudgeBySummary(want, mc, b), b), nil
}

// Watch starts the informers of the ManagedChart and its Bundle.
// Where this process may read the Helm release Fleet deploys (the local
// cluster), its revisions are watched too: a failed newest revision at the
// version waited for is a failure of the wait (failedRevisionWatch).
func (t *Target) Watch(ctx context.Context) (upgrade.Watch, error) {
	obs, err := t.c.Observe(ctx, t.namespace, t.name)
	if err != nil {
		return nil, err
	}
	w := observerWatch{o: obs, confirm: t.confirmer(ctx)}
	mc, _ := obs.parsed()
	if mc == nil {
		return w, nil
	}
	ns := mc.ReleaseNamespace()
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	if ok, err := (&liveobjects.SelfAccess{Kube: t.c.Kube}).May(ctx, secrets, ns, "list", "watch"); err != nil || !ok {
		if t.c.Log != nil {
			t.c.Log.Debug("not watching the helm release's revisions: this process may not list and watch them", "namespace", ns, "release", mc.Release())
		}
		return w, nil
	}
	revs, err := t.c.Releases().WatchRevisions(ctx, ns, mc.Release(), cluster.SecretDriver, obs.changed.Notify)
	if err != nil {
		return nil, err
	}
	return failedRevisionWatch{Watch: w, revs: revs}, nil
}

// failedRevisionWatch is a ManagedChart's watch that also reads the
// newest revision of the release Fleet deploys: Fleet's agent can fail
// every try of a deployment (Helm 4's field-manager conflict) while the
// Bundle shows only WaitApplied, with no message; the failed revision at
// the version waited for, with Helm's description, is then the failure.
type failedRevisionWatch struct {
	upgrade.Watch
	revs *helmrelease.Watcher
}

func (w failedRevisionWatch) Readiness(want upgrade.Want) upgrade.Readiness {
	r := w.Watch.Readiness(want)
	if r.Ready || r.Failed != "" {
		return r
	}
	rel := w.revs.Newest()
	if rel == nil || rel.Info == nil || rel.Info.Status != helmstatus.StatusFailed || helmrelease.ChartVersion(rel) != want.Version {
		return r
	}
	r.Failed = fmt.Sprintf("helm release %s/%s revision %d (chart %s) failed in Fleet's agent: %s",
		rel.Namespace, rel.Name, rel.Version, want.Version, rel.Info.Description)
	return r
}

// WatchOf is an Observer seen through the upgrade.Watch port.
func WatchOf(o *Observer) upgrade.Watch { return observerWatch{o: o} }

// observerWatch is an Observer seen through the upgrade.Watch port; with
// confirm, a ready judgement is confirmed by the BundleDeployments.
type observerWatch struct {
	o       *Observer
	confirm func(upgrade.Readiness, *Bundle) upgrade.Readiness
}

func (w observerWatch) Current() *upgrade.Observed { return w.o.Current().Observed() }

func (w observerWatch) Readiness(want upgrade.Want) upgrade.Readiness {
	r := w.o.Readiness(want)
	if w.confirm == nil {
		return r
	}
	_, b := w.o.parsed()
	return w.confirm(r, b)
}

// confirmer confirms a ready or failed judgement with one page
// (ConfirmSample) of the Bundle's BundleDeployments (Confirm,
// ConfirmFailure), a ready one once per Bundle generation. When it cannot
// read them (no RBAC for it), the summary's judgement stands and the
// warning says so, once.
func (t *Target) confirmer(ctx context.Context) func(upgrade.Readiness, *Bundle) upgrade.Readiness {
	var warned bool
	return func(r upgrade.Readiness, b *Bundle) upgrade.Readiness {
		if !r.Ready && r.Failed == "" {
			return r // a wait goes on: nothing to check
		}
		var gen bundleGeneration
		if b != nil {
			gen = bundleGeneration{uid: b.UID, generation: b.Generation}
		}
		if r.Ready && b != nil && t.wasConfirmed(gen) {
			return r
		}
		bds, all, err := t.c.BundleDeployments(ctx, t.namespace, t.name, ConfirmSample)
		if err != nil {
			if !warned && t.c.Log != nil {
				t.c.Log.Warn("the bundle summary's judgement (ready, or ErrApplied) is not checked against its BundleDeployments (give the ServiceAccount list on fleet.cattle.io bundledeployments)", "error", err.Error())
			}
			warned = true
			return r
		}
		if r.Failed != "" {
			return ConfirmFailure(r, b, bds)
		}
		out := Confirm(r, b, bds, !all)
		if out.Ready && b != nil {
			t.mu.Lock()
			t.confirmed = gen
			t.mu.Unlock()
		}
		return out
	}
}

// wasConfirmed says whether the ready summary of gen was confirmed.
func (t *Target) wasConfirmed(gen bundleGeneration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed == gen && gen.generation != 0
}

func (w observerWatch) Changed() <-chan struct{} { return w.o.Changed() }

// HelmRelease is the release Fleet's agent deploys of the ManagedChart as
// o shows it on this (the local) cluster, which the health gates read. A
// ManagedChart with no release here (its Bundle targets other clusters
// only, or never deployed here) is bad input for them.
func (t *Target) HelmRelease(_ context.Context, o *upgrade.Observed) (string, string, string, error) {
	mc := o.Source.(*ManagedChart)
	ns := mc.ReleaseNamespace()
	rel, err := t.c.Releases().Newest(ns, mc.Release(), cluster.SecretDriver)
	if err != nil {
		return "", "", "", fmt.Errorf("reading helm release %s/%s: %w", ns, mc.Release(), err)
	}
	if rel == nil {
		return "", "", "", outcome.BadInput(fmt.Errorf("%s deploys no helm release %s/%s on this cluster: its Bundle targets other clusters only, "+
			"and health gates read the cluster the upgrade runs on (Harvester's fleet-local: the local cluster)", mc.Ref(), ns, mc.Release()))
	}
	return ns, mc.Release(), cluster.SecretDriver, nil
}
