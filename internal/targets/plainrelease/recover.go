package plainrelease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// The warnings of a release whose newest revision is failed or pending.
const (
	// WarnFailedRevision: the newest revision is failed; the upgrade goes
	// over it from the last deployed one, as helm upgrade does.
	WarnFailedRevision values.WarningKind = "failed-revision"
	// WarnInterruptedApply: the newest revision is chart-upgrader's own
	// apply, left pending by a process that was killed; it is marked
	// failed and the upgrade made again.
	WarnInterruptedApply values.WarningKind = "interrupted-apply"
	// WarnRecoverPending: another process's pending revision, old enough
	// for release.recoverPending.after and with no hook running, is marked
	// failed and upgraded over.
	WarnRecoverPending values.WarningKind = "recover-pending"
)

// helmChartLabel marks a release helm-controller's Job (klipper-helm)
// deploys (its --labels): that release is the HelmChart's, never written
// here.
const helmChartLabel = "helmcharts.helm.cattle.io/configHash"

// interrupted reports whether a pending revision is chart-upgrader's own
// apply: its labels carry a record written for that very revision (Helm
// copies labels forward, so a record copied from an earlier revision
// names another revision number).
func interrupted(rel *release.Release) bool {
	n, err := strconv.Atoi(rel.Labels[LabelRevision])
	return err == nil && n == rel.Version && rel.Labels[LabelVersion] != ""
}

// writer says who wrote a pending revision, as far as its record tells.
func writer(rel *release.Release) string {
	switch {
	case interrupted(rel):
		return "chart-upgrader (its record names this revision)"
	case rel.Labels[helmChartLabel] != "":
		return "helm-controller's Job (klipper-helm; label " + helmChartLabel + ")"
	case rel.Labels[LabelVersion] != "":
		return fmt.Sprintf("a Helm client other than chart-upgrader (it carries chart-upgrader's record of revision %s, copied by Helm)", rel.Labels[LabelRevision])
	}
	var custom []string
	for k := range rel.Labels {
		custom = append(custom, k)
	}
	sort.Strings(custom)
	if len(custom) == 0 {
		return "a Helm client other than chart-upgrader (no label says which)"
	}
	return "a Helm client other than chart-upgrader (its labels: " + strings.Join(custom, ", ") + ")"
}

// judgePending says whether the upgrade may go over the pending newest
// revision of rv: a warning (it will be recovered), or the problem that
// refuses it (judgePending, reading the release's hooks only when it
// needs them).
func (t *Target) judgePending(ctx context.Context, rv *revisions) (values.Warning, string, error) {
	return judgePending(t.namespace, t.name, t.opts.RecoverPendingAfter, rv, time.Now(), func() ([]string, error) {
		return t.c.releases.RunningHooks(ctx, rv.pending.Release)
	})
}

