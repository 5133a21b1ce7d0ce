package plainrelease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Kind is the kind's name in --target and in the kind registry.
const Kind = "release"

// Options are a release target's options (the spec's release: block).
type Options struct {
	// RollbackOnFailure: a failed upgrade, or one whose wait timed out or
	// failed, is rolled back to the revision it started from.
	RollbackOnFailure bool
	// HistoryMax bounds the revisions Helm keeps (0: no limit).
	HistoryMax int
	// RecoverPendingAfter (recoverPending.after; 0: never): a pending
	// revision another process left is recovered (marked failed, then
	// upgraded over) once it is older than this, no hook of it runs and
	// its record is unchanged across a re-read.
	RecoverPendingAfter time.Duration
}

// Client reads releases and runs Helm against the cluster.
type Client struct {
	releases *helmrelease.Client
	helm     *cluster.HelmGetter
	log      *slog.Logger
}

// NewClient is the Client of the cluster's clients.
func NewClient(c *cluster.Clients) *Client {
	return &Client{releases: &helmrelease.Client{Kube: c.Kube, Dynamic: c.Dynamic, Log: c.Log, RESTMapper: c.Mapper},
		helm: cluster.NewHelmGetter(c.Config), log: c.Log}
}

// Target is the upgrade.Target of one Helm release (Secrets storage, as
// Helm's default).
type Target struct {
	c               *Client
	namespace, name string
	opts            Options
	apply           kind.Apply
}

// New returns the target port of release namespace/name.
func New(c *Client, namespace, name string, o Options) *Target {
	return &Target{c: c, namespace: namespace, name: name, opts: o, apply: kind.DefaultApply}
}

var (
	_ upgrade.Target   = (*Target)(nil)
	_ upgrade.Reverter = (*Target)(nil)
)

// Ref names it as release/NAMESPACE/NAME.
func (t *Target) Ref() upgrade.Ref {
	return upgrade.Ref{Kind: Kind, Namespace: t.namespace, Name: t.name}
}

// newest reads the newest revision; nil when the release does not exist.
func (t *Target) newest() (*release.Release, error) {
	return t.c.releases.Newest(t.namespace, t.name, "secret")
}

// revisions is what Read saw of the release: the revision an upgrade
// starts from and the newest one. They differ when the newest is failed
// or pending and an earlier revision is deployed: as Helm does, the
// upgrade then starts from that last deployed revision (its values, its
// version, its objects).
type revisions struct {
	base, newest *release.Release
	// pending is the newest revision when it is pending-*, with the
	// resourceVersion of its record when Read read it.
	pending *helmrelease.Pending
}

// revisionsOf is what o was read from.
func revisionsOf(o *upgrade.Observed) *revisions { return o.Source.(*revisions) }

// Read reads the release: the revision an upgrade starts from (the newest,
// or the last deployed one before a failed or pending newest), with the
// newest beside it; nil when the release does not exist.
func (t *Target) Read(ctx context.Context) (*upgrade.Observed, error) {
	for attempt := 0; ; attempt++ {
		o, err := t.read(ctx)
		if !errors.Is(err, errPendingEnded) || attempt == 3 {
			return o, err
		}
	}
}

// errPendingEnded: the pending newest revision ended between two reads.
var errPendingEnded = errors.New("the pending revision ended while it was read")

func (t *Target) read(ctx context.Context) (*upgrade.Observed, error) {
	hist, err := t.c.releases.History(t.namespace, t.name, "secret")
	if err != nil || len(hist) == 0 {
		return nil, err
	}
	newest := hist[len(hist)-1]
	rv := &revisions{base: newest, newest: newest}
	if st := status(newest); st == common.StatusFailed || helmrelease.IsPending(newest) {
		if d := lastDeployed(hist[:len(hist)-1]); d != nil {
			rv.base = d
		}
	}
	if helmrelease.IsPending(newest) {
		if rv.pending, err = t.c.releases.ReadPending(ctx, newest); err != nil {
			return nil, err
		}
		if rv.pending == nil {
			return nil, fmt.Errorf("helm release %s/%s revision %d: %w", t.namespace, t.name, newest.Version, errPendingEnded)
		}
	}
	o, err := observeFinished(rv.base)
	if err != nil {
		return nil, err
	}
	o.Source = rv
	return o, nil
}

// observeFinished is observe for telling what was applied: a revision that
// is not deployed (pending, failed) is no finished apply, whatever record
// its labels hold (a killed apply's, or one Helm copied).
func observeFinished(rel *release.Release) (*upgrade.Observed, error) {
	o, err := observe(rel)
	if err == nil && status(rel) != "deployed" {
		o.Applied = upgrade.Record{}
	}
	return o, err
}

