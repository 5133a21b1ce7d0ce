package plainrelease

import (
	"context"
	"fmt"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

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
	hist, err := t.c.releases.History(t.namespace, t.name, cluster.SecretDriver)
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
	hist, err := t.c.releases.History(t.namespace, t.name, cluster.SecretDriver)
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