// judgePending is the decision on the pending newest revision of release
// namespace/name at now: chart-upgrader's own interrupted apply is
// recovered; a HelmChart's release never is; another writer's is
// refused, saying the ways out, unless it is older than after (>0) and
// runningHooks, called only then, names no hook of it still running.
func judgePending(namespace, name string, after time.Duration, rv *revisions, now time.Time, runningHooks func() ([]string, error)) (values.Warning, string, error) {
	p, base := rv.pending, rv.base
	rel := p.Release
	age := now.Sub(p.Since).Round(time.Second)
	what := fmt.Sprintf("helm release %s/%s revision %d (chart %s) is %s since %s (%s ago)", namespace, name, rel.Version,
		helmrelease.ChartVersion(rel), rel.Info.Status, p.Since.UTC().Format(time.RFC3339), age)
	if interrupted(rel) {
		return values.Warning{Kind: WarnInterruptedApply, Message: what + ": chart-upgrader's own apply of chart " + versionOfLabel(rel.Labels[LabelVersion]) +
			", never finished (the process was killed); once this process holds the Lease (the one that began it no longer renews it), it is marked failed and the upgrade is made again from revision " +
			strconv.Itoa(base.Version) + ", the last deployed one"}, "", nil
	}
	refusal := fmt.Sprintf("%s, written by %s; the last deployed revision is %d (chart %s). Helm keeps no owner or heartbeat: another process began this operation and was killed, or is still running it. "+
		"Ways out: if a process still runs it, wait for it; if none does, `helm rollback %s %d -n %s` (Helm's own way out, a new revision), "+
		"or set release.recoverPending.after in the spec (it is then marked failed and upgraded over once older than that, with no hook of it running)",
		what, writer(rel), base.Version, helmrelease.ChartVersion(base), name, base.Version, namespace)
	if rel.Info.Description != "" {
		refusal = strings.Replace(refusal, ", written by", fmt.Sprintf(" (%q), written by", rel.Info.Description), 1)
	}
	if rel.Labels[helmChartLabel] != "" {
		return values.Warning{}, refusal + "; never here: this release is a HelmChart's (upgrade it as helmchart/" + namespace + "/" + name + ")", nil
	}
	if after <= 0 {
		return values.Warning{}, refusal, nil
	}
	if age < after {
		return values.Warning{}, fmt.Sprintf("%s; release.recoverPending.after is %s: it may be recovered in %s", refusal, after, (after - age).Round(time.Second)), nil
	}
	running, err := runningHooks()
	if err != nil {
		return values.Warning{}, "", err
	}
	if len(running) > 0 {
		return values.Warning{}, fmt.Sprintf("%s; its hooks still run: %s", refusal, strings.Join(running, ", ")), nil
	}
	return values.Warning{Kind: WarnRecoverPending, Message: fmt.Sprintf("%s, written by %s: older than release.recoverPending.after (%s) and no hook of it runs; it is marked failed (only if its record is unchanged) and the upgrade goes over it from revision %d, the last deployed one",
		what, writer(rel), after, base.Version)}, "", nil
}

// recover marks the pending newest revision of rv failed, under the Lease,
// when judgePending allowed it and nothing changed since: the record is
// updated only over the resourceVersion Read saw (a change is
// upgrade.ErrConflict: the core reads again). It returns the newest
// revision as it is now. Only that revision changes: no Secret is
// deleted, no other revision touched, nothing uninstalled.
func (t *Target) recover(ctx context.Context, rv *revisions) (*release.Release, error) {
	w, problem, err := t.judgePending(ctx, rv)
	if err != nil {
		return nil, err
	}
	if problem != "" {
		return nil, fmt.Errorf("%w: %s", upgrade.ErrConflict, problem)
	}
	why := "an interrupted apply of chart-upgrader's"
	if w.Kind == WarnRecoverPending {
		why = fmt.Sprintf("pending longer than release.recoverPending.after (%s), no hook running", t.opts.RecoverPendingAfter)
	}
	desc := fmt.Sprintf("marked failed by chart-upgrader at %s: %s, left %s", time.Now().UTC().Format(time.RFC3339), why, rv.pending.Release.Info.Status)
	if err := t.c.releases.MarkFailed(ctx, rv.pending, desc); err != nil {
		if errors.Is(err, helmrelease.ErrPendingChanged) {
			return nil, fmt.Errorf("%w: %v", upgrade.ErrConflict, err)
		}
		return nil, err
	}
	t.c.log.Info("pending revision marked failed", "release", t.namespace+"/"+t.name, "revision", rv.pending.Release.Version,
		"was", rv.pending.Release.Info.Status.String(), "why", why, "from", rv.base.Version)
	now, err := t.newest()
	if err != nil {
		return nil, err
	}
	if now == nil || now.Version != rv.pending.Release.Version || status(now) != common.StatusFailed {
		return nil, fmt.Errorf("%w: helm release %s/%s changed while its pending revision was marked failed", upgrade.ErrConflict, t.namespace, t.name)
	}
	return now, nil
}