// lastDeployed is the newest revision of hist (oldest first) whose status
// is deployed, as Helm's Deployed() picks it; nil when none is.
func lastDeployed(hist []*release.Release) *release.Release {
	for i := len(hist) - 1; i >= 0; i-- {
		if status(hist[i]) == common.StatusDeployed {
			return hist[i]
		}
	}
	return nil
}

// observe is a revision as the core sees it: its chart and version, its
// user-supplied values (`helm get values`), the record in its labels.
func observe(rel *release.Release) (*upgrade.Observed, error) {
	u, _ := values.Normalize(rel.Config).(map[string]any)
	if u == nil {
		u = map[string]any{}
	}
	hash, err := values.Hash(u)
	if err != nil {
		return nil, err
	}
	o := &upgrade.Observed{Values: u, ValuesHash: hash, Applied: recordOf(rel.Labels), Source: &revisions{base: rel, newest: rel}}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		o.Chart, o.Version = rel.Chart.Metadata.Name, rel.Chart.Metadata.Version
	}
	return o, nil
}

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

// configuration is Helm's action configuration for the release's
// namespace, Secrets storage.
func (t *Target) configuration() (*action.Configuration, error) {
	return cluster.HelmConfiguration(t.c.helm, t.namespace, "secret", t.c.log)
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
	hist, err := t.c.releases.History(t.namespace, t.name, "secret")
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

// Backup writes nothing: Helm's history is the backup. The apply records
// the revision it starts from in the labels of the revision it makes.
func (t *Target) Backup(_ context.Context, o *upgrade.Observed) (string, bool, error) {
	rel := revisionsOf(o).base
	return fmt.Sprintf("helm revision %d", rel.Version), false, nil
}

// ReadBackup is the revision to go back to: the one the newest revision's
// record says its apply started from, or, for fromVersion, the newest
// earlier revision at that chart version.
func (t *Target) ReadBackup(_ context.Context, fromVersion string) (*upgrade.Backup, error) {
	hist, err := t.c.releases.History(t.namespace, t.name, "secret")
	if err != nil {
		return nil, err
	}
	if len(hist) == 0 {
		return nil, fmt.Errorf("helm release %s/%s not found", t.namespace, t.name)
	}
	newest := hist[len(hist)-1]
	var target *release.Release
	if fromVersion == "" {
		from := fromRevision(newest.Labels)
		for _, r := range hist {
			if r.Version == from {
				target = r
			}
		}
		if target == nil {
			return nil, fmt.Errorf("helm release %s/%s revision %d records no revision an upgrade by chart-upgrader started from", t.namespace, t.name, newest.Version)
		}
	} else {
		for _, r := range hist[:len(hist)-1] {
			if strings.TrimPrefix(helmrelease.ChartVersion(r), "v") == strings.TrimPrefix(fromVersion, "v") {
				target = r
			}
		}
		if target == nil {
			return nil, fmt.Errorf("helm release %s/%s has no earlier revision of chart version %s", t.namespace, t.name, fromVersion)
		}
	}
	o, err := observe(target)
	if err != nil {
		return nil, err
	}
	return &upgrade.Backup{Name: fmt.Sprintf("helm revision %d", target.Version), Version: o.Version, ValuesHash: o.ValuesHash,
		Data: target.Version}, nil
}

// Backups lists the release's revisions, newest first.
func (t *Target) Backups(_ context.Context) ([]string, error) {
	hist, err := t.c.releases.History(t.namespace, t.name, "secret")
	if err != nil {
		return nil, err
	}
	var out []string
	for i := len(hist) - 1; i >= 0; i-- {
		r := hist[i]
		out = append(out, fmt.Sprintf("helm revision %d (chart %s, %s)", r.Version, helmrelease.ChartVersion(r), status(r)))
	}
	return out, nil
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
	if w.rel, err = t.c.releases.Watch(ctx, t.namespace, t.name, "secret", w.changed.Notify); err != nil {
		return nil, err
	}
	return w, nil
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

// DeployedChart is the chart the newest revision deployed, as Helm stores
// it: the old defaults never need a repository.
func (t *Target) DeployedChart(_ context.Context) (*chart.Chart, error) {
	rel, err := t.newest()
	if err != nil || rel == nil {
		return nil, err
	}
	return rel.Chart, nil
}

// OwnSource is nil: a release names no chart source; the spec gives it.
func (t *Target) OwnSource(context.Context) (chartpkg.Source, error) { return nil, nil }

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
			Recreate: t.apply.Recreate, Why: fmt.Sprintf("apply.serverSide %s, the release records %s", t.apply.ServerSide, recorded)}
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
