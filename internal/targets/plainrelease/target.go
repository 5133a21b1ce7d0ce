package plainrelease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

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
	// MapRemovedAPIs (mapRemovedAPIs): before the upgrade, the deployed
	// revision's stored manifest is mapped from the API versions the
	// cluster no longer serves to those that replace them, as
	// helm-mapkubeapis does (helmrelease.MapRemovedAPIs); else such a
	// version is a refusal.
	MapRemovedAPIs bool
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
	return t.c.releases.Newest(t.namespace, t.name, cluster.SecretDriver)
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
	hist, err := t.c.releases.History(t.namespace, t.name, cluster.SecretDriver)
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

// HelmRelease is the release itself (the health gates read its objects).
func (t *Target) HelmRelease(context.Context, *upgrade.Observed) (string, string, string, error) {
	return t.namespace, t.name, cluster.SecretDriver, nil
}
