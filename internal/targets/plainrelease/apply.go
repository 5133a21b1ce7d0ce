package plainrelease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// configuration is Helm's action configuration for the release's
// namespace, Secrets storage.
func (t *Target) configuration() (*action.Configuration, error) {
	return cluster.HelmConfiguration(t.c.helm, t.namespace, cluster.SecretDriver, t.c.log)
}

// Apply upgrades the release with Helm's SDK, exactly to the merged
// values (ResetValues: never the old ones), keeping at most HistoryMax
// revisions, with the record as the new revision's labels; or, for a
// restore, rolls back to the backed-up revision and records that. A
// release whose newest revision moved since o was read is a conflict. A
// failed upgrade that made a revision is rolled back to the one it started
// from (RollbackOnFailure), and both are named in the error.
func (t *Target) Apply(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (*upgrade.Observed, error) {
	rv := revisionsOf(o)
	read := rv.base
	now, err := t.newest()
	if err != nil {
		return nil, err
	}
	if now == nil || now.Version != rv.newest.Version {
		return nil, fmt.Errorf("%w: helm release %s/%s has a new revision", upgrade.ErrConflict, t.namespace, t.name)
	}
	if rv.pending != nil {
		if now, err = t.recover(ctx, rv); err != nil {
			return nil, err
		}
	}
	cfg, err := t.configuration()
	if err != nil {
		return nil, err
	}
	labels := recordLabels(c.Record, read.Version, now.Version+1)
	if c.Restore != nil {
		to, _ := c.Restore.Data.(int)
		if to == 0 {
			return nil, fmt.Errorf("restoring %s: not a release backup", t.Ref())
		}
		if err := t.rollback(ctx, cfg, to); err != nil {
			return nil, err
		}
		rel, err := t.label(ctx, labels)
		if err != nil {
			return nil, err
		}
		return observe(rel)
	}
	if c.Chart == nil || c.Chart.Archive == nil {
		return nil, fmt.Errorf("upgrading %s: chart %s is not at hand", t.Ref(), c.Version)
	}
	ch, err := helmChart(c.Chart)
	if err != nil {
		return nil, err
	}
	// apply.recreate: what the API server would refuse to update is
	// deleted first (its dependents stay), and the upgrade creates it
	chk, check, a := t.applyCheck(o, c)
	if _, err := chk.Recreate(ctx, check, a); err != nil {
		return nil, err
	}
	if t.opts.MapRemovedAPIs {
		mapped, err := t.c.releases.MapRemovedAPIs(ctx, read)
		if err != nil {
			return nil, err
		}
		for _, m := range mapped {
			t.c.log.Info("removed API mapped in the deployed revision's manifest", "release", t.namespace+"/"+t.name, "revision", read.Version, "object", m.Object, "from", m.From, "to", m.To)
		}
	}
	t.c.helm.Reset() // a new chart may bring CRDs
	up := action.NewUpgrade(cfg)
	up.Namespace, up.ResetValues, up.MaxHistory, up.Labels = t.namespace, true, t.opts.HistoryMax, labels
	up.WaitStrategy = kube.HookOnlyStrategy // the wait phase watches the rollout
	up.ServerSideApply = t.apply.ServerSide
	up.ForceConflicts = t.apply.ForceConflicts && kind.ServerSide(t.apply.ServerSide, read.ApplyMethod) // Helm forces only server-side
	res, err := up.RunWithContext(ctx, t.name, ch, c.Values)
	if err != nil {
		return nil, t.failed(ctx, cfg, read, fmt.Errorf("helm upgrade of release %s/%s to chart %s %s: %w", t.namespace, t.name, ch.Name(), ch.Metadata.Version, err))
	}
	rel, err := helmrelease.AsRelease(res)
	if err != nil {
		return nil, fmt.Errorf("helm upgrade of release %s/%s: %w", t.namespace, t.name, err)
	}
	return observe(rel)
}

// failed adds to err what became of a failed upgrade: nothing changed
// when it made no revision; else, with RollbackOnFailure, the rollback to
// the revision it started from.
func (t *Target) failed(ctx context.Context, cfg *action.Configuration, from *release.Release, err error) error {
	now, rerr := t.newest()
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if now == nil || now.Version == from.Version {
		return fmt.Errorf("%w\n  nothing changed: the release is still at revision %d", err, from.Version)
	}
	if !t.opts.RollbackOnFailure {
		return fmt.Errorf("%w\n  revision %d is %s; not rolled back (release.rollbackOnFailure is false)", err, now.Version, status(now))
	}
	if rerr := t.rollback(ctx, cfg, from.Version); rerr != nil {
		return fmt.Errorf("%w\n  and the rollback from revision %d to revision %d failed: %v", err, now.Version, from.Version, rerr)
	}
	back, _ := t.newest()
	as := ""
	if back != nil {
		as = fmt.Sprintf(" as revision %d", back.Version)
	}
	return fmt.Errorf("%w\n  rolled back helm release %s/%s from revision %d to revision %d (chart %s)%s",
		err, t.namespace, t.name, now.Version, from.Version, helmrelease.ChartVersion(from), as)
}

// rollback rolls the release back to revision to, as `helm rollback
// --force-conflicts`: a rollback puts that revision back as it was, so a
// server-side one takes the fields other managers changed since (a
// client-side one overwrites them anyway); it must not fail half-way
// after a failed upgrade.
func (t *Target) rollback(ctx context.Context, cfg *action.Configuration, to int) error {
	rb := action.NewRollback(cfg)
	rb.Version, rb.MaxHistory, rb.WaitStrategy = to, t.opts.HistoryMax, kube.HookOnlyStrategy
	hist, err := t.c.releases.History(t.namespace, t.name, cluster.SecretDriver)
	if err != nil {
		return err
	}
	for _, r := range hist {
		if r.Version == to {
			// auto applies as revision to recorded; Helm takes force only
			// with a server-side apply
			rb.ForceConflicts = kind.ServerSide(kind.ServerSideAuto, r.ApplyMethod)
		}
	}
	if err := rb.Run(t.name); err != nil {
		return fmt.Errorf("helm rollback of release %s/%s to revision %d: %w", t.namespace, t.name, to, err)
	}
	return nil
}

// label puts the record on the newest revision's storage object: Helm's
// rollback copies the labels of the revision it goes back to.
func (t *Target) label(ctx context.Context, labels map[string]string) (*release.Release, error) {
	rel, err := t.newest()
	if err != nil || rel == nil {
		return rel, err
	}
	var b bytes.Buffer
	b.WriteString(`{"metadata":{"labels":{`)
	i := 0
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", k, labels[k])
		i++
	}
	b.WriteString(`}}}`)
	secret := fmt.Sprintf("sh.helm.release.v1.%s.v%d", t.name, rel.Version)
	if _, err := t.c.releases.Kube.CoreV1().Secrets(t.namespace).Patch(ctx, secret, types.MergePatchType, b.Bytes(),
		metav1.PatchOptions{FieldManager: "chart-upgrader"}); err != nil {
		return nil, fmt.Errorf("recording the rollback on %s/%s: %w", t.namespace, secret, err)
	}
	return t.newest()
}

