package app

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// MergeTargetOptions are the inputs of `merge --target`.
type MergeTargetOptions struct {
	Kubeconfig  string
	Target      string // KIND/NAMESPACE/NAME
	ChartSource string
	ChartName   string
	PolicyFile  string
	Explicit    Explicit // -f and the --set family
	Version     string   // default $SYSTEM_UPGRADE_PLAN_LATEST_VERSION
	CAFile      string
	Log         *slog.Logger
}

// MergeTarget runs the merge of `merge --target` in cluster mode: U from
// the target, the old defaults from the chart source at the deployed
// version, live objects from the cluster, --set and -f after the rules —
// the same path as preflight and upgrade. It reads only: no lock, no
// journal, no write.
func MergeTarget(ctx context.Context, o MergeTargetOptions) (*values.Result, error) {
	log, _ := logAndOut(o.Log, nil)
	opts := Options{Target: o.Target, ChartSource: o.ChartSource, ChartName: o.ChartName, PolicyFile: o.PolicyFile,
		Explicit: o.Explicit, Log: log}
	charts, _, err := planCharts(&opts)
	if err != nil {
		return nil, err
	}
	version := o.Version
	if version == "" {
		version = os.Getenv(upgrade.LatestVersionEnv)
	}
	clients, err := connect(ctx, o.Kubeconfig, log)
	if err != nil {
		return nil, err
	}
	s := &session{clients: clients, cluster: &cluster.Cluster{Clients: clients, Kinds: targets.Kinds()}}
	job, err := s.job(ctx, charts[0], o.CAFile, o.Explicit, 0, nil, nil)
	if err != nil {
		return nil, err
	}
	r := &upgrade.Runner{Cluster: s.cluster, Settings: upgrade.Settings{Version: version, Names: names, Log: log, Out: io.Discard}}
	return r.MergeOnly(ctx, job)
}