// helmChart is the Helm chart of c, from its archive.
func helmChart(c *upgrade.Chart) (*chart.Chart, error) {
	data, err := c.Archive()
	if err != nil {
		return nil, err
	}
	return loader.LoadArchive(bytes.NewReader(data))
}

// RevertFailed rolls the release back to the revision the apply of want
// started from, when RollbackOnFailure is set and the newest revision is
// still that apply.
func (t *Target) RevertFailed(ctx context.Context, want upgrade.Want) (string, error) {
	if !t.opts.RollbackOnFailure {
		return "", nil
	}
	now, err := t.newest()
	if err != nil || now == nil {
		return "", err
	}
	if w, ok := recordOf(now.Labels).Want(); !ok || w != want {
		return "", nil
	}
	from := fromRevision(now.Labels)
	if from == 0 || from == now.Version {
		return "", nil
	}
	cfg, err := t.configuration()
	if err != nil {
		return "", err
	}
	if err := t.rollback(ctx, cfg, from); err != nil {
		return "", err
	}
	back, err := t.newest()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("rolled back helm release %s/%s from revision %d (chart %s) to revision %d (chart %s) as revision %d (release.rollbackOnFailure)",
		t.namespace, t.name, now.Version, helmrelease.ChartVersion(now), from, helmrelease.ChartVersion(back), back.Version), nil
}
